#!/usr/bin/env python3
# pysample_tool.py - the Python half of the `pysample` command.
#
# The sh front end (scripts/pysample) finds this module and runs it with the
# user's python3.  It needs nothing but the standard library (Python >= 3.6),
# because it has to work on any machine the profiled program runs on.
#
# Subcommands: record, flamegraph, top, convert, info.  See docs/tools.md and
# the pysample(1) man page.  This module is also the reference reader of the
# collapsed format that libpysample writes (docs/format.md) and the reference
# writer of the speedscope and pprof formats.
#
# SPDX-License-Identifier: MIT

import argparse
import collections
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib

VERSION = "0.1.0"
PROG = "pysample"
LIB_BASENAMES = ("libpysample.so", "libpysample.dylib")
DEFAULT_RATE = 100  # the library's default PYSAMPLE_RATE

# Set by the sh front end: the directory the `pysample` script lives in, where
# record starts looking for the library.  record removes it from the
# environment of the profiled command.
SCRIPT_DIR_ENV = "PYSAMPLE_TOOL_SCRIPT_DIR"


class ToolError(Exception):
    """A problem the user has to fix: printed as one `pysample: ...` line."""

    def __init__(self, message, status=2):
        Exception.__init__(self, message)
        self.status = status


# ---------------------------------------------------------------------------
# The collapsed format (docs/format.md)
#
#   thread 4242 (MainThread);main (/srv/app.py:10);Worker.run (/srv/w.py:42) 17
#
# One line per distinct stack, root first, frames separated by ';', then one
# space and a positive sample count.  The first frame names the thread.  A
# Python frame is `qualname (filename:line)`, or `qualname (filename)` when
# the library ran with PYSAMPLE_LINES=0.  Frames the profiler adds itself look
# like `[pysample: ...]`.  Inside names '%', ';', CR, LF and other control
# bytes are written as %XX.
# ---------------------------------------------------------------------------

KIND_PY = "py"
KIND_MARKER = "marker"

_THREAD_RE = re.compile(r"^thread (\d+|\?)(?: \((.*)\))?$")
_PYFRAME_LINE_RE = re.compile(r"^(.+?) \((.*):(-?\d+)\)$")
_PYFRAME_NOLINE_RE = re.compile(r"^(.+?) \((.+)\)$")
_COUNT_RE = re.compile(r"^[0-9]+$")
_ESCAPE_RE = re.compile(r"%([0-9A-Fa-f]{2})")


def unescape(text):
    """Undoes the %XX escaping of names and paths."""
    if "%" not in text:
        return text
    return _ESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), text)


class Frame(collections.namedtuple("Frame", "kind name file line")):
    """One stack frame.  kind is KIND_PY or KIND_MARKER; for markers, name is
    the whole `[pysample: ...]` text and file and line are None.  line is None
    for profiles written with PYSAMPLE_LINES=0."""

    __slots__ = ()

    @property
    def label(self):
        """The frame as the collapsed format shows it, unescaped."""
        if self.kind == KIND_MARKER:
            return self.name
        if self.line is None:
            return "%s (%s)" % (self.name, self.file)
        return "%s (%s:%d)" % (self.name, self.file, self.line)

    @property
    def short_label(self):
        """qualname (basename:line): what a flame graph box shows."""
        if self.kind == KIND_MARKER:
            return self.name
        base = os.path.basename(self.file) or self.file
        if self.line is None:
            return "%s (%s)" % (self.name, base)
        return "%s (%s:%d)" % (self.name, base, self.line)


class Thread(collections.namedtuple("Thread", "tid name")):
    """tid is None for `thread ?`: a thread whose id the library never saw."""

    __slots__ = ()

    @property
    def tid_text(self):
        return "?" if self.tid is None else str(self.tid)

    @property
    def label(self):
        if self.name is None:
            return "thread %s" % self.tid_text
        return "thread %s (%s)" % (self.tid_text, self.name)

    def sort_key(self):
        return (self.tid is None, self.tid or 0, self.name or "")


class Profile(object):
    """A parsed collapsed profile.

    stacks: list of (Thread, tuple of Frame root first, count), in file order
    with duplicate stacks merged.  total: the number of samples.
    """

    def __init__(self, path):
        self.path = path
        self.stacks = []
        self.total = 0
        self.has_lines = False

    def threads(self):
        """[(Thread, samples)] by thread id."""
        counts = collections.OrderedDict()
        for thread, _frames, count in self.stacks:
            counts[thread] = counts.get(thread, 0) + count
        return sorted(counts.items(), key=lambda item: item[0].sort_key())


def _malformed(path, lineno, why, text, data):
    if len(text) > 120:
        text = text[:117] + "..."
    hint = _sniff(data) if lineno == 1 else ""
    return ToolError("%s:%d: malformed line: %s: %s%s" % (path, lineno, why, printable(text), hint))


def _sniff(data):
    """A hint when a file is obviously not a collapsed profile."""
    head = data[:512].lstrip()
    if b"\0" in data[:4096]:
        return " (this is a binary file, e.g. a pprof profile; pysample reads the text profiles libpysample writes)"
    if head.startswith(b"<?xml") or head.startswith(b"<svg"):
        return " (this is an SVG or XML file, not a collapsed-stack profile)"
    if head.startswith(b"{"):
        return " (this is a JSON file, not a collapsed-stack profile)"
    return ""


def parse_collapsed(path, data=None):
    """Reads a collapsed profile; raises ToolError for a missing file, an
    empty profile or a malformed line (with its line number)."""
    if data is None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except (IOError, OSError) as e:
            raise ToolError("cannot read %s: %s" % (path, e.strerror or e))
    profile = Profile(path)
    merged = collections.OrderedDict()
    frame_cache = {}
    thread_cache = {}
    lineno = 0
    for raw in data.split(b"\n"):
        lineno += 1
        line = raw.decode("utf-8", "replace")
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip():
            continue
        stack_text, sep, count_text = line.rpartition(" ")
        if not sep or not _COUNT_RE.match(count_text):
            raise _malformed(path, lineno, "expected a sample count at the end of the line", line, data)
        count = int(count_text)
        if count <= 0:
            raise _malformed(path, lineno, "the sample count must be positive", line, data)
        parts = stack_text.split(";")
        thread = thread_cache.get(parts[0])
        if thread is None:
            m = _THREAD_RE.match(parts[0])
            if not m:
                raise _malformed(path, lineno,
                                 "the first frame must be \"thread <tid>\" or \"thread <tid> (<name>)\", not %r"
                                 % parts[0][:60], line, data)
            name = m.group(2)
            tid = None if m.group(1) == "?" else int(m.group(1))
            thread = Thread(tid, unescape(name) if name is not None else None)
            thread_cache[parts[0]] = thread
        frames = []
        for index, text in enumerate(parts[1:], 2):
            frame = frame_cache.get(text)
            if frame is None:
                frame = _parse_frame(text)
                if frame is None:
                    raise _malformed(path, lineno,
                                     "frame %d is neither \"name (file:line)\", \"name (file)\" nor a "
                                     "\"[pysample: ...]\" marker: %r" % (index, text[:60]), line, data)
                frame_cache[text] = frame
            frames.append(frame)
        key = (thread, tuple(frames))
        merged[key] = merged.get(key, 0) + count
        profile.total += count
    if profile.total == 0:
        raise ToolError("%s: empty profile: it holds no samples (the program may have ended before the "
                        "first sample, or was not a Python program; see docs/troubleshooting.md)" % path)
    profile.stacks = [(thread, frames, count) for (thread, frames), count in merged.items()]
    profile.has_lines = any(f.line is not None for f in frame_cache.values())
    return profile


def _parse_frame(text):
    if text.startswith("[pysample: ") and text.endswith("]"):
        return Frame(KIND_MARKER, unescape(text), None, None)
    m = _PYFRAME_LINE_RE.match(text)
    if m:
        return Frame(KIND_PY, unescape(m.group(1)), unescape(m.group(2)), int(m.group(3)))
    m = _PYFRAME_NOLINE_RE.match(text)
    if m:
        return Frame(KIND_PY, unescape(m.group(1)), unescape(m.group(2)), None)
    return None


# ---------------------------------------------------------------------------
# Text helpers
# ---------------------------------------------------------------------------

_CONTROL_RE = re.compile("[\x00-\x1f\x7f]")
_XML_INVALID_RE = re.compile("[\ud800-\udfff\ufffe\uffff]")


def printable(text):
    """Makes names safe for a terminal or XML: control characters are shown
    as \\n, \\t, \\xNN; characters XML can't hold become U+FFFD."""
    if _CONTROL_RE.search(text):
        text = _CONTROL_RE.sub(lambda m: repr(m.group(0))[1:-1], text)
    if _XML_INVALID_RE.search(text):
        text = _XML_INVALID_RE.sub("\ufffd", text)
    return text


def xml_text(text, lines=None):
    """Escapes text for XML text and attributes.  Control characters are made
    visible; to get line breaks (multi-line tooltips) pass the lines instead."""
    if lines is not None:
        text = "\n".join(printable(line) for line in lines)
    else:
        text = printable(text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def percent(part, whole):
    return 100.0 * part / whole if whole else 0.0


def thousands(n):
    return "{:,}".format(n)


# ---------------------------------------------------------------------------
# top
# ---------------------------------------------------------------------------

NO_FRAMES = Frame(KIND_MARKER, "[no Python frames]", None, None)


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


def describe(profile):
    threads = profile.threads()
    return "%s samples in %d thread%s, line numbers %s" % (
        thousands(profile.total), len(threads), "" if len(threads) == 1 else "s",
        "on" if profile.has_lines else "off")


def cmd_top(args):
    profile = parse_collapsed(args.file)
    text = "%s: %s\n" % (args.file, describe(profile)) + format_top([profile], args.n)
    write_output(None, text.encode("utf-8"), binary=False)
    return 0


# ---------------------------------------------------------------------------
# flamegraph
# ---------------------------------------------------------------------------

class Node(object):
    __slots__ = ("key", "kind", "title", "long", "short", "colour_key", "count", "self_count", "children")

    def __init__(self, key, kind, title, long_label, short_label, colour_key):
        self.key = key
        self.kind = kind            # "root", "thread", KIND_PY, KIND_MARKER
        self.title = title          # full text for the tooltip
        self.long = long_label      # box label when there is room
        self.short = short_label    # box label when there is less room
        self.colour_key = colour_key
        self.count = 0
        self.self_count = 0
        self.children = {}


def build_tree(profile):
    root = Node("all", "root", "all", "all", "all", None)
    for thread, frames, count in profile.stacks:
        root.count += count
        node = root
        path = [("thread", thread)] + [(f.kind, f) for f in frames]
        for kind, item in path:
            if kind == "thread":
                key = ("thread", thread)
            else:
                key = (item.kind, item.name, item.file, item.line)
            child = node.children.get(key)
            if child is None:
                if kind == "thread":
                    label = thread.label
                    short = "thread %s" % thread.tid_text
                    child = Node(key, "thread", label, label, short, None)
                elif item.kind == KIND_MARKER:
                    child = Node(key, KIND_MARKER, item.name, item.name, item.name, None)
                else:
                    child = Node(key, KIND_PY, item.label, item.short_label, item.name, item)
                node.children[key] = child
            child.count += count
            node = child
        node.self_count += count
    return root


def _sort_key(node):
    if node.kind == "thread":
        return (0,) + node.key[1].sort_key()
    return (1, node.title)


_SITE_RE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([^/\\]+)")
_STDLIB_RE = re.compile(r"[/\\]lib(?:64)?[/\\]python\d+(?:\.\d+)?t?(?:[/\\]|\.zip[/\\])")


def classify(filename):
    """('site-packages', package) | ('stdlib', module) | ('user', directory)."""
    m = _SITE_RE.search(filename)
    if m:
        package = m.group(1)
        for suffix in (".py", ".so", ".pyd"):
            if package.endswith(suffix):
                package = package[:-len(suffix)]
        return "site-packages", package
    if filename.startswith("<frozen ") or _STDLIB_RE.search(filename):
        module = re.split(r"[/\\]", _STDLIB_RE.split(filename)[-1])[0] if _STDLIB_RE.search(filename) \
            else filename
        return "stdlib", module
    return "user", os.path.dirname(filename) or filename


def _unit_hash(text):
    return (zlib.crc32(text.encode("utf-8", "replace")) & 0xFFFFFFFF) / 4294967296.0


PALETTE = {
    # category: (base rgb, rgb span): colour = base + span * v
    "user": ((205, 70, 0), (50, 150, 55)),              # warm: red .. orange .. yellow
    "stdlib": ((70, 130, 190), (50, 70, 55)),           # blue
    "site-packages": ((60, 170, 70), (60, 60, 50)),     # green
}
MARKER_COLOUR = "rgb(170,170,170)"
THREAD_COLOUR = "rgb(205,200,190)"
ROOT_COLOUR = "rgb(220,215,205)"
MATCH_COLOUR = "rgb(230,0,230)"


def frame_colour(node):
    """Stable colour: the category gives the hue range, the package or
    directory most of the shade, the function name a little of it."""
    if node.kind == "root":
        return ROOT_COLOUR
    if node.kind == "thread":
        return THREAD_COLOUR
    if node.kind == KIND_MARKER:
        return MARKER_COLOUR
    frame = node.colour_key
    category, group = classify(frame.file)
    v_group = _unit_hash(category + ":" + group)
    v_name = _unit_hash(frame.name)
    base, span = PALETTE[category]
    channels = []
    for i in range(3):
        v = 0.7 * v_group + 0.3 * (v_name if i != 1 else 1.0 - v_name)
        channels.append(int(base[i] + span[i] * v))
    return "rgb(%d,%d,%d)" % tuple(channels)


FONT_SIZE = 12
FONT_WIDTH = 0.59       # average glyph width in em, as flamegraph.pl assumes
FRAME_HEIGHT = 16
IMAGE_WIDTH = 1200
XPAD = 10
YPAD_TOP = 62           # title, toolbar
YPAD_BOTTOM = 34        # details line


def fit_label(long_label, short_label, width):
    """The label a box of `width` pixels shows: long, short, cut short, or none.
    flamegraph.js below does the same when zooming."""
    chars = int((width - 6) / (FONT_SIZE * FONT_WIDTH))
    if chars < 3:
        return ""
    if len(long_label) <= chars:
        return long_label
    if len(short_label) <= chars:
        return short_label
    return short_label[:chars - 2] + ".."


def render_flamegraph(profile, title=None, minwidth=0.1, subtitle=None):
    root = build_tree(profile)
    total = root.count
    usable = IMAGE_WIDTH - 2 * XPAD
    scale = float(usable) / total

    # Lay out: (node, x in samples, depth), skipping boxes narrower than
    # minwidth pixels like flamegraph.pl does (they would be invisible).
    boxes = []
    omitted = [0]
    max_depth = [0]

    # Iterative, so that deep stacks don't hit Python's recursion limit.
    work = [(root, 0, 0)]
    while work:
        node, x, depth = work.pop()
        if node.count * scale < minwidth:
            omitted[0] += 1
            continue
        boxes.append((node, x, depth))
        max_depth[0] = max(max_depth[0], depth)
        offset = x
        children = sorted(node.children.values(), key=_sort_key)
        pending = []
        for child in children:
            pending.append((child, offset, depth + 1))
            offset += child.count
        work.extend(reversed(pending))

    height = YPAD_TOP + (max_depth[0] + 1) * FRAME_HEIGHT + YPAD_BOTTOM
    base_y = height - YPAD_BOTTOM
    if title is None:
        title = "Flame Graph"
    if subtitle is None:
        subtitle = "%s: %s" % (os.path.basename(profile.path), describe(profile))
    if omitted[0]:
        subtitle += "; %d frames narrower than %.2g px not drawn" % (omitted[0], minwidth)

    out = []
    w = out.append
    w('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n')
    w('<svg version="1.1" xmlns="http://www.w3.org/2000/svg" '
      'xmlns:fg="urn:x-pysample:flamegraph" width="%d" height="%d" viewBox="0 0 %d %d" '
      'fg:total="%d" fg:xpad="%d" fg:usable="%d">\n'
      % (IMAGE_WIDTH, height, IMAGE_WIDTH, height, total, XPAD, usable))
    w('<!-- Flame graph by pysample %s (https://github.com/brendangregg/FlameGraph style). '
      'Hover for details, click a frame to zoom, Ctrl-F or "Search" to highlight. -->\n' % VERSION)
    w('<defs><linearGradient id="bg" y1="0" y2="1" x1="0" x2="0">'
      '<stop stop-color="#f2f2f2" offset="5%"/><stop stop-color="#e4e4dc" offset="95%"/>'
      '</linearGradient></defs>\n')
    w('<style type="text/css"><![CDATA[\n%s]]></style>\n' % FLAMEGRAPH_CSS)
    w('<rect x="0" y="0" width="%d" height="%d" fill="url(#bg)"/>\n' % (IMAGE_WIDTH, height))
    w('<text id="title" x="%d" y="24">%s</text>\n' % (IMAGE_WIDTH // 2, xml_text(title)))
    w('<text id="subtitle" x="%d" y="42">%s</text>\n' % (IMAGE_WIDTH // 2, xml_text(subtitle)))
    w('<text id="unzoom" class="button hide" x="%d" y="24">Reset Zoom</text>\n' % XPAD)
    w('<text id="search" class="button" x="%d" y="24">Search</text>\n' % (IMAGE_WIDTH - XPAD - 100))
    w('<text id="matched" x="%d" y="%d"> </text>\n' % (IMAGE_WIDTH - XPAD - 100, height - 12))
    w('<text id="details" x="%d" y="%d"> </text>\n' % (XPAD, height - 12))
    # Legend: what the colours mean.
    legend = [(PALETTE["user"], "your code"), (PALETTE["stdlib"], "standard library"),
              (PALETTE["site-packages"], "site-packages"), (None, "profiler marker")]
    lx = XPAD
    w('<g id="legend">\n')
    for colour, text in legend:
        if colour is None:
            fill = MARKER_COLOUR
        else:
            base, span = colour
            fill = "rgb(%d,%d,%d)" % tuple(int(base[i] + span[i] * 0.5) for i in range(3))
        w('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (lx, 48, fill))
        w('<text x="%d" y="57">%s</text>\n' % (lx + 14, xml_text(text)))
        lx += 14 + int(len(text) * FONT_SIZE * FONT_WIDTH) + 16
    w('</g>\n')

    w('<g id="frames">\n')
    for node, x, depth in boxes:
        px = XPAD + x * scale
        pw = node.count * scale
        y = base_y - (depth + 1) * FRAME_HEIGHT
        stats = "%s sample%s (%.2f%%)" % (thousands(node.count), "" if node.count == 1 else "s",
                                          percent(node.count, total))
        if node.self_count and node.children:
            stats += ", self %s (%.2f%%)" % (thousands(node.self_count), percent(node.self_count, total))
        tip = [node.title, stats]
        if node.kind == KIND_PY:
            tip.append("%s: %s" % classify(node.colour_key.file))
        attrs = ' fg:x="%d" fg:w="%d"' % (x, node.count)
        if node.long != node.title:
            attrs += ' fg:l="%s"' % xml_text(node.long)
        if node.short != node.long:
            attrs += ' fg:s="%s"' % xml_text(node.short)
        w('<g class="f"%s><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" '
          'rx="2" ry="2"/><text x="%.2f" y="%.1f">%s</text></g>\n'
          % (attrs, xml_text(None, lines=tip), px, y, pw, FRAME_HEIGHT - 1, frame_colour(node),
             px + 3, y + 10.5 + 0.5, xml_text(fit_label(node.long, node.short, pw))))
    w('</g>\n')
    w('<script type="text/ecmascript"><![CDATA[\n%s]]></script>\n' % FLAMEGRAPH_JS)
    w('</svg>\n')
    return "".join(out)


FLAMEGRAPH_CSS = """\
text { font-family: Verdana, "DejaVu Sans", sans-serif; font-size: 12px; fill: #000; }
#title { text-anchor: middle; font-size: 17px; }
#subtitle { text-anchor: middle; fill: #555; }
#legend text { font-size: 11px; fill: #444; }
.button { cursor: pointer; fill: #336; text-decoration: underline; }
.button:hover { fill: #00c; }
.f { cursor: pointer; }
.f text { pointer-events: none; }
.f:hover rect { stroke: #000; stroke-width: 0.7; }
.hide { display: none; }
.parent rect { opacity: 0.55; }
"""

# Plain ES5 so it runs in any browser that opens an SVG.  Reads the layout from
# the fg:* attributes the generator writes: fg:x and fg:w are the position and
# width of a box in samples, fg:l and fg:s the long and short labels (default:
# the first title line, then the long label).
FLAMEGRAPH_JS = r"""
(function () {
  "use strict";
  var svg = document.documentElement;
  var total = +svg.getAttribute("fg:total");
  var xpad = +svg.getAttribute("fg:xpad");
  var usable = +svg.getAttribute("fg:usable");
  var details = document.getElementById("details");
  var matchedtxt = document.getElementById("matched");
  var unzoombtn = document.getElementById("unzoom");
  var searchbtn = document.getElementById("search");
  var frames = [];
  var all = document.getElementById("frames").getElementsByTagName("g");
  for (var i = 0; i < all.length; i++) {
    var g = all[i];
    var title = g.getElementsByTagName("title")[0].textContent;
    var rect = g.getElementsByTagName("rect")[0];
    var name = title.split("\n")[0];
    var longl = g.getAttribute("fg:l") || name;
    frames.push({
      g: g, rect: rect, text: g.getElementsByTagName("text")[0],
      x: +g.getAttribute("fg:x"), w: +g.getAttribute("fg:w"), y: +rect.getAttribute("y"),
      name: name, info: title.replace(/\n/g, " \u2014 "),
      longl: longl, shortl: g.getAttribute("fg:s") || longl,
      fill: rect.getAttribute("fill")
    });
  }
  var byg = [];
  var zoomed = null, searchre = null;

  function fit(f, width) {
    var chars = Math.floor((width - 6) / (12 * 0.59));
    if (chars < 3) return "";
    if (f.longl.length <= chars) return f.longl;
    if (f.shortl.length <= chars) return f.shortl;
    return f.shortl.substring(0, chars - 2) + "..";
  }
  function place(f, x, width) {
    f.rect.setAttribute("x", x.toFixed(2));
    f.rect.setAttribute("width", width.toFixed(2));
    f.text.setAttribute("x", (x + 3).toFixed(2));
    f.text.textContent = fit(f, width);
  }
  function find(target) {
    while (target && target !== svg) {
      if (target.getAttribute && target.getAttribute("class") === "f") return target;
      target = target.parentNode;
    }
    return null;
  }
  function frameOf(g) {
    for (var i = 0; i < frames.length; i++) if (frames[i].g === g) return frames[i];
    return null;
  }
  function zoom(z) {
    zoomed = z;
    var zx = z ? z.x : 0, zw = z ? z.w : total, zy = z ? z.y : Infinity;
    var scale = usable / zw;
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i];
      var cls = "f";
      if (f.y <= zy && f.x >= zx && f.x + f.w <= zx + zw) {
        place(f, xpad + (f.x - zx) * scale, f.w * scale);       /* the frame and its callees */
      } else if (f.y > zy && f.x <= zx && f.x + f.w >= zx + zw) {
        place(f, xpad, usable);                                 /* its callers */
        cls = "f parent";
      } else {
        cls = "f hide";
      }
      f.g.setAttribute("class", cls);
    }
    unzoombtn.setAttribute("class", z ? "button" : "button hide");
    if (searchre) search(searchre);
  }
  function search(re) {
    searchre = re;
    var spans = [];
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i];
      if (re && re.test(f.name)) {
        f.rect.setAttribute("fill", "rgb(230,0,230)");
        spans.push([f.x, f.x + f.w]);
      } else {
        f.rect.setAttribute("fill", f.fill);
      }
    }
    if (!re) {
      matchedtxt.textContent = " ";
      searchbtn.textContent = "Search";
      return;
    }
    /* Matched share: the union of the matching boxes, so that recursion and
       nested matches are not counted twice. */
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var covered = 0, end = -1;
    for (var j = 0; j < spans.length; j++) {
      var s = spans[j][0] > end ? spans[j][0] : end;
      if (spans[j][1] > s) { covered += spans[j][1] - s; end = spans[j][1]; }
    }
    matchedtxt.textContent = "Matched: " + (100 * covered / total).toFixed(1) + "%";
    searchbtn.textContent = "Reset Search";
  }
  function askSearch() {
    if (searchre) { search(null); return; }
    var term = prompt("Search for frames matching (a regular expression, e.g. a function or file name):", "");
    if (term) {
      try { search(new RegExp(term)); }
      catch (e) { alert("Not a valid regular expression: " + e.message); }
    }
  }
  svg.addEventListener("click", function (e) {
    var g = find(e.target);
    if (g) { zoom(frameOf(g)); return; }
    if (e.target === unzoombtn) zoom(null);
    else if (e.target === searchbtn) askSearch();
  });
  svg.addEventListener("mouseover", function (e) {
    var g = find(e.target);
    if (g) details.textContent = frameOf(g).info;
  });
  svg.addEventListener("mouseout", function (e) {
    if (find(e.target)) details.textContent = " ";
  });
  /* Deep Python stacks make tall graphs: start where the root is. */
  window.addEventListener("load", function () {
    if (svg.getBoundingClientRect().height > window.innerHeight) {
      window.scrollTo(0, svg.getBoundingClientRect().height);
    }
  });
  window.addEventListener("keydown", function (e) {
    if ((e.ctrlKey || e.metaKey) && e.keyCode === 70) { e.preventDefault(); askSearch(); }
    else if (e.keyCode === 27) { search(null); zoom(null); }
  });
})();
"""


def cmd_flamegraph(args):
    profile = parse_collapsed(args.file)
    svg = render_flamegraph(profile, title=args.title, minwidth=args.minwidth)
    write_output(args.output, svg.encode("utf-8"), binary=False)
    return 0


# ---------------------------------------------------------------------------
# speedscope (https://www.speedscope.app/file-format-schema.json)
# ---------------------------------------------------------------------------

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def to_speedscope(profile, rate=None):
    frames = []
    frame_index = {}

    def index_of(frame):
        i = frame_index.get(frame)
        if i is None:
            i = frame_index[frame] = len(frames)
            entry = {"name": frame.name}
            if frame.file is not None:
                entry["file"] = frame.file
            if frame.line is not None:
                entry["line"] = frame.line
            frames.append(entry)
        return i

    per_thread = collections.OrderedDict()
    for thread, _ in profile.threads():
        per_thread[thread] = ([], [])
    for thread, stack, count in profile.stacks:
        samples, weights = per_thread[thread]
        samples.append([index_of(f) for f in stack])
        weights.append(count)

    if rate:
        unit, factor = "milliseconds", 1000.0 / rate
    else:
        unit, factor = "none", 1
    profiles = []
    for thread, (samples, weights) in per_thread.items():
        if factor != 1:
            weights = [round(wt * factor, 6) for wt in weights]
        profiles.append({
            "type": "sampled",
            "name": thread.label,
            "unit": unit,
            "startValue": 0,
            "endValue": sum(weights),
            "samples": samples,
            "weights": weights,
        })
    busiest = max(range(len(profiles)), key=lambda i: profiles[i]["endValue"])
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": os.path.basename(profile.path),
        "activeProfileIndex": busiest,
        "exporter": "pysample %s" % VERSION,
    }


# ---------------------------------------------------------------------------
# pprof: perftools.profiles.Profile (github.com/google/pprof proto/profile.proto),
# written uncompressed.  go tool pprof and Pyroscope read both plain and
# gzipped profiles.
# ---------------------------------------------------------------------------

def _varint(value):
    if value < 0:
        value += 1 << 64            # int64 fields: two's complement, 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class _Message(object):
    """A protobuf message being built: append fields in any order."""

    def __init__(self):
        self.parts = []

    def varint(self, field, value, keep_zero=False):
        if value or keep_zero:
            self.parts.append(_varint(field << 3) + _varint(value))
        return self

    def bytes(self, field, data):
        self.parts.append(_varint(field << 3 | 2) + _varint(len(data)) + data)
        return self

    def message(self, field, msg):
        return self.bytes(field, msg.encode())

    def packed(self, field, values):
        if values:
            self.bytes(field, b"".join(_varint(v) for v in values))
        return self

    def encode(self):
        return b"".join(self.parts)


class _Strings(object):
    def __init__(self):
        self.table = [""]
        self.index = {"": 0}

    def __call__(self, text):
        i = self.index.get(text)
        if i is None:
            i = self.index[text] = len(self.table)
            self.table.append(text)
        return i


def to_pprof(profile, rate=None, mode="cpu", mtime_ns=None):
    strings = _Strings()
    prof = _Message()

    sample_types = [("samples", "count")]
    period = 1
    if rate:
        period = int(round(1e9 / rate))
        sample_types.append((mode, "nanoseconds"))
    for type_name, unit in sample_types:
        prof.message(1, _Message().varint(1, strings(type_name)).varint(2, strings(unit)))

    functions = collections.OrderedDict()   # (name, file) -> id
    locations = collections.OrderedDict()   # (function id, line) -> id
    thread_id_key = strings("thread_id")
    thread_name_key = strings("thread_name")
    for thread, frames, count in profile.stacks:
        ids = []
        for frame in reversed(frames):       # pprof wants the leaf first
            fkey = (frame.name, frame.file or "")
            fid = functions.get(fkey)
            if fid is None:
                fid = functions[fkey] = len(functions) + 1
            lkey = (fid, frame.line or 0)
            lid = locations.get(lkey)
            if lid is None:
                lid = locations[lkey] = len(locations) + 1
            ids.append(lid)
        sample = _Message().packed(1, ids)
        values = [count] + ([count * period] if rate else [])
        sample.packed(2, values)
        sample.message(3, _Message().varint(1, thread_id_key).varint(2, strings(thread.tid_text)))
        if thread.name is not None:
            sample.message(3, _Message().varint(1, thread_name_key).varint(2, strings(thread.name)))
        prof.message(2, sample)

    # One mapping that says "symbolized already", so that pprof never tries to
    # look up addresses in some binary.
    prof.message(3, _Message().varint(1, 1).varint(5, strings("python"))
                 .varint(7, 1).varint(8, 1).varint(9, 1 if profile.has_lines else 0))
    for (fid, line), lid in locations.items():
        loc = _Message().varint(1, lid).varint(2, 1)
        loc.message(4, _Message().varint(1, fid).varint(2, line))
        prof.message(4, loc)
    # system_name stays empty: pprof "demangles" functions whose name equals
    # their system_name, which turns `<module>` into nothing.
    for (name, filename), fid in functions.items():
        prof.message(5, _Message().varint(1, fid).varint(2, strings(name))
                     .varint(4, strings(filename)))

    duration = 0
    if rate and mode == "wall":
        duration = max(count for _, count in profile.threads()) * period
    if mtime_ns is None:
        mtime_ns = int(time.time() * 1e9)
    comment = strings("converted by pysample %s from %s" % (VERSION, os.path.basename(profile.path)))
    prof.varint(9, max(0, mtime_ns - duration))
    prof.varint(10, duration)
    if rate:
        prof.message(11, _Message().varint(1, strings(mode)).varint(2, strings("nanoseconds")))
    else:
        prof.message(11, _Message().varint(1, strings("samples")).varint(2, strings("count")))
    prof.varint(12, period)
    prof.packed(13, [comment])
    if rate:
        prof.varint(14, strings(mode))
    # The string table goes last: every string is known by now.
    for text in strings.table:
        prof.bytes(6, text.encode("utf-8", "replace"))
    return prof.encode()


def _file_mtime_ns(path):
    try:
        return int(os.stat(path).st_mtime * 1e9)
    except OSError:
        return None


def convert_bytes(profile, fmt, rate=None, mode="cpu", title=None):
    if fmt == "speedscope":
        return (json.dumps(to_speedscope(profile, rate), ensure_ascii=False, separators=(",", ":"))
                + "\n").encode("utf-8")
    if fmt == "pprof":
        return to_pprof(profile, rate, mode, _file_mtime_ns(profile.path))
    if fmt == "svg":
        return render_flamegraph(profile, title=title).encode("utf-8")
    if fmt == "collapsed":
        with open(profile.path, "rb") as f:
            return f.read()
    raise ToolError("unknown format %r" % fmt)


def cmd_convert(args):
    profile = parse_collapsed(args.file)
    data = convert_bytes(profile, args.to, rate=args.rate, mode=args.mode)
    write_output(args.output, data, binary=(args.to == "pprof"))
    return 0


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def write_output(path, data, binary):
    if path is None or path == "-":
        stream = getattr(sys.stdout, "buffer", sys.stdout)
        if binary and sys.stdout.isatty():
            raise ToolError("refusing to write binary pprof data to a terminal; use -o FILE")
        try:
            stream.write(data)
            stream.flush()
        except BrokenPipeError:
            # `pysample top prof.txt | head`: not an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".pysample-", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except (IOError, OSError) as e:
        raise ToolError("cannot write %s: %s" % (path, e.strerror or e))


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------------------
# record
# ---------------------------------------------------------------------------

EXTENSIONS = {"collapsed": ".txt", "svg": ".svg", "speedscope": ".json", "pprof": ".pb"}
FORMAT_HINTS = {
    "collapsed": "pysample flamegraph %s -o flame.svg",
    "svg": "open %s in a web browser",
    "speedscope": "load %s at https://www.speedscope.app",
    "pprof": "go tool pprof -http=: %s",
}


def script_dir():
    return os.environ.get(SCRIPT_DIR_ENV) or os.path.dirname(os.path.abspath(__file__))


def library_candidates(here):
    native = "libpysample.dylib" if sys.platform == "darwin" else "libpysample.so"
    names = [native] + [n for n in LIB_BASENAMES if n != native]
    up = os.path.normpath(os.path.join(here, os.pardir))
    places = []
    # A source checkout with the conventional build dir, then the build dir the
    # script was configured into (<builddir>/scripts -> <builddir>/lib), which
    # is also <prefix>/lib of an install.
    for d in (os.path.join(up, "build", "lib"), os.path.join(up, "lib")):
        places.extend(os.path.join(d, n) for n in names)
    # <prefix>/lib64, <prefix>/lib32, <prefix>/lib/x86_64-linux-gnu ...
    try:
        entries = sorted(os.listdir(up))
    except OSError:
        entries = []
    for entry in entries:
        if entry.startswith("lib") and entry != "lib":
            places.extend(os.path.join(up, entry, n) for n in names)
    libdir = os.path.join(up, "lib")
    try:
        subdirs = sorted(os.listdir(libdir))
    except OSError:
        subdirs = []
    for entry in subdirs:
        # (not Meson's private <target>.p directories of a build dir)
        if not entry.endswith(".p") and os.path.isdir(os.path.join(libdir, entry)):
            places.extend(os.path.join(libdir, entry, n) for n in names)
    return places


def find_library(here=None):
    """Returns (path, places looked at).  path is None when not found."""
    explicit = os.environ.get("PYSAMPLE_LIB")
    if explicit:
        return (explicit if os.path.isfile(explicit) else None), [explicit + " (PYSAMPLE_LIB)"]
    places = library_candidates(here or script_dir())
    for place in places:
        if os.path.isfile(place):
            return os.path.abspath(place), places
    return None, places


def demo_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo.py")


def expand_template(template, pid, hostname, start):
    """Expands %p %h %t %% the way the library expands PYSAMPLE_OUTPUT."""
    def sub(m):
        c = m.group(1)
        return {"p": str(pid), "h": hostname, "t": str(start), "%": "%"}.get(c, m.group(0))
    return re.sub(r"%(.)", sub, template)


def _insert_before_ext(path, text):
    stem, ext = os.path.splitext(path)
    return stem + text + ext


def plan_outputs(pids, main_pid, output, fmt, hostname, start):
    """{pid: destination} for the profiles the processes wrote."""
    ext = EXTENSIONS[fmt]
    if output is None:
        return dict((pid, os.path.abspath("pysample-%d%s" % (pid, ext))) for pid in pids)
    if re.search(r"%p", output.replace("%%", "")):
        return dict((pid, os.path.abspath(expand_template(output, pid, hostname, start))) for pid in pids)
    single = expand_template(output, 0, hostname, start)
    if len(pids) == 1:
        return {pids[0]: os.path.abspath(single)}
    plan = {}
    for pid in pids:
        plan[pid] = os.path.abspath(single if pid == main_pid else _insert_before_ext(single, ".%d" % pid))
    return plan


def _describe_command(command):
    command = [os.path.basename(command[0])] + list(command[1:])
    if len(command) == 2 and command[1] == demo_path():
        command[1] = "demo.py"
    text = " ".join(" ".join(command).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal %d" % signum


def _exit_status(returncode):
    return 128 - returncode if returncode < 0 else returncode


def cmd_record(args, command):
    fmt = args.format
    python = args.python or sys.executable or "python3"
    if not command:
        demo = demo_path()
        if not os.path.isfile(demo):
            raise ToolError("no COMMAND given and the demo program %s is missing" % demo)
        command = [python, demo]
        if not args.quiet:
            sys.stderr.write("%s: no command given: profiling the bundled demo (%s)\n" % (PROG, demo))
    elif command[0].endswith(".py"):
        command = [python] + command

    library, places = find_library()
    if library is None:
        raise ToolError("cannot find libpysample (looked for %s); build it with `meson setup build && "
                        "meson compile -C build` or point PYSAMPLE_LIB at it"
                        % ", ".join(places[:4] + (["..."] if len(places) > 4 else [])))

    hostname = socket.gethostname()
    start = int(time.time())
    if args.output is not None:
        target_dir = os.path.dirname(os.path.abspath(expand_template(args.output, 0, hostname, start)))
        if not os.path.isdir(target_dir):
            raise ToolError("cannot write %s: directory %s does not exist" % (args.output, target_dir))

    env = dict(os.environ)
    env.pop(SCRIPT_DIR_ENV, None)
    preload_var = "DYLD_INSERT_LIBRARIES" if sys.platform == "darwin" else "LD_PRELOAD"
    existing = [p for p in re.split(r"[: ]", env.get(preload_var, "")) if p]
    existing = [p for p in existing if os.path.basename(p) not in LIB_BASENAMES]
    env[preload_var] = ":".join([library] + existing)
    workdir = tempfile.mkdtemp(prefix="pysample-record-")
    env["PYSAMPLE_OUTPUT"] = os.path.join(workdir.replace("%", "%%"), "pysample-%p.txt")
    env["PYSAMPLE_FORMAT"] = "collapsed"
    if args.rate is not None:
        env["PYSAMPLE_RATE"] = str(args.rate)
    if args.mode is not None:
        env["PYSAMPLE_MODE"] = args.mode
    rate = args.rate
    if rate is None:
        try:
            rate = int(env.get("PYSAMPLE_RATE") or DEFAULT_RATE)
        except ValueError:
            rate = DEFAULT_RATE
    mode = env.get("PYSAMPLE_MODE") or "wall"

    try:
        returncode, main_pid = _run(command, env)
        produced = {}
        for name in os.listdir(workdir):
            m = re.match(r"^pysample-(\d+)\.txt$", name)
            if m:
                produced[int(m.group(1))] = os.path.join(workdir, name)
        if returncode < 0:
            sys.stderr.write("%s: `%s` was killed by %s\n"
                             % (PROG, _describe_command(command), _signal_name(-returncode)))
        if not produced:
            if returncode < 0:
                sys.stderr.write("%s: no profile was written: the process died before it could write "
                                 "one (see docs/troubleshooting.md)\n" % PROG)
            else:
                sys.stderr.write(
                    "%s: no profile was written: is `%s` a Python program, and did it run long enough "
                    "for one sample (1/%d s)? See docs/troubleshooting.md (\"Nothing written\").\n"
                    % (PROG, _describe_command(command), rate))
            return _exit_status(returncode)
        _finish(args, command, produced, main_pid, fmt, rate, mode, hostname, start)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _exit_status(returncode)


def _run(command, env):
    """Runs the command; SIGINT (Ctrl-C) reaches it through the terminal, and
    we wait for it to finish writing its profile.  SIGTERM and SIGHUP sent
    to us are passed on."""
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as e:
        raise ToolError("cannot run %s: %s" % (command[0], e.strerror or e),
                        status=126 if e.errno == errno.EACCES else 127)
    previous = {}

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous[signum] = signal.signal(signum, forward)
    try:
        while True:
            try:
                returncode = child.wait()
                break
            except InterruptedError:
                continue
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return returncode, child.pid


def _finish(args, command, produced, main_pid, fmt, rate, mode, hostname, start):
    plan = plan_outputs(sorted(produced), main_pid, args.output, fmt, hostname, start)
    profiles = []
    problems = []
    written = []
    for pid in sorted(produced, key=lambda p: (p != main_pid, p)):
        source = produced[pid]
        try:
            profile = parse_collapsed(source)
        except ToolError as e:
            problems.append("pid %d: %s" % (pid, str(e).replace(source + ": ", "").replace(source, "profile")))
            if fmt == "collapsed":
                shutil.move(source, plan[pid])
                written.append((pid, plan[pid], None))
            continue
        profile.path = plan[pid]
        if fmt == "collapsed":
            shutil.move(source, plan[pid])
        else:
            data = convert_bytes(profile, fmt, rate=rate, mode="cpu" if mode == "cpu" else "wall",
                                 title="pysample: %s" % _describe_command(command))
            write_output(plan[pid], data, binary=(fmt == "pprof"))
        profiles.append(profile)
        written.append((pid, plan[pid], profile))

    if args.quiet:
        for problem in problems:
            sys.stderr.write("%s: %s\n" % (PROG, problem))
        return
    err = sys.stderr
    err.write("%s: profiled `%s` at %d Hz (%s-clock time)\n"
              % (PROG, _describe_command(command), rate, "CPU" if mode == "cpu" else "wall"))
    for pid, path, profile in written:
        what = describe(profile) if profile else "no samples"
        err.write("%s: pid %d: %s -> %s\n" % (PROG, pid, what, path))
    for problem in problems:
        err.write("%s: %s\n" % (PROG, problem))
    if profiles:
        scope = "" if len(profiles) == 1 else " (all %d processes)" % len(profiles)
        err.write("%s: top functions by self samples%s:\n" % (PROG, scope))
        err.write(format_top(profiles, 10, indent="  "))
        first = [path for _, path, p in written if p][0]
        err.write("%s: next: %s\n" % (PROG, FORMAT_HINTS[fmt] % _shell_quote(os.path.relpath(first))))


def _shell_quote(text):
    if re.match(r"^[A-Za-z0-9_./=:,+-]+$", text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


# ---------------------------------------------------------------------------
# info
# ---------------------------------------------------------------------------

def cmd_info(args):
    library, places = find_library()
    lines = [
        "pysample %s" % VERSION,
        "tool module: %s" % os.path.abspath(__file__),
        "demo:        %s%s" % (demo_path(), "" if os.path.isfile(demo_path()) else " (missing)"),
        "library:     %s" % (library or "not found (looked in %s)" % ", ".join(places)),
        "python:      %s (%s)" % (sys.executable, sys.version.split()[0]),
        "platform:    %s" % sys.platform,
    ]
    write_output(None, ("\n".join(lines) + "\n").encode("utf-8"), binary=False)
    return 0


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one `pysample: ...` line and exit status 2."""

    def error(self, message):
        sys.stderr.write("%s: %s (see `%s --help`)\n" % (PROG, message, self.prog))
        sys.exit(2)


def _rate(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a whole number of samples per second, not %r" % text)
    if not 1 <= value <= 100000:
        raise argparse.ArgumentTypeError("must be between 1 and 100000 samples per second, not %d" % value)
    return value


def build_parser():
    parser = _Parser(
        prog=PROG,
        description="Record Python programs with libpysample and turn the profiles into flame graphs, "
                    "tables, speedscope and pprof files.",
        epilog="Run `%s COMMAND --help` for the options of each command. "
               "Documentation: docs/tools.md, man pysample." % PROG)
    parser.add_argument("--version", action="version", version="%s %s" % (PROG, VERSION))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    rec = sub.add_parser(
        "record", help="run a command with the profiler preloaded",
        usage="%(prog)s [-o FILE] [--rate HZ] [--mode wall|cpu] [--format FORMAT] [--python PY] [-q] "
              "[-- COMMAND [ARG...]]",
        description="Runs COMMAND with libpysample preloaded (LD_PRELOAD, or DYLD_INSERT_LIBRARIES on "
                    "macOS), writes one profile per Python process and prints a summary to stderr. "
                    "Exits with the exit status of COMMAND. Without COMMAND it profiles a small bundled "
                    "demo program.  A COMMAND whose first word ends in .py is run with --python.",
        epilog="The library is found through PYSAMPLE_LIB, else next to this script (source checkout: "
               "build/lib; build dir: <builddir>/lib; install: <prefix>/lib*). Other PYSAMPLE_* "
               "variables in the environment (e.g. PYSAMPLE_LINES=0, PYSAMPLE_MAX_DEPTH) reach the "
               "library unchanged.")
    rec.add_argument("-o", "--output", metavar="FILE",
                     help="where to write the profile; %%p is replaced by the process id, %%h by the host "
                          "name, %%t by the start time (default: pysample-<pid>.txt, .svg, .json or .pb "
                          "in the current directory). Without %%p and with several processes, the others "
                          "get .<pid> before the extension.")
    rec.add_argument("--rate", type=_rate, metavar="HZ",
                     help="samples per second, 1..100000 (default: $PYSAMPLE_RATE or 100)")
    rec.add_argument("--mode", choices=("wall", "cpu"),
                     help="wall: sample threads whatever they do (default); cpu: only while on a CPU")
    rec.add_argument("--format", choices=("collapsed", "speedscope", "pprof", "svg"), default="collapsed",
                     help="output format (default: collapsed, the library's text format)")
    rec.add_argument("--python", metavar="PY",
                     help="interpreter for the demo and for a COMMAND that starts with a .py file "
                          "(default: %s)" % (sys.executable or "python3"))
    rec.add_argument("-q", "--quiet", action="store_true", help="print no summary")
    rec.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND", help=argparse.SUPPRESS)

    fg = sub.add_parser(
        "flamegraph", help="draw an interactive SVG flame graph",
        description="Writes a self-contained interactive SVG flame graph of a collapsed profile: hover "
                    "for details, click to zoom, Ctrl-F to search. Colours: warm for your code, blue for "
                    "the standard library, green for site-packages, grey for profiler markers.")
    fg.add_argument("file", metavar="FILE", help="a collapsed profile written by libpysample")
    fg.add_argument("-o", "--output", metavar="OUT", help="write here instead of standard output")
    fg.add_argument("--title", metavar="T", help="title above the graph (default: Flame Graph)")
    fg.add_argument("--minwidth", type=float, default=0.1, metavar="PX",
                    help="leave out frames narrower than PX pixels (default: 0.1)")

    top = sub.add_parser(
        "top", help="table of the functions with the most samples",
        description="Prints the functions (qualname and file, all lines together) with their self "
                    "samples (in the function itself) and total samples (in it or its callees), sorted "
                    "by self samples.")
    top.add_argument("file", metavar="FILE", help="a collapsed profile written by libpysample")
    top.add_argument("-n", type=int, default=20, metavar="N", help="show N functions, 0 for all (default: 20)")

    conv = sub.add_parser(
        "convert", help="convert to speedscope JSON or pprof",
        description="Converts a collapsed profile to speedscope JSON (one sampled profile per thread) or "
                    "to an uncompressed pprof protobuf (perftools.profiles.Profile) for go tool pprof, "
                    "Pyroscope and friends.")
    conv.add_argument("file", metavar="FILE", help="a collapsed profile written by libpysample")
    conv.add_argument("--to", required=True, choices=("speedscope", "pprof"), help="output format")
    conv.add_argument("-o", "--output", metavar="OUT", help="write here instead of standard output")
    conv.add_argument("--rate", type=_rate, metavar="HZ",
                      help="the sampling rate the profile was taken at: adds time values (pprof: "
                           "cpu or wall nanoseconds; speedscope: milliseconds)")
    conv.add_argument("--mode", choices=("cpu", "wall"), default="cpu",
                      help="what the time values measure, with --rate (default: cpu)")

    sub.add_parser("info", help="show where the tool, the demo and the library are",
                   description="Prints the version and the paths pysample uses; handy when record "
                               "cannot find the library.")
    return parser


def main(argv=None):
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")
        sys.stderr.reconfigure(errors="replace")
    argv = list(sys.argv[1:] if argv is None else argv)
    command = None
    if argv and argv[0] == "record" and "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1:]
    parser = build_parser()
    if not argv:
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        if args.command == "record":
            if command is None:
                command = args.cmd
            elif args.cmd:
                parser.error("unexpected arguments before --: %s" % " ".join(args.cmd))
            return cmd_record(args, command)
        if args.command == "flamegraph":
            return cmd_flamegraph(args)
        if args.command == "top":
            return cmd_top(args)
        if args.command == "convert":
            return cmd_convert(args)
        if args.command == "info":
            return cmd_info(args)
        parser.print_help(sys.stderr)
        return 2
    except ToolError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return e.status
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % PROG)
        return 130


if __name__ == "__main__":
    if sys.version_info < (3, 6):
        sys.stderr.write("pysample: needs Python 3.6 or newer, this is %s\n" % sys.version.split()[0])
        sys.exit(2)
    sys.exit(main())
