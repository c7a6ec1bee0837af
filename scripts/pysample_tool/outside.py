# outside.py - `dump`, `record` and `top --pid` on a process that was not
# started armed: read from outside by pysample-attach (docs/attach.md).
#
# pysample-attach answers on its stdout in the control protocol's frames,
# so a Connection reads it as it reads an armed process's socket; only how
# the answer is asked for differs (its arguments instead of a request line).
# Which way a pid is read: armed when libpysample is in its maps, from
# outside when it is not; when its maps cannot be read here (another uid),
# armed first, and from outside if nothing answers, whose refusal then
# says what reading it needs.
#
# SPDX-License-Identifier: MIT

import os
import subprocess
import sys

from . import peercheck, remote
from .common import PROG, ToolError
from .launch import DEFAULT_RATE  # one default for every way a process is read

ATTACH = "pysample-attach"
FOREVER_MS = 24 * 3600 * 1000


def attach_binary():
    """pysample-attach beside the library the tool uses, or None.
    PYSAMPLE_ATTACH names another one (tests)."""
    explicit = os.environ.get("PYSAMPLE_ATTACH")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    from .library import find_library
    lib, _places = find_library()
    if lib is None:
        return None
    path = os.path.join(os.path.dirname(lib), ATTACH)
    return path if os.access(path, os.X_OK) else None


def _argv(pid, verb, keys):
    """pysample-attach's arguments for a request, or ToolError for what
    only an armed process offers."""
    for key, what in (("cpu", "--mode cpu"), ("native", "--native"), ("async", "--async")):
        if keys.get(key):
            raise ToolError("%s needs the library inside process %d, which was not started armed: "
                            "leave it out, or start the process with LD_PRELOAD=<libpysample.so> "
                            "PYSAMPLE_ARM=1 (docs/attach.md)" % (what, pid))
    rate = keys.get("rate") or DEFAULT_RATE
    if verb == "dump":
        return ["dump", str(pid)]
    if verb == "record":
        return ["record", str(pid), str(rate), str(int((keys.get("duration") or 10) * 1000))]
    if verb == "top":
        return ["record", str(pid), str(rate), str(FOREVER_MS), str(keys.get("interval") or 1000)]
    raise ToolError("%s does not apply to a process that was not started armed" % verb)


class OutsideConnection(remote.Connection):
    """pysample-attach's answer read as an armed process's (remote.Connection)."""

    def __init__(self, pid, verb, keys, binary):
        argv = [binary] + _argv(pid, verb, keys)
        self.said = False
        self.pid = pid
        self.on_started = None
        self.shown = "pysample-attach"
        self._buf = b""
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        except OSError as e:
            raise ToolError("cannot run %s: %s" % (binary, e.strerror or e))

    def send(self, verb, **keys):
        pass  # asked for by its arguments

    def _fill(self, n):
        while len(self._buf) < n:
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:
                return False
            self._buf += chunk
        return True

    def frame(self):
        """remote.Connection.frame, and the way used said once it is sure:
        a refusal (err) is the only line then."""
        f = remote.Connection.frame(self)
        if not self.said and f is not None and f[0] != "err":
            self.said = True
            say_outside(self.pid)
        return f

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.stdout.close()
        self.proc.wait()


def is_outside(pid):
    """True if pid is to be read from outside (libpysample is not in its
    maps), False if armed, None if its maps cannot be read here."""
    if not sys.platform.startswith("linux"):
        return False
    maps = remote._maps_say(pid)
    return None if maps is None else maps == "not loaded"


def say_outside(pid):
    sys.stderr.write("%s: process %d is not armed: reading it from outside (process_vm_readv; "
                     "it is never stopped)\n" % (PROG, pid))


def connect(pid, verb, keys, control_dir=None, timeout=None):
    """A connection that answers verb: the armed process's socket, or
    pysample-attach reading it from outside (said on stderr)."""
    if pid <= 0:
        raise ToolError("--pid must be a process id, not %d" % pid)
    if not remote._exists(pid):
        raise ToolError("no process %d" % pid)
    outside = is_outside(pid)
    armed_error = None
    if not outside:
        try:
            return remote.Connection(pid, control_dir, timeout=timeout)
        except ToolError as e:
            if outside is False:
                raise
            armed_error = e
        except TypeError as e:
            # remote._not_armed's line for another uid has one argument
            # too many (a bug of remote.py, reported): from outside, the
            # refusal is said right.
            if outside is False:
                raise
            armed_error = ToolError("process %d: %s" % (pid, e))
    if armed_error is not None and outside is None and _listening(pid, control_dir):
        # Its maps are closed to us, so reading it from outside would fail
        # too (that needs more than reading maps), and something listens on
        # its control name: the armed answer's reason is the one to give
        # (a process armed as root that then changed its user).
        raise armed_error
    binary = attach_binary()
    if binary is None:
        raise armed_error or ToolError("process %d was not started armed, and %s, which reads such a "
                                       "process from outside, is not installed beside the library"
                                       % (pid, ATTACH))
    return OutsideConnection(pid, verb, keys, binary)


def _listening(pid, control_dir):
    """True if a socket listens on one of pid's control names."""
    try:
        return any(peercheck.listeners(shown) for _addr, shown in remote.addresses(pid, control_dir))
    except (OSError, ToolError):
        return False


def request(pid, verb, control_dir=None, on_started=None, **keys):
    """remote.request for a process armed or not."""
    if is_outside(pid) is False:
        return remote.request(pid, verb, control_dir, on_started=on_started, **keys)
    conn = connect(pid, verb, keys, control_dir)
    return conn.request(verb, on_started=on_started, **keys)
