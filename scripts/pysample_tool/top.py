# top.py - `pysample top`: the functions with the most samples, and the same
# table in record's summary.
#
# SPDX-License-Identifier: MIT

import argparse
import collections
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import deadline, filters, options, remote
from .collapsed import KIND_MARKER, KIND_NATIVE, Frame, describe, parse_collapsed
from .common import PROG, ToolError, percent, printable, write_output
from .launch import command_to_run, library_or_fail, preload_environment

NO_FRAMES = Frame(KIND_MARKER, "[no Python frames]", None, None)


NAME = "top"
HELP = "table of the functions with the most samples"
DESCRIPTION = ("Prints the functions (qualname and file, all lines together) with their self samples (in "
               "the function itself) and total samples (in it or its callees), sorted by self samples. "
               "With --pid instead of FILE: a live table of the running armed process PID (started with "
               "PYSAMPLE_ARM=1), refreshed every second until Ctrl-C, headed by what the samples are worth. "
               "With -- COMMAND: runs COMMAND with the library preloaded and armed and shows its live "
               "table until it exits (its output goes to a file, named at the end); exits with its status.")
USAGE = ("%(prog)s FILE [-n N]\n       %(prog)s --pid PID [-n N] [--rate HZ] [--duration S] [--mode wall|cpu] "
         "[--native] [--async]\n"
         "       %(prog)s [-n N] [--rate HZ] [--gil] [--idle] -- COMMAND [ARG...]")


def add_options(parser):
    parser.add_argument("file", metavar="FILE", nargs="?", help="a collapsed profile written by libpysample")
    parser.add_argument("-n", type=int, default=None, metavar="N",
                        help="show N functions, 0 for all (default: 20; with --pid, what fits the terminal)")
    options.addresses(parser)
    filters.add_options(parser)
    remote.add_pid_option(parser, help="show the live table of this running process (armed, or read "
                                       "from outside: docs/attach.md)")
    options.rate(parser, help="with --pid: samples per second (default: the process's PYSAMPLE_RATE)")
    parser.add_argument("-d", "--duration", type=options.seconds, metavar="S",
                        help="with --pid: stop after S seconds (default: until Ctrl-C)")
    parser.add_argument("-g", "--gil", action="store_true",
                        help="with COMMAND: only threads holding the GIL (PYSAMPLE_GIL=1)")
    parser.add_argument("-i", "--idle", action="store_true",
                        help="with COMMAND: idle threads too (PYSAMPLE_MODE=wall, the default)")
    parser.add_argument("--delay", type=_delay, default=1.0, metavar="S",
                        help="live: seconds between two tables, 0.1..60 (default: 1, as py-spy's --delay)")
    parser.add_argument("--nonblocking", action="store_true", help=argparse.SUPPRESS)   # py-spy's; always so
    options.pyspy_compat(parser)
    parser.add_argument("--python", metavar="PY", help="with COMMAND: interpreter for a COMMAND that starts "
                                                       "with a .py file (default: %s)" % (sys.executable or "python3"))
    # `-- COMMAND` only (cli splits it off): a FILE may be followed by options.
    parser.set_defaults(cmd=[], command_argv=None)
    parser.takes_command = True
    remote.add_session_options(parser)


def _delay(text):
    """--delay: seconds, within what the control protocol takes (100 ms to 60 s)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number of seconds, not %r" % text)
    if not 0.1 <= value <= 60:
        raise argparse.ArgumentTypeError("must be between 0.1 and 60 seconds, not %s" % text)
    return value


def run(args):
    if args.command_argv:
        if args.pid is not None or args.file is not None:
            raise ToolError("give FILE, --pid PID or -- COMMAND, only one of them")
        return run_command(args)
    if args.pid is not None:
        if args.file is not None:
            raise ToolError("give FILE or --pid, not both")
        return run_live(args)
    if args.file is None:
        raise ToolError("give a profile FILE, --pid PID for a running process, or -- COMMAND to run one")
    if args.n is None:
        args.n = 20
    profile = options.grouped(parse_collapsed(args.file), args)
    text = "%s: %s\n" % (args.file, describe(profile)) + format_top([profile], args.n)
    write_output(None, text.encode("utf-8"), binary=False)
    return 0


def function_key(frame):
    """Functions are frames without the line number."""
    return (frame.kind, frame.name, frame.file)


def top_functions(profiles):
    """[(kind, name, file), self, total] sorted by self, then total."""
    self_counts = collections.Counter()
    total_counts = collections.Counter()
    for profile in profiles:
        for _thread, frames, count in profile.stacks:
            if not frames:
                frames = (NO_FRAMES,)
            self_counts[function_key(frames[-1])] += count
            for key in set(function_key(f) for f in frames):
                total_counts[key] += count
    rows = [(key, self_counts.get(key, 0), total) for key, total in total_counts.items()]
    rows.sort(key=lambda r: (-r[1], -r[2], r[0][1], r[0][2] or ""))
    return rows


def format_top(profiles, limit, indent=""):
    total = sum(p.total for p in profiles)
    rows = top_functions(profiles)
    shown = rows if limit <= 0 else rows[:limit]
    out = ["%s%9s %6s %9s %6s  %s" % (indent, "SELF", "SELF%", "TOTAL", "TOTAL%", "FUNCTION (FILE)")]
    for (kind, name, filename), self_count, total_count in shown:
        # (a native frame without a symbol names its object already)
        where = "" if filename is None or kind == KIND_NATIVE else " (%s)" % filename
        out.append("%s%9d %5.1f%% %9d %5.1f%%  %s%s" % (
            indent, self_count, percent(self_count, total), total_count, percent(total_count, total),
            printable(name), printable(where)))
    if len(rows) > len(shown):
        out.append("%s... %d more functions (use -n 0 to list all)" % (indent, len(rows) - len(shown)))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# Live (--pid)
# ---------------------------------------------------------------------------

CLEAR = "\x1b[H\x1b[2J"


def live_header(pid, meta):
    """The first lines of the live table: what the samples are worth."""
    first = "pysample top: process %d, Python %s, %s-clock, %s s" % (
        pid, meta.get("python", "?"), meta.get("mode", "?"), meta.get("duration_s", "?"))
    dropped = sum(remote.meta_number(meta, k)
                  for k in ("dropped_unreadable", "dropped_inconsistent", "dropped_other"))
    second = "rate %s of %s Hz requested, %s samples, %d dropped, %s truncated" % (
        meta.get("achieved_rate_hz", "?"), meta.get("requested_rate_hz", "?"), meta.get("samples", "?"),
        dropped, meta.get("truncated_stacks", "0"))
    if remote.meta_number(meta, "budget_pct", 0.0, float):
        second += ", CPU budget %s%%: %s Hz now, %s changes" % (
            meta["budget_pct"], meta.get("rate_now_hz", "?"), meta.get("budget_adjustments", "0"))
    return [first, second]


def run_live(args):
    from . import outside
    try:
        # A table is due every --delay: each read waits that long and the deadline beyond it.
        conn = outside.connect(args.pid, "top", dict(rate=args.rate, interval=int(round(args.delay * 1000)),
                                                     **remote.session_keys(args)), args.control_dir,
                               timeout=deadline.ANSWER_S + args.delay)
    except KeyboardInterrupt:
        return 0
    tty = sys.stdout.isatty()
    end = time.monotonic() + args.duration if args.duration else None
    try:
        conn.send("top", rate=args.rate, interval=int(round(args.delay * 1000)),
                  **remote.session_keys(args))
        meta = {}
        frames = 0
        while end is None or time.monotonic() < end:
            f = conn.frame()
            if f is None:
                if frames == 0:
                    raise conn.closed_without_answer()
                if not getattr(args, "launched", False):
                    sys.stderr.write("%s: process %d closed the connection (it exited?)\n" % (PROG, args.pid))
                return 1
            kind, payload = f
            frames += 1
            if kind == "err":
                raise ToolError("process %d: %s" % (args.pid, remote.peer_text(payload)))
            if kind == "meta":
                meta = remote.parse_meta(payload)
                continue
            if kind != "data":
                continue
            lines = live_header(args.pid, meta) + [""]
            if payload.strip():
                profile = options.grouped(parse_collapsed("process %d" % args.pid, data=payload), args)
                limit = args.n
                if limit is None:
                    rows = shutil.get_terminal_size((80, 24)).lines if tty else 24
                    limit = max(5, rows - len(lines) - 3)
                lines.append(format_top([profile], limit).rstrip("\n"))
            else:
                lines.append("no samples yet")
            text = "\n".join(lines) + "\n"
            sys.stdout.write((CLEAR + text) if tty else (text + "\n"))
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass
    finally:
        conn.close()
    return 0


# ---------------------------------------------------------------------------
# A command it runs (-- COMMAND), like `py-spy top -- python3 app.py`
# ---------------------------------------------------------------------------

def run_command(args):
    """Runs the command armed (PYSAMPLE_ARM=1: it samples only while asked)
    and shows its live table until it exits.  Its output goes to a file, so
    that it does not scroll the table away; the file is named at the end.
    Returns the command's exit status, 128+N for a signal N."""
    args.quiet = True
    command = command_to_run(args)
    library = library_or_fail()
    env = preload_environment(library)
    for name in ("PYSAMPLE_OUTPUT", "PYSAMPLE_CONTROL_DIR"):
        env.pop(name, None)
    env["PYSAMPLE_ARM"] = "1"
    if args.gil:
        env["PYSAMPLE_GIL"] = "1"
    if args.idle:
        env["PYSAMPLE_MODE"] = "wall"
    if args.native:  # what the session's --native and --async need from the start
        env["PYSAMPLE_NATIVE"] = args.native
    if args.async_tasks:
        env["PYSAMPLE_ASYNC"] = "1"
    log = tempfile.NamedTemporaryFile(prefix="pysample-top-", suffix=".log", delete=False)
    try:
        child = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    except OSError as e:
        log.close()
        os.unlink(log.name)
        raise ToolError("cannot run %s: %s" % (command[0], e.strerror or e),
                        status=126 if e.errno == errno.EACCES else 127)
    log.close()
    args.pid, args.launched, args.control_dir = child.pid, True, None
    _wait_for_exec(child, library)
    try:
        run_live(args)
    except ToolError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
    finally:
        # Ctrl-C reached the command too: wait for it to end.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            returncode = child.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
    if os.path.getsize(log.name):
        sys.stderr.write("%s: the output of `%s` is in %s\n" % (PROG, " ".join(command), log.name))
    else:
        os.unlink(log.name)
    return 128 - returncode if returncode < 0 else returncode


def _wait_for_exec(child, library, limit=5.0):
    """Until the child runs the command with the library loaded: before its
    exec /proc/PID/environ is still ours, without PYSAMPLE_ARM, and before
    the loader maps the library /proc/PID/maps has none; either way the
    connection would say at once that it is not armed, not wait for it."""
    give_up = time.monotonic() + limit
    name = os.path.basename(library).encode()
    while child.poll() is None and time.monotonic() < give_up:
        try:
            with open("/proc/%d/environ" % child.pid, "rb") as f:
                execd = b"\0PYSAMPLE_ARM=1\0" in b"\0" + f.read()
            with open("/proc/%d/maps" % child.pid, "rb") as f:
                if execd and name in f.read():
                    return
        except OSError:
            return          # not Linux, or gone: nothing to wait for
        time.sleep(0.01)
