# record.py - `pysample record`: runs a command with libpysample preloaded,
# collects the profile of every Python process it starts, converts and names
# them, and prints a summary.
#
# The library is the only owner of profile names.  record gives it a template
# in a private temporary directory (PRIVATE_TEMPLATE) and afterwards takes
# every profile found there, whatever the library called it: a forked child's
# pysample-<pid>.txt, the image an exec started in the same process
# (pysample-<pid>.1.txt, docs/processes.md), names a later library may use.
# The only part of a name record reads is the %p it put in the template.
#
# SPDX-License-Identifier: MIT

import argparse
import collections
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from . import options, remote, sip, tree as process_tree
from .collapsed import describe, parse_collapsed
from .common import PROG, ToolError, file_mode, write_output
from .convert import convert_bytes, is_binary
from .elfsyms import LoadedObjects
from .quality import SIDECAR_SUFFIX, read_sidecar
from . import timeline
from . import lib
from .library import LIB_BASENAMES, SCRIPT_DIR_ENV, demo_path
from .top import format_top

DEFAULT_RATE = 100  # the library's default PYSAMPLE_RATE

# record --duration with a COMMAND: how often record looks for the profiles
# the library writes at that many seconds, and how long past them it waits
# for the started process's before it takes what there is (a shell that
# started Python as a child writes none of its own).
POLL_INTERVAL = 0.1
DURATION_GRACE = 2.0

EXTENSIONS = {"collapsed": ".txt", "svg": ".svg", "speedscope": ".json", "pprof": ".pb"}
FORMAT_HINTS = {
    "collapsed": "pysample flamegraph %s -o flame.svg",
    "svg": "open %s in a web browser",
    "speedscope": "load %s at https://www.speedscope.app",
    "pprof": "go tool pprof -http=: %s",
}

PRIVATE_TEMPLATE = "pysample-%p.txt"
TIMELINE_FORMATS = ("speedscope", "collapsed")
_PRIVATE_NAME_RE = re.compile(r"^pysample-(\d+)(.*?)(?:\.txt)?$", re.S)


NAME = "record"
HELP = "run a command with the profiler preloaded"
USAGE = ("%(prog)s [-o FILE] [-d SECONDS] [--rate HZ] [--mode wall|cpu] [--gil] [--async] [--native[=all]] "
         "[--timeline] [--format FORMAT] [--no-subprocesses] [--python PY] [-q] [-- COMMAND [ARG...]]\n       %(prog)s --pid PID [-s] [-d SECONDS] [-o FILE] [--rate HZ] [--format FORMAT]")
DESCRIPTION = ("Runs COMMAND with libpysample preloaded (LD_PRELOAD, or DYLD_INSERT_LIBRARIES on macOS), "
               "writes one profile per Python process and prints a summary to stderr. Exits with the exit "
               "status of COMMAND. Without COMMAND it profiles a small bundled demo program.  A COMMAND "
               "whose first word ends in .py is run with --python.  With --pid, records the running process PID "
               "instead, for --duration seconds: through the library inside it if it was %s (docs/kubernetes.md), "
               "else from outside, which needs the right to trace it (docs/attach.md)." % remote.ARMED)
EPILOG = ("The library is found through PYSAMPLE_LIB, else next to this script (source checkout: build/lib; "
          "build dir: <builddir>/lib; install: <prefix>/lib*). Other PYSAMPLE_* variables in the "
          "environment (e.g. PYSAMPLE_LINES=0, PYSAMPLE_MAX_DEPTH) reach the library unchanged.")


def add_options(parser):
    options.output(parser, metavar="FILE",
                   help="where to write the profile; %%p is replaced by the process id, %%h by the host "
                        "name, %%t by the start time (default: pysample-<pid>.txt, .svg, .json or .pb "
                        "in the current directory). Without %%p and with several processes, the others "
                        "get .<pid> before the extension.")
    options.rate(parser, help="samples per second, 1..100000 (default: $PYSAMPLE_RATE or 100)")
    parser.add_argument("--mode", choices=("wall", "cpu"),
                        help="wall: sample threads whatever they do (default); cpu: only while on a CPU")
    parser.add_argument("-i", "--idle", action="store_true",
                        help="py-spy's --idle: include idle threads, which is --mode wall (the default)")
    parser.add_argument("-g", "--gil", action="store_true",
                        help="only threads holding the GIL (PYSAMPLE_GIL=1), like py-spy's --gil")
    parser.add_argument("--async", dest="async_tasks", action="store_true",
                        help="attribute samples to asyncio tasks (PYSAMPLE_ASYNC=1): each task's stack "
                             "under [task NAME \"CORO\"] markers; in wall mode waiting tasks count too")
    parser.add_argument("--native", nargs="?", const="1", choices=("1", "all"),
                        help="native frames too (PYSAMPLE_NATIVE): C extensions, ctypes calls, the "
                             "system call or GIL wait a thread is in, with the Python frames in place "
                             "of the interpreter's; --native=all also shows the interpreter's own "
                             "frames (Linux x86-64)")
    # py-spy's -n takes no value: `record -n app.py` must not read app.py as one.
    parser.add_argument("-n", dest="native", action="store_const", const="1",
                        help="--native (py-spy's -n; it takes no value)")
    options.addresses(parser)
    parser.add_argument("--nolineno", action="store_true",
                        help="one frame per function, no line numbers (PYSAMPLE_LINES=0; py-spy's name)")
    subprocesses = parser.add_mutually_exclusive_group()
    subprocesses.add_argument("-s", "--subprocesses", dest="subprocesses", action="store_true", default=None,
                              help="keep the profiles of every Python process COMMAND starts (the default); "
                                   "with --pid, record every process below PID too, also those forked "
                                   "during the recording")
    subprocesses.add_argument("--no-subprocesses", dest="subprocesses", action="store_false",
                              help="keep only the profiles of the process record started (and of a "
                                   "Python it execs); its children still run with the library")
    parser.add_argument("-t", "--threads", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--nonblocking", action="store_true", help=argparse.SUPPRESS)
    options.pyspy_compat(parser, function=True, capture=True)
    options.output_format(parser)
    parser.add_argument("--timeline", action="store_true",
                        help="keep the samples in time order too (PYSAMPLE_TIMELINE=1): --format "
                             "speedscope then shows when each stack ran (its Time Order view), "
                             "collapsed puts <file>.timeline beside the profile (docs/format.md)")
    parser.add_argument("--python", metavar="PY",
                        help="interpreter for the demo and for a COMMAND that starts with a .py file "
                             "(default: %s)" % (sys.executable or "python3"))
    parser.add_argument("-q", "--quiet", action="store_true", help="print no summary")
    remote.add_pid_option(parser, help="record this running process (armed, or read from outside: "
                                       "docs/attach.md) instead of running COMMAND")
    parser.add_argument("-d", "--duration", type=options.seconds, metavar="SECONDS", default=None,
                        help="how long to record: with --pid (default: 10); with COMMAND, the profiles "
                             "of its first SECONDS are written then and COMMAND runs on (default: "
                             "until it exits)")
    options.trailing_command(parser)


# ---------------------------------------------------------------------------
# Running the command
# ---------------------------------------------------------------------------

def run(args):
    args.format = options.choose_format(args.format, args.output)
    if args.idle:
        if args.mode == "cpu":
            raise ToolError("--idle (include idle threads) contradicts --mode cpu: give one of them")
        args.mode = "wall"
    if args.pid is not None:
        if args.command_argv:
            raise ToolError("--pid records a running process: give no COMMAND")
        if args.gil:
            raise ToolError("--gil cannot change a running process's PYSAMPLE_GIL")
        if args.nolineno:
            raise ToolError("--nolineno cannot change a running process's PYSAMPLE_LINES")
        if args.timeline:
            raise ToolError("--timeline records a COMMAND it runs (PYSAMPLE_TIMELINE), not a running process")
        if args.subprocesses:
            from . import pidtree
            return pidtree.record_tree(args, save_remote_profile)
        return record_pid(args)
    if args.timeline and args.format not in TIMELINE_FORMATS:
        raise ToolError("--timeline goes with --format %s" % " or ".join(TIMELINE_FORMATS))
    command = command_to_run(args)
    library = library_or_fail()

    hostname = socket.gethostname()
    start = int(time.time())
    target_dir = os.getcwd()
    if args.output is not None:
        target_dir = os.path.dirname(os.path.abspath(expand_template(args.output, 0, hostname, start)))
    _check_writable(target_dir, args.output)

    workdir = tempfile.mkdtemp(prefix="pysample-record-")
    env = _environment(library, workdir, args)
    rate = args.rate
    if rate is None:
        try:
            rate = int(env.get("PYSAMPLE_RATE") or DEFAULT_RATE)
        except ValueError:
            rate = DEFAULT_RATE
    mode = env.get("PYSAMPLE_MODE") or "wall"

    keep = []
    delivered_at = []
    tree = process_tree.Tree()

    def deliver(main_pid, returncode):
        written = [w._replace(command=tree.command(w.pid, w.image)) for w in collect(workdir)]
        if args.subprocesses is False:
            written = _only_started_process(written, main_pid, args.quiet)
        if returncode is not None and returncode < 0:
            sys.stderr.write("%s: `%s` was killed by %s\n"
                             % (PROG, _describe_command(command), _signal_name(-returncode)))
        if not written:
            if returncode is not None and returncode < 0:
                sys.stderr.write("%s: no profile was written: the process died before it could write "
                                 "one (see docs/troubleshooting.md)\n" % PROG)
            else:
                old = _old_python(command)
                if old:
                    sys.stderr.write("%s: no profile was written: `%s` runs Python %s, which libpysample "
                                     "does not profile (3.9 or newer)\n"
                                     % (PROG, _describe_command(command), old))
                else:
                    sys.stderr.write(
                        "%s: no profile was written: is `%s` a Python program, and did it run long "
                        "enough for one sample (1/%d s)? See docs/troubleshooting.md (\"Nothing "
                        "written\").\n" % (PROG, _describe_command(command), rate))
            return
        try:
            if not _finish(args, command, written, main_pid, rate, mode, hostname, start, objects.resolve):
                keep.append(True)
        except Exception as e:
            # After the run nothing may lose the profiles: whatever went
            # wrong, they stay where the library wrote them.
            keep.append(True)
            sys.stderr.write("%s: could not deliver the profiles (%s: %s)\n" % (PROG, type(e).__name__, e))

    # --native: the objects the processes map, read while they run, name
    # more of the native frames the library left as addresses (elfsyms.py).
    objects = LoadedObjects()

    def poll(child, elapsed):
        tree.look()
        tree.reap(child.pid)
        if args.native:
            objects.scan(child.pid)
        if args.duration:
            at_duration(child, elapsed)

    def at_duration(child, elapsed):
        """--duration: once the started process has written its profile (the
        library's flush at that many seconds), deliver what is there."""
        if delivered_at or elapsed < args.duration:
            return
        written = collect(workdir)
        mine = [w for w in written if w.pid == child.pid]
        if not mine and (not written or elapsed < args.duration + DURATION_GRACE):
            return
        if tree.flushes_due(set(w.pid for w in written), args.duration, elapsed, DURATION_GRACE):
            return
        delivered_at.append(elapsed)
        deliver(child.pid, None)
        if not args.quiet:
            sys.stderr.write("%s: recorded the first %d s; `%s` runs on (record waits for it; its later "
                             "samples are not kept)\n"
                             % (PROG, args.duration, _describe_command(command)))

    left = []
    try:
        process_tree.become_subreaper()
        returncode, main_pid = _run(command, env, poll, capture=args.capture)
        left = tree.wait_for_pythons(main_pid)
        if not delivered_at:
            deliver(main_pid, returncode)
        elif returncode < 0:
            sys.stderr.write("%s: `%s` was killed by %s\n"
                             % (PROG, _describe_command(command), _signal_name(-returncode)))
    finally:
        tree.say_left(left, _describe_command(command), workdir)
        if keep:
            sys.stderr.write("%s: the profiles not delivered are kept in %s\n" % (PROG, workdir))
        elif not left:
            shutil.rmtree(workdir, ignore_errors=True)
    return _exit_status(returncode)


def _check_writable(directory, output):
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


def _old_python(command):
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


def _environment(library, workdir, args):
    env = preload_environment(library)
    env["PYSAMPLE_OUTPUT"] = os.path.join(workdir.replace("%", "%%"), PRIVATE_TEMPLATE)
    env["PYSAMPLE_FORMAT"] = "collapsed"
    # The library's quality figures beside each profile (<name>.quality.json):
    # record reads them into the converted formats and the summary.
    env["PYSAMPLE_QUALITY"] = "1"
    if args.rate is not None:
        env["PYSAMPLE_RATE"] = str(args.rate)
    if args.mode is not None:
        env["PYSAMPLE_MODE"] = args.mode
    if args.async_tasks:
        env["PYSAMPLE_ASYNC"] = "1"
    if getattr(args, "native", None):
        env["PYSAMPLE_NATIVE"] = args.native
    if getattr(args, "gil", False):
        env["PYSAMPLE_GIL"] = "1"
    if getattr(args, "nolineno", False):
        env["PYSAMPLE_LINES"] = "0"
    if getattr(args, "duration", None):
        # Every process writes its profile this many seconds after its start
        # (and again every as many), which record takes once.
        env["PYSAMPLE_FLUSH_INTERVAL"] = str(args.duration)
    if getattr(args, "timeline", False):
        env["PYSAMPLE_TIMELINE"] = "1"
    return env


def _run(command, env, poll=None, capture=False):
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


# ---------------------------------------------------------------------------
# The profiles the library wrote, and where they go
# ---------------------------------------------------------------------------

class Written(collections.namedtuple("Written", "pid extra stem path command")):
    """A profile the library wrote in record's private directory.

    pid: the process, from the %p of the template (None for a name without
    one); extra: whatever else the library put in the name (".1" for the
    image an exec started), "" for a process's first profile; stem: the
    library's name without ".txt"; path: where it is; command: what the
    process ran (tree.py), None when record did not see it run."""

    __slots__ = ()

    @property
    def who(self):
        """The process as the summary names it."""
        return "pid %s" % (self.pid if self.pid is not None else "? (%s)" % self.stem)

    @property
    def named(self):
        """The process and the command it ran, for the summary."""
        return "%s (`%s`)" % (self.who, self.command) if self.command else self.who

    @property
    def image(self):
        """0 for a process's first profile, n for its .n (the n-th exec)."""
        m = re.match(r"^\.(\d+)$", self.extra)
        return int(m.group(1)) if m else 0

    def sort_key(self, main_pid):
        numbers = [int(n) for n in re.findall(r"\d+", self.extra)]
        return (self.pid != main_pid, self.pid is None, self.pid or 0, numbers, self.extra, self.stem)


def collect(workdir):
    """Every profile in the private directory.  Names starting with a dot
    are the library's temporary files (a process killed while writing)."""
    written = []
    for name in os.listdir(workdir):
        path = os.path.join(workdir, name)
        if name.startswith(".") or not os.path.isfile(path) or name.endswith(SIDECAR_SUFFIX) \
                or name.endswith(timeline.SUFFIX):
            continue
        stem = name[:-len(".txt")] if name.endswith(".txt") else name
        m = _PRIVATE_NAME_RE.match(name)
        if m:
            written.append(Written(int(m.group(1)), m.group(2), stem, path, None))
        else:
            written.append(Written(None, "." + stem, stem, path, None))
    return written


def _only_started_process(written, main_pid, quiet):
    """--no-subprocesses: the profiles of the process record started (its
    first image and those of Pythons it exec'd), not its children's."""
    kept = [w for w in written if w.pid == main_pid]
    if len(kept) < len(written) and not quiet:
        others = len(set(w.pid if w.pid is not None else w.stem for w in written if w.pid != main_pid))
        sys.stderr.write("%s: --no-subprocesses: left out the profiles of %d other process%s\n"
                         % (PROG, others, "" if others == 1 else "es"))
    return kept


def host_component(hostname):
    """%h as the library writes it: one file name component (a '/' becomes
    '_', a name of only dots '_'s), so that no host name moves a profile to
    another directory (lib/profile/output.c)."""
    if hostname.strip(".") == "":
        return "_" * max(len(hostname), 1)
    return hostname.replace("/", "_")


def expand_template(template, pid, hostname, start):
    """Expands %p %h %t %% the way the library expands PYSAMPLE_OUTPUT,
    which refuses any other %-placeholder (and a lone % at the end): so
    does this, with the library's words."""
    host = host_component(hostname)
    known = {"p": str(pid), "h": host, "t": str(start), "%": "%"}

    def sub(m):
        if m.group(1) not in known:
            raise ToolError("-o '%s' has an unknown %%-placeholder (known: %%p %%h %%t %%%%)" % template)
        return known[m.group(1)]
    return re.sub(r"%(.?)", sub, template)


def _insert_before_ext(path, text):
    stem, ext = os.path.splitext(path)
    return stem + text + ext


def plan_outputs(written, main_pid, output, fmt, hostname, start):
    """{Written: destination}.  Without -o a profile keeps the library's
    name; a template with %p gets each process's pid, and the library's
    extra part before the extension; a name without %p goes to the started
    process's first profile, the others insert .<pid><extra> before the
    extension."""
    ext = EXTENSIONS[fmt]
    plan = {}
    if output is None:
        for w in written:
            plan[w] = os.path.abspath(w.stem + ext)
        return plan
    if re.search(r"%p", output.replace("%%", "")):
        for w in written:
            pid = w.pid if w.pid is not None else w.stem
            plan[w] = os.path.abspath(_insert_before_ext(expand_template(output, pid, hostname, start),
                                                         w.extra if w.pid is not None else ""))
        return plan
    single = expand_template(output, 0, hostname, start)
    for w in written:
        if len(written) == 1 or (w.pid == main_pid and w.extra == ""):
            plan[w] = os.path.abspath(single)
        else:
            pid = "" if w.pid is None else ".%d" % w.pid
            plan[w] = os.path.abspath(_insert_before_ext(single, pid + w.extra))
    return plan


# ---------------------------------------------------------------------------
# Delivering and summing up
# ---------------------------------------------------------------------------

def _finish(args, command, written, main_pid, rate, mode, hostname, start, resolve=None):
    fmt = args.format
    plan = plan_outputs(written, main_pid, args.output, fmt, hostname, start)
    profiles = []
    problems = []
    delivered = []
    undelivered = 0
    for w in sorted(written, key=lambda w: w.sort_key(main_pid)):
        destination = plan[w]
        try:
            profile = options.grouped(parse_collapsed(w.path), args, resolve)
        except ToolError as e:
            problems.append("%s: %s" % (w.who, str(e).replace(w.path + ": ", "").replace(w.path, "profile")))
            profile = None
            if fmt != "collapsed":
                continue
        try:
            if args.timeline and profile is not None:
                problems.extend(_deliver_timeline(w, destination, fmt, file_mode(os.environ)))
            else:
                _deliver(w, profile, destination, fmt, rate, mode, command, file_mode(os.environ))
        except (ToolError, OSError) as e:
            undelivered += 1
            reason = str(e) if isinstance(e, ToolError) else "cannot write %s: %s" % (destination, e.strerror or e)
            problems.append("%s: %s; its profile is kept at %s" % (w.who, reason, w.path))
            continue
        if profile is not None:
            profile.path = destination
            profiles.append((w, profile))
        delivered.append((w, destination, profile))

    if args.quiet:
        for problem in problems:
            sys.stderr.write("%s: %s\n" % (PROG, problem))
        return undelivered == 0
    err = sys.stderr
    err.write("%s: profiled `%s` at %d Hz (%s-clock time)\n"
              % (PROG, _describe_command(command), rate, "CPU" if mode == "cpu" else "wall"))
    for w, path, profile in delivered:
        what = describe(profile) if profile else "no samples"
        quality = remote.describe_quality(read_sidecar(w.path)) if profile else ""
        if quality:
            what += " (%s)" % quality
        err.write("%s: %s: %s -> %s\n" % (PROG, w.named, what, path))
    for problem in problems:
        err.write("%s: %s\n" % (PROG, problem))
    if profiles:
        err.write("%s: top functions by self samples%s:\n" % (PROG, _scope(w for w, _ in profiles)))
        err.write(format_top([p for _, p in profiles], 10, indent="  "))
        # The busiest process's: a server's master mostly waits for its workers.
        busiest = max((p.total, -i, path) for i, (_, path, p) in enumerate(delivered) if p)[2]
        err.write("%s: next: %s\n" % (PROG, FORMAT_HINTS[fmt] % _shell_quote(os.path.relpath(busiest))))
    return undelivered == 0


def _deliver(w, profile, destination, fmt, rate, mode, command, permissions):
    """Moves or converts one profile to its destination, with the
    permissions PYSAMPLE_FILE_MODE gives the library's own files.  It stays
    in the private directory if this fails."""
    if fmt == "collapsed":
        os.chmod(w.path, permissions)
        shutil.move(w.path, destination)
        _copy_sidecar(w.path, destination, permissions)
        return
    source = profile.path
    profile.path = destination      # speedscope's name for it
    try:
        data = convert_bytes(profile, fmt, rate=rate, mode="cpu" if mode == "cpu" else "wall",
                             quality=read_sidecar(w.path), title="pysample: %s" % _describe_command(command),
                             source="the profile of %s" % w.who)
    finally:
        profile.path = source
    write_output(destination, data, binary=is_binary(fmt), mode=permissions)


def _copy_sidecar(source, destination, permissions):
    """The quality figures go beside a collapsed profile (<profile>.quality.json):
    `diff --time` reads the length of a sample from them.  A copy: the
    summary still reads them where the library wrote them."""
    side = source + SIDECAR_SUFFIX
    if os.path.isfile(side):
        shutil.copyfile(side, destination + SIDECAR_SUFFIX)
        os.chmod(destination + SIDECAR_SUFFIX, permissions)


def _deliver_timeline(w, destination, fmt, permissions):
    """record --timeline: the profile and its .timeline beside it
    (collapsed), or speedscope's time-ordered profiles of the timeline.
    Returns what the summary should say; raises ToolError when there is
    nothing to deliver (the profile then stays in the private directory)."""
    side = w.path + timeline.SUFFIX
    if fmt == "collapsed":
        os.chmod(w.path, permissions)
        shutil.move(w.path, destination)
        if not os.path.isfile(side):
            return ["%s: no timeline was written beside the profile" % w.who]
        os.chmod(side, permissions)
        shutil.move(side, destination + timeline.SUFFIX)
        return []
    tl = timeline.parse_timeline(side)
    doc = timeline.to_speedscope_timeline(tl, name=os.path.basename(destination),
                                          quality=read_sidecar(w.path))
    write_output(destination, (json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
                 .encode("utf-8"), binary=False, mode=permissions)
    if not tl.header.get("dropped_records"):
        return []
    return ["%s: the timeline met its bound (PYSAMPLE_TIMELINE_MAX=%d records): the last %d samples, "
            "from %.3f s on, are in the totals but not in time order"
            % (w.who, tl.header.get("max_records", 0), tl.header.get("dropped_samples", 0),
               tl.header.get("first_dropped_us", 0) / 1e6)]


def _scope(written):
    """What the top table sums: one profile, every process, or the profiles
    of fewer processes (an exec gives one process a second profile)."""
    written = list(written)
    processes = len(set(w.pid if w.pid is not None else w.stem for w in written))
    if len(written) == 1:
        return ""
    if processes == len(written):
        return " (all %d processes)" % processes
    return " (all %d profiles of %d process%s)" % (len(written), processes, "" if processes == 1 else "es")


def _describe_command(command):
    command = [os.path.basename(command[0])] + list(command[1:])
    if len(command) == 2 and command[1] == demo_path():
        command[1] = "demo.py"
    text = " ".join(" ".join(command).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal %d" % signum


def _exit_status(returncode):
    return 128 - returncode if returncode < 0 else returncode


def _shell_quote(text):
    if re.match(r"^[A-Za-z0-9_./=:,+-]+$", text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


# ---------------------------------------------------------------------------
# A running, armed process (--pid)
# ---------------------------------------------------------------------------

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
    from . import quality
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
