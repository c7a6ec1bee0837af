# dump.py - `pysample dump --pid PID`: the Python stack of every thread of a
# running, armed process, once (like `py-spy dump`), innermost call first.
#
# SPDX-License-Identifier: MIT

import sys

from . import options, outside, remote
from .collapsed import parse_collapsed
from .common import PROG, ToolError, printable, write_output

NAME = "dump"
HELP = "print the current stacks of a running process"
DESCRIPTION = ("Prints the Python stack of every thread of process PID as it is now, innermost call first. "
               "PID is read through the library inside it if it was %s (docs/kubernetes.md), else from "
               "outside, which needs the right to trace it (docs/attach.md). Threads that run no Python "
               "code are not shown." % remote.ARMED)


def add_options(parser):
    remote.add_pid_option(parser, required=True)
    options.pyspy_compat(parser)
    remote.add_session_options(parser)


def format_dump(pid, profile, meta):
    out = ["Process %d: Python %s" % (pid, meta.get("python", "?"))]
    for thread, frames, _count in sorted(profile.stacks, key=lambda s: s[0].sort_key()):
        out.append("")
        out.append("%s:" % printable(thread.label))
        for frame in reversed(frames):
            out.append("    %s" % printable(frame.label))
    return "\n".join(out) + "\n"


def run(args):
    if args.mode is not None:
        raise ToolError("--mode does not apply to dump: it shows every thread, running or not")
    reply = outside.request(args.pid, "dump", args.control_dir, **remote.session_keys(args))
    data = reply.data or b""
    if not data.strip():
        write_output(None, ("Process %d: Python %s\n\nno thread is running Python code\n"
                            % (args.pid, reply.meta.get("python", "?"))).encode("utf-8"), binary=False)
        return 0
    profile = parse_collapsed("process %d" % args.pid, data=data)
    write_output(None, format_dump(args.pid, profile, reply.meta).encode("utf-8"), binary=False)
    dropped = sum(int(reply.meta.get(k, "0") or 0)
                  for k in ("dropped_unreadable", "dropped_inconsistent", "dropped_other"))
    if dropped:
        sys.stderr.write("%s: %d thread(s) could not be read consistently and are missing\n" % (PROG, dropped))
    return 0
