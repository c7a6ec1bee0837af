# diff.py - `pysample diff BASE HEAD`: what changed between two profiles (or
# two sets of runs), as shares of their samples or as seconds: a table of
# every function with the interval of its change and a verdict, a
# differential flame graph, and a gate for CI (--fail-over).
#
# Two profiles of the same program are rarely the same length, so counts
# are never compared, only shares (a function's samples over all samples,
# or over its thread's with --per-thread), or seconds where the profiles
# say how long a sample is (--time).  Frames are compared by function
# (qualified name and file), never by line: the commits being compared move
# lines, and a function whose every line moved has not changed.  Whether a
# change is more than noise is diffmodel.py's and gatestats.py's business.
#
# SPDX-License-Identifier: MIT

import argparse
import os
import re
import sys

from . import filters, options, remote
from .collapsed import KIND_MARKER, KIND_PY, parse_collapsed
from .common import PROG, ToolError, thousands, write_output
from .diffmodel import Analysis, Run, thread_key
from .diffreport import Report
from .flamegraph import Node, classify, grow_tree, render_tree
from .gatestats import z_of
from .quality import read_sidecar
from .top import function_key

NAME = "diff"
HELP = "compare profiles: table with confidence intervals, differential flame graph, CI gate"
DESCRIPTION = ("Compares HEAD with BASE as shares of their samples (or, with --time, as seconds): prints "
               "every function's total share (on the stack) before and after, the change in percentage "
               "points with its confidence interval, and a verdict: grew, shrank or unchanged (inside the "
               "interval). Several runs of a side are combined, and their run-to-run spread widens the "
               "interval. With -o writes a differential flame graph. With --fail-over P exits 1 when a "
               "function grew by more than P points at the chosen confidence, naming each.")
USAGE = ("%(prog)s BASE HEAD [options]\n"
         "       %(prog)s BASE [BASE...] -- HEAD [HEAD...] [options]\n"
         "       %(prog)s --base BASE [--base BASE...] HEAD [HEAD...] [options]")
EPILOG = ("Exit status: 0, or 1 when --fail-over found a function over the limit, 2 for bad input. "
          "See docs/tools.md#diff and docs/ci.md.")


def _limit(text):
    """--fail-over: percentage points (0-100), or seconds with a unit
    (0.2s, 150ms): ('points', fraction) or ('seconds', seconds)."""
    m = re.match(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$", text)
    if m and m.group(2):
        value = float(m.group(1))
        return ("seconds", value / 1000.0 if m.group(2) == "ms" else value)
    if m and float(m.group(1)) <= 100.0:
        return ("points", float(m.group(1)) / 100.0)
    raise argparse.ArgumentTypeError("expected percentage points between 0 and 100, or seconds with a unit "
                                     "(0.5s, 200ms), not %r" % text)


def _confidence(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 50.0 <= value < 100.0:
        raise argparse.ArgumentTypeError("expected a confidence in percent, at least 50 and below 100, "
                                         "not %r" % text)
    return value


def _regex(text):
    try:
        return re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError("not a regular expression: %r (%s)" % (text, e))


def add_options(parser):
    parser.add_argument("runs", nargs="*", metavar="PROFILE",
                        help="BASE then HEAD; or the BASE runs, then -- and the HEAD runs; or the HEAD "
                             "runs, with --base for BASE's")
    parser.add_argument("--base", action="append", default=[], metavar="BASE",
                        help="a profile of BASE (repeat for several runs); the profiles named without it "
                             "are HEAD's")
    options.output(parser, metavar="SVG", help="write the differential flame graph here")
    parser.add_argument("--fail-over", type=_limit, metavar="LIMIT",
                        help="exit 1 when a function's total share grew by more than LIMIT percentage "
                             "points at the --confidence (the whole interval above it); with a unit "
                             "(0.5s, 200ms) seconds per run, as with --time")
    parser.add_argument("--confidence", type=_confidence, default=99.0, metavar="PCT",
                        help="the confidence of the intervals and verdicts, in percent (default: 99)")
    parser.add_argument("--time", action="store_true",
                        help="compare seconds per run instead of shares: each sample's length from the "
                             "profile's .quality.json (written by record and PYSAMPLE_QUALITY=1), or --rate")
    parser.add_argument("--rate", type=float, metavar="HZ",
                        help="with --time, the rate the profiles were recorded at, for profiles without "
                             "a .quality.json (a sample is 1/HZ seconds)")
    parser.add_argument("--focus", action="append", type=_regex, metavar="REGEX",
                        help="only the samples with a frame matching REGEX (as `name (file)`), before "
                             "anything is counted; repeat for any of several")
    parser.add_argument("--exclude", action="append", type=_regex, metavar="REGEX",
                        help="leave out the samples with a frame matching REGEX, before anything is "
                             "counted (e.g. '<frozen importlib' for the imports); repeat for several")
    parser.add_argument("--format", choices=("text", "markdown"), default="text",
                        help="text (default), or markdown: a table and the verdict, for a CI job summary")
    parser.add_argument("--top", type=int, default=20, metavar="N",
                        help="show the N functions that changed most, 0 for all (default: 20)")
    parser.add_argument("--per-thread", action="store_true",
                        help="compare thread with thread (matched by name), each as shares of its own "
                             "samples (default: all threads merged)")
    parser.add_argument("--title", metavar="T", help="title above the graph (default: Differential Flame Graph)")
    options.addresses(parser)
    filters.add_options(parser)
    # `diff B1 B2 -- H1 H2 [options]`: cli.py hands the profiles after `--`
    # over as command_argv.
    parser.splits_runs = True
    parser.set_defaults(command_argv=None)


def sides(args):
    """(BASE's profile paths, HEAD's) from the command line."""
    after = args.command_argv
    if after is not None:
        base, head = args.base + args.runs, after
    elif args.base:
        base, head = args.base, args.runs
    elif len(args.runs) == 2:
        base, head = args.runs[:1], args.runs[1:]
    else:
        raise ToolError("diff takes BASE HEAD, or several runs as BASE... -- HEAD... or --base BASE ... HEAD...; "
                        "got %d profile%s" % (len(args.runs), "" if len(args.runs) == 1 else "s"))
    if not base or not head:
        raise ToolError("diff needs at least one BASE and one HEAD profile")
    return base, head


def run(args):
    base_paths, head_paths = sides(args)
    by_time = args.time or (args.fail_over is not None and args.fail_over[0] == "seconds")
    if args.fail_over is not None and by_time and args.fail_over[0] == "points":
        raise ToolError("--time compares seconds: give --fail-over in seconds (0.5s, 200ms)")
    if args.rate is not None and not 0 < args.rate <= 1e6:
        raise ToolError("--rate must be a positive number of samples per second, not %g" % args.rate)
    base = [load(path, args, by_time) for path in base_paths]
    head = [load(path, args, by_time) for path in head_paths]
    analysis = Analysis([r for r, _ in base], [r for r, _ in head], z_of(args.confidence), by_time)
    report = Report(analysis, args)
    text = report.markdown() if args.format == "markdown" else report.text()
    if args.output is not None:
        svg = render_diff([p for _, p in base], [p for _, p in head], analysis, args)
        write_output(args.output, svg.encode("utf-8"), binary=False)
    write_output(None, text.encode("utf-8"), binary=False)
    for line in report.flagged_lines():
        print_err(line)
    return 1 if report.flagged else 0


# ---------------------------------------------------------------------------
# Reading the runs
# ---------------------------------------------------------------------------

def frame_text(frame):
    """What --focus and --exclude match: `name (file)`, or a marker's text."""
    if frame.kind == KIND_PY:
        return "%s (%s)" % (frame.name, frame.file)
    return frame.name


def focus(profile, args):
    """The profile with only the samples --focus and --exclude keep."""
    wanted, unwanted = args.focus or [], args.exclude or []
    if not wanted and not unwanted:
        return profile
    kept, total = [], 0
    for thread, frames, count in profile.stacks:
        texts = [frame_text(f) for f in frames]
        if wanted and not any(r.search(t) for r in wanted for t in texts):
            continue
        if unwanted and any(r.search(t) for r in unwanted for t in texts):
            continue
        kept.append((thread, frames, count))
        total += count
    if total == 0:
        raise ToolError("%s: no samples left after --focus/--exclude" % profile.path)
    profile.stacks, profile.total = kept, total
    return profile


def seconds_per_sample(path, args):
    """How long one sample of the profile at path stands for: 1/--rate, or
    from its .quality.json (a wall-clock sample is one tick of the sampler,
    a cpu one 1/requested rate of CPU time); a ToolError when neither says."""
    if args.rate is not None:
        return 1.0 / args.rate
    meta = read_sidecar(path)
    requested = remote.meta_number(meta, "requested_rate_hz", 0, float)
    if meta.get("mode") != "cpu":
        achieved = remote.meta_number(meta, "achieved_rate_hz", 0, float)
        duration = remote.meta_number(meta, "duration_s", 0, float)
        ticks = remote.meta_number(meta, "ticks", 0, float)
        if achieved > 0:
            return 1.0 / achieved
        if duration > 0 and ticks > 0:
            return duration / ticks
    if requested > 0:
        return 1.0 / requested
    raise ToolError("%s: --time needs the length of a sample, and there is no %s.quality.json beside it "
                    "(record and PYSAMPLE_QUALITY=1 write one): give --rate HZ, the rate it was recorded at"
                    % (path, os.path.basename(path)))


def load(path, args, by_time):
    # Native frames without a symbol are merged per object unless
    # --addresses: a rebuilt extension moves its addresses between commits.
    profile = focus(options.grouped(parse_collapsed(path), args), args)
    return Run(profile, args.per_thread, seconds_per_sample(path, args) if by_time else None), profile


def print_err(text):
    sys.stderr.write("%s: %s\n" % (PROG, text))


# ---------------------------------------------------------------------------
# The differential flame graph
# ---------------------------------------------------------------------------

def build_function_tree(profile, per_thread):
    """A flame graph tree of a profile whose frames are functions (lines
    merged), under one box per thread name with per_thread, else directly
    under the root."""
    def path_of(thread, frames):
        return ([thread] if per_thread else []) + list(frames)

    def key_of(thread, item):
        return ("thread", thread_key(thread)) if item is thread else function_key(item)

    def node_of(thread, item, key):
        if item is thread:
            label = "thread %s" % key[1] if thread.name is not None else key[1]
            return Node(key, "thread", label, label, label, None)
        if item.kind == KIND_MARKER:
            return Node(key, KIND_MARKER, item.name, item.name, item.name, None)
        label = "%s (%s)" % (item.name, item.file)
        short = "%s (%s)" % (item.name, os.path.basename(item.file) or item.file)
        return Node(key, item.kind, label, short, item.name, item)

    return grow_tree(profile, path_of, key_of, node_of)


class Merged(object):
    """The runs of one side as one profile (for drawing)."""

    def __init__(self, profiles):
        self.path = profiles[0].path if len(profiles) == 1 else "%d runs" % len(profiles)
        self.stacks = [s for p in profiles for s in p.stacks]
        self.total = sum(p.total for p in profiles)


class Compared(object):
    """What a box of HEAD's graph compares: the verdict of its call path
    (diffmodel.Analysis.path_verdicts), found by the box's path of
    function keys under its thread group."""

    def __init__(self, head_root, analysis, per_thread):
        self.info = {}      # id(head node) -> (plain Change, judged Change, verdict, on the rest)
        work = [(head_root, None, ())]
        while work:
            node, group, path = work.pop()
            for key, child in node.children.items():
                if per_thread and not path and group is None and key[0] == "thread":
                    work.append((child, key[1], ()))
                    continue
                child_path = path + (key,)
                self.info[id(child)] = analysis.path_verdicts.get((group, child_path))
                work.append((child, group, child_path))
        # Colours saturate at the largest change that is not noise, but never
        # for less than a point (a hundredth of a second with --time).
        deltas = [abs(v[0].delta) for v in self.info.values() if v is not None and v[2] != "unchanged"]
        self.scale = max([0.01] + deltas)

    def verdict(self, node):
        return self.info.get(id(node))


GREW = (220, 40, 30)
SHRANK = (40, 90, 220)
SAME = (235, 232, 225)


def _mix(target, amount):
    return "rgb(%d,%d,%d)" % tuple(int(SAME[i] + (target[i] - SAME[i]) * amount) for i in range(3))


def render_diff(base_profiles, head_profiles, analysis, args):
    """HEAD's stacks (all its runs), a box red where its call path grew,
    blue where it shrank (on the rest, diffmodel.py), pale inside the
    interval."""
    report_units = Report(analysis, args)
    head_root = build_function_tree(Merged(head_profiles), args.per_thread)
    compared = Compared(head_root, analysis, args.per_thread)

    def colour(node):
        v = compared.verdict(node)
        if v is None or v[2] == "unchanged":
            return _mix(SAME, 0.0)
        amount = min(1.0, 0.25 + 0.75 * abs(v[0].delta) / compared.scale)
        return _mix(GREW if v[2] == "grew" else SHRANK, amount)

    def tip(node, _total):
        lines = [node.title]
        v = compared.verdict(node)
        if v is not None:
            plain, judged, verdict, on_rest = v
            lines.append("total %s -> %s (%s, %g%% interval %s)" % (
                report_units.value(plain.before), report_units.value(plain.after),
                report_units.delta(plain.delta), args.confidence, report_units.interval(plain)))
            lines.append(verdict + (" (its share of the samples outside what grew: %s -> %s)"
                                    % (report_units.value(judged.before), report_units.value(judged.after))
                                    if on_rest else ""))
        lines.append("HEAD: %s sample%s" % (thousands(node.count), "" if node.count == 1 else "s"))
        if node.kind == KIND_PY:
            lines.append("%s: %s" % classify(node.colour_key.file))
        return lines

    unit = "s" if analysis.by_time else " points"
    legend = [(_mix(GREW, 1.0), "grew by %.2g%s or more" % (compared.scale * (1 if analysis.by_time else 100), unit)),
              (_mix(GREW, 0.4), "grew"), (_mix(SAME, 0.0), "unchanged (inside the interval)"),
              (_mix(SHRANK, 0.4), "shrank"),
              (_mix(SHRANK, 1.0), "shrank by %.2g%s or more" % (compared.scale * (1 if analysis.by_time else 100),
                                                                unit))]
    base, head = Merged(base_profiles), Merged(head_profiles)
    subtitle = "%s (%s samples) -> %s (%s samples): HEAD's stacks, %s, by function, %g%% confidence" % (
        os.path.basename(base.path), thousands(base.total), os.path.basename(head.path), thousands(head.total),
        "seconds" if analysis.by_time else "shares of each thread" if args.per_thread else "shares of all samples",
        args.confidence)
    return render_tree(head_root, args.title or "Differential Flame Graph", subtitle, colour=colour, tip=tip,
                       legend=legend)
