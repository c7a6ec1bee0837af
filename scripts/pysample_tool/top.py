# top.py - `pysample top`: the functions with the most samples, and the same
# table in record's summary.
#
# SPDX-License-Identifier: MIT

import collections

from . import options
from .collapsed import KIND_MARKER, Frame, describe, parse_collapsed
from .common import percent, printable, write_output

NO_FRAMES = Frame(KIND_MARKER, "[no Python frames]", None, None)


NAME = "top"
HELP = "table of the functions with the most samples"
DESCRIPTION = ("Prints the functions (qualname and file, all lines together) with their self samples (in "
               "the function itself) and total samples (in it or its callees), sorted by self samples.")


def add_options(parser):
    options.profile_file(parser)
    parser.add_argument("-n", type=int, default=20, metavar="N",
                        help="show N functions, 0 for all (default: 20)")


def run(args):
    profile = parse_collapsed(args.file)
    text = "%s: %s\n" % (args.file, describe(profile)) + format_top([profile], args.n)
    write_output(None, text.encode("utf-8"), binary=False)
    return 0


def function_key(frame):
    """Functions are frames without the line number."""
    return (frame.kind, frame.name, frame.file)


def top_functions(profiles):
    """[(kind, name, file), self, total] sorted by self, then total."""
    self_counts = collections.Counter()
    total_counts = collections.Counter()
    for profile in profiles:
        for _thread, frames, count in profile.stacks:
            if not frames:
                frames = (NO_FRAMES,)
            self_counts[function_key(frames[-1])] += count
            for key in set(function_key(f) for f in frames):
                total_counts[key] += count
    rows = [(key, self_counts.get(key, 0), total) for key, total in total_counts.items()]
    rows.sort(key=lambda r: (-r[1], -r[2], r[0][1], r[0][2] or ""))
    return rows


def format_top(profiles, limit, indent=""):
    total = sum(p.total for p in profiles)
    rows = top_functions(profiles)
    shown = rows if limit <= 0 else rows[:limit]
    out = ["%s%9s %6s %9s %6s  %s" % (indent, "SELF", "SELF%", "TOTAL", "TOTAL%", "FUNCTION (FILE)")]
    for (kind, name, filename), self_count, total_count in shown:
        where = "" if filename is None else " (%s)" % filename
        out.append("%s%9d %5.1f%% %9d %5.1f%%  %s%s" % (
            indent, self_count, percent(self_count, total), total_count, percent(total_count, total),
            printable(name), printable(where)))
    if len(rows) > len(shown):
        out.append("%s... %d more functions (use -n 0 to list all)" % (indent, len(rows) - len(shown)))
    return "\n".join(out) + "\n"
