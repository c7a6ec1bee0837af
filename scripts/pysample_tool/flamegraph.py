# flamegraph.py - `pysample flamegraph`: a self-contained interactive SVG
# flame graph of a collapsed profile.  Its script and style sheet are the
# package files flamegraph.js and flamegraph.css, embedded in every SVG.
#
# SPDX-License-Identifier: MIT

import os
import re
import zlib

from . import filters, options
from .collapsed import KIND_MARKER, KIND_PY, describe, parse_collapsed
from .common import VERSION, ToolError, percent, thousands, write_output, xml_text


NAME = "flamegraph"
HELP = "draw an interactive SVG flame graph"
DESCRIPTION = ("Writes a self-contained interactive SVG flame graph of a collapsed profile: hover for "
               "details, click to zoom, Ctrl-F to search. Colours: warm for your code, blue for the standard "
               "library, green for site-packages, grey for profiler markers.")


def add_options(parser):
    options.profile_file(parser)
    options.output(parser)
    parser.add_argument("--title", metavar="T", help="title above the graph (default: Flame Graph)")
    parser.add_argument("--minwidth", type=float, default=0.1, metavar="PX",
                        help="leave out frames narrower than PX pixels (default: 0.1)")
    options.addresses(parser)
    filters.add_options(parser)


def run(args):
    profile = options.grouped(parse_collapsed(args.file), args)
    svg = render_flamegraph(profile, title=args.title, minwidth=args.minwidth)
    write_output(args.output, svg.encode("utf-8"), binary=False)
    return 0


def _package_file(name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (IOError, OSError) as e:
        raise ToolError("cannot read %s, a part of pysample: %s (reinstall pysample)"
                        % (path, e.strerror or e))


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


def grow_tree(profile, path_of, key_of, node_of):
    """The tree of a profile's stacks under a root box: path_of(thread,
    frames) lists a stack's items from the root, key_of(thread, item) says
    which items share a box, node_of(thread, item, key) makes the box of
    the first one.  Each box counts the samples through it and those that
    end in it (self)."""
    root = Node("all", "root", "all", "all", "all", None)
    for thread, frames, count in profile.stacks:
        root.count += count
        node = root
        for item in path_of(thread, frames):
            key = key_of(thread, item)
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = node_of(thread, item, key)
            child.count += count
            node = child
        node.self_count += count
    return root


def build_tree(profile):
    def key_of(thread, item):
        if item is thread:
            return ("thread", thread)
        return (item.kind, item.name, item.file, item.line)

    def node_of(thread, item, key):
        if item is thread:
            return Node(key, "thread", thread.label, thread.label, "thread %s" % thread.tid_text, None)
        if item.kind == KIND_MARKER:
            return Node(key, KIND_MARKER, item.name, item.name, item.name, None)
        return Node(key, KIND_PY, item.label, item.short_label, item.name, item)

    return grow_tree(profile, lambda thread, frames: [thread] + list(frames), key_of, node_of)


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
    fit() in flamegraph.js does the same when zooming."""
    chars = int((width - 6) / (FONT_SIZE * FONT_WIDTH))
    if chars < 3:
        return ""
    if len(long_label) <= chars:
        return long_label
    if len(short_label) <= chars:
        return short_label
    return short_label[:chars - 2] + ".."


def frame_tip(node, total):
    """The tooltip of a box: its frame, samples and share, what its colour means."""
    stats = "%s sample%s (%.2f%%)" % (thousands(node.count), "" if node.count == 1 else "s",
                                      percent(node.count, total))
    if node.self_count and node.children:
        stats += ", self %s (%.2f%%)" % (thousands(node.self_count), percent(node.self_count, total))
    tip = [node.title, stats]
    if node.kind == KIND_PY:
        tip.append("%s: %s" % classify(node.colour_key.file))
    return tip


def _legend_fill(colour):
    base, span = colour
    return "rgb(%d,%d,%d)" % tuple(int(base[i] + span[i] * 0.5) for i in range(3))


LEGEND = [(_legend_fill(PALETTE["user"]), "your code"), (_legend_fill(PALETTE["stdlib"]), "standard library"),
          (_legend_fill(PALETTE["site-packages"]), "site-packages"), (MARKER_COLOUR, "profiler marker")]


def render_flamegraph(profile, title=None, minwidth=0.1, subtitle=None):
    if subtitle is None:
        subtitle = "%s: %s" % (os.path.basename(profile.path), describe(profile))
    return render_tree(build_tree(profile), title or "Flame Graph", subtitle, minwidth)


def render_tree(root, title, subtitle, minwidth=0.1, colour=frame_colour, tip=frame_tip, legend=LEGEND):
    """The SVG of a tree of Nodes.  colour(node) is a box's fill, tip(node,
    total) its tooltip lines (the first is the frame, which search matches),
    legend [(fill, text)] what the colours mean.  `pysample diff` draws its
    graph with its own three."""
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
    w('<style type="text/css"><![CDATA[\n%s]]></style>\n' % _package_file("flamegraph.css"))
    w('<rect x="0" y="0" width="%d" height="%d" fill="url(#bg)"/>\n' % (IMAGE_WIDTH, height))
    w('<text id="title" x="%d" y="24">%s</text>\n' % (IMAGE_WIDTH // 2, xml_text(title)))
    w('<text id="subtitle" x="%d" y="42">%s</text>\n' % (IMAGE_WIDTH // 2, xml_text(subtitle)))
    w('<text id="unzoom" class="button hide" x="%d" y="24">Reset Zoom</text>\n' % XPAD)
    w('<text id="search" class="button" x="%d" y="24">Search</text>\n' % (IMAGE_WIDTH - XPAD - 100))
    w('<text id="matched" x="%d" y="%d"> </text>\n' % (IMAGE_WIDTH - XPAD - 100, height - 12))
    w('<text id="details" x="%d" y="%d"> </text>\n' % (XPAD, height - 12))
    # Legend: what the colours mean.
    lx = XPAD
    w('<g id="legend">\n')
    for fill, text in legend:
        w('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (lx, 48, fill))
        w('<text x="%d" y="57">%s</text>\n' % (lx + 14, xml_text(text)))
        lx += 14 + int(len(text) * FONT_SIZE * FONT_WIDTH) + 16
    w('</g>\n')

    w('<g id="frames">\n')
    for node, x, depth in boxes:
        px = XPAD + x * scale
        pw = node.count * scale
        y = base_y - (depth + 1) * FRAME_HEIGHT
        attrs = ' fg:x="%d" fg:w="%d"' % (x, node.count)
        if node.long != node.title:
            attrs += ' fg:l="%s"' % xml_text(node.long)
        if node.short != node.long:
            attrs += ' fg:s="%s"' % xml_text(node.short)
        w('<g class="f"%s><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" '
          'rx="2" ry="2"/><text x="%.2f" y="%.1f">%s</text></g>\n'
          % (attrs, xml_text(None, lines=tip(node, total)), px, y, pw, FRAME_HEIGHT - 1, colour(node),
             px + 3, y + 10.5 + 0.5, xml_text(fit_label(node.long, node.short, pw))))
    w('</g>\n')
    w('<script type="text/ecmascript"><![CDATA[\n%s]]></script>\n' % _package_file("flamegraph.js"))
    w('</svg>\n')
    return "".join(out)
