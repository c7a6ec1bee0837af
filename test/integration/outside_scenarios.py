"""Scenarios of the control suite (test_control.py imports them): a process
that was NOT started with the library, read from outside by pysample-attach
through `pysample dump|record|top --pid` (docs/attach.md).

The target (programs/unarmed.py) runs with no LD_PRELOAD and no PYSAMPLE_*
variable.  What is checked: the exact functions and lines of every thread,
the proportions of a thread's time between two functions, that the target
is never stopped (its threads are never in a stopped state and its own
progress counter advances meanwhile), and that a user without the right to
trace it is refused in one line.
"""
import os
import re
import select
import subprocess
import sys
import threading
import time

import harness

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "scripts")


class Unarmed(object):
    """programs/unarmed.py, started without the library, read up to ready."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.dir = ctx.tmpdir()
        os.chmod(self.dir, 0o755)
        self.stopfile = os.path.join(self.dir, "stop")
        env = {k: v for k, v in ctx.env(None, False).items()
               if not k.startswith("PYSAMPLE_") and k != "LD_PRELOAD"}
        self.proc = subprocess.Popen([ctx.python, ctx.program("unarmed.py"), self.stopfile], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        r, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline().decode() if r else ""
        if not line.startswith("ready "):
            self.proc.kill()
            raise AssertionError("unarmed.py did not start: %r %r" % (line, self.proc.stderr.read()[-2000:]))
        self.pid = int(line.split()[1])
        # Past the first progress write: the counter exists.
        harness.wait_for(lambda: self.progress() > 0, 60)

    def state(self):
        """(progress counter, s in mix_long, s in mix_short) as the program
        last wrote them."""
        try:
            with open(self.stopfile + ".progress") as f:
                n, a, b = f.read().split()
                return int(n), float(a), float(b)
        except (OSError, ValueError):
            return 0, 0.0, 0.0

    def progress(self):
        return self.state()[0]

    def finish(self):
        open(self.stopfile, "w").close()
        try:
            out, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.proc.returncode, out.decode(), err.decode()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def tool(ctx, *args, user=None):
    """The tool, finding pysample-attach beside the library under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSAMPLE_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = os.path.abspath(SCRIPTS)
    env["PYSAMPLE_LIB"] = ctx.lib
    cmd = [sys.executable, "-m", "pysample_tool"] + list(args)
    if user is not None:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups", "--"] + cmd
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd="/")


def _need_attach(ctx):
    if not sys.platform.startswith("linux"):
        ctx.skip("reading from outside is Linux only")
    # Where test_control.tool() gives the tool its pysample-attach: the
    # build dir under test (run.py --build, else the one --lib is in).
    attach = os.path.join(ctx.build, "lib", "pysample-attach")
    if not os.access(attach, os.X_OK):
        ctx.skip("no pysample-attach at %s (run.py --build BUILD names the build dir)" % attach)


def _lines(ctx, *markers):
    return [harness.program_lines(ctx.program("unarmed.py"), m) for m in markers]


def _block(text, pattern):
    """The frames of the thread whose header matches pattern, innermost first."""
    m = re.search(pattern + r":\n((?:    .*\n)+)", text)
    return [l.strip() for l in m.group(1).splitlines()] if m else None


class StoppedWatch(object):
    """Polls /proc/PID/task/*/stat while it runs: every state seen.  A
    process stopped by a debugger (ptrace) shows 't', by a signal 'T'."""

    def __init__(self, pid):
        self.pid, self.states, self.polls = pid, set(), 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        task = "/proc/%d/task" % self.pid
        while not self.done.is_set():
            try:
                for tid in os.listdir(task):
                    with open(os.path.join(task, tid, "stat")) as f:
                        self.states.add(f.read().rpartition(")")[2].split()[0])
            except OSError:
                pass
            self.polls += 1
            time.sleep(0.0005)

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.states


def test_outside_dump(ctx):
    _need_attach(ctx)
    u = Unarmed(ctx)
    try:
        before = u.progress()
        res = tool(ctx, "dump", "--pid", str(u.pid))
        ctx.check(res.returncode == 0, "dump --pid of an unarmed process failed", res.stdout, res.stderr)
        ctx.check("process %d is not armed: reading it from outside" % u.pid in res.stderr,
                  "which way was used is not said", res.stderr)
        text = res.stdout
        src = ctx.program("unarmed.py")
        waiter, long_l, short_l, module_l = _lines(ctx, "waiter line", "long line", "short line", "module line")
        ctx.check(re.match(r"Process %d: Python %d\.%d(\.\d+)?t?\n" % ((u.pid,) + ctx.version), text),
                  "header", text)
        main = _block(text, r"thread %d \(MainThread\)" % u.pid)
        # Innermost of the program's own frames (os.path.exists may be above it).
        own = [f for f in main or [] if "(%s:" % src in f]
        ctx.check(len(own) == 2 and own[0].startswith("count_progress (%s:" % src) and
                  own[-1] == "<module> (%s:%d)" % (src, module_l), "main thread's stack", text)
        w = _block(text, r"thread \d+ \(waiter\)")
        ctx.check(w is not None and "waiter_wait (%s:%d)" % (src, waiter) in w, "waiter thread at its line", text)
        m = _block(text, r"thread \d+ \(mixer\)")
        ok = m is not None and (m[0] in ("mix_long (%s:%d)" % (src, long_l), "mix_long (%s:%d)" % (src, long_l + 1),
                                         "mix_short (%s:%d)" % (src, short_l), "mix_short (%s:%d)" % (src, short_l + 1)))
        ctx.check(ok and m[1].startswith("mixer (%s:" % src), "mixer thread in mix_long/mix_short", text)
        harness.wait_for(lambda: u.progress() > before, 30)
        ctx.check(u.progress() > before, "the target's progress stopped after the dump")
    finally:
        rc, out, err = u.finish()
    ctx.check(rc == 7 and "Traceback" not in err and "pysample" not in err, "target changed: %s %r" % (rc, err))


def test_outside_record_proportions(ctx):
    _need_attach(ctx)
    u = Unarmed(ctx)
    out = os.path.join(u.dir, "rec.txt")
    try:
        before = u.state()
        watch = StoppedWatch(u.pid)
        res = tool(ctx, "record", "--pid", str(u.pid), "-d", "4", "--rate", "200", "-o", out)
        states = watch.stop()
        after = u.state()
        ctx.check(res.returncode == 0, "record --pid of an unarmed process failed", res.stdout, res.stderr)
        prof = harness.Profile(out)
        mixer = [s for s in prof.stacks if s.thread.endswith("(mixer)")]
        long_n = sum(s.count for s in mixer if s.frames and s.frames[-1].name == "mix_long")
        short_n = sum(s.count for s in mixer if s.frames and s.frames[-1].name == "mix_short")
        total = long_n + short_n
        # Samples, not seconds: 4 s at 200 Hz is 800 ticks; a busy machine
        # gives fewer, never fewer than this many.
        ctx.check(total >= 100, "only %d samples of the mixer thread" % total, prof.dump())
        share = long_n / float(total or 1)
        # The truth over (about) the same window, as the program measured
        # it: ~0.75 on an idle machine.  With >= 100 samples 3 standard
        # deviations are under 0.14.
        spent_long, spent_short = after[1] - before[1], after[2] - before[2]
        truth = spent_long / (spent_long + spent_short or 1.0)
        ctx.check(abs(share - truth) <= 0.15, "mix_long has %.2f of the mixer's samples (%d/%d); the program "
                  "measured %.2f of its time there" % (share, long_n, total, truth), prof.dump())
        ctx.check(prof.with_frame("waiter_wait") > 0 and prof.with_frame("count_progress") > 0,
                  "a thread is missing", prof.dump())
        ctx.check(watch.polls > 50 and not (states & {"t", "T"}),
                  "the target was stopped while recorded: states %s in %d polls" % (sorted(states), watch.polls))
        ctx.check(after[0] > before[0], "the target's progress counter did not advance while recorded "
                  "(%d -> %d)" % (before[0], after[0]))
    finally:
        rc, _out, err = u.finish()
    ctx.check(rc == 7 and "Traceback" not in err, "target changed: %s %r" % (rc, err))


def test_outside_other_user_refused(ctx):
    _need_attach(ctx)
    if os.geteuid() != 0:
        ctx.skip("needs root to run the tool as another user")
    u = Unarmed(ctx)
    try:
        for verb in (["dump"], ["record", "-d", "1", "-o", os.path.join(u.dir, "x.txt")]):
            res = tool(ctx, *(verb + ["--pid", str(u.pid)]), user=65534)
            lines = [l for l in res.stderr.splitlines() if l.strip()]
            ctx.check(res.returncode != 0 and len(lines) == 1 and lines[0].startswith("pysample: ") and
                      "needs the right to trace it" in lines[0] and "CAP_SYS_PTRACE" in lines[0],
                      "%s as uid 65534 must be refused in one line" % verb[0], res.stdout, res.stderr)
    finally:
        rc, _out, err = u.finish()
    ctx.check(rc == 7 and "Traceback" not in err, "target changed: %s %r" % (rc, err))
