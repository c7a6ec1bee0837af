# pidtree.py - `record --pid MASTER -s`: records a running process and every
# process below it, those there at the start and those forked or spawned
# during the recording (a gunicorn or uvicorn master and its workers), in
# one command (issue #35 item 2).
#
# Each process is recorded on its own through its control socket (armed,
# PYSAMPLE_ARM=1: a forked child of an armed process is armed on its own
# pid, docs/kubernetes.md), the master also from outside when it is not
# armed (outside.py).  The tree is looked at every POLL_S; a process that
# appears is recorded for the whole seconds left.
#
# SPDX-License-Identifier: MIT

import os
import sys
import threading
import time

from . import outside, remote
from .collapsed import describe, parse_collapsed
from .common import PROG, ToolError
from .top import format_top
from .tree import Tree, command_line

POLL_S = 0.1
# A process just forked makes its control socket when its sampler thread
# starts: how long to wait for it before the process counts as not armed.
LISTEN_WAIT_S = 3.0


class Session(object):
    """One process's recording, on a thread of its own."""

    def __init__(self, pid, command, seconds):
        self.pid, self.command, self.seconds = pid, command, seconds
        self.reply = None
        self.error = None
        self.thread = None

    @property
    def named(self):
        return "pid %d (`%s`)" % (self.pid, self.command) if self.command else "pid %d" % self.pid


def _record_child(session, args):
    """A descendant: armed, once its control socket listens."""
    give_up = time.monotonic() + LISTEN_WAIT_S
    while not outside._listening(session.pid, args.control_dir):
        if time.monotonic() >= give_up or not remote._exists(session.pid):
            session.error = "not armed (no control socket), or it ended: not recorded"
            return
        time.sleep(0.05)
    session.reply = remote.request(session.pid, "record", args.control_dir, duration=session.seconds,
                                   rate=args.rate, **remote.session_keys(args))


def _run_session(session, args, master):
    try:
        if master:
            session.reply = outside.request(session.pid, "record", args.control_dir,
                                            duration=session.seconds, rate=args.rate,
                                            **remote.session_keys(args))
        else:
            _record_child(session, args)
    except ToolError as e:
        session.error = str(e).replace("process %d: " % session.pid, "")
    except OSError as e:
        session.error = e.strerror or str(e)


def _start(sessions, pid, seconds, args, master=False):
    session = Session(pid, command_line(pid), seconds)
    session.thread = threading.Thread(target=_run_session, args=(session, args, master))
    session.thread.daemon = True
    session.thread.start()
    sessions.append(session)


def _output_for(output, pid, master_pid):
    """The -o template for pid: as given with %p; without it the master
    takes the name and the others insert .<pid> before the extension."""
    if output is None or "%p" in output.replace("%%", "") or pid == master_pid:
        return output
    stem, ext = os.path.splitext(output)
    return "%s.%d%s" % (stem, pid, ext)


def record_tree(args, save):
    """record --pid PID --subprocesses.  save: recordpid.save_remote_profile.
    Returns the exit status: 0 if some process had samples."""
    if args.output == "-":
        raise ToolError("--subprocesses writes one profile per process: give -o a file name "
                        "(%p for each process's id) or none")
    duration = args.duration if args.duration is not None else 10
    if not remote._exists(args.pid):
        raise ToolError("no process %d" % args.pid)
    sessions = []
    end = time.monotonic() + duration
    _start(sessions, args.pid, duration, args, master=True)
    if not args.quiet:
        sys.stderr.write("%s: recording process %d and every process below it for %d s...\n"
                         % (PROG, args.pid, duration))
    tree = Tree(args.pid)
    while time.monotonic() < end:
        known = set(s.pid for s in sessions)
        for pid in tree.pythons(tree.look()):
            left = int(end - time.monotonic())
            if pid not in known and left >= 1:
                _start(sessions, pid, left, args)
        time.sleep(POLL_S)
    for session in sessions:
        session.thread.join()
    return _deliver(sessions, args, save)


def _deliver(sessions, args, save):
    profiles, lines = [], []
    for s in sessions:
        if s.error or s.reply is None:
            lines.append("%s: %s" % (s.named, s.error or "no answer"))
            continue
        out = save(s.pid, s.reply, _output_for(args.output, s.pid, args.pid), args.format, True, "")
        if out is None:
            continue    # no samples: save said so
        profile = parse_collapsed(out, data=s.reply.data)
        profiles.append(profile)
        lines.append("%s, %d s: %s (%s) -> %s" % (s.named, s.seconds, describe(profile),
                                                  remote.describe_quality(s.reply.meta), out))
    for line in lines:
        if not args.quiet or " -> " not in line:
            sys.stderr.write("%s: %s\n" % (PROG, line))
    if profiles and not args.quiet:
        sys.stderr.write("%s: top functions by self samples (all %d processes):\n" % (PROG, len(profiles)))
        sys.stderr.write(format_top(profiles, 10, indent="  "))
    return 0 if profiles else 1
