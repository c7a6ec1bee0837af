# recordpid.py - `record --pid PID`: a running process's profile, asked of
# the library inside it (armed) or read from outside (outside.py), and
# saving what such a process sent (also `stop`'s, and pidtree's for each
# process of a tree).
#
# SPDX-License-Identifier: MIT

import os
import socket
import sys
import time

from . import quality, remote
from .collapsed import describe, parse_collapsed
from .common import PROG, write_output
from .convert import convert_bytes, is_binary
from .deliver import EXTENSIONS, expand_template
from .launch import DEFAULT_RATE
from .top import format_top


def record_pid(args):
    duration = args.duration if args.duration is not None else 10
    def started(_text):
        # Said once the process has begun: a refusal is the only line.
        if not args.quiet:
            sys.stderr.write("%s: recording process %d for %d s...\n" % (PROG, args.pid, duration))
    from . import outside
    reply = outside.request(args.pid, "record", args.control_dir, on_started=started, duration=duration,
                            rate=args.rate, **remote.session_keys(args))
    destination = save_remote_profile(args.pid, reply, args.output, args.format, args.quiet,
                                      "recorded %d s of process %d" % (duration, args.pid))
    return 0 if destination else 1


def save_remote_profile(pid, reply, output, fmt, quiet, what):
    """Writes the profile an armed process sent, in fmt, to output
    (default pysample-<pid>.<ext>), with the quality figures beside it
    (quality.py); prints a summary unless quiet.  Returns the path, or None
    when there were no samples."""
    data = reply.data or b""
    meta = reply.meta
    to_stdout = output == "-"
    destination = "-" if to_stdout else os.path.abspath(
        expand_template(output, pid, socket.gethostname(), int(time.time()))
        if output else "pysample-%d%s" % (pid, EXTENSIONS[fmt]))
    warning = remote.low_rate_warning(meta)
    if not data.strip():
        sys.stderr.write("%s: process %d: no samples (%s); nothing written\n"
                         % (PROG, pid, remote.describe_quality(meta)))
        return None
    profile = parse_collapsed("process %d" % pid if to_stdout else destination, data=data)
    rate = remote.meta_number(meta, "requested_rate_hz", DEFAULT_RATE) or DEFAULT_RATE
    mode = meta.get("mode") or "wall"
    if fmt == "collapsed":
        out = data
    else:
        out = convert_bytes(profile, fmt, rate=rate, mode=mode, title="pysample: process %d" % pid,
                            quality=meta, source="process %d" % pid)
    write_output(None if to_stdout else destination, out, binary=is_binary(fmt))
    if fmt == "collapsed" and not to_stdout:
        quality.write_sidecar(destination, meta, pid)
    if not quiet:
        sys.stderr.write("%s: %s: %s -> %s\n" % (PROG, what, describe(profile),
                                                  "standard output" if to_stdout else destination))
        sys.stderr.write("%s: quality: %s\n" % (PROG, remote.describe_quality(meta)))
        sys.stderr.write("%s: top functions by self samples:\n" % PROG)
        sys.stderr.write(format_top([profile], 10, indent="  "))
    if warning:
        sys.stderr.write(warning + "\n")
    return destination
