# remote.py - talking to an armed process (PYSAMPLE_ARM=1) over its control
# socket: the client half of lib/control/control.c, for record/dump/top/start/stop
# --pid.  The wire format is lib/control/ctlproto.h's: one request line, then
# frames "KIND LENGTH\n" + LENGTH bytes (meta, data, ok, err).
#
# Where the socket is: Linux, the abstract name @pysample.<uid>.<pidns>.<pid>
# (its PID namespace's inode and its pid in that namespace, so that the pid
# 1s of two containers of one pod never share a name); with
# PYSAMPLE_CONTROL_DIR (ours, or the target's own environment, which the
# same user may read in /proc/PID/environ) <dir>/pysample.<uid>.<pidns>.<pid>.sock;
# macOS, /tmp unless that variable says otherwise.
#
# Who answers is checked, not assumed: anyone can bind a name first, so
# after connect the kernel is asked who listens (SO_PEERCRED), and only
# the process named is talked to: its pid as our PID namespace sees it,
# its effective uid, and, since a pid is only a number that a process
# which has exited leaves to the next holder, proof that the listener is
# that process (peercheck.py).  What it sends is made printable before it
# is shown.
#
# Every step that blocks has a deadline, and a target that does not answer
# is said to be stopped, frozen or slow in one line (deadline.py).
#
# SPDX-License-Identifier: MIT

import errno
import os
import re
import socket
import struct
import sys
import time

from . import deadline, options, peercheck
from .common import PROG, ToolError, printable

MAGIC = "pysample/1"

# What a process must be for the --pid commands to reach it, in their help.
ARMED = "started with libpysample preloaded and PYSAMPLE_ARM=1, run as your user"


def add_pid_option(parser, required=False, help=None):
    parser.add_argument("-p", "--pid", type=int, metavar="PID", required=required,
                        help=help or "the armed process (started with PYSAMPLE_ARM=1) to work on")
    parser.add_argument("--control-dir", metavar="DIR",
                        help="the directory of its control socket, if it was started with "
                             "PYSAMPLE_CONTROL_DIR (default: read from its environment)")


def add_session_options(parser):
    """--mode, --native and --async for a command that only has --pid
    (dump, top): what the session samples (record has its own)."""
    options.mode(parser, help="wall (every thread) or cpu (only threads on a CPU) for this session "
                             "(default: the process's PYSAMPLE_MODE)")
    parser.add_argument("--async", dest="async_tasks", action="store_true",
                        help="asyncio tasks (a --pid process must have PYSAMPLE_ASYNC=1)")
    parser.add_argument("--native", nargs="?", const="1", choices=("1", "all"),
                        help="native frames too (a --pid process must have PYSAMPLE_NATIVE)")


def session_keys(args):
    """The request's keys for --mode, --native and --async as given (a key
    left out: the process's own setting)."""
    keys = {}
    mode = getattr(args, "mode", None)
    if mode is not None:
        keys["cpu"] = 1 if mode == "cpu" else 0
    native = getattr(args, "native", None)
    if native:
        keys["native"] = 2 if native == "all" else 1
    if getattr(args, "async_tasks", False):
        keys["async"] = 1
    return keys


def _target_environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    env = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key.startswith(b"PYSAMPLE_"):
            env[key.decode("ascii", "replace")] = value.decode("utf-8", "replace")
    return env


def _status(pid):
    """/proc/PID/status as a dict (readable by anyone), {} if gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except OSError:
        return {}


def _target_uid(pid):
    """The target's effective uid, as this process's user namespace shows it."""
    uid = _status(pid).get("Uid", "").split()
    if len(uid) >= 2:
        return int(uid[1])
    try:
        return os.stat("/proc/%d" % pid).st_uid
    except OSError:
        return os.geteuid()


def _own_pid(pid):
    """The target's pid in its own PID namespace (NSpid's last), which is
    the pid in its socket's name."""
    nspid = _status(pid).get("NSpid", "").split()
    return int(nspid[-1]) if nspid else pid


def _ns(pid, kind):
    """The identity (inode) of the target's namespace of that kind, or None
    where it cannot be read (another user's process, not dumpable)."""
    try:
        return os.stat("/proc/%d/ns/%s" % (pid, kind)).st_ino
    except OSError:
        return None


def _exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _directory(pid, control_dir):
    env = _target_environ(pid)
    directory = control_dir or env.get("PYSAMPLE_CONTROL_DIR") or os.environ.get("PYSAMPLE_CONTROL_DIR")
    if not directory and sys.platform == "darwin":
        directory = "/tmp"
    return directory


_NAME_RE = re.compile(r"^pysample\.(\d+)\.(\d+)\.(\d+)(\.sock)?$")


def _listed_names(directory):
    """The control names that exist: the directory's files, or the
    abstract names of this network namespace (/proc/net/unix)."""
    if directory:
        try:
            return os.listdir(directory)
        except OSError:
            return []
    names = []
    try:
        with open("/proc/net/unix") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 8 else ""
                if path.startswith("@pysample."):
                    names.append(path[1:])
    except OSError:
        pass
    return names


def addresses(pid, control_dir=None):
    """[(address for connect(), the name as the user sees it)]: the name the
    target would listen on, pysample.<uid>.<pidns>.<pid> (ctlsock.h), and,
    where its uid or namespace cannot be known from here (another user
    namespace, an unreadable /proc/PID/ns), the existing names with its
    pid.  Which of them is the target is told by the kernel after connect
    (Connection._verify), never by the name."""
    directory = _directory(pid, control_dir)
    own = _own_pid(pid)
    ns = 0 if sys.platform == "darwin" else _ns(pid, "pid")
    names = []
    if ns is not None:
        names.append("pysample.%d.%d.%d" % (_target_uid(pid), ns, own))
    for name in _listed_names(directory):
        m = _NAME_RE.match(name)
        if m and int(m.group(3)) == own and (ns is None or int(m.group(2)) == ns) \
                and bool(m.group(4)) == bool(directory):
            base = name[:-5] if m.group(4) else name
            if base not in names:
                names.append(base)
    if directory:
        return [(os.path.join(directory, n + ".sock"),) * 2 for n in names]
    return [("\0" + n, "@" + n) for n in names]


def _maps_say(pid):
    """'loaded', 'not loaded', or None (unreadable): libpysample in the
    target's /proc/PID/maps."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            return "loaded" if "libpysample" in f.read() else "not loaded"
    except OSError:
        return None


def _elsewhere(pid, control_dir):
    """True if the target's abstract name lives in another network
    namespace than ours (which abstract names are scoped to)."""
    net, own_net = _ns(pid, "net"), _ns(os.getpid(), "net")
    return net is not None and own_net is not None and net != own_net and not _directory(pid, control_dir)


def _not_armed(pid, shown):
    """Why nothing answers, and what to do: from the target's maps, its
    user, its network namespace and its environment."""
    me, uid = os.geteuid(), _target_uid(pid)
    loaded = _maps_say(pid)
    where = "process %d does not answer on %s" % (pid, shown)
    if loaded is None and uid != me:
        return ToolError("%s: it runs as uid %d and you are uid %d, who may not read it: run pysample "
                         "as uid %d (e.g. `setpriv --reuid %d --regid %d --clear-groups pysample ...`)"
                         % (where, uid, me, uid, uid, uid, uid))
    if loaded == "not loaded":
        return ToolError("%s: the library is not loaded in it (its /proc/%d/maps has no libpysample): "
                         "start it with LD_PRELOAD=<path to libpysample.so> PYSAMPLE_ARM=1 "
                         "(docs/kubernetes.md)" % (where, pid))
    if _elsewhere(pid, None):
        return ToolError("%s: it is in another network namespace (another pod or container), where its "
                         "control socket lives: run pysample there (`kubectl exec`, or `nsenter --target "
                         "%d --net --pid --mount`)" % (where, pid))
    env = _target_environ(pid)
    if env and env.get("PYSAMPLE_ARM", "") in ("", "0", "no", "false"):
        return ToolError("%s: libpysample is loaded in it but not armed (its environment has no "
                         "PYSAMPLE_ARM=1): start it with PYSAMPLE_ARM=1 (docs/kubernetes.md)" % (where,))
    if loaded == "loaded":
        return ToolError("%s: libpysample is loaded in it but does not listen (not armed, or it said why "
                         "on its stderr): start it with PYSAMPLE_ARM=1 (docs/kubernetes.md)" % (where,))
    return ToolError("%s: start it with libpysample preloaded and PYSAMPLE_ARM=1 (docs/kubernetes.md)"
                     % (where,))


def _peer(sock):
    """(pid, uid) of the process that listens, as the kernel tells them,
    translated into our namespaces: pid 0 if our PID namespace cannot see
    it.  None where the system does not say."""
    if sys.platform.startswith("linux"):
        pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                             struct.calcsize("3i")))
        return pid, uid
    if sys.platform == "darwin":
        LOCAL_PEERPID = 2
        pid = struct.unpack("i", sock.getsockopt(0, LOCAL_PEERPID, 4))[0]
        return pid, _target_uid(pid) if pid > 0 else -1
    return None


class Reply(object):
    """The frames of one answer: meta (dict), data (bytes), ok text."""

    def __init__(self):
        self.meta = {}
        self.data = None
        self.text = ""


def peer_text(payload):
    """Text a process sent, fit for a terminal: no control character, hence
    no escape sequence or line break of its, gets through."""
    return printable(payload.decode("utf-8", "replace"))


def parse_meta(payload):
    meta = {}
    for line in payload.decode("utf-8", "replace").split("\n"):
        key, _, value = line.partition(" ")
        if key:
            meta[printable(key)] = printable(value)
    return meta


class Connection(object):
    def __init__(self, pid, control_dir=None, timeout=None):
        if pid <= 0:
            raise ToolError("--pid must be a process id, not %d" % pid)
        if not _exists(pid):
            raise ToolError("no process %d" % pid)
        self.pid = pid
        # How long each read of an answer may wait (deadline.py).
        self.timeout = deadline.ANSWER_S if timeout is None else timeout
        self.on_started = None  # called with the text of a "started" frame
        # A process that was just started listens a moment later: one whose
        # environment asks for arming gets a few seconds to do so.
        armed = _target_environ(pid).get("PYSAMPLE_ARM", "") not in ("", "0", "no", "false")
        if _maps_say(pid) == "not loaded" or _elsewhere(pid, control_dir):
            armed = False  # nothing to wait for: say why at once
        give_up = time.monotonic() + (5.0 if armed else 0.0)
        self.sock = None
        while self.sock is None:
            found = addresses(pid, control_dir)
            impostor = None
            for addr, shown in found:
                self.shown = shown
                sock = self._connect(addr, shown)
                if sock is None:
                    continue
                why = self._verify(sock, shown)
                if why is None:
                    self.sock = sock
                    break
                sock.close()
                impostor = why
            if self.sock is not None:
                break
            if impostor is not None:
                raise ToolError(impostor)
            if time.monotonic() >= give_up or not _exists(pid):
                why = deadline.stopped(pid)
                if why is not None:
                    raise ToolError("process %d %s" % (pid, why))
                raise _not_armed(pid, found[0][1] if found else "its control socket")
            time.sleep(0.05)
        self._buf = b""

    def _connect(self, addr, shown):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            deadline.connect(sock, addr, deadline.Wait(self.pid, deadline.CONNECT_S, "connect", shown))
            return sock
        except ToolError:
            sock.close()
            raise
        except OSError as e:
            sock.close()
            if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise ToolError("cannot connect to process %d (%s): %s" % (self.pid, shown, e.strerror or e))
            return None

    def _verify(self, sock, shown):
        """None if the process listening is the one named; else what to
        say.  The kernel gives the listener's pid as our PID namespace
        sees it (0: one we cannot see), which must be the target's: a
        name proves nothing, anyone may bind it first; nor does the pid,
        which a listener that has exited leaves to the next holder: the
        rest is proved by peercheck.verify."""
        peer = _peer(sock)
        if peer is None:
            return None
        pid, uid = peer
        if pid == self.pid:
            if not sys.platform.startswith("linux"):
                return None
            return peercheck.verify(sock, pid, uid, _target_uid(pid), shown)
        who = ("a process in another PID namespace, which this one cannot see" if pid == 0
               else "process %d (uid %d)" % (pid, uid))
        return ("%s is held by %s, not by process %d: refusing to talk to it (was process %d started "
                "with PYSAMPLE_ARM=1? its stderr says if it could not listen)" % (shown, who, self.pid, self.pid))

    def close(self):
        self.sock.close()

    def send(self, verb, **keys):
        words = [MAGIC, verb] + ["%s=%d" % (k, v) for k, v in sorted(keys.items()) if v is not None]
        data = (" ".join(words) + "\n").encode("ascii")
        wait = deadline.Wait(self.pid, deadline.CONNECT_S, "take the request", self.shown)
        try:
            while data:
                data = data[deadline.call(self.sock, wait, self.sock.send, data):]
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused at once: its err frame, if any, is there to read

    def _fill(self, n):
        while len(self._buf) < n:
            wait = deadline.Wait(self.pid, self.timeout, "answer", self.shown)
            try:
                chunk = deadline.call(self.sock, wait, self.sock.recv, 1 << 20)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return False
            self._buf += chunk
        return True

    def frame(self):
        """(kind, payload); None when the process closed the connection."""
        while b"\n" not in self._buf:
            if not self._fill(len(self._buf) + 1):
                if not self._buf:
                    return None
                raise ToolError("process %d sent a malformed answer" % self.pid)
            if len(self._buf) > 64 and b"\n" not in self._buf:
                raise ToolError("process %d sent a malformed answer" % self.pid)
        head, _, rest = self._buf.partition(b"\n")
        kind, _, length = head.decode("ascii", "replace").partition(" ")
        if not length.isdigit():
            raise ToolError("process %d sent a malformed answer" % self.pid)
        self._buf = rest
        n = int(length)
        if not self._fill(n):
            raise ToolError("process %d closed the connection in the middle of its answer" % self.pid)
        payload, self._buf = self._buf[:n], self._buf[n:]
        return kind, payload

    def closed_without_answer(self):
        return ClosedWithoutAnswer(self.pid)

    def reply(self):
        """Reads frames up to ok/err: a Reply, or ToolError for err."""
        r = Reply()
        got_any = False
        while True:
            f = self.frame()
            if f is None:
                if not got_any:
                    raise self.closed_without_answer()
                raise ToolError("process %d closed the connection before it finished" % self.pid)
            got_any = True
            kind, payload = f
            if kind == "meta":
                r.meta = parse_meta(payload)
            elif kind == "data":
                r.data = payload
            elif kind == "started":
                if self.on_started is not None:
                    self.on_started(peer_text(payload))
            elif kind == "ok":
                r.text = peer_text(payload)
                return r
            elif kind == "err":
                raise ToolError("process %d: %s" % (self.pid, peer_text(payload)))


    def request(self, verb, on_started=None, **keys):
        """Sends one request and reads its answer; closes the connection.
        on_started: called once a session has begun (record)."""
        self.on_started = on_started
        try:
            self.send(verb, **keys)
            return self.reply()
        finally:
            self.close()


class ClosedWithoutAnswer(ToolError):
    """The process closed our connection before any frame.  Not a refusal:
    the library refuses with an err frame.  It is exiting, or the program
    closed (or dup2()ed over) the library's listening socket while a wait
    of the library still held it: connections queued on it meanwhile are
    reset when the wait ends, and the library makes a new one within 2 s
    (its descriptor checks, lib/control/control.c)."""

    def __init__(self, pid, tried=0.0):
        uid, me = _target_uid(pid), os.geteuid()
        who = ("; it answers only its own user (uid %d; you are uid %d)" % (uid, me)
               if uid >= 0 and me not in (0, uid) else "")
        again = " (tried again for %g s)" % tried if tried else ""
        ToolError.__init__(self, "process %d closed the connection without an answer%s: it is exiting, or "
                           "the program closed the library's control socket and no new one was made (its "
                           "stderr says why)%s" % (pid, again, who))


# How long the --pid commands try again after a connection closed without
# an answer (ClosedWithoutAnswer): the library's descriptor checks run every
# 2 s at most.
RECLAIM_S = 3.0


def request(pid, verb, control_dir=None, timeout=None, **keys):
    """One request answered (Connection.request), tried again for
    RECLAIM_S while the process closes connections without an answer.
    timeout: how long each read may wait (default: deadline.ANSWER_S,
    plus a record's duration, which passes before its answer)."""
    if timeout is None:
        timeout = deadline.ANSWER_S + (keys.get("duration") or 0)
    start = time.monotonic()
    while True:
        try:
            return Connection(pid, control_dir, timeout).request(verb, **keys)
        except ClosedWithoutAnswer:
            tried = time.monotonic() - start
            if tried >= RECLAIM_S or not _exists(pid):
                raise ClosedWithoutAnswer(pid, round(tried, 1))
        time.sleep(0.05)


def meta_number(meta, key, default=0, kind=int):
    """A figure from a process's quality metadata, or default.  The values
    come from the profiled process (its control socket or the sidecar file
    beside its profile), which may send anything: text that is not a finite
    number of that kind, or a negative one, reads as absent rather than
    stopping the tool with a traceback."""
    text = meta.get(key)
    if not text:
        return default
    try:
        value = kind(text)
    except (TypeError, ValueError):
        return default
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        return default
    return value


def describe_quality(meta):
    """One line: what the profile is worth."""
    if not meta:
        return ""
    parts = []
    if meta.get("python"):
        parts.append("Python %s" % meta["python"])
    if meta.get("mode"):
        parts.append("%s-clock" % meta["mode"])
    req = meta_number(meta, "requested_rate_hz")
    if req:
        parts.append("%.1f of %d Hz" % (meta_number(meta, "achieved_rate_hz", 0.0, float), req))
    dropped = sum(meta_number(meta, k) for k in
                  ("dropped_unreadable", "dropped_inconsistent", "dropped_other"))
    samples = meta_number(meta, "samples", None)
    parts.append("%s samples" % ("?" if samples is None else samples))
    parts.append("%d dropped" % dropped)
    truncated = meta_number(meta, "truncated_stacks")
    if truncated:
        parts.append("%d truncated" % truncated)
    budget = meta_number(meta, "budget_pct", 0.0, float)
    if budget:
        parts.append("budget %g%% (%d rate changes)" % (budget, meta_number(meta, "budget_adjustments")))
    return ", ".join(parts)


def low_rate_warning(meta):
    """The line to print when the achieved rate fell below 90% of the
    requested one, or None."""
    req = meta_number(meta, "requested_rate_hz")
    got = meta_number(meta, "achieved_rate_hz", 0.0, float)
    if req and got < 0.9 * req:
        why = " (the CPU budget lowered it)" if meta_number(meta, "budget_adjustments") else ""
        return ("%s: the achieved rate %.1f Hz is below 90%% of the requested %d Hz%s: the profile "
                "has fewer samples than asked" % (PROG, got, req, why))
    return None
