# tree.py - the processes a command or a running master grew: `record`
# keeps every one's profile (issue #35 item 2, docs/processes.md).
#
# A process tree is read from /proc (each process's parent, field 4 of
# /proc/PID/stat).  record makes itself the "child subreaper" of what it
# starts (prctl PR_SET_CHILD_SUBREAPER), so that a process whose parent ended
# (multiprocessing's resource tracker and fork server once the main program
# has returned, a daemon's double fork) is reparented to record rather than
# to init and stays in the tree: record then waits for it to write its
# profile before it takes the private directory away.
#
# SPDX-License-Identifier: MIT

import ctypes
import ctypes.util
import os
import sys
import time

from .common import PROG, printable
from .library import LIB_BASENAMES

PR_SET_CHILD_SUBREAPER = 36
COMMAND_MAX = 80
# Once the started process has ended, how long record waits for the
# Pythons it left running (multiprocessing's resource tracker and fork
# server end then, and write their profiles as they end).
AFTER_EXIT_GRACE = 5.0


def become_subreaper():
    """Orphans of our descendants become our children (Linux 3.4+).
    False where that is not possible (other systems, no libc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parent(pid):
    """pid's parent, or None when it is gone (or a zombie, which writes
    nothing more)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1])


def descendants(root):
    """Every live process below root, found in one pass over /proc."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            parent = _parent(int(name))
            if parent is not None:
                children.setdefault(parent, []).append(int(name))
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def command_line(pid):
    """What pid runs, from /proc/PID/cmdline: words joined by spaces,
    control characters made visible (the process chose them), shortened
    to COMMAND_MAX characters, the program by its base name.  None when it cannot be read."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            words = [w.decode("utf-8", "replace") for w in f.read().split(b"\0") if w]
    except OSError:
        return None
    if not words:
        return None
    text = printable(" ".join([os.path.basename(words[0])] + words[1:]))
    return text if len(text) <= COMMAND_MAX else text[:COMMAND_MAX - 3] + "..."


def profiles_itself(pid):
    """True if pid has the library and a Python runtime loaded (a shell
    with LD_PRELOAD has only the first, and writes nothing); False if not;
    None when it cannot be told (gone, or not ours to read)."""
    try:
        with open("/proc/%d/maps" % pid, "rb") as f:
            maps = f.read().decode("utf-8", "replace")
        exe = os.path.basename(os.readlink("/proc/%d/exe" % pid))
    except OSError:
        return None
    paths = set(line.split(None, 5)[5] for line in maps.splitlines() if len(line.split(None, 5)) == 6)
    names = set(os.path.basename(p) for p in paths)
    if not names & set(LIB_BASENAMES):
        return False
    return exe.startswith("python") or any(n.startswith("libpython") for n in names)


class Seen(object):
    """A process of the tree as record saw it: when first (seconds since
    the start), what it ran (one command line per image, when it exec'd),
    whether it profiles itself."""

    __slots__ = ("first", "commands", "python")

    def __init__(self, first):
        self.first, self.commands, self.python = first, [], None


class Tree(object):
    """The processes below root, looked at every time look() is called
    (record's poll): what each ran is read while it runs, for the summary."""

    def __init__(self, root=None):
        self.root = os.getpid() if root is None else root
        self.seen = {}
        self.live = []
        self.started = time.monotonic()

    def look(self):
        now = time.monotonic() - self.started
        self.live = descendants(self.root)
        for pid in self.live:
            seen = self.seen.setdefault(pid, Seen(now))
            command = command_line(pid)
            if command and command not in seen.commands[-1:]:
                seen.commands.append(command)
                seen.python = None      # an exec: another program
            if seen.python is None:
                seen.python = profiles_itself(pid)
        return self.live

    def command(self, pid, image=0):
        """What pid ran: its first program, or the image-th it exec'd."""
        seen = self.seen.get(pid)
        if not seen or not seen.commands:
            return None
        return seen.commands[min(image, len(seen.commands) - 1)]

    def pythons(self, pids=None):
        """The live processes that profile themselves."""
        return [p for p in (self.live if pids is None else pids) if self.seen.get(p) and self.seen[p].python]

    def reap(self, keep):
        """Reaps our children that ended, other than keep (subprocess's
        own): orphans reparented to us would otherwise stay zombies."""
        for pid in list(self.seen):
            if pid == keep:
                continue
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass

    def wait_for_pythons(self, keep, grace=AFTER_EXIT_GRACE):
        """After the started process ended: waits up to grace seconds for
        the processes that profile themselves to end (their profiles are
        written at exit).  Returns those still running."""
        give_up = time.monotonic() + grace
        while True:
            self.reap(keep)
            left = self.pythons(self.look())
            if not left or time.monotonic() >= give_up:
                return left
            time.sleep(0.05)

    def flushes_due(self, done, duration, elapsed, grace):
        """record -d: True while a Python that started within the first
        duration seconds, still runs and has not written yet (done: the
        pids that have) may write its profile soon: its flush comes
        duration seconds after its own start, and is waited for grace
        seconds more."""
        for pid in self.pythons():
            first = self.seen[pid].first
            if pid not in done and first < duration and elapsed < first + duration + grace:
                return True
        return False

    def say_left(self, left, command, workdir):
        """The Pythons still running after the started process ended (and
        AFTER_EXIT_GRACE): their profiles will be written later, where the
        library can still write them (record leaves workdir to them)."""
        for pid in left:
            sys.stderr.write("%s: pid %d (`%s`) still runs after `%s` ended; its profile will be written "
                             "in %s when it ends\n" % (PROG, pid, self.command(pid) or "?", command, workdir))
