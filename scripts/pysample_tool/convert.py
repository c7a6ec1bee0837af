# convert.py - `pysample convert`, and the one place that turns a parsed
# profile into the bytes of an output format (record uses it too).
#
# SPDX-License-Identifier: MIT

import json
import os
import sys

from . import options
from .collapsed import parse_collapsed
from .common import ToolError, printable, write_output
from .flamegraph import render_flamegraph
from .pprof import to_pprof
from .quality import read_sidecar
from .speedscope import to_speedscope
from . import timeline


NAME = "convert"
HELP = "convert to speedscope JSON or pprof"
DESCRIPTION = ("Converts a collapsed profile to speedscope JSON (one sampled profile per thread) or to an "
               "uncompressed pprof protobuf (perftools.profiles.Profile) for go tool pprof, Pyroscope and "
               "friends.")


def add_options(parser):
    options.profile_file(parser)
    parser.add_argument("--to", required=True, choices=("speedscope", "pprof"), help="output format")
    options.output(parser)
    options.rate(parser, help="the sampling rate the profile was taken at: adds time values (pprof: "
                              "cpu or wall nanoseconds; speedscope: milliseconds)")
    options.mode(parser, help="what the time values measure, with --rate (default: the mode in the "
                             "profile's .quality.json, else wall, the library's default mode)")
    options.addresses(parser)


def run(args):
    if timeline.is_timeline(args.file):
        return _run_timeline(args)
    profile = options.grouped(parse_collapsed(args.file), args)
    quality = read_sidecar(args.file)
    rate = args.rate
    recorded = quality.get("requested_rate_hz", "")
    if rate is None and recorded.isdigit():
        rate = int(recorded) or None
    mode = profile_mode(args, quality, rate)
    data = convert_bytes(profile, args.to, rate=rate, mode=mode, quality=quality)
    write_output(args.output, data, binary=is_binary(args.to))
    return 0


def _run_timeline(args):
    """A <profile>.timeline: speedscope in time order; pprof has no time
    order, so it gets the aggregate the timeline holds."""
    tl = timeline.parse_timeline(args.file)
    stem = args.file[:-len(timeline.SUFFIX)] if args.file.endswith(timeline.SUFFIX) else args.file
    quality = read_sidecar(stem)
    if args.to == "speedscope":
        doc = timeline.to_speedscope_timeline(tl, quality=quality)
        data = (json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    else:
        rate = args.rate or tl.header.get("rate_hz")
        data = convert_bytes(tl.profile, args.to, rate=rate, mode=profile_mode(args, quality, rate),
                             quality=quality)
    write_output(args.output, data, binary=is_binary(args.to))
    return 0


def profile_mode(args, quality, rate):
    """wall or cpu: what the time values measure.  --mode, else the mode
    the .quality.json recorded, else wall: the library's default
    (PYSAMPLE_MODE), so a wall profile is never labelled cpu (issue #35).
    A collapsed profile does not say its mode, so when time values are
    added on a guess, one line says so."""
    mode = args.mode or quality.get("mode")
    if mode in ("wall", "cpu"):
        return mode
    if rate and args.to == "pprof":
        sys.stderr.write("pysample: %s does not record its mode (no .quality.json beside it): its time "
                         "values are labelled wall, PYSAMPLE_MODE's default; give --mode cpu for a "
                         "profile taken with PYSAMPLE_MODE=cpu\n" % printable(args.file))
    return "wall"


def is_binary(fmt):
    return fmt == "pprof"


def convert_bytes(profile, fmt, rate=None, mode="cpu", title=None, quality=None, source=None):
    """quality: the profile's figures (quality.py), else those of the
    sidecar beside profile.path, if any.  source: what pprof's comment says
    the profile came from (default: profile.path's base name)."""
    if quality is None:
        quality = read_sidecar(profile.path)
    if fmt == "speedscope":
        return (json.dumps(to_speedscope(profile, rate, quality), ensure_ascii=False, separators=(",", ":"))
                + "\n").encode("utf-8")
    if fmt == "pprof":
        return to_pprof(profile, rate, mode, _file_mtime_ns(profile.path), quality, source)
    if fmt == "svg":
        return render_flamegraph(profile, title=title).encode("utf-8")
    if fmt == "collapsed":
        with open(profile.path, "rb") as f:
            return f.read()
    raise ToolError("unknown format %r" % fmt)


def _file_mtime_ns(path):
    try:
        return int(os.stat(path).st_mtime * 1e9)
    except OSError:
        return None
