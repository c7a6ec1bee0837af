# deadline.py - how long the --pid commands wait for an armed process, and
# what they say when it does not answer (issue #39 item 5).
#
# Every blocking step of a talk with a target (connect, send, each recv)
# has a deadline.  Without one, `dump --pid` waited forever in connect() to
# a listener whose queue is full and which never accepts (anyone may bind
# the name first), and in recv() from a process that cannot run: stopped
# by SIGSTOP or ^Z, held by a debugger, or in a frozen cgroup.  The
# library answers from its sampler thread within milliseconds; the limits
# below are generous for a loaded machine or an emulator, and a target
# that stays stopped is given up on sooner, since waiting longer cannot
# help.  On expiry the one line says what the target is doing, from
# /proc/PID/stat and its cgroup's freezer.
#
# SPDX-License-Identifier: MIT

import os
import socket
import time

from .common import ToolError

# connect(): the kernel queues a connection at once unless the listen
# queue is full, so only a queue nobody takes from waits this long.
CONNECT_S = 5.0
# The first frame of an answer, and each later read (beyond the time the
# request itself asks for: record's duration, top's interval).
ANSWER_S = 30.0
# A target seen stopped (or frozen) this long without a break: it cannot
# answer until someone resumes it, so say so rather than wait on.
STOPPED_S = 2.0
# How often the target's state is read while waiting: every SLICE_S at
# first and while it is stopped; each time it is seen able to run, the
# next look waits twice as long, up to SLICE_MAX_S.  A serve scraping 32
# processes for 10 s looked 40 times at each (mountinfo, cgroup files,
# stat: about 0.2 ms a look) and spent 450-600 ms of CPU per scrape,
# growing with the scrape's length; a record's answer cannot come before
# its duration anyway.  The price: a target stopped in the middle of a long
# wait is said so up to SLICE_MAX_S later.
SLICE_S = 0.25
# How often a connect() to a full listen queue looks at the target (its
# tries are every millisecond).
CONNECT_LOOK_S = 0.02
SLICE_MAX_S = 2.0

_STATES = {"R": "running", "S": "sleeping", "D": "in uninterruptible sleep (state D: waiting on the "
           "kernel, e.g. a disk, NFS or a page fault)", "I": "idle", "W": "paging",
           "X": "dead", "P": "parked"}


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _mounts(fstype, option=None):
    """Mount points of fstype (with option among its super options, for
    cgroup v1 controllers), from our /proc/self/mountinfo."""
    found = []
    for line in (_read("/proc/self/mountinfo") or "").splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        after = line.split(" - ", 1)[1].split()
        if after and after[0] == fstype and (option is None or option in after[-1].split(",")):
            found.append(fields[4])
    return found


def _cgroup_file(mount, path, name):
    return _read(os.path.join(mount, path.lstrip("/"), name))


def frozen_cgroup(pid):
    """(the cgroup directory that freezes the process, the file that thaws
    it, what to write there): v2 cgroup.freeze or cgroup.events 'frozen 1',
    v1 freezer.state FROZEN or FREEZING.  None if none does."""
    for line in (_read("/proc/%d/cgroup" % pid) or "").splitlines():
        _hier, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if controllers == "":
            for mount in _mounts("cgroup2"):
                events = (_cgroup_file(mount, path, "cgroup.events") or "").split("\n")
                if "frozen 1" in events or (_cgroup_file(mount, path, "cgroup.freeze") or "").strip() == "1":
                    return os.path.join(mount, path.lstrip("/")), "cgroup.freeze", "0"
        elif "freezer" in controllers.split(","):
            for mount in _mounts("cgroup", "freezer"):
                if (_cgroup_file(mount, path, "freezer.state") or "").strip() in ("FROZEN", "FREEZING"):
                    return os.path.join(mount, path.lstrip("/")), "freezer.state", "THAWED"
    return None


def state(pid):
    """The one-letter state of the process's main thread (/proc/PID/stat),
    or None (gone, or not Linux)."""
    stat = _read("/proc/%d/stat" % pid)
    if not stat or ")" not in stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] if fields else None


def _tracer(pid):
    for line in (_read("/proc/%d/status" % pid) or "").splitlines():
        if line.startswith("TracerPid:"):
            return line.split()[1] if len(line.split()) > 1 else "0"
    return "0"


def stopped(pid):
    """What keeps the process from running, as the end of a sentence
    ('is stopped ...: it cannot answer until ...'), or None if nothing."""
    frozen = frozen_cgroup(pid)
    if frozen is not None:
        cgroup, name, value = frozen
        return ("is in a frozen cgroup (%s): it cannot answer until the cgroup is thawed (`echo %s > %s/%s`)"
                % (cgroup, value, cgroup, name))
    letter = state(pid)
    if letter == "T":
        return ("is stopped (SIGSTOP, ^Z or job control): it cannot answer until resumed (`kill -CONT %d`)"
                % pid)
    if letter == "t":
        return ("is stopped by a debugger (tracer pid %s): it cannot answer until the debugger lets it run"
                % _tracer(pid))
    return None


def _doing(pid):
    """What the process is doing, for a line about a deadline that expired
    while it could run."""
    letter = state(pid)
    if letter is None:
        return "it has exited"
    if letter == "Z":
        return "it has exited (a zombie its parent has not reaped)"
    return "it is %s" % _STATES.get(letter, "in state %s" % letter)


class Wait(object):
    """One blocking step's deadline: slice() is how long the next wait may
    last, expired() raises the line to print once the step must end (its
    time is over, or the process stayed stopped for STOPPED_S)."""

    def __init__(self, pid, seconds, step, shown):
        self.pid, self.seconds, self.step, self.shown = pid, seconds, step, shown
        self.start = time.monotonic()
        self.stopped_since = None
        self.looks = 0      # how many times expired() has looked in a row (backing off)

    def slice(self):
        every = min(SLICE_MAX_S, SLICE_S * 2 ** min(self.looks, 8))
        return max(0.001, min(every, self.start + self.seconds - time.monotonic()))

    def expired(self):
        """Returns if the step may wait on; raises ToolError if not."""
        now = time.monotonic()
        why = stopped(self.pid)
        if why is None:
            self.stopped_since = None
            self.looks += 1
        else:
            self.looks = 0
            if self.stopped_since is None:
                self.stopped_since = now
        if why is not None and (now - self.stopped_since >= STOPPED_S or now >= self.start + self.seconds):
            raise ToolError("process %d %s" % (self.pid, why))
        if now >= self.start + self.seconds:
            raise ToolError(self._late_line())

    def _late_line(self):
        doing = _doing(self.pid)
        if self.step == "connect":
            return ("the control socket of process %d, %s, took no connection within %g s: its listen queue "
                    "is full and nothing accepts from it (process %d: %s; another process may hold that name: "
                    "`ss -xlp | grep %s`)" % (self.pid, self.shown, self.seconds, self.pid, doing,
                                              self.shown.lstrip("@")))
        return ("process %d did not %s within %g s (%s): its library's thread may be blocked, or the machine "
                "overloaded" % (self.pid, self.step, self.seconds, doing))


def connect(sock, addr, wait):
    """connect() within the wait's deadline.  A Unix socket's connect()
    that would block (EAGAIN: the listen queue is full) is tried again,
    since the kernel offers no way to wait for room; any other error is
    raised as it is.  Tried again every millisecond, and the target looked
    at every CONNECT_LOOK_S: under a flood of connections from another
    user, the library's burst of accepts frees places for well under a
    millisecond before the flooders take them again, and a try every 20 ms
    missed them often enough that a dump waited out its whole deadline."""
    sock.setblocking(False)
    looked = time.monotonic()
    while True:
        try:
            sock.connect(addr)
            return
        except (BlockingIOError, InterruptedError):
            if time.monotonic() - looked >= CONNECT_LOOK_S:
                wait.expired()
                looked = time.monotonic()
            time.sleep(min(0.001, wait.slice()))


def call(sock, wait, op, *args):
    """sock's op(*args) (send, recv) within the wait's deadline."""
    while True:
        sock.settimeout(wait.slice())
        try:
            return op(*args)
        except socket.timeout:
            wait.expired()
