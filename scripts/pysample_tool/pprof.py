# pprof.py - a collapsed profile as pprof: perftools.profiles.Profile
# (github.com/google/pprof proto/profile.proto), written uncompressed by the
# small protobuf encoder below.  go tool pprof and Pyroscope read both plain
# and gzipped profiles.
#
# SPDX-License-Identifier: MIT

import collections
import os
import time

from .common import VERSION
from .remote import describe_quality

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


def to_pprof(profile, rate=None, mode="cpu", mtime_ns=None, quality=None, source=None):
    """source: what the profile was converted from, for the comment
    (default: the base name of profile.path)."""
    # One comment: pprof prints every comment at the head of every report
    # (`go tool pprof -top`), so the quality figures are one line here; all
    # of them are in the collapsed profile's .quality.json.
    comment = "converted by pysample %s from %s" % (VERSION, source or os.path.basename(profile.path))
    if quality:
        comment += ": " + describe_quality(quality)
    duration = 0
    if rate and mode == "wall":
        duration = max(count for _, count in profile.threads()) * int(round(1e9 / rate))
    return to_pprof_parts([(profile, None)], rate, mode, mtime_ns, comment, duration)


def to_pprof_parts(parts, rate, mode, mtime_ns, comment, duration):
    """One pprof of several profiles: parts is [(profile, labels)], labels a
    list of (key, value) that every sample of that profile carries (pprof
    sample labels: `pysample serve`'s pid, process, pod...), or None."""
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
    for profile, labels in parts:
        _add_samples(prof, strings, functions, locations, profile, labels, period if rate else None)

    # One mapping that says "symbolized already", so that pprof never tries to
    # look up addresses in some binary.
    has_lines = any(profile.has_lines for profile, _ in parts)
    prof.message(3, _Message().varint(1, 1).varint(5, strings("python"))
                 .varint(7, 1).varint(8, 1).varint(9, 1 if has_lines else 0))
    for (fid, line), lid in locations.items():
        loc = _Message().varint(1, lid).varint(2, 1)
        loc.message(4, _Message().varint(1, fid).varint(2, line))
        prof.message(4, loc)
    # system_name stays empty: pprof "demangles" functions whose name equals
    # their system_name, which turns `<module>` into nothing.
    for (name, filename), fid in functions.items():
        prof.message(5, _Message().varint(1, fid).varint(2, strings(name))
                     .varint(4, strings(filename)))

    if mtime_ns is None:
        mtime_ns = int(time.time() * 1e9)
    prof.varint(9, max(0, mtime_ns - duration))
    prof.varint(10, duration)
    if rate:
        prof.message(11, _Message().varint(1, strings(mode)).varint(2, strings("nanoseconds")))
    else:
        prof.message(11, _Message().varint(1, strings("samples")).varint(2, strings("count")))
    prof.varint(12, period)
    prof.packed(13, [strings(comment)])
    if rate:
        prof.varint(14, strings(mode))
    # The string table goes last: every string is known by now.
    for text in strings.table:
        prof.bytes(6, text.encode("utf-8", "replace"))
    return prof.encode()


def _add_samples(prof, strings, functions, locations, profile, labels, period):
    """The samples of one profile, each with its thread and the labels."""
    thread_id_key = strings("thread_id")
    thread_name_key = strings("thread_name")
    extra = [_Message().varint(1, strings(k)).varint(2, strings(v)) for k, v in labels or ()]
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
        values = [count] + ([count * period] if period else [])
        sample.packed(2, values)
        sample.message(3, _Message().varint(1, thread_id_key).varint(2, strings(thread.tid_text)))
        if thread.name is not None:
            sample.message(3, _Message().varint(1, thread_name_key).varint(2, strings(thread.name)))
        for label in extra:
            sample.message(3, label)
        prof.message(2, sample)
