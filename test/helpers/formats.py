# formats.py - the tests' own readers of what the library and the tool
# write, independent of the tool's (scripts/pysample_tool): the collapsed
# format's %XX escapes and a protobuf decoder for pprof files.  Shared by
# the integration tests (test/integration/harness.py puts this directory on
# sys.path) and the tool tests (test/tools/helpers.py).  Python 3.9+.
#
# SPDX-License-Identifier: MIT

import collections
import re


def unescape(text):
    """A name or file of the collapsed format with its %XX escapes undone."""
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), text)


def _varint(buf, i):
    shift = value = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def decode_message(buf):
    """{field number: [int or bytes]} of one protobuf message."""
    fields = collections.defaultdict(list)
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            length, i = _varint(buf, i)
            value = bytes(buf[i:i + length])
            i += length
        elif wire == 1:
            value, i = bytes(buf[i:i + 8]), i + 8
        elif wire == 5:
            value, i = bytes(buf[i:i + 4]), i + 4
        else:
            raise ValueError("wire type %d at %d" % (wire, i))
        if i > len(buf):
            raise ValueError("truncated message")
        fields[number].append(value)
    return fields


def repeated_ints(values):
    """A repeated integer field, packed or not."""
    out = []
    for value in values:
        if isinstance(value, bytes):
            i = 0
            while i < len(value):
                v, i = _varint(value, i)
                out.append(v)
        else:
            out.append(value)
    return out


def one(fields, number, default=0):
    values = fields.get(number, [])
    assert len(values) <= 1, "field %d repeated" % number
    return values[0] if values else default


def decode_pprof(data):
    """An uncompressed pprof Profile as a dict: strings, sample_type
    [(type, unit)], samples [(location ids, values, {label: text})],
    locations {id: (mapping id, [(function id, line)])}, functions
    {id: (name, file, start line)}, mappings, period_type, period,
    comments, time_nanos, default_sample_type."""
    p = decode_message(data)
    strings = [s.decode("utf-8") for s in p[6]]
    functions = {}
    for raw in p[5]:
        f = decode_message(raw)
        functions[one(f, 1)] = (strings[one(f, 2)], strings[one(f, 4)], one(f, 5))
    locations = {}
    for raw in p[4]:
        loc = decode_message(raw)
        lines = [decode_message(x) for x in loc[4]]
        locations[one(loc, 1)] = (one(loc, 2), [(one(ln, 1), one(ln, 2)) for ln in lines])
    samples = []
    for raw in p[2]:
        s = decode_message(raw)
        labels = {}
        for lab in s[3]:
            lab = decode_message(lab)
            labels[strings[one(lab, 1)]] = strings[one(lab, 2)]
        samples.append((repeated_ints(s[1]), repeated_ints(s[2]), labels))
    vt = lambda raw: (strings[one(decode_message(raw), 1)], strings[one(decode_message(raw), 2)])  # noqa: E731
    return {
        "strings": strings,
        "sample_type": [vt(raw) for raw in p[1]],
        "samples": samples,
        "locations": locations,
        "functions": functions,
        "mappings": [decode_message(m) for m in p[3]],
        "period_type": vt(one(p, 11)) if p.get(11) else None,
        "period": one(p, 12),
        "comments": [strings[i] for i in repeated_ints(p[13])],
        "time_nanos": one(p, 9),
        "default_sample_type": strings[one(p, 14)],
    }


def values_by_leaf(prof, sample_type):
    """{leaf function name: sum of the sample_type values} of a decoded
    pprof: the leaf is the function of the first location's last line."""
    column = [t for t, _ in prof["sample_type"]].index(sample_type)
    out = {}
    for location_ids, values, _labels in prof["samples"]:
        function_id = prof["locations"][location_ids[0]][1][-1][0]
        leaf = prof["functions"][function_id][0]
        out[leaf] = out.get(leaf, 0) + values[column]
    return out
