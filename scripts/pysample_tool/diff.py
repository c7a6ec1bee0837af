# diff.py - `pysample diff BASE HEAD`: what changed between two profiles, as
# shares of their samples: a table of the functions that grew or shrank
# most, a differential flame graph, and a gate for CI (--fail-over).
#
# Two profiles of the same program are rarely the same length, so counts
# are never compared, only shares (a function's samples over all samples,
# or over its thread's with --per-thread), and changes are in percentage
# points.  Frames are compared by function (qualified name and file), never
# by line: the commits being compared move lines, and a function whose
# every line moved has not changed.
#
# SPDX-License-Identifier: MIT

import argparse
import collections
import os
import sys

from . import filters, options
from .collapsed import KIND_MARKER, KIND_PY, parse_collapsed
from .common import PROG, ToolError, percent, printable, thousands, write_output
from .flamegraph import Node, classify, grow_tree, render_tree
from .top import NO_FRAMES, function_key

NAME = "diff"
HELP = "compare two profiles: table, differential flame graph, CI gate"
DESCRIPTION = ("Compares HEAD with BASE as shares of their samples: prints the functions whose total share "
               "(on the stack) and self share (running) grew or shrank most, in percentage points; with -o "
               "writes a differential flame graph (HEAD's stacks, red where a frame's share grew, blue where "
               "it shrank). Functions are compared by qualified name and file, not line. With --fail-over P "
               "exits 1 when a function's total share grew by more than P points, naming each.")
USAGE = "%(prog)s BASE HEAD [-o diff.svg] [--fail-over POINTS] [--top N] [--per-thread]"
EPILOG = ("Exit status: 0, or 1 when --fail-over found a function over the limit, 2 for bad input. "
          "See docs/tools.md and docs/ci.md.")


def _points(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError("expected percentage points between 0 and 100, not %r" % text)
    return value


def add_options(parser):
    parser.add_argument("base", metavar="BASE", help="the profile before (collapsed, as libpysample writes it)")
    parser.add_argument("head", metavar="HEAD", help="the profile after")
    options.output(parser, metavar="SVG", help="write the differential flame graph here")
    parser.add_argument("--fail-over", type=_points, metavar="POINTS",
                        help="exit 1 when a function's total share grew by more than POINTS percentage points")
    parser.add_argument("--top", type=int, default=20, metavar="N",
                        help="show the N functions that changed most, 0 for all (default: 20)")
    parser.add_argument("--per-thread", action="store_true",
                        help="compare thread with thread (matched by name), each as shares of its own "
                             "samples (default: all threads merged)")
    parser.add_argument("--title", metavar="T", help="title above the graph (default: Differential Flame Graph)")
    options.addresses(parser)
    filters.add_options(parser)


def run(args):
    # Native frames without a symbol are merged per object unless
    # --addresses: a rebuilt extension moves its addresses between commits.
    base = options.grouped(parse_collapsed(args.base), args)
    head = options.grouped(parse_collapsed(args.head), args)
    rows = diff_functions(base, head, args.per_thread)
    text = "%s -> %s: %s -> %s samples, %s\n" % (
        args.base, args.head, thousands(base.total), thousands(head.total),
        "shares of each thread's samples" if args.per_thread else "shares of all samples")
    text += format_table(rows, args.top)
    if args.output is not None:
        svg = render_diff(base, head, args.per_thread, args.title)
        write_output(args.output, svg.encode("utf-8"), binary=False)
    write_output(None, text.encode("utf-8"), binary=False)
    if args.fail_over is None:
        return 0
    return gate(rows, args.fail_over)


# ---------------------------------------------------------------------------
# Shares
# ---------------------------------------------------------------------------

def thread_key(thread):
    """Threads are matched by name: their ids differ from run to run.  A
    thread without a name can only be its id."""
    return thread.name if thread.name is not None else thread.label


class Shares(object):
    """One profile's self and total samples per (thread key, function), and
    the totals they are shares of.  Without per_thread every thread key is
    None."""

    def __init__(self, profile, per_thread):
        self.self_counts = collections.Counter()
        self.total_counts = collections.Counter()
        self.totals = collections.Counter()
        for thread, frames, count in profile.stacks:
            group = thread_key(thread) if per_thread else None
            frames = frames or (NO_FRAMES,)
            self.totals[group] += count
            self.self_counts[(group, function_key(frames[-1]))] += count
            # A recursive function is on the stack once per sample.
            for key in set(function_key(f) for f in frames):
                self.total_counts[(group, key)] += count

    def share(self, counts, key):
        return percent(counts.get(key, 0), self.totals.get(key[0], 0))


Row = collections.namedtuple("Row", "group function base_total head_total base_self head_self")


def _delta_total(row):
    return row.head_total - row.base_total


def _delta_self(row):
    return row.head_self - row.base_self


def diff_functions(base, head, per_thread):
    """[Row] of every function of either profile, the largest change (of
    total or self share, grown or shrunk) first."""
    before, after = Shares(base, per_thread), Shares(head, per_thread)
    rows = []
    for key in set(before.total_counts) | set(after.total_counts):
        rows.append(Row(key[0], key[1],
                        before.share(before.total_counts, key), after.share(after.total_counts, key),
                        before.share(before.self_counts, key), after.share(after.self_counts, key)))
    rows.sort(key=lambda r: (-max(abs(_delta_total(r)), abs(_delta_self(r))), -_delta_total(r),
                             r.group or "", r.function[1], r.function[2] or ""))
    return rows


def function_text(row):
    _kind, name, filename = row.function
    text = printable(name) + ("" if filename is None else " (%s)" % printable(filename))
    if row.group is not None:
        text += " [%s]" % printable(row.group)
    return text


def format_table(rows, limit):
    shown = rows if limit <= 0 else rows[:limit]
    out = ["%7s %7s %8s  %7s %7s %8s  %s" % ("TOTAL%", "->", "CHANGE", "SELF%", "->", "CHANGE",
                                              "FUNCTION (FILE)")]
    for row in shown:
        out.append("%6.2f%% %6.2f%% %+8.2f  %6.2f%% %6.2f%% %+8.2f  %s" % (
            row.base_total, row.head_total, _delta_total(row), row.base_self, row.head_self, _delta_self(row),
            function_text(row)))
    if len(rows) > len(shown):
        out.append("... %d more functions (use --top 0 to list all)" % (len(rows) - len(shown)))
    return "\n".join(out) + "\n"


def gate(rows, limit):
    """The CI gate: 1 and one line per function whose total share grew by
    more than limit points, else 0."""
    over = [r for r in rows if _delta_total(r) > limit]
    over.sort(key=lambda r: -_delta_total(r))
    for row in over:
        print_err("%s: total share grew by %.2f points (%.2f%% -> %.2f%%), more than %g"
                  % (function_text(row), _delta_total(row), row.base_total, row.head_total, limit))
    return 1 if over else 0


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


class Compared(object):
    """What a box of HEAD's graph compares: its shares in both profiles.
    A share is of the whole profile, or of the box's thread with
    per_thread."""

    def __init__(self, base_root, head_root, per_thread):
        self.per_thread = per_thread
        self.info = {}      # id(head node) -> (base node or None, base whole, head whole)
        self._walk(base_root, head_root)
        deltas = [abs(self.change(n)[0]) for n in self.nodes]
        # Colours saturate at the largest change, but never for less than a
        # point: two runs of an unchanged program differ by noise, which
        # must stay pale.
        self.scale = max([1.0] + deltas)

    def _walk(self, base_root, head_root):
        """Pairs each box of HEAD with BASE's at the same path (iteratively:
        stacks are deep)."""
        self.nodes = []
        work = [(base_root, head_root, base_root.count, head_root.count, 0)]
        while work:
            b, h, bw, hw, d = work.pop()
            self.info[id(h)] = (b, bw, hw)
            child_bw, child_hw = bw, hw
            if self.per_thread and d == 1:
                # The thread box is a share of the profile; the functions
                # above it are shares of the thread.
                child_bw, child_hw = (b.count if b else 0), h.count
            self.nodes.append(h)
            for key, child in h.children.items():
                work.append((b.children.get(key) if b else None, child, child_bw, child_hw, d + 1))

    def shares(self, node):
        """(base total, head total, base self, head self) in percent."""
        b, bw, hw = self.info[id(node)]
        return (percent(b.count if b else 0, bw), percent(node.count, hw),
                percent(b.self_count if b else 0, bw), percent(node.self_count, hw))

    def change(self, node):
        base_total, head_total, base_self, head_self = self.shares(node)
        return head_total - base_total, self.info[id(node)][0] is None


GREW = (220, 40, 30)
SHRANK = (40, 90, 220)
SAME = (235, 232, 225)


def _mix(target, amount):
    return "rgb(%d,%d,%d)" % tuple(int(SAME[i] + (target[i] - SAME[i]) * amount) for i in range(3))


def render_diff(base, head, per_thread, title=None):
    base_root = build_function_tree(base, per_thread)
    head_root = build_function_tree(head, per_thread)
    compared = Compared(base_root, head_root, per_thread)

    def colour(node):
        delta, _new = compared.change(node)
        amount = min(1.0, abs(delta) / compared.scale)
        return _mix(GREW if delta > 0 else SHRANK, amount)

    def tip(node, _total):
        base_total, head_total, base_self, head_self = compared.shares(node)
        delta, new = compared.change(node)
        lines = [node.title,
                 "total %.2f%% -> %.2f%% (%+.2f points)%s" % (base_total, head_total, delta,
                                                               ", not in BASE" if new else ""),
                 "self %.2f%% -> %.2f%% (%+.2f points)" % (base_self, head_self, head_self - base_self),
                 "HEAD: %s sample%s" % (thousands(node.count), "" if node.count == 1 else "s")]
        if node.kind == KIND_PY:
            lines.append("%s: %s" % classify(node.colour_key.file))
        return lines

    legend = [(_mix(GREW, 1.0), "grew by %.2g points or more" % compared.scale),
              (_mix(GREW, 0.4), "grew"), (_mix(SHRANK, 0.4), "shrank"),
              (_mix(SHRANK, 1.0), "shrank by %.2g points or more" % compared.scale)]
    subtitle = "%s (%s samples) -> %s (%s samples): HEAD's stacks, shares of %s, by function" % (
        os.path.basename(base.path), thousands(base.total), os.path.basename(head.path), thousands(head.total),
        "each thread" if per_thread else "all samples")
    return render_tree(head_root, title or "Differential Flame Graph", subtitle, colour=colour, tip=tip,
                       legend=legend)
