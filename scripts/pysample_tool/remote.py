# remote.py - talking to an armed process (PYSAMPLE_ARM=1) over its control
# socket: the client half of lib/control/control.c, for record/dump/top/start/stop
# --pid.  The wire format is lib/control/ctlproto.h's: one request line, then
# frames "KIND LENGTH\n" + LENGTH bytes (meta, data, ok, err).
#
# Where the socket is: Linux, the abstract name @pysample.<uid>.<pid>; with
# PYSAMPLE_CONTROL_DIR (ours, or the target's own environment, which the
# same user may read in /proc/PID/environ) <dir>/pysample.<uid>.<pid>.sock;
# macOS, /tmp unless that variable says otherwise.
#
# SPDX-License-Identifier: MIT

import errno
import os
import socket
import sys
import time

from .common import PROG, ToolError

MAGIC = "pysample/1"

# What a process must be for the --pid commands to reach it, in their help.
ARMED = "started with libpysample preloaded and PYSAMPLE_ARM=1, run as your user"


def add_pid_option(parser, required=False, help=None):
    parser.add_argument("-p", "--pid", type=int, metavar="PID", required=required,
                        help=help or "the armed process (started with PYSAMPLE_ARM=1) to work on")
    parser.add_argument("--control-dir", metavar="DIR",
                        help="the directory of its control socket, if it was started with "
                             "PYSAMPLE_CONTROL_DIR (default: read from its environment)")


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


def _target_uid(pid):
    try:
        return os.stat("/proc/%d" % pid).st_uid
    except OSError:
        return os.geteuid()


def _exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def address(pid, control_dir=None):
    """(address for connect(), the name as the user sees it)."""
    env = _target_environ(pid)
    directory = control_dir or env.get("PYSAMPLE_CONTROL_DIR") or os.environ.get("PYSAMPLE_CONTROL_DIR")
    if not directory and sys.platform == "darwin":
        directory = "/tmp"
    name = "pysample.%d.%d" % (_target_uid(pid), pid)
    if directory:
        path = os.path.join(directory, name + ".sock")
        return path, path
    return "\0" + name, "@" + name


def _not_armed(pid, shown):
    env = _target_environ(pid)
    hint = ""
    if env and env.get("PYSAMPLE_ARM", "") in ("", "0", "no", "false"):
        hint = " (its environment has no PYSAMPLE_ARM=1)"
    return ToolError("process %d does not answer on %s%s: start it with libpysample preloaded and "
                     "PYSAMPLE_ARM=1 (docs/kubernetes.md)" % (pid, shown, hint))


class Reply(object):
    """The frames of one answer: meta (dict), data (bytes), ok text."""

    def __init__(self):
        self.meta = {}
        self.data = None
        self.text = ""


def parse_meta(payload):
    meta = {}
    for line in payload.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        if key:
            meta[key] = value
    return meta


class Connection(object):
    def __init__(self, pid, control_dir=None, timeout=None):
        if pid <= 0:
            raise ToolError("--pid must be a process id, not %d" % pid)
        if not _exists(pid):
            raise ToolError("no process %d" % pid)
        self.pid = pid
        addr, self.shown = address(pid, control_dir)
        # A process that was just started listens a moment later: one whose
        # environment asks for arming gets a few seconds to do so.
        armed = _target_environ(pid).get("PYSAMPLE_ARM", "") not in ("", "0", "no", "false")
        give_up = time.monotonic() + (5.0 if armed else 0.0)
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            try:
                self.sock.connect(addr)
                break
            except OSError as e:
                self.sock.close()
                if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                    raise ToolError("cannot connect to process %d (%s): %s"
                                    % (pid, self.shown, e.strerror or e))
                if time.monotonic() >= give_up or not _exists(pid):
                    raise _not_armed(pid, self.shown)
                time.sleep(0.05)
        self._buf = b""

    def close(self):
        self.sock.close()

    def send(self, verb, **keys):
        words = [MAGIC, verb] + ["%s=%d" % (k, v) for k, v in sorted(keys.items()) if v is not None]
        try:
            self.sock.sendall((" ".join(words) + "\n").encode("ascii"))
        except (BrokenPipeError, ConnectionResetError):
            raise self.closed_without_answer()

    def _fill(self, n):
        while len(self._buf) < n:
            try:
                chunk = self.sock.recv(1 << 20)
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
        return ToolError("process %d closed the connection without an answer: it accepts only its own "
                         "user (uid %d; you are uid %d), or it is exiting"
                         % (self.pid, _target_uid(self.pid), os.geteuid()))

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
            elif kind == "ok":
                r.text = payload.decode("utf-8", "replace")
                return r
            elif kind == "err":
                raise ToolError("process %d: %s" % (self.pid, payload.decode("utf-8", "replace")))


def request(pid, verb, control_dir=None, timeout=None, **keys):
    conn = Connection(pid, control_dir, timeout)
    try:
        conn.send(verb, **keys)
        return conn.reply()
    finally:
        conn.close()


def describe_quality(meta):
    """One line: what the profile is worth."""
    if not meta:
        return ""
    parts = []
    if meta.get("python"):
        parts.append("Python %s" % meta["python"])
    if meta.get("mode"):
        parts.append("%s-clock" % meta["mode"])
    try:
        req = int(meta.get("requested_rate_hz", "0"))
        got = float(meta.get("achieved_rate_hz", "0"))
        if req:
            parts.append("%.1f of %d Hz" % (got, req))
    except ValueError:
        pass
    dropped = sum(int(meta.get(k, "0") or 0) for k in
                  ("dropped_unreadable", "dropped_inconsistent", "dropped_other"))
    parts.append("%s samples" % meta.get("samples", "?"))
    parts.append("%d dropped" % dropped)
    if int(meta.get("truncated_stacks", "0") or 0):
        parts.append("%s truncated" % meta["truncated_stacks"])
    if float(meta.get("budget_pct", "0") or 0):
        parts.append("budget %s%% (%s rate changes)" % (meta["budget_pct"], meta.get("budget_adjustments", "0")))
    return ", ".join(parts)


def low_rate_warning(meta):
    """The line to print when the achieved rate fell below 90% of the
    requested one, or None."""
    try:
        req = int(meta.get("requested_rate_hz", "0"))
        got = float(meta.get("achieved_rate_hz", "0"))
    except ValueError:
        return None
    if req and got < 0.9 * req:
        why = " (the CPU budget lowered it)" if int(meta.get("budget_adjustments", "0") or 0) else ""
        return ("%s: the achieved rate %.1f Hz is below 90%% of the requested %d Hz%s: the profile "
                "has fewer samples than asked" % (PROG, got, req, why))
    return None
