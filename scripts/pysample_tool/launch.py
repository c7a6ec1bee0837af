# launch.py - starting a command with libpysample preloaded: the command
# line (the demo, --python before a .py), the environment that preloads the
# library, the run itself with Ctrl-C and SIGTERM passed on, and what the
# summary says of the command.  record and top (-- COMMAND) both launch.
#
# SPDX-License-Identifier: MIT

import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import lib, sip
from .common import PROG, ToolError
from .library import LIB_BASENAMES, SCRIPT_DIR_ENV, demo_path

DEFAULT_RATE = 100  # the library's default PYSAMPLE_RATE

# How often the run calls its poll while the command runs.
POLL_INTERVAL = 0.1


def check_writable(directory, output):
    """Refuses, before the command runs, a destination directory that
    cannot take a file: missing, not writable, a read-only mount.  A file is
    created and removed there, which asks the kernel itself (os.access
    answers for the real uid and knows nothing of read-only mounts)."""
    what = output if output is not None else "profiles to the current directory"
    if not os.path.isdir(directory):
        raise ToolError("cannot write %s: directory %s does not exist" % (what, directory))
    try:
        fd, probe = tempfile.mkstemp(prefix=".pysample-probe-", dir=directory)
    except OSError as e:
        raise ToolError("cannot write %s: %s: %s (the command was not started)"
                        % (what, directory, e.strerror or e))
    os.close(fd)
    os.unlink(probe)


def _interpreter_of(command):
    """The Python interpreter command runs: command[0] when it is named
    python*, else the one its #! line names, else None."""
    path = shutil.which(command[0]) if command else None
    if path is None:
        return None
    if re.match(r"python[0-9.]*[a-z]?$", os.path.basename(path)):
        return path
    try:
        with open(path, "rb") as f:
            first = f.readline(256).decode("utf-8", "replace")
    except OSError:
        return None
    words = first[2:].split() if first.startswith("#!") else []
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        words = words[1:]
    if words and re.match(r"python[0-9.]*[a-z]?$", os.path.basename(words[0])):
        return shutil.which(words[0])
    return None


def old_python(command):
    """"3.8", "2.7": the version of the Python command runs when it is one
    libpysample does not profile (older than 3.9), else None.  Asked of
    the interpreter itself, without the library (Python 2 can answer)."""
    python = _interpreter_of(command)
    if python is None:
        return None
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES") and not k.startswith("PYSAMPLE_")}
    try:
        out = subprocess.run([python, "-c", "import sys; sys.stdout.write('%d.%d' % sys.version_info[:2])"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30).stdout
        major, minor = map(int, out.decode().split("."))
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return "%d.%d" % (major, minor) if (major, minor) < (3, 9) else None


def command_to_run(args):
    """The command line to run: the demo without COMMAND, --python before a
    .py.  Refuses what macOS would start without the library."""
    command = args.command_argv
    python = getattr(args, "python", None) or sys.executable or "python3"
    runs_python = not command or command[0].endswith(".py")
    if sip.on_macos():
        sip.refuse_protected(python if runs_python else command[0])
    if not command:
        demo = demo_path()
        if not os.path.isfile(demo):
            raise ToolError("no COMMAND given and the demo program %s is missing" % demo)
        if not args.quiet:
            sys.stderr.write("%s: no command given: profiling the bundled demo (%s)\n" % (PROG, demo))
        return [python, demo]
    if runs_python:
        return [python] + command
    return command


def preload_environment(library):
    """Our environment with the library first in the preload list (an
    existing list is kept after it, without another libpysample)."""
    env = dict(os.environ)
    env.pop(SCRIPT_DIR_ENV, None)
    preload_var = "DYLD_INSERT_LIBRARIES" if sys.platform == "darwin" else "LD_PRELOAD"
    existing = [p for p in re.split(r"[: ]", env.get(preload_var, "")) if p]
    existing = [p for p in existing if os.path.basename(p) not in LIB_BASENAMES]
    env[preload_var] = ":".join([library] + existing)
    return env


def library_or_fail():
    return lib.require_library()


def run_command(command, env, poll=None, capture=False):
    """Runs the command; SIGINT (Ctrl-C) reaches it through the terminal, and
    we wait for it to finish writing its profile.  SIGTERM and SIGHUP sent
    to us are passed on.  poll(child, seconds since the start), if given, is
    called every POLL_INTERVAL while the command runs.  capture (py-spy's
    --capture): the command reads and writes nothing of ours."""
    quiet = subprocess.DEVNULL if capture else None
    try:
        child = subprocess.Popen(command, env=env, stdin=quiet, stdout=quiet, stderr=quiet)
    except OSError as e:
        raise ToolError("cannot run %s: %s" % (command[0], e.strerror or e),
                        status=126 if e.errno == errno.EACCES else 127)
    previous = {}

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous[signum] = signal.signal(signum, forward)
    started = time.monotonic()
    try:
        while True:
            try:
                returncode = child.wait(timeout=POLL_INTERVAL if poll else None)
                break
            except subprocess.TimeoutExpired:
                poll(child, time.monotonic() - started)
            except InterruptedError:
                continue
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return returncode, child.pid



def describe_command(command):
    command = [os.path.basename(command[0])] + list(command[1:])
    if len(command) == 2 and command[1] == demo_path():
        command[1] = "demo.py"
    text = " ".join(" ".join(command).split())
    return text if len(text) <= 60 else text[:57] + "..."


def signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal %d" % signum


def exit_status(returncode):
    return 128 - returncode if returncode < 0 else returncode

