# timeline.py - the samples in time order that libpysample writes beside a
# profile with PYSAMPLE_TIMELINE=1 (<profile>.timeline, docs/format.md), and
# speedscope's time-order view of them.
#
# The file: a header of "key value" lines, then "stacks N" and the N lines
# of the profile (collapsed, as in the profile itself), then "records M" and
# M lines "<microseconds since start> <stack line, 0 first> <weight>".
#
# SPDX-License-Identifier: MIT

import os

from .collapsed import parse_collapsed
from .common import VERSION, ToolError, printable
from .quality import typed
from .speedscope import SPEEDSCOPE_SCHEMA, FrameTable

SUFFIX = ".timeline"
MAGIC = b"# pysample timeline 1\n"
FULL_MARKER = "[pysample: timeline full]"
_INTS = ("rate_hz", "start_unix_ns", "end_us", "samples", "max_records", "dropped_records",
         "dropped_samples", "first_dropped_us")


def is_timeline(path):
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


class Timeline(object):
    """header: {key: int}; stacks: [(Thread, frames)] by line; records:
    [(t_us, line, weight)] in time order; profile: the aggregated profile
    of the same samples (collapsed.Profile)."""

    def __init__(self, path, header, profile, stacks, records):
        self.path = path
        self.header = header
        self.profile = profile
        self.stacks = stacks
        self.records = records


def _bad(path, lineno, why, text=""):
    return ToolError("%s:%d: not a pysample timeline: %s%s" % (path, lineno, why,
                                                               ": " + printable(text[:100]) if text else ""))


def parse_timeline(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (IOError, OSError) as e:
        raise ToolError("cannot read %s: %s" % (path, e.strerror or e))
    if not data.startswith(MAGIC):
        raise _bad(path, 1, "it does not start with %r" % MAGIC.decode().strip())
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    header = {}
    i = 1
    while i < len(lines) and not lines[i].startswith(b"stacks "):
        key, _, value = lines[i].decode("utf-8", "replace").partition(" ")
        if not value.isdigit():
            raise _bad(path, i + 1, "expected \"key number\"", lines[i].decode("utf-8", "replace"))
        header[key] = int(value)
        i += 1
    if i == len(lines) or not lines[i][7:].isdigit():
        raise _bad(path, i + 1, "no \"stacks N\" line")
    nstacks = int(lines[i][7:])
    first = i + 1
    block = lines[first:first + nstacks]
    if len(block) != nstacks:
        raise _bad(path, len(lines), "%d stack lines announced, %d there" % (nstacks, len(block)))
    if nstacks == 0:
        raise ToolError("%s: empty timeline: it holds no samples (the program may have ended before the "
                        "first sample)" % path)
    profile = parse_collapsed(path, b"\n".join(block) + b"\n")
    if len(profile.stacks) == nstacks:
        stacks = [(thread, frames) for thread, frames, _ in profile.stacks]
    else:   # two lines of one stack (cannot happen in a file the library wrote): line by line
        stacks = [parse_collapsed(path, line).stacks[0][:2] for line in block]
    i = first + nstacks
    if i == len(lines) or not lines[i].startswith(b"records ") or not lines[i][8:].isdigit():
        raise _bad(path, i + 1, "no \"records N\" line after the stacks")
    nrecords = int(lines[i][8:])
    records = []
    last = 0
    for lineno in range(i + 2, i + 2 + nrecords):
        if lineno - 1 >= len(lines):
            raise _bad(path, lineno, "%d records announced, %d there" % (nrecords, len(records)))
        parts = lines[lineno - 1].split()
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise _bad(path, lineno, "expected \"<time> <stack> <weight>\"",
                       lines[lineno - 1].decode("utf-8", "replace"))
        t, line, weight = (int(p) for p in parts)
        if line >= nstacks or t < last:
            raise _bad(path, lineno, "stack %d of %d, or time going back" % (line, nstacks))
        last = t
        records.append((t, line, weight))
    profile.path = path
    return Timeline(path, header, profile, stacks, records)


def to_speedscope_timeline(tl, name=None, quality=None):
    """speedscope's "sampled" profiles, one per thread, their samples in time
    order and each weighing the time until that thread's next sample (in
    microseconds from the timeline's start), so that its Time Order view
    shows when each stack ran.  A sample stands for at most twice its
    nominal time (weight / rate): a longer gap (a thread that was idle in
    cpu mode, or had no Python frame) is an empty sample, as is the time
    before a thread's first sample.  Samples past the timeline's bound
    show as one FULL_MARKER sample per thread, to the end."""
    table = FrameTable()
    frames, index_of = table.frames, table.index_of

    rate = tl.header.get("rate_hz") or 100
    nominal = 1e6 / rate
    stack_frames = [[index_of(f) for f in frames_] for _, frames_ in tl.stacks]
    per_thread = {}
    for t, line, weight in tl.records:
        per_thread.setdefault(tl.stacks[line][0], []).append((t, line, weight))
    dropped = tl.header.get("dropped_records", 0)
    end = tl.header.get("end_us", 0)
    cut = tl.header.get("first_dropped_us", end) if dropped else None
    full = None
    profiles = []
    for thread in sorted(per_thread, key=lambda th: th.sort_key()):
        recs = per_thread[thread]
        samples, weights = [], []
        cursor = 0
        for k, (t, line, weight) in enumerate(recs):
            if t > cursor:
                samples.append([])
                weights.append(t - cursor)
            most = 2 * weight * nominal
            nxt = recs[k + 1][0] if k + 1 < len(recs) else (cut if cut is not None else t + most / 2)
            span = nxt - t if 0 < nxt - t <= most else weight * nominal
            samples.append(stack_frames[line])
            weights.append(round(span))
            cursor = t + round(span)
        if cut is not None and end > cursor:
            if full is None:
                full = table.add_marker(FULL_MARKER)
            samples.append([full])
            weights.append(end - cursor)
            cursor = end
        profiles.append({
            "type": "sampled",
            "name": thread.label,
            "unit": "microseconds",
            "startValue": 0,
            "endValue": sum(weights),
            "samples": samples,
            "weights": weights,
        })
    busiest = max(range(len(profiles)), key=lambda i: sum(
        w for s, w in zip(profiles[i]["samples"], profiles[i]["weights"]) if s)) if profiles else 0
    figures = typed(quality or {})
    figures["timeline"] = {k: v for k, v in tl.header.items() if k in _INTS}
    note = ""
    if dropped:
        note = " (timeline full: %d samples after %.3f s not in time order)" % (
            tl.header.get("dropped_samples", 0), cut / 1e6)
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": name or os.path.basename(tl.path),
        "activeProfileIndex": busiest,
        "exporter": "pysample %s, timeline%s" % (VERSION, note),
        "pysample": figures,
    }
