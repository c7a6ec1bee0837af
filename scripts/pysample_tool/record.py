# record.py - `pysample record`: runs a command with libpysample preloaded,
# collects the profile of every Python process it starts, converts and names
# them, and prints a summary.  One Recording holds a run; launch.py starts
# the command, deliver.py takes the profiles where they go, recordpid.py
# records a running process (--pid).
#
# SPDX-License-Identifier: MIT

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time

from . import deliver, launch, options, remote, tree as process_tree
from .common import PROG, ToolError
from .elfsyms import LoadedObjects
from .launch import describe_command, signal_name

# record --duration with a COMMAND: how long past that many seconds record
# waits for the started process's profile before it takes what there is (a
# shell that started Python as a child writes none of its own).
DURATION_GRACE = 2.0

TIMELINE_FORMATS = ("speedscope", "collapsed")


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
    options.mode(parser, help="wall: sample threads whatever they do (default); cpu: only while on a CPU")
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




def run(args):
    args.format = options.choose_format(args.format, args.output)
    if args.idle:
        if args.mode == "cpu":
            raise ToolError("--idle (include idle threads) contradicts --mode cpu: give one of them")
        args.mode = "wall"
    if args.pid is not None:
        return _run_pid(args)
    if args.timeline and args.format not in TIMELINE_FORMATS:
        raise ToolError("--timeline goes with --format %s" % " or ".join(TIMELINE_FORMATS))
    return Recording(args).run()


def _run_pid(args):
    """record --pid: refuses what cannot change a running process."""
    if args.command_argv:
        raise ToolError("--pid records a running process: give no COMMAND")
    if args.gil:
        raise ToolError("--gil cannot change a running process's PYSAMPLE_GIL")
    if args.nolineno:
        raise ToolError("--nolineno cannot change a running process's PYSAMPLE_LINES")
    if args.timeline:
        raise ToolError("--timeline records a COMMAND it runs (PYSAMPLE_TIMELINE), not a running process")
    from . import recordpid
    if args.subprocesses:
        from . import pidtree
        return pidtree.record_tree(args, recordpid.save_remote_profile)
    return recordpid.record_pid(args)


def _environment(library, workdir, args):
    """The command's environment: the library preloaded, writing collapsed
    profiles with their quality figures to workdir, and record's options
    as PYSAMPLE_* settings."""
    env = launch.preload_environment(library)
    env["PYSAMPLE_OUTPUT"] = os.path.join(workdir.replace("%", "%%"), deliver.PRIVATE_TEMPLATE)
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


class Recording:
    """One `record COMMAND`: the command, the library's settings it runs
    with, the private directory the library writes to, the processes seen
    (tree.py), the objects they map (--native), and whether the profiles
    were delivered (--duration delivers before the command ends) or must be
    kept where the library wrote them."""

    def __init__(self, args):
        self.args = args
        self.command = launch.command_to_run(args)
        self.library = launch.library_or_fail()
        self.hostname = socket.gethostname()
        self.start = int(time.time())
        target_dir = os.getcwd()
        if args.output is not None:
            target_dir = os.path.dirname(os.path.abspath(
                deliver.expand_template(args.output, 0, self.hostname, self.start)))
        launch.check_writable(target_dir, args.output)
        self.workdir = tempfile.mkdtemp(prefix="pysample-record-")
        self.env = _environment(self.library, self.workdir, args)
        self.rate = _rate(args.rate, self.env)
        self.mode = self.env.get("PYSAMPLE_MODE") or "wall"
        self.tree = process_tree.Tree()
        # --native: the objects the processes map, read while they run, name
        # more of the native frames the library left as addresses (elfsyms.py).
        self.objects = LoadedObjects()
        self.delivered_at = None    # --duration: seconds after the start
        self.keep = False           # a profile could not be delivered

    @property
    def described(self):
        return describe_command(self.command)

    def run(self):
        """Runs the command, delivers, cleans up; the command's exit status."""
        left = []
        try:
            process_tree.become_subreaper()
            returncode, main_pid = launch.run_command(self.command, self.env, self.poll,
                                                      capture=self.args.capture)
            left = self.tree.wait_for_pythons(main_pid)
            if self.delivered_at is None:
                self.deliver(main_pid, returncode)
            elif returncode < 0:
                self._say_killed(returncode)
        finally:
            self.tree.say_left(left, self.described, self.workdir)
            if self.keep:
                sys.stderr.write("%s: the profiles not delivered are kept in %s\n" % (PROG, self.workdir))
            elif not left:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return launch.exit_status(returncode)

    def poll(self, child, elapsed):
        """Called while the command runs (launch.POLL_INTERVAL)."""
        self.tree.look()
        self.tree.reap(child.pid)
        if self.args.native:
            self.objects.scan(child.pid)
        if self.args.duration:
            self.at_duration(child, elapsed)

    def at_duration(self, child, elapsed):
        """--duration: once the started process has written its profile (the
        library's flush at that many seconds), deliver what is there."""
        duration = self.args.duration
        if self.delivered_at is not None or elapsed < duration:
            return
        written = deliver.collect(self.workdir)
        mine = [w for w in written if w.pid == child.pid]
        if not mine and (not written or elapsed < duration + DURATION_GRACE):
            return
        if self.tree.flushes_due(set(w.pid for w in written), duration, elapsed, DURATION_GRACE):
            return
        self.delivered_at = elapsed
        self.deliver(child.pid, None)
        if not self.args.quiet:
            sys.stderr.write("%s: recorded the first %d s; `%s` runs on (record waits for it; its later "
                             "samples are not kept)\n" % (PROG, duration, self.described))

    def deliver(self, main_pid, returncode):
        """The profiles written so far to their destinations, and the summary;
        returncode None while the command still runs."""
        written = [w._replace(command=self.tree.command(w.pid, w.image)) for w in deliver.collect(self.workdir)]
        if self.args.subprocesses is False:
            written = deliver.only_started_process(written, main_pid, self.args.quiet)
        if returncode is not None and returncode < 0:
            self._say_killed(returncode)
        if not written:
            self._say_nothing_written(returncode)
            return
        try:
            if not deliver.deliver(self, written, main_pid):
                self.keep = True
        except Exception as e:
            # After the run nothing may lose the profiles: whatever went
            # wrong, they stay where the library wrote them.
            self.keep = True
            sys.stderr.write("%s: could not deliver the profiles (%s: %s)\n" % (PROG, type(e).__name__, e))

    def _say_killed(self, returncode):
        sys.stderr.write("%s: `%s` was killed by %s\n" % (PROG, self.described, signal_name(-returncode)))

    def _say_nothing_written(self, returncode):
        if returncode is not None and returncode < 0:
            sys.stderr.write("%s: no profile was written: the process died before it could write "
                             "one (see docs/troubleshooting.md)\n" % PROG)
            return
        old = launch.old_python(self.command)
        if old:
            sys.stderr.write("%s: no profile was written: `%s` runs Python %s, which libpysample "
                             "does not profile (3.9 or newer)\n" % (PROG, self.described, old))
        else:
            sys.stderr.write(
                "%s: no profile was written: is `%s` a Python program, and did it run long "
                "enough for one sample (1/%d s)? See docs/troubleshooting.md (\"Nothing "
                "written\").\n" % (PROG, self.described, self.rate))


def _rate(rate, env):
    """The rate the library samples at: --rate, else PYSAMPLE_RATE, else its default."""
    if rate is not None:
        return rate
    try:
        return int(env.get("PYSAMPLE_RATE") or launch.DEFAULT_RATE)
    except ValueError:
        return launch.DEFAULT_RATE
