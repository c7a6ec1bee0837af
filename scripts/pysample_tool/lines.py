# lines.py - `pysample lines PROFILE FILE`: one source file with the samples
# of each of its lines, from the `(file:line)` of the profile's frames.
#
# A frame's line is the line that frame was executing: the innermost
# frame's is where the time went (self), a caller's is the call it was
# waiting in (total).  A line counts once per sample however many frames
# of a recursive function stand on it.
#
# SPDX-License-Identifier: MIT

import collections
import os

from . import filters, options
from .collapsed import KIND_PY, parse_collapsed
from .common import ToolError, percent, printable, thousands, write_output

NAME = "lines"
HELP = "one source file with the samples of each line"
DESCRIPTION = ("Prints a source file with, on each line, its self samples (the line was running) and total "
               "samples (it was on the stack: running, or calling what ran), and their shares of the "
               "profile's samples. FILE is matched against the files of the profile's frames: the same "
               "path, or one that ends with the other (prog.py, pkg/mod.py). The profile needs line numbers "
               "(the default; not PYSAMPLE_LINES=0).")
USAGE = "%(prog)s PROFILE FILE [--sampled] [-o OUT]"


def add_options(parser):
    parser.add_argument("file", metavar="PROFILE", help="a collapsed profile written by libpysample")
    parser.add_argument("source", metavar="FILE", help="the source file to show")
    parser.add_argument("--sampled", action="store_true",
                        help="print only the lines with samples")
    options.output(parser)
    filters.add_options(parser)


def run(args):
    profile = filters.apply(parse_collapsed(args.file), args)
    if not profile.has_lines:
        raise ToolError("%s has no line numbers (it was recorded with PYSAMPLE_LINES=0)" % args.file)
    filename = match_file(profile, args.source)
    self_counts, total_counts = line_counts(profile, filename)
    source = read_source(args.source, filename)
    text = format_lines(profile, filename, source, self_counts, total_counts, args.sampled)
    write_output(args.output, text.encode("utf-8"), binary=False)
    return 0


def _files(profile):
    """{file: samples in which it is on the stack} of the Python frames."""
    files = collections.Counter()
    for _thread, frames, count in profile.stacks:
        for name in set(f.file for f in frames if f.kind == KIND_PY and f.line is not None):
            files[name] += count
    return files


def _ends_with(path, tail):
    path, tail = os.path.normpath(path), os.path.normpath(tail)
    return path == tail or path.endswith(os.sep + tail)


def match_file(profile, wanted):
    """The profile's file that wanted names: equal, equal as absolute paths,
    or one a tail of the other (a program started as `python prog.py` has
    frames in `prog.py`)."""
    files = _files(profile)
    if wanted in files:
        return wanted
    absolute = os.path.abspath(wanted)
    same = [f for f in files if os.path.isabs(f) and os.path.normpath(f) == absolute]
    if same:
        return same[0]
    tails = sorted(f for f in files if _ends_with(f, wanted) or _ends_with(absolute, f))
    if len(tails) == 1:
        return tails[0]
    if len(tails) > 1:
        raise ToolError("%s matches %d files of %s: %s; give more of its path"
                        % (wanted, len(tails), profile.path, ", ".join(printable(f) for f in tails[:5])))
    busiest = ", ".join("%s (%s)" % (printable(f), thousands(n)) for f, n in files.most_common(3))
    raise ToolError("%s has no samples in %s; its busiest files: %s"
                    % (wanted, profile.path, busiest or "none (no Python frames)"))


def line_counts(profile, filename):
    """({line: self samples}, {line: total samples}) of one file."""
    self_counts = collections.Counter()
    total_counts = collections.Counter()
    for _thread, frames, count in profile.stacks:
        if frames and frames[-1].kind == KIND_PY and frames[-1].file == filename:
            self_counts[frames[-1].line] += count
        for line in set(f.line for f in frames if f.kind == KIND_PY and f.file == filename):
            total_counts[line] += count
    return self_counts, total_counts


def read_source(given, filename):
    """The file's lines: from the path the user gave, else the profile's
    (relative to here); None when neither can be read."""
    for path in (given, filename):
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace").splitlines()
        except (IOError, OSError):
            continue
    return None


def format_lines(profile, filename, source, self_counts, total_counts, sampled_only):
    total = profile.total
    in_file = sum(n for _thread, frames, n in profile.stacks
                  if any(f.kind == KIND_PY and f.file == filename for f in frames))
    out = ["%s: %s samples, %s (%.1f%%) in %s" % (profile.path, thousands(total), thousands(in_file),
                                                   percent(in_file, total), printable(filename))]
    if source is None:
        out.append("(source not found: only the lines with samples are listed)")
        sampled_only = True
        source = []
    out.append("%7s %6s %7s %6s %6s  %s" % ("SELF", "SELF%", "TOTAL", "TOTAL%", "LINE", "SOURCE"))
    last = max([len(source)] + list(total_counts))
    # A frame whose line the interpreter could not tell is line 0 or -1:
    # listed first, with no source.
    for number in sorted(n for n in total_counts if n < 1) + list(range(1, last + 1)):
        text = printable(source[number - 1]) if 1 <= number <= len(source) else ""
        if number in total_counts:
            own, all_ = self_counts.get(number, 0), total_counts[number]
            out.append("%7d %5.1f%% %7d %5.1f%% %6d  %s" % (own, percent(own, total), all_, percent(all_, total),
                                                             number, text))
        elif not sampled_only:
            out.append("%7s %6s %7s %6s %6d  %s" % ("", "", "", "", number, text))
    return "\n".join(out).rstrip() + "\n"
