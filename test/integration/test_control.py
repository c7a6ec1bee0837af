"""Armed mode (issue #17): a process started with PYSAMPLE_ARM=1 runs
unprofiled and answers `pysample record|dump|top|start|stop --pid` from
another process of the same user; nobody else.  Every scenario runs the
real tool against a real armed interpreter and asserts what the user sees.

Samples are counted only after the tool says how many ticks it took (the
quality figures), so a loaded machine gives fewer samples, not failures.

What issue #17 asks of each interpreter (record, dump, top, start/stop, a
foreign user refused, fork children, stale sockets) runs under each.  The
scenarios marked @harness.once run under the primary interpreter only
(run.py --primary): the CPU budget and the thread window are the sampler
thread's own arithmetic, an idle armed process sleeps in ppoll before it
ever reads the interpreter, the terminal and the pprof/speedscope fields
are the tool's (run by this test's own Python), and the low-rate note is
the library's; the functions and lines they show are asserted per
interpreter by the scenarios above.
"""
import json
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(REPO, "scripts")
_live = []
_children = []  # pids of armed.py's fork children (not ours to wait for)


def go_cache():
    """The Go build cache of `go tool pprof` runs: pprof is compiled into it on
    first use (41 s of CPU with Go 1.26), so one cache outside the repository
    serves every run (.ci/run fills it in the background)."""
    return os.environ.get("PYSAMPLE_GOCACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "pysample", "go-build")


def teardown(ctx):
    while _live:
        p = _live.pop()
        if p.poll() is None:
            p.kill()
        p.wait()
    # A failed scenario leaves the fork child spinning until its stop file
    # appears, which nobody writes any more.
    while _children:
        pid = _children.pop()
        try:
            # Only if it is still that child (pids are reused).
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"armed.py" in f.read():
                    os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Armed(object):
    """The armed program (programs/armed.py), started and read up to ready."""

    def __init__(self, ctx, fork=False, env=None, preload=True, pin=None, program="armed.py", args=(),
                 prefix=(), stopdir=None):
        self.dir = stopdir or ctx.tmpdir()
        self.stopfile = os.path.join(self.dir, "stop")
        e = {"PYSAMPLE_ARM": "1"}
        e.update(env or {})
        script = program if os.path.isabs(program) else ctx.program(program)
        args = list(prefix) + [ctx.python, script, self.stopfile] + list(args) + (["fork"] if fork else [])
        if pin is not None:
            args = ["taskset", "-c", pin] + args
        self.proc = subprocess.Popen(args, env=ctx.env(e, preload), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        _live.append(self.proc)
        self.child = None
        self.pid = None
        self.early = b""  # stdout read so far (unbuffered: select sees all of it)
        deadline = time.monotonic() + 60
        fd = self.proc.stdout.fileno()
        while self.pid is None:
            left = deadline - time.monotonic()
            r, _, _ = select.select([fd], [], [], max(0.0, left))
            chunk = os.read(fd, 4096) if r else b""
            if not chunk:
                self.proc.kill()
                raise AssertionError("armed.py did not start: rc %s, stderr %s"
                                     % (self.proc.wait(), self.proc.stderr.read()[-2000:]))
            self.early += chunk
            for line in self.early.decode().splitlines():
                if line.startswith("child ") and self.child is None:
                    self.child = int(line.split()[1])
                    _children.append(self.child)
                if line.startswith("ready "):
                    self.pid = int(line.split()[1])

    def finish(self):
        """Tells the program to end: (exit status, stdout, stderr)."""
        open(self.stopfile, "w").close()
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, (self.early + out).decode(), err.decode()


def as_user(uid):
    """The command prefix that runs a command as uid (and gid) uid."""
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups", "--"]


def tool(ctx, *args, user=None, cwd=None, timeout=120, prefix=()):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSAMPLE_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = SCRIPTS
    # The build under test's pysample-attach (a process not started armed):
    # the tool finds its own library in the tree's build/, which an
    # out-of-tree build dir is not.  (ctx None: a helper's dump of an
    # armed process, which needs no pysample-attach.)
    attach = os.path.join(ctx.build, "lib", "pysample-attach") if ctx is not None else ""
    if attach and os.access(attach, os.X_OK):
        env["PYSAMPLE_ATTACH"] = attach
    cmd = list(prefix) + [sys.executable, "-m", "pysample_tool"] + list(args)
    if user is not None:
        cmd = as_user(user) + cmd
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd or "/")


def ctl_name(pid):
    """The control socket's name of our own process pid (ctlsock.h)."""
    return "pysample.%d.%d.%d" % (os.geteuid(), os.stat("/proc/%d/ns/pid" % pid).st_ino, pid)


def check_tool(ctx, res, what):
    ctx.check(res.returncode == 0, "%s failed with status %d" % (what, res.returncode),
              "stdout:\n" + res.stdout[-2000:], "stderr:\n" + res.stderr[-2000:])


def check_program_unchanged(ctx, armed, rc, out, err):
    ctx.check(rc == 7, "armed program exited with %s, expected 7" % rc, err[-2000:])
    ctx.check(out.strip().endswith("done 1"), "armed program's output changed: %r" % out[-300:])
    # The achieved-rate note is the library's one allowed line (harness.RATE_NOTE):
    # a CI machine loaded to 15 once starved the sampler to 6.5 ticks a second.
    ctx.check(not harness.our_messages(err) and "Traceback" not in err and "Warning" not in err,
              "armed program printed something", err[-2000:])


def work_line(ctx):
    return harness.program_lines(ctx.program("armed.py"), "work line")


def test_record_pid(ctx):
    a = Armed(ctx)
    out = os.path.join(a.dir, "rec.%p.txt")
    res = tool(ctx, "record", "--pid", str(a.pid), "-d", "2", "--rate", "200", "-o", out)
    check_tool(ctx, res, "record --pid")
    path = out.replace("%p", str(a.pid))
    prof = harness.Profile(path)
    quality = json.load(open(path + ".quality.json"))
    ctx.check(quality["how"] == "armed record" and quality["requested_rate_hz"] == 200
              and quality["mode"] == "wall", "quality figures: %r" % quality)
    ctx.check(re.match(r"^%d\.%d(\.\d+)?t?$" % ctx.version, quality["python"]), "python %r" % quality["python"])
    ctx.check(quality["samples"] == prof.total, "quality says %d samples, profile has %d"
              % (quality["samples"], prof.total))
    ctx.check(quality["ticks"] >= 20, "too few ticks in 2 s at 200 Hz: %r" % quality)
    main = [s for s in prof.stacks if s.thread == "thread %d (MainThread)" % a.pid]
    on_line = sum(s.count for s in main if s.frames and s.frames[-1].name == "armed_work"
                  and s.frames[-1].line == work_line(ctx))
    # The main thread computes on that line all the time; the rest is the
    # loop's other lines and the os.path.exists call.
    ctx.check(on_line >= quality["ticks"] * 0.5,
              "armed_work:%d has %d of %d ticks" % (work_line(ctx), on_line, quality["ticks"]), prof.dump())
    ctx.check(prof.with_frame("waiter_wait") > 0, "the waiter thread is missing", prof.dump())
    ctx.check("quality: Python %d.%d" % ctx.version in res.stderr, "summary lacks quality", res.stderr)
    check_program_unchanged(ctx, a, *a.finish())


def test_dump_pid(ctx):
    a = Armed(ctx)
    res = tool(ctx, "dump", "--pid", str(a.pid))
    check_tool(ctx, res, "dump --pid")
    text = res.stdout
    ctx.check(re.match(r"Process %d: Python %d\.%d(\.\d+)?t?\n" % ((a.pid,) + ctx.version), text), "header", text)
    # Main thread: innermost first, so armed_work comes before <module>.
    m = re.search(r"thread %d \(MainThread\):\n((?:    .*\n)+)" % a.pid, text)
    ctx.check(m is not None, "no MainThread block", text)
    frames = [l.strip() for l in m.group(1).splitlines()]
    ctx.check(any(f.startswith("armed_work (") for f in frames[:2]) and frames[-1].startswith("<module> ("),
              "main thread stack", text)
    m = re.search(r"thread \d+ \(waiter\):\n((?:    .*\n)+)", text)
    ctx.check(m is not None and "waiter_wait (" in m.group(1) and
              ":%d)" % harness.program_lines(ctx.program("armed.py"), "waiter line") in m.group(1),
              "waiter thread blocked in waiter_wait at its line", text)
    check_program_unchanged(ctx, a, *a.finish())


def test_start_stop_pid(ctx):
    a = Armed(ctx)
    res = tool(ctx, "start", "--pid", str(a.pid), "--rate", "200")
    check_tool(ctx, res, "start --pid")
    ctx.check("sampling at 200 Hz" in res.stderr, "start says", res.stderr)
    # While started, a record is refused with a reason.
    busy = tool(ctx, "record", "--pid", str(a.pid), "-d", "1")
    ctx.check(busy.returncode != 0 and "busy: a `pysample start`" in busy.stderr, "busy", busy.stderr)
    time.sleep(1.0)
    out = os.path.join(a.dir, "ss.pb")
    res = tool(ctx, "stop", "--pid", str(a.pid), "-o", out, "--format", "pprof")
    check_tool(ctx, res, "stop --pid")
    ctx.check(os.path.getsize(out) > 0 and "armed_work (" in res.stderr, "stop's profile", res.stderr)
    again = tool(ctx, "stop", "--pid", str(a.pid))
    ctx.check(again.returncode != 0 and "not started" in again.stderr, "second stop", again.stderr)
    check_program_unchanged(ctx, a, *a.finish())


def test_top_pid(ctx):
    a = Armed(ctx)
    res = tool(ctx, "top", "--pid", str(a.pid), "--duration", "3", "-n", "5")
    check_tool(ctx, res, "top --pid")
    frames = [f for f in res.stdout.split("\n\n\n") if f.strip()]
    ctx.check(frames, "no table", res.stdout)
    last = frames[-1].splitlines()
    ctx.check(re.match(r"pysample top: process %d, Python %d\.%d(\.\d+)?t?, " % ((a.pid,) + ctx.version), last[0])
              and "wall-clock" in last[0], "first line", frames[-1])
    ctx.check(re.match(r"rate [0-9.]+ of 100 Hz requested, \d+ samples, 0 dropped, 0 truncated", last[1]),
              "second line", frames[-1])
    ctx.check(any(l.endswith("armed_work (%s)" % ctx.program("armed.py")) for l in last[3:]),
              "armed_work in the table", frames[-1])
    check_program_unchanged(ctx, a, *a.finish())


def test_other_user_refused(ctx):
    if os.geteuid() != 0:
        ctx.skip("needs root to run the client as another user")
    a = Armed(ctx)
    res = tool(ctx, "dump", "--pid", str(a.pid), user=65534)
    ctx.check(res.returncode != 0 and "accepts only its own user" in res.stderr,
              "dump as uid 65534 must be refused", res.stdout, res.stderr)
    rc, out, err = a.finish()
    lines = [l for l in err.splitlines() if l.startswith("pysample:")]
    ctx.check(len(lines) == 1 and "refused a control connection from uid 65534" in lines[0]
              and "only uid 0 may profile this process" in lines[0], "one refusal line", err)
    ctx.check(rc == 7 and out.strip().endswith("done 1"), "program unchanged", out, err)


def test_fork_child_armed(ctx):
    a = Armed(ctx, fork=True)
    ctx.check(a.child is not None, "no child pid")
    out = os.path.join(a.dir, "child.txt")
    res = tool(ctx, "record", "--pid", str(a.child), "-d", "1", "-o", out)
    check_tool(ctx, res, "record --pid <fork child>")
    prof = harness.Profile(out)
    ctx.check(prof.leaf_count("child_work") > 0 and prof.with_frame("armed_work") == 0,
              "the child's profile is the child's", prof.dump())
    ctx.check(all(s.thread.startswith("thread %d" % a.child) for s in prof.stacks), "child's threads",
              prof.dump())
    res = tool(ctx, "dump", "--pid", str(a.pid))
    check_tool(ctx, res, "dump --pid <parent>")
    ctx.check("armed_work (" in res.stdout, "parent still answers", res.stdout)
    check_program_unchanged(ctx, a, *a.finish())


def test_socket_directory_and_stale_cleanup(ctx):
    d = ctx.tmpdir()
    first = Armed(ctx, env={"PYSAMPLE_CONTROL_DIR": d})
    name = ctl_name(first.pid) + ".sock"
    # The sampler thread opens the socket on its own schedule, not before
    # the program prints "ready": at load ~9 the listing was still empty.
    harness.wait_for(lambda: os.listdir(d), 30)
    ctx.check(os.listdir(d) == [name], "socket file", os.listdir(d))
    first.proc.kill()  # no chance to clean up
    first.proc.wait()
    ctx.check(os.listdir(d) == [name], "a killed process leaves its socket", os.listdir(d))
    second = Armed(ctx, env={"PYSAMPLE_CONTROL_DIR": d})
    res = tool(ctx, "dump", "--pid", str(second.pid))  # finds the directory in its environment
    check_tool(ctx, res, "dump --pid (directory)")
    mine = ctl_name(second.pid) + ".sock"
    ctx.check(os.listdir(d) == [mine], "stale socket removed", os.listdir(d))
    check_program_unchanged(ctx, second, *second.finish())
    ctx.check(os.listdir(d) == [], "socket removed at exit", os.listdir(d))


def _voluntary_switches(pid, tid):
    with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches for %d/%d" % (pid, tid))


@harness.once
def test_idle_armed_process_sleeps(ctx):
    if not sys.platform.startswith("linux"):
        ctx.skip("reads /proc")
    a = Armed(ctx)
    res = tool(ctx, "dump", "--pid", str(a.pid))  # the sampler has served one request
    check_tool(ctx, res, "dump --pid")
    waiter = [l for l in res.stdout.splitlines() if "(waiter)" in l][0]
    known = {a.pid, int(re.search(r"thread (\d+)", waiter).group(1))}
    tids = [int(t) for t in os.listdir("/proc/%d/task" % a.pid)]
    ours = [t for t in tids if t not in known]
    ctx.check(len(ours) == 1, "one thread of the library", tids, known)
    before = _voluntary_switches(a.pid, ours[0])
    time.sleep(3.0)
    woke = _voluntary_switches(a.pid, ours[0]) - before
    ctx.check(woke <= 3, "the idle sampler thread woke %d times in 3 s" % woke)
    check_program_unchanged(ctx, a, *a.finish())


def test_arm_in_non_python_process_is_inert(ctx):
    """A shell with PYSAMPLE_ARM=1, inspected from outside while it waits
    in read(): no socket, no second thread, and nothing on stderr.  (Asked
    from inside, with ls on /proc/$$/fd, the shell's own short-lived pipe
    descriptors raced the listing on a loaded machine.)"""
    if ctx.musl:
        ctx.skip("this machine's sh is a glibc program; scripts/check-musl runs a musl one armed "
                 "(musl/library/inert_in_other_programs)")
    sh = subprocess.Popen(["/bin/sh", "-c", "read x"], env=ctx.env({"PYSAMPLE_ARM": "1"}),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        # The constructor has run once the shell's main loop reads stdin
        # (system call 0 on x86-64; any blocked state elsewhere).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open("/proc/%d/syscall" % sh.pid) as f:
                state = f.read().split()
            if state and state[0] != "running" and \
                    (state[0] == "0" or os.uname().machine != "x86_64"):
                break
            time.sleep(0.01)
        sockets = 0
        for fd in os.listdir("/proc/%d/fd" % sh.pid):
            try:
                sockets += os.readlink("/proc/%d/fd/%s" % (sh.pid, fd)).startswith("socket:")
            except OSError:
                pass
        threads = len(os.listdir("/proc/%d/task" % sh.pid))
    finally:
        out, err = sh.communicate("x\n", timeout=60)
    ctx.check(sockets == 0 and threads == 1 and err == "" and sh.returncode == 0,
              "a shell with PYSAMPLE_ARM=1: no socket, no thread, no output",
              "sockets %d threads %d rc %s" % (sockets, threads, sh.returncode), err)


def _schedstat_ns(pid, tid=None):
    tids = [tid] if tid else [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    total = 0
    for t in tids:
        with open("/proc/%d/task/%d/schedstat" % (pid, t)) as f:
            total += int(f.read().split()[0])
    return total


def _remote():
    if SCRIPTS not in sys.path:
        sys.path.insert(0, SCRIPTS)
    from pysample_tool import remote
    return remote


def _library_tid(a):
    """The library's thread of armed.py: neither the main thread nor the
    waiter (named in a dump)."""
    res = tool(None, "dump", "--pid", str(a.pid))
    waiter = [l for l in res.stdout.splitlines() if "(waiter)" in l]
    known = {a.pid} | {int(re.search(r"thread (\d+)", l).group(1)) for l in waiter}
    ours = [int(t) for t in os.listdir("/proc/%d/task" % a.pid) if int(t) not in known]
    return ours[0] if len(ours) == 1 else None


def _budget_session(ctx, budget, rate, seconds):
    """start..stop of armed.py pinned to CPU 0 with PYSAMPLE_CPU_BUDGET:
    (quality, sampler CPU ns, process CPU ns, wall ns) over the session."""
    if not sys.platform.startswith("linux") or not os.path.exists("/usr/bin/taskset"):
        ctx.skip("needs taskset and /proc")
    a = Armed(ctx, env={"PYSAMPLE_CPU_BUDGET": budget}, pin="0")
    tid = _library_tid(a)
    ctx.check(tid is not None, "cannot tell the library's thread")
    remote = _remote()
    remote.request(a.pid, "start", rate=rate)
    s0, p0, w0 = _schedstat_ns(a.pid, tid), _schedstat_ns(a.pid), time.monotonic_ns()
    time.sleep(seconds)
    s1, p1, w1 = _schedstat_ns(a.pid, tid), _schedstat_ns(a.pid), time.monotonic_ns()
    reply = remote.request(a.pid, "stop")
    rc, out, err = a.finish()
    check_program_unchanged(ctx, a, rc, out, err)
    return reply.meta, s1 - s0, p1 - p0, w1 - w0


@harness.once
def test_cpu_budget_holds_at_10khz(ctx):
    meta, sampler, process, wall = _budget_session(ctx, "1%", 10000, 4.0)
    share_core = 100.0 * sampler / wall
    share_process = 100.0 * sampler / process
    info = "sampler %.3f%% of one core, %.3f%% of the process's CPU (process got %.0f%% of a core); %r" % (
        share_core, share_process, 100.0 * process / wall, meta)
    # The budget is a share of one core; on a machine where the pinned
    # program has its core, that is the share of the process's CPU too.
    ctx.check(share_core <= 1.2, "over budget: " + info)
    if process >= 0.9 * wall:
        ctx.check(share_process <= 1.2, "over budget: " + info)
    ctx.check(meta["budget_pct"] == "1.00" and int(meta["budget_adjustments"]) >= 1
              and int(meta["rate_now_hz"]) < 10000, "the budget lowered the rate: " + info)
    achieved = float(meta["achieved_rate_hz"])
    ctx.check(0 < achieved < 9000 and int(meta["requested_rate_hz"]) == 10000,
              "achieved rate reported: " + info)
    print("    budget 1%% at 10 kHz: %s" % info.split(";")[0], flush=True)


@harness.once
def test_generous_budget_keeps_rate(ctx):
    meta, sampler, process, wall = _budget_session(ctx, "50%", 1000, 2.0)
    ctx.check(int(meta["budget_adjustments"]) == 0 and int(meta["rate_now_hz"]) == 1000,
              "a 50%% budget must keep 1000 Hz: %r" % meta)


@harness.once
def test_max_threads_per_tick_unbiased(ctx):
    stats = os.path.join(ctx.tmpdir(), "stats")
    res = ctx.run([ctx.program("threads4.py")], env={"PYSAMPLE_RATE": "200",
                                                     "PYSAMPLE_MAX_THREADS_PER_TICK": "2",
                                                     "PYSAMPLE_STATS": stats})
    ctx.check_clean_run(res)
    p = res.profile()
    counts = {}
    for line in res.stdout.splitlines():
        fname, tid = line.split()
        counts[fname] = p.count_where(lambda s, tid=tid: s.thread.split()[1] == tid)
    mean = sum(counts.values()) / float(len(counts))
    # A worker's expected count is the number of ticks it lived through,
    # whichever 2 of the 5 threads a tick walked: at most every tick of the
    # run (over-counting would show above it), and most of them (start-up,
    # the barrier and the joins are the rest: a quarter of the ticks at
    # worst seen on this loaded machine).
    st = dict(l.split(" ", 1) for l in open(stats).read().splitlines())
    ticks = int(st["ticks"])
    for fname, n in counts.items():
        ctx.check(abs(n - mean) <= 0.2 * mean, "%s: %d samples, the workers' mean %.0f" % (fname, n, mean),
                  counts)
        ctx.check(0.6 * ticks <= n <= 1.1 * ticks, "%s: %d samples for %d ticks" % (fname, n, ticks), counts)
    ctx.check(int(st["samples"]) == p.total, "stats and profile agree", st, p.total)


@harness.once
def test_top_pid_in_a_terminal(ctx):
    """`pysample top --pid` in a real terminal (tmux): the table is redrawn
    in place every second, its first lines say what the samples are worth,
    and Ctrl-C ends it with status 0, the program unharmed."""
    if not shutil.which("tmux"):
        ctx.skip("tmux is not installed (CI: PYSAMPLE_DEPS_EXTRA=tmux)")
    a = Armed(ctx)
    sock = "pysample-test-%d" % os.getpid()
    tmux = ["tmux", "-L", sock]
    # The shell notes top's exit status in a file: tmux, which reaps the
    # pane's process, was seen to leave it a zombie for 30 s and more on a
    # loaded machine, so its own notion of the pane's death is no measure.
    # ("trap : INT": a handler, reset at exec, so top gets Ctrl-C as usual
    # while the shell lives on to write the status.)
    status_file = os.path.join(a.dir, "top.status")
    cmd = "trap : INT; env PYTHONPATH=%s %s -m pysample_tool top --pid %d; echo $? > %s" % (
        SCRIPTS, sys.executable, a.pid, status_file)
    subprocess.run(tmux + ["-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "30", cmd], check=True)
    try:

        def screen():
            return subprocess.run(tmux + ["capture-pane", "-p"], capture_output=True, text=True).stdout

        def header_seconds(text):
            m = re.search(r"^pysample top: process %d, Python [0-9.t]+, wall-clock, ([0-9.]+) s$" % a.pid,
                          text, re.M)
            return float(m.group(1)) if m else None

        deadline = time.monotonic() + 60
        first = None
        text = ""
        while time.monotonic() < deadline:
            text = screen()
            secs = header_seconds(text)
            if secs is not None and "armed_work (" in text:
                if first is None:
                    first = secs
                elif secs >= first + 1.5:
                    break
            time.sleep(0.2)
        secs = header_seconds(text)
        ctx.check(first is not None and secs is not None and secs >= first + 1.5,
                  "no refreshed table within 60 s", text)
        lines = text.splitlines()
        ctx.check(lines[0].startswith("pysample top: process %d," % a.pid), "first line", text)
        ctx.check(re.match(r"rate [0-9.]+ of 100 Hz requested, \d+ samples, \d+ dropped, \d+ truncated$",
                           lines[1]), "second line", text)
        ctx.check(text.count("pysample top:") == 1, "redrawn in place, not scrolled", text)
        row = [l for l in lines if l.endswith("armed_work (%s)" % ctx.program("armed.py"))]
        ctx.check(row and float(row[0].split()[1].rstrip("%")) > 30.0, "armed_work's self share", text)
        subprocess.run(tmux + ["send-keys", "C-c"], check=True)
        status = None
        for _ in range(300):
            try:
                with open(status_file) as f:
                    status = int(f.read().strip())
                break
            except (OSError, ValueError):
                time.sleep(0.1)
        diag = ""
        if status is None:
            # Still running: how its signals stand and where it waits.
            pane = subprocess.run(tmux + ["display-message", "-p", "#{pane_pid}"],
                                  capture_output=True, text=True).stdout.strip()
            for pid in [pane] + subprocess.run(["pgrep", "-P", pane], capture_output=True,
                                               text=True).stdout.split():
                for name in ("status", "wchan", "stack"):
                    try:
                        with open("/proc/%s/%s" % (pid, name)) as f:
                            text = f.read()
                        if name == "status":
                            text = "".join(l for l in text.splitlines(True)
                                           if l.startswith(("Sig", "State", "Name")))
                        diag += "/proc/%s/%s:\n%s\n" % (pid, name, text)
                    except OSError as e:
                        diag += "/proc/%s/%s: %s\n" % (pid, name, e)
        ctx.check(status == 0, "top after Ctrl-C: exit status %r" % status, screen(), diag)
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
    check_program_unchanged(ctx, a, *a.finish())


def test_signal_writes_profile_now(ctx):
    """PYSAMPLE_SIGNAL=USR2 (opt-in): the signal gets the profile written
    while the program runs on, unharmed."""
    out = ctx.tmpdir()
    path = os.path.join(out, "sig.txt")
    a = Armed(ctx, env={"PYSAMPLE_ARM": "0", "PYSAMPLE_OUTPUT": path, "PYSAMPLE_SIGNAL": "USR2",
                        "PYSAMPLE_FLUSH_INTERVAL": "0"})
    time.sleep(0.5)
    ctx.check(not os.path.exists(path), "no flush interval: nothing written yet")
    os.kill(a.pid, signal.SIGUSR2)
    ctx.check(harness.wait_for(lambda: os.path.exists(path), 30, 0.05),
              "SIGUSR2 wrote nothing within 30 s")
    ctx.check(a.proc.poll() is None, "the program still runs")
    prof = harness.Profile(path)
    ctx.check(prof.with_frame("armed_work") > 0, "the profile so far", prof.dump())
    rc, out_text, err = a.finish()
    check_program_unchanged(ctx, a, rc, out_text, err)
    ctx.check(harness.Profile(path).total >= prof.total, "the final profile has it all")


@harness.once
def test_low_rate_said_at_exit(ctx):
    """A profile whose achieved rate fell below half the requested one
    says so on stderr at exit, once, with the reason."""
    res = ctx.run(["-c", "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass\n"],
                  env={"PYSAMPLE_RATE": "10000", "PYSAMPLE_CPU_BUDGET": "0.1%"})
    lines = [l for l in res.stderr.splitlines() if l.startswith("pysample:")]
    ctx.check(res.rc == 0 and len(lines) == 1 and "not the 10000 requested" in lines[0]
              and "PYSAMPLE_CPU_BUDGET lowered the rate" in lines[0], "one note at exit", res.stderr)
    ctx.check(res.profile().total > 0, "the profile is written all the same")


@harness.once
def test_small_rate_shortfall_stays_off_stderr(ctx):
    """A profile short of its rate but above half of it (here: the process
    stopped for a third of its run, as a loaded machine stops the sampler)
    leaves the program's stderr empty; the shortfall is in the figures.
    PYSAMPLE_VERBOSE=1 says it.  A run that fell under half says it either
    way."""
    prog = ("import time\nend = time.time() + 2.1\nwhile time.time() < end: pass\n"
            "print('done')\n")
    for verbose in ("0", "1"):
        d = ctx.tmpdir()
        env = ctx.env({"PYSAMPLE_OUTPUT": os.path.join(d, "prof.txt"), "PYSAMPLE_QUALITY": "1",
                       "PYSAMPLE_VERBOSE": verbose})
        proc = subprocess.Popen([ctx.python, "-c", prog], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(0.6)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.7)
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
        q = json.load(open(os.path.join(d, "prof.txt.quality.json")))
        share = q["achieved_rate_hz"] / q["requested_rate_hz"]
        ctx.check(proc.returncode == 0 and out == "done\n" and share < 0.9,
                  "a run short of its rate (%.0f %% of it)" % (100 * share), err)
        said = [l for l in err.splitlines() if l.startswith("pysample:")]
        if abs(share - 0.5) < 0.05:
            continue  # at the edge: the exit's figures and the file's may differ
        want = 1 if share < 0.5 or verbose == "1" else 0
        ctx.check(len(said) == want and all("requested" in l for l in said),
                  "PYSAMPLE_VERBOSE=%s, %.0f %% of the rate: %d line(s) expected" % (
                      verbose, 100 * share, want), err)
        ctx.check(not said or "times a second, not the 100 requested" in said[0],
                  "the note says what it got and what was asked", err)


@harness.once
def test_quality_in_pprof_and_speedscope(ctx):
    a = Armed(ctx)
    d = a.dir
    res = tool(ctx, "record", "--pid", str(a.pid), "-d", "1", "--format", "pprof", "-o",
               os.path.join(d, "q.pb"), "-q")
    check_tool(ctx, res, "record --format pprof")
    res = tool(ctx, "record", "--pid", str(a.pid), "-d", "1", "--format", "speedscope", "-o",
               os.path.join(d, "q.json"), "-q")
    check_tool(ctx, res, "record --format speedscope")
    check_program_unchanged(ctx, a, *a.finish())
    doc = json.load(open(os.path.join(d, "q.json")))
    q = doc["pysample"]
    ctx.check(q["requested_rate_hz"] == 100 and q["how"] == "armed record" and q["ticks"] > 0
              and "of 100 Hz" in doc["exporter"], "speedscope metadata", doc.get("pysample"), doc["exporter"])
    go = shutil.which("go")
    if go is None:
        ctx.skip("go tool pprof is not installed (CI: golang-go); speedscope checked")
    raw = subprocess.run([go, "tool", "pprof", "-raw", os.path.join(d, "q.pb")], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, HOME=d, GOCACHE=go_cache()))
    ctx.check(raw.returncode == 0, "go tool pprof -raw failed", raw.stderr[-2000:])
    # One comment, the quality figures in words (pprof prints every
    # comment above every report): the process, the mode, the rates.
    comments = [l for l in raw.stdout.splitlines() if l.startswith("Comment:")]
    ctx.check("PeriodType: wall nanoseconds" in raw.stdout and "Period: 10000000" in raw.stdout
              and len(comments) == 1
              and re.search(r"from process %d: Python [0-9.]+, wall-clock, [0-9.]+ of 100 Hz, "
                            r"[1-9][0-9]* samples" % a.pid, comments[0]),
              "pprof fields", raw.stdout[:3000])


def test_quality_sidecar_of_output_files(ctx):
    """PYSAMPLE_QUALITY=1: each write of PYSAMPLE_OUTPUT leaves
    <file>.quality.json beside it, with the figures of that profile."""
    res = ctx.run(["-c", "import time\nend = time.time() + 0.5\nwhile time.time() < end: pass\n"],
                  output="prof.%p.txt", env={"PYSAMPLE_QUALITY": "1", "PYSAMPLE_RATE": "200"})
    ctx.check(res.rc == 0 and not harness.our_messages(res.stderr), "clean run", res.stderr)
    profs = [f for f in res.files if f.endswith(".txt")]
    ctx.check(len(profs) == 1 and res.files == sorted(profs + [profs[0] + ".quality.json"]),
              "a profile and its sidecar", res.files)
    prof = res.profile(profs[0])
    # The figures are as private as the profile (docs/configuration.md: 0600).
    for name in (profs[0], profs[0] + ".quality.json"):
        mode = os.stat(os.path.join(res.outdir, name)).st_mode & 0o777
        ctx.check(mode == 0o600, "%s has mode %o, expected 600" % (name, mode))
    q = json.load(open(os.path.join(res.outdir, profs[0] + ".quality.json")))
    pid = int(profs[0].split(".")[1])
    ctx.check(q["pid"] == pid and q["how"] == "PYSAMPLE_OUTPUT" and q["requested_rate_hz"] == 200
              and q["samples"] == prof.total and q["ticks"] > 0 and q["achieved_rate_hz"] > 0
              and re.match(r"^%d\.%d" % ctx.version, q["python"]), "sidecar %r, profile total %d"
              % (q, prof.total))


# ---------------------------------------------------------------------------
# Armed mode attacked (issue #26): the right process answers, nobody else
# stalls it, and nothing of the program is touched.  The library's own
# arithmetic, the same under every interpreter: run under the primary one.
# ---------------------------------------------------------------------------

def _need_root(ctx, *tools):
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        ctx.skip("needs root on Linux (other uids, namespaces)")
    for t in tools:
        if not shutil.which(t):
            ctx.skip("%s is not installed" % t)


def _open_dir(ctx, mode=0o755):
    """A fresh directory that other users can reach (the stop file of a
    program that drops to uid 1000; a shared control directory)."""
    d = ctx.tmpdir()
    os.chmod(d, mode)
    p = os.path.dirname(d)
    while p not in ("/", "/tmp", ""):
        os.chmod(p, os.stat(p).st_mode | 0o011)
        p = os.path.dirname(p)
    return d


def _run_as(uid, code, *args):
    """A Python helper run as uid: its Popen (stdout piped)."""
    p = subprocess.Popen(as_user(uid) + [sys.executable, "-c", code] + [str(a) for a in args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _live.append(p)
    return p


def _children_of(pid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _only_thread_but_main(pid):
    tids = [int(t) for t in os.listdir("/proc/%d/task" % pid) if int(t) != pid]
    return tids[0] if len(tids) == 1 else None


def _refusals(err):
    return [l for l in err.splitlines() if l.startswith("pysample:")]


@harness.once
def test_pid1_of_each_pid_namespace(ctx):
    """Two armed pid 1s in two PID namespaces sharing one network namespace
    (two containers of a pod): both listen, and `dump --pid 1` inside each
    namespace shows that namespace's pid 1, never the other's."""
    _need_root(ctx, "unshare", "nsenter")
    progs = []
    for name in ("alpha", "beta"):
        path = os.path.join(ctx.tmpdir(), "armed_%s.py" % name)
        shutil.copy(ctx.program("armed.py"), path)
        a = Armed(ctx, program=path, prefix=["unshare", "--pid", "--fork", "--mount-proc"])
        kids = _children_of(a.proc.pid)
        ctx.check(a.pid == 1 and len(kids) == 1, "pid 1 of its namespace", a.pid, kids)
        progs.append((a, path, kids[0]))
    for (a, path, host), (_, other, _) in zip(progs, reversed(progs)):
        res = tool(ctx, "dump", "--pid", "1", prefix=["nsenter", "--target", str(host), "--pid", "--mount"])
        check_tool(ctx, res, "dump --pid 1 inside the namespace of %s" % path)
        ctx.check(("armed_work (%s:" % path) in res.stdout and other not in res.stdout,
                  "dump --pid 1 must show %s" % path, res.stdout)
    for a, path, _ in progs:
        check_program_unchanged(ctx, a, *a.finish())


IMPOSTOR = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(8)
print("bound", flush=True)
forged = b"thread 1 (MainThread);forged_frame (forged.py:1) 1\n"
while True:
    c, _ = s.accept()
    c.recv(600)
    c.sendall(b"meta 0\ndata %d\n%sok 0\n" % (len(forged), forged))
    c.close()
"""


@harness.once
def test_impostor_is_not_believed(ctx):
    """Another user binds the control name of a process that is not armed:
    dump and record --pid refuse to talk to it, with one line and a
    non-zero status, and never print its frames."""
    _need_root(ctx, "setpriv")
    a = Armed(ctx, env={"PYSAMPLE_ARM": "0"})
    imp = _run_as(1000, IMPOSTOR, ctl_name(a.pid))
    ctx.check(imp.stdout.readline().strip() == "bound", "the impostor could not bind")
    res = tool(ctx, "dump", "--pid", str(a.pid))
    ctx.check(res.returncode != 0 and "forged" not in res.stdout + res.stderr
              and ("is held by process %d (uid 1000), not by process %d" % (imp.pid, a.pid)) in res.stderr,
              "dump must refuse the impostor", res.returncode, res.stdout, res.stderr)
    out = os.path.join(a.dir, "rec.txt")
    res = tool(ctx, "record", "--pid", str(a.pid), "-d", "1", "-o", out)
    ctx.check(res.returncode != 0 and not os.path.exists(out) and "recording" not in res.stderr,
              "record must refuse the impostor", res.returncode, res.stderr)
    check_program_unchanged(ctx, a, *a.finish())


# pid 1 of a new PID namespace (root), without the library (its threads
# would take pids): a squatter of uid argv[1] listens,
# in a child that exits at once, on the control name the next pid will
# want, and keeps the socket; the pid counter is set back so that the
# armed program (argv after "--", preloading argv[2]) gets exactly that pid.  Answers with
# forged frames full of escape sequences to whoever connects.
SQUAT_INIT = r"""
import os, signal, socket, sys
uid = int(sys.argv[1]); target = sys.argv[sys.argv.index("--") + 1:]
r, w = os.pipe()
squatter = os.fork()
if squatter == 0:
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ns = os.stat("/proc/self/ns/pid").st_ino
    child = os.fork()
    if child == 0:
        # listen() here: the kernel keeps this pid as the listener's
        # after this process is gone and its pid is another's.
        s.bind("\0pysample.0.%d.%d" % (ns, os.getpid()))
        s.listen(8)
        os._exit(0)
    os.waitpid(child, 0)
    os.write(w, b"%d" % child)
    frames = [(b"started", b"\x1b[H"), (b"meta", b"python 3.99\x1b[31m\nsamples 1\n"),
              (b"data", b"thread 1 (MainThread);forged_frame\x1b]0\x07 (forged.py:1);"
                        b"forged\xc2\x9b2J (f.py:2) 1\n"), (b"ok", b"\x1b[2J")]
    answer = b"".join(b"%s %d\n%s" % (kind, len(payload), payload) for kind, payload in frames)
    while True:
        c, _ = s.accept()
        try:
            c.sendall(answer)
        except OSError:
            pass  # refused by the tool
        c.close()
want = int(os.read(r, 32))
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(want - 1))
pid = os.fork()
if pid == 0:
    os.environ["LD_PRELOAD"] = sys.argv[2]
    os.execv(target[0], target)
if pid != want:
    sys.stderr.write("squat: the program got pid %d, not %d\n" % (pid, want))
status = os.waitpid(pid, 0)[1]
os.kill(squatter, signal.SIGKILL)
sys.exit(os.waitstatus_to_exitcode(status))
"""

# The tool with one of its parts replaced (a Python statement), run in the
# PID namespace of process init.
TOOL_WITH = ("import sys; sys.path.insert(0, %r); from pysample_tool import peercheck; %s; "
             "from pysample_tool.cli import main; sys.exit(main())")
NO_PIDFD = "peercheck.listener_pid = lambda sock: None"  # a kernel before Linux 6.5
BELIEVED = "peercheck.verify = lambda *a: None"  # a squatter that got through


def _tool_in(init, patch, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSAMPLE_") and k != "LD_PRELOAD"}
    cmd = ["nsenter", "--target", str(init), "--pid", "--mount", sys.executable, "-c", TOOL_WITH % (SCRIPTS, patch)]
    return subprocess.run(cmd + list(args), env=env, capture_output=True, timeout=60, cwd="/")


def _raw_controls(res):
    """Control bytes (C0 but newline, DEL, UTF-8 C1) in what the tool printed."""
    return re.findall(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", res.stdout + res.stderr)


@harness.once
def test_pid_reuse_squatter_is_refused(ctx):
    """Issue #39 item 2.  A process listens on the control name of its own
    pid and exits; its parent keeps the socket; the next process to get that
    pid is an armed program, whose bind fails.  SO_PEERCRED names that pid as
    the listener's, yet dump and record --pid refuse the squatter in one
    line, printing none of its frames or escape bytes: a squatter of another
    uid, one of the program's own uid (told by SO_PEERPIDFD), and the same
    without SO_PEERPIDFD (told by the listening socket's inode, absent from
    the program's /proc/PID/fd).  A tool made to believe the squatter still
    prints none of its escape bytes.  The program says once that it cannot
    listen, and runs on unchanged."""
    _need_root(ctx, "setpriv", "unshare", "nsenter")
    init = os.path.join(ctx.tmpdir(), "squat_init.py")
    with open(init, "w") as f:
        f.write(SQUAT_INIT)
    for squatter_uid, patch in ((65534, "pass"), (0, "pass"), (0, NO_PIDFD)):
        a = Armed(ctx, prefix=["env", "-u", "LD_PRELOAD", "unshare", "--pid", "--kill-child", "--mount-proc",
                               sys.executable, init, str(squatter_uid), ctx.lib, "--"])
        kids = _children_of(a.proc.pid)
        ctx.check(len(kids) == 1, "the namespace's init", kids)
        what = "squatter of uid %d%s" % (squatter_uid, ", no SO_PEERPIDFD" if patch == NO_PIDFD else "")
        runs = [["dump", "--pid", str(a.pid)]]
        if squatter_uid:
            runs.append(["record", "--pid", str(a.pid), "-d", "1", "-o", os.path.join(a.dir, "rec.txt")])
        for args in runs:
            res = _tool_in(kids[0], patch, *args)
            out, err = res.stdout.decode("utf-8", "replace"), res.stderr.decode("utf-8", "replace")
            said = err.splitlines()
            ctx.check(res.returncode != 0 and out == "" and len(said) == 1 and said[0].startswith("pysample:")
                      and "pids are reused" in said[0] and "refusing to talk to it" in said[0]
                      and not _raw_controls(res), "%s %s must refuse in one line" % (args[0], what),
                      res.returncode, out, err)
        if squatter_uid:
            for args in (["dump", "--pid", str(a.pid)], ["start", "--pid", str(a.pid)]):
                res = _tool_in(kids[0], BELIEVED, *args)
                ctx.check(res.returncode == 0 and (args[0] == "start" or b"forged" in res.stdout),
                          "the believing %s did not reach the squatter" % args[0], res.stdout, res.stderr)
                ctx.check(not _raw_controls(res), "%s printed the squatter's control bytes" % args[0],
                          _raw_controls(res), res.stdout, res.stderr)
        ctx.check(not os.path.exists(os.path.join(a.dir, "rec.txt")), "record wrote the squatter's profile")
        rc, text, err = a.finish()
        lines = _refusals(err)
        ctx.check(rc == 7 and text.strip().endswith("done 1") and len(lines) == 1
                  and "cannot listen on @pysample.0." in lines[0]
                  and "another process holds this process's name" in lines[0],
                  "the program must say once that it cannot listen, and run on", rc, err[-2000:])


def _listens_again(pid):
    """1 if the process's control name is bound by a socket one of its
    descriptors holds."""
    want = "@" + ctl_name(pid)
    with open("/proc/net/unix") as f:
        inodes = [l.split()[6] for l in f if len(l.split()) >= 8 and l.split()[7] == want]
    held = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            held.add(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
    return any("socket:[%s]" % i in held for i in inodes)


@harness.once
def test_closed_descriptors_are_not_touched(ctx):
    """The program closes every descriptor (os.closerange) and gets the
    library's numbers back for its own log file, pipe and server socket:
    nothing is written to the log, the pipe is not drained, the server's
    connection is not accepted, and the library makes its own again."""
    d = ctx.tmpdir()
    log, server = os.path.join(d, "log"), os.path.join(d, "srv.sock")
    a = Armed(ctx, program="armed_fds.py", args=["closefds", log, server])
    placed = [l for l in a.early.decode().splitlines() if l.startswith("placed ")]
    ctx.check(placed and {"log", "pipe", "server"} <= set(placed[0].split()[1:]),
              "the program took the library's numbers", a.early)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(server)
    c.sendall(b"hello\n")
    # Its checks run at least every 2 s: wait until it listens again, on a
    # socket it holds; then a dump.
    relistened = harness.wait_for(lambda: _listens_again(a.pid), 30, 0.05)
    res = tool(ctx, "dump", "--pid", str(a.pid))
    c.settimeout(0.2)
    try:
        got = c.recv(200)
    except socket.timeout:
        got = None
    rc, out, err = a.finish()  # the exit wakes the library's thread: a write to its pipe
    c.close()
    with open(log, "rb") as f:
        logged = f.read()
    ctx.check(logged == b"log line\n", "the program's log file was written to: %r" % logged)
    ctx.check(got is None, "the library answered on the program's own socket: %r" % got)
    ctx.check("pipe ok" in out and "server ok" in out, "the program's pipe and socket", out)
    ctx.check(rc == 7 and not _refusals(err), "program unchanged", rc, err)
    ctx.check(relistened, "the library did not make its control socket again")
    check_tool(ctx, res, "dump --pid after closerange")
    ctx.check("fds_work (" in res.stdout, "the dump", res.stdout)


@harness.once
def test_dump_right_after_the_socket_is_taken(ctx):
    """The program puts its own listening socket over the library's with
    dup2(): the library's wait still holds the old one (and its name) for
    up to 2 s, and a connection made meanwhile is reset unanswered when
    the wait ends.  The first dump right after must still get its answer
    (the tool tries again, the library listens again), and never blame
    the user (it said "accepts only its own user", issue #39)."""
    server = os.path.join(ctx.tmpdir(), "srv.sock")
    a = Armed(ctx, program="armed_fds.py", args=["dup2listen", server])
    ctx.check("placed server" in a.early.decode(), "the program took the library's socket", a.early)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(server)
    c.sendall(b"hello\n")
    res = tool(ctx, "dump", "--pid", str(a.pid))
    c.settimeout(0.2)
    try:
        got = c.recv(200)
    except socket.timeout:
        got = None
    rc, out, err = a.finish()
    c.close()
    ctx.check(got is None, "the library answered on the program's own socket: %r" % got)
    ctx.check("server ok" in out, "the program's socket", out)
    ctx.check(rc == 7 and not _refusals(err), "program unchanged", rc, err)
    ctx.check("own user" not in res.stderr, "the user was blamed", res.stderr)
    check_tool(ctx, res, "the first dump --pid after dup2() over the library's socket")
    ctx.check("fds_work (" in res.stdout, "the dump", res.stdout)


def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int([l for l in f if l.startswith("VmRSS:")][0].split()[1])


@harness.once
def test_sessions_keep_no_timeline(ctx):
    """Armed with PYSAMPLE_TIMELINE=1 and no output: a session's profile
    goes to its client, which never gets a timeline, so none is kept.  Its
    records (16 bytes a sample, up to PYSAMPLE_TIMELINE_MAX) grew the
    process by hundreds of MB nobody would read, and its exit waited for
    the kernel to free them (issue #39)."""
    a = Armed(ctx, program="armed_threads.py", args=["200"],
              env={"PYSAMPLE_TIMELINE": "1", "PYSAMPLE_TIMELINE_MAX": "100000000"})
    before = _rss_kb(a.pid)
    out = os.path.join(a.dir, "rec.txt")
    most = 0
    for _ in range(6):  # until one session took 300 000 samples (a loaded machine takes fewer)
        res = tool(ctx, "record", "--pid", str(a.pid), "-d", "2", "--rate", "1000", "-o", out)
        check_tool(ctx, res, "record --pid")
        with open(out + ".quality.json") as f:
            most = max(most, json.load(f)["samples"])
        if most >= 300000:
            break
    grown = _rss_kb(a.pid) - before
    rc, text, err = a.finish()
    ctx.check(rc == 7 and not harness.our_messages(err), "program unchanged", rc, err[-2000:])
    ctx.check(most >= 100000, "sessions took only %d samples" % most)
    print("    %d samples in a session, the process grew %d kB" % (most, grown), flush=True)
    ctx.check(grown * 1024 < most * 16 // 4, "the process grew %d kB over sessions of up to %d samples: "
              "a timeline was kept (16 bytes a sample)" % (grown, most))


@harness.once
def test_fd_limit_does_not_spin(ctx):
    """A program at its descriptor limit with a connection pending: accept
    fails with EMFILE and the socket stays readable; the sampler thread
    must back off, not spin."""
    a = Armed(ctx, program="armed_fds.py", args=["fdlimit"])
    tid = _only_thread_but_main(a.pid)
    ctx.check(tid is not None, "the library's thread")
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect("\0" + ctl_name(a.pid))
    s0, w0 = _schedstat_ns(a.pid, tid), time.monotonic_ns()
    time.sleep(2.0)
    s1, w1 = _schedstat_ns(a.pid, tid), time.monotonic_ns()
    c.close()
    share = 100.0 * (s1 - s0) / (w1 - w0)
    ctx.check(share < 5.0, "the sampler thread used %.1f%% of a core at the fd limit" % share)
    check_program_unchanged(ctx, a, *a.finish())


FLOOD = r"""
import socket, sys
name = "\0" + sys.argv[1]
print("flooding", flush=True)
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(name)
    except OSError:
        pass
    s.close()
"""


@harness.once
def test_flood_from_another_user(ctx):
    """Two processes of another uid connect as fast as they can: the
    sampler thread's CPU stays bounded, and the owner's dumps get through."""
    _need_root(ctx, "setpriv")
    a = Armed(ctx)
    tid = _library_tid(a)
    ctx.check(tid is not None, "the library's thread")
    floods = [_run_as(1000, FLOOD, ctl_name(a.pid)) for _ in range(3)]
    t0 = time.monotonic_ns()
    for f in floods:
        ctx.check(f.stdout.readline().strip() == "flooding", "flooder did not start")
    s0, w0 = _schedstat_ns(a.pid, tid), time.monotonic_ns()
    for _ in range(3):
        res = tool(ctx, "dump", "--pid", str(a.pid), timeout=60)
        check_tool(ctx, res, "dump --pid during a flood")
    time.sleep(max(0.0, 3.0 - (time.monotonic_ns() - w0) / 1e9))
    s1, w1 = _schedstat_ns(a.pid, tid), time.monotonic_ns()
    for f in floods:
        f.kill()
        f.wait()
    share = 100.0 * (s1 - s0) / (w1 - w0)
    ctx.check(share < 10.0, "the sampler thread used %.1f%% of a core during the flood" % share)
    rc, out, err = a.finish()
    lines = _refusals(err)
    ctx.check(rc == 7 and len(lines) == 2 and "refused a control connection from uid 1000" in lines[0]
              and re.search(r"refused \d+ more control connections .*from uid 1000", lines[1]),
              "one refusal line, and the count of the others at exit", err[-2000:])
    # Every refusal is counted in those lines: at most 64 accepts per 100 ms.
    refused = 1 + int(re.search(r"refused (\d+) more", lines[1]).group(1))
    seconds = (time.monotonic_ns() - t0) / 1e9
    print("    flood: %d refused in %.1f s, sampler %.1f%% of a core" % (refused, seconds, share), flush=True)
    ctx.check(refused <= 640 * seconds * 1.1 + 64, "%d refusals in %.1f s: more than 64 per 100 ms"
              % (refused, seconds))


REFUSED_EVERY_SECOND = r"""
import socket, sys, time
for k in range(int(sys.argv[2])):
    if k:
        time.sleep(1.2)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + sys.argv[1])
    s.settimeout(30)
    while s.recv(4096):
        pass  # the err frame, then the library's close: this one is refused
    s.close()
print("done", flush=True)
"""


@harness.once
def test_refusals_said_once(ctx):
    """Another user connects once a second: the first refusal is said, the
    others only counted, and the count said at exit (one line a second
    put a line per second in the victim's log for as long as anyone
    liked, issue #39)."""
    _need_root(ctx, "setpriv")
    a = Armed(ctx)
    p = _run_as(1000, REFUSED_EVERY_SECOND, ctl_name(a.pid), 3)
    out, perr = p.communicate(timeout=60)
    ctx.check(out.strip() == "done", "the connecting helper failed", out, perr)
    rc, out, err = a.finish()
    lines = _refusals(err)
    ctx.check(rc == 7 and out.strip().endswith("done 1"), "program unchanged", rc, out, err)
    ctx.check(len(lines) == 2 and "refused a control connection from uid 1000" in lines[0]
              and "(and" not in lines[0] and
              re.search(r"refused 2 more control connections since the last such line "
                        r"\(the last from uid 1000, pid \d+\)$", lines[1]),
              "the first refusal, then the count of the 2 others at exit", err)


@harness.once
def test_half_closed_client_gets_its_reply(ctx):
    """A client that half-closes after its request (socat) still gets the
    whole reply."""
    a = Armed(ctx)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect("\0" + ctl_name(a.pid))
    c.sendall(b"pysample/1 record duration=1\n")
    c.shutdown(socket.SHUT_WR)
    c.settimeout(60)
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    c.close()
    ctx.check(data.endswith(b"ok 0\n") and b"armed_work (" in data, "the reply", data[-500:])
    check_program_unchanged(ctx, a, *a.finish())


@harness.once
def test_privilege_drop_ends_answers(ctx):
    """Armed as root, then setuid(1000): uid 1000 may not read the process
    (not dumpable), and neither does pysample answer it."""
    _need_root(ctx, "setpriv")
    a = Armed(ctx, program="armed_fds.py", args=["setuid", "1000"], stopdir=_open_dir(ctx))
    res = tool(ctx, "dump", "--pid", str(a.pid), user=1000)
    ctx.check(res.returncode != 0 and "fds_work" not in res.stdout and
              ("changed its user" in res.stderr or "not dumpable" in res.stderr),
              "uid 1000 must be refused", res.returncode, res.stdout, res.stderr)
    rc, out, err = a.finish()
    lines = _refusals(err)
    ctx.check(rc == 7 and len(lines) == 1 and "refused a control connection from uid 1000" in lines[0],
              "one refusal line", err)


@harness.once
def test_user_namespace_target_refuses_host_users(ctx):
    """A target in a user namespace without a mapping runs as the overflow
    uid 65534, which is also how it sees every host user: those are
    refused; a process of its own user namespace is answered."""
    _need_root(ctx, "unshare", "nsenter", "setpriv")
    a = Armed(ctx, prefix=["unshare", "--user"], stopdir=_open_dir(ctx))
    res = tool(ctx, "dump", "--pid", str(a.pid), user=1000)
    ctx.check(res.returncode != 0 and "armed_work" not in res.stdout and "another user namespace" in res.stderr,
              "a host user must be refused", res.returncode, res.stdout, res.stderr)
    res = tool(ctx, "dump", "--pid", str(a.pid),
               prefix=["nsenter", "--target", str(a.pid), "--user", "--preserve-credentials"])
    check_tool(ctx, res, "dump --pid from the target's own user namespace")
    ctx.check("armed_work (" in res.stdout, "the dump", res.stdout)
    rc, out, err = a.finish()
    lines = _refusals(err)
    ctx.check(rc == 7 and len(lines) == 1 and "another user namespace" in lines[0], "one refusal line", err)


@harness.once
def test_other_network_namespace_said(ctx):
    """A target in another network namespace cannot be reached by its
    abstract name: the tool says where to run instead; from inside, it
    works."""
    _need_root(ctx, "unshare", "nsenter")
    a = Armed(ctx, prefix=["unshare", "--net"])
    res = tool(ctx, "dump", "--pid", str(a.pid))
    ctx.check(res.returncode != 0 and "another network namespace" in res.stderr, "where to run", res.stderr)
    res = tool(ctx, "dump", "--pid", str(a.pid), prefix=["nsenter", "--target", str(a.pid), "--net"])
    check_tool(ctx, res, "dump --pid inside the network namespace")
    check_program_unchanged(ctx, a, *a.finish())


PLANT = r"""
import os, socket, sys
d, ns = sys.argv[1], sys.argv[2]
stale = os.path.join(d, "pysample.0.%s.11.sock" % ns)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(stale)
s.close()  # a socket file of uid 1000 that nobody listens on
os.symlink(sys.argv[3], os.path.join(d, "pysample.0.%s.12.sock" % ns))
print("planted", flush=True)
"""


@harness.once
def test_shared_control_directory_plants(ctx):
    """PYSAMPLE_CONTROL_DIR on a directory everyone may write: another
    user's stale socket named like ours is left alone, a symlink named like
    a socket is not followed (nor removed), and a socket of our uid that
    never accepts does not hang the sweep (the program samples, answers and
    exits)."""
    _need_root(ctx, "setpriv")
    d = _open_dir(ctx, 0o1777)
    ns = os.stat("/proc/self/ns/pid").st_ino
    victim_path = os.path.join(ctx.tmpdir(), "victim.sock")
    victim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    victim.bind(victim_path)
    victim.listen(8)
    victim.setblocking(False)
    os.chmod(os.path.dirname(victim_path), 0o755)
    plant = _run_as(1000, PLANT, d, ns, victim_path)
    ctx.check(plant.stdout.readline().strip() == "planted", "planting failed", plant.stderr.read())
    # Ours (uid 0), listening with a full backlog, never accepting: a
    # blocking connect to it never returns.
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.bind(os.path.join(d, "pysample.0.%d.13.sock" % ns))
    stuck.listen(0)
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    filler.setblocking(False)
    filler.connect(stuck.getsockname())
    before = sorted(os.listdir(d))
    out = os.path.join(ctx.tmpdir(), "prof.txt")
    a = Armed(ctx, env={"PYSAMPLE_CONTROL_DIR": d, "PYSAMPLE_OUTPUT": out})
    # (PYSAMPLE_OUTPUT profiles the process: a dump would be "busy".)
    reply = _remote().request(a.pid, "status", d, timeout=60)
    ctx.check(reply.meta.get("how") == "armed none", "status with planted names in the directory", reply.meta)
    try:
        conn, _ = victim.accept()
        connected = True
    except BlockingIOError:
        connected = False
    ctx.check(not connected, "the sweep followed a planted symlink and connected to another socket")
    after = sorted(os.listdir(d))
    ctx.check(set(before) <= set(after), "planted names were removed", before, after)
    rc, text, err = a.finish()
    ctx.check(rc == 7 and not harness.our_messages(err) and os.path.exists(out),
              "the program ran and wrote", rc, err)
    for sock in (stuck, filler, victim):
        sock.close()


SWAP = r"""
import os, stat, sys, time
d, target = sys.argv[1], sys.argv[2]
give_up = time.monotonic() + 30
while time.monotonic() < give_up:
    for name in os.listdir(d):
        path = os.path.join(d, name)
        if name.startswith("pysample.") and name.endswith(".sock") and stat.S_ISSOCK(os.lstat(path).st_mode):
            os.rename(path, path + ".moved")
            os.symlink(target, path)
            print("swapped", name, flush=True)
            sys.exit(0)
    time.sleep(0.001)
print("no socket appeared", flush=True)
"""


def _chmod_window(ctx):
    """programs/chmod_window.c built into a fresh directory (or a skip)."""
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc):
        ctx.skip("no C compiler (%s)" % cc)
    path = os.path.join(ctx.tmpdir(), "libchmodwindow.so")
    r = subprocess.run([cc, "-O2", "-fPIC", "-shared", "-o", path, ctx.program("chmod_window.c"), "-ldl"],
                       capture_output=True, text=True, timeout=120)
    ctx.check(r.returncode == 0, "building chmod_window.c failed", r.stderr[-2000:])
    return path


@harness.once
def test_socket_mode_never_set_through_a_symlink(ctx):
    """PYSAMPLE_CONTROL_DIR on a directory everyone may write (an emptyDir
    is 0777): another user swaps a symlink in for the socket file right
    after bind (a preloaded chmod waits for the swap: the race is won every
    time).  The root program must not change the mode of the file the
    symlink points to, and its socket file is 0600 all the same."""
    _need_root(ctx, "setpriv")
    shim = _chmod_window(ctx)
    d = _open_dir(ctx, 0o777)
    target = os.path.join(ctx.tmpdir(), "precious")
    with open(target, "w") as f:
        f.write("x\n")
    os.chmod(target, 0o644)
    racer = _run_as(1000, SWAP, d, target)
    a = Armed(ctx, env={"PYSAMPLE_CONTROL_DIR": d, "LD_PRELOAD": shim + " " + ctx.lib})
    said = racer.stdout.readline().split()
    ctx.check(said[:1] == ["swapped"], "the racer did not find the socket", said, racer.stderr.read())
    moved = os.path.join(d, said[1] + ".moved")
    mode = stat.S_IMODE(os.stat(target).st_mode)
    ctx.check(mode == 0o644, "the program changed the mode of %s through a symlink: %o" % (target, mode))
    sock_mode = stat.S_IMODE(os.lstat(moved).st_mode)
    ctx.check(sock_mode & 0o077 == 0, "the socket file is open to others: %o" % sock_mode)
    check_program_unchanged(ctx, a, *a.finish())


@harness.once
def test_pid_failures_say_what_to_do(ctx):
    """Every way --pid can fail says what to do: no such process (before
    any "recording..."), the library not loaded, loaded but not armed, and
    another user's process."""
    res = tool(ctx, "record", "--pid", "999999", "-d", "1")
    ctx.check(res.returncode != 0 and "no process 999999" in res.stderr and "recording" not in res.stderr,
              "record --pid 999999", res.stderr)
    # Without the library it is read from outside (pysample-attach, as root
    # here: allowed to trace it), and the tool says so.
    a = Armed(ctx, preload=False)
    res = tool(ctx, "dump", "--pid", str(a.pid))
    ctx.check(res.returncode == 0 and "is not armed: reading it from outside" in res.stderr
              and "armed_work" in res.stdout, "not loaded: read from outside", res.returncode, res.stdout,
              res.stderr)
    check_program_unchanged(ctx, a, *a.finish())
    a = Armed(ctx, env={"PYSAMPLE_ARM": "0"})
    res = tool(ctx, "dump", "--pid", str(a.pid))
    ctx.check(res.returncode != 0 and "loaded in it but not armed" in res.stderr, "not armed", res.stderr)
    check_program_unchanged(ctx, a, *a.finish())
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return
    a = Armed(ctx, program="armed_fds.py", args=["setuid", "1000"], stopdir=_open_dir(ctx))
    res = tool(ctx, "dump", "--pid", str(a.pid))
    # (armed as root, then uid 1000: it answers nobody, and the tool says so)
    ctx.check(res.returncode != 0 and "changed its user since it was armed" in res.stderr,
              "root: the process changed its user", res.stderr)
    rc, out, err = a.finish()
    ctx.check(rc == 7, "program unchanged", err)


def test_session_options_pid(ctx):
    """--mode cpu is honoured for the session (a blocked thread is not
    sampled, the figures say cpu); --native and --async on a process
    started without them are refused in one line."""
    a = Armed(ctx)
    out = os.path.join(a.dir, "cpu.txt")
    res = tool(ctx, "record", "--pid", str(a.pid), "-d", "1", "--mode", "cpu", "-o", out)
    check_tool(ctx, res, "record --pid --mode cpu")
    prof = harness.Profile(out)
    quality = json.load(open(out + ".quality.json"))
    ctx.check(quality["mode"] == "cpu" and prof.with_frame("waiter_wait") == 0 and prof.with_frame("armed_work") > 0,
              "cpu mode: the waiter is not sampled", quality, prof.dump())
    for flag, var in (("--native", "PYSAMPLE_NATIVE"), ("--async", "PYSAMPLE_ASYNC")):
        res = tool(ctx, "record", "--pid", str(a.pid), "-d", "1", flag)
        lines = [l for l in res.stderr.splitlines() if l.startswith("pysample:")]
        ctx.check(res.returncode != 0 and len(lines) == 1 and ("without %s" % var) in lines[0],
                  "%s refused in one line" % flag, res.stderr)
    res = tool(ctx, "top", "--pid", str(a.pid), "--duration", "2", "--mode", "cpu")
    check_tool(ctx, res, "top --pid --mode cpu")
    ctx.check("cpu-clock" in res.stdout and "wall-clock" not in res.stdout, "top's header says cpu", res.stdout)
    check_program_unchanged(ctx, a, *a.finish())


def test_dump_beside_a_session(ctx):
    """dump works while a `start` session runs, and the session's profile
    goes on."""
    a = Armed(ctx)
    check_tool(ctx, tool(ctx, "start", "--pid", str(a.pid)), "start --pid")
    res = tool(ctx, "dump", "--pid", str(a.pid))
    check_tool(ctx, res, "dump --pid beside a session")
    # Innermost first: armed_work, or the os.path.exists it calls once a
    # round, where a one-shot dump sometimes finds a debug build (as
    # test_dump_pid allows).
    m = re.search(r"thread %d \(MainThread\):\n((?:    .*\n)+)" % a.pid, res.stdout)
    frames = [l.strip() for l in m.group(1).splitlines()] if m else []
    ctx.check(any(f.startswith("armed_work (") for f in frames[:2]) and
              "waiter_wait (" in res.stdout, "the dump", res.stdout)
    out = os.path.join(a.dir, "ss.txt")
    res = tool(ctx, "stop", "--pid", str(a.pid), "-o", out)
    check_tool(ctx, res, "stop --pid")
    ctx.check(harness.Profile(out).with_frame("armed_work") > 0, "the session's profile")
    check_program_unchanged(ctx, a, *a.finish())


# Issue #39 item 5: every blocking step of the tool's talk with a target has
# a deadline (scripts/pysample_tool/deadline.py), and its expiry says in one
# line what the target is doing.  Without the deadlines each of these tools
# waits forever: the test's own limit turns that into a failure.
# Far beyond deadline.CONNECT_S and STOPPED_S (the tool's start on a loaded
# machine takes seconds), and above ANSWER_S: a stopped process is still
# told apart by the line, which must say stopped or frozen.
HUNG_S = 60

SQUATTER = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(0)
fillers = []
while True:                      # queue connections until it is full
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.setblocking(False)
    try:
        c.connect("\0" + sys.argv[1])
    except BlockingIOError:
        break
    fillers.append(c)
print("full %d" % len(fillers), flush=True)
sys.stdin.read()                 # never accepts
"""


def _dump_in_time(ctx, pid, what):
    """dump --pid's result, failing (not hanging) if it outlasts HUNG_S."""
    try:
        res = tool(ctx, "dump", "--pid", str(pid), timeout=HUNG_S)
    except subprocess.TimeoutExpired:
        ctx.check(False, "dump --pid on %s still waited after %d s" % (what, HUNG_S))
    lines = _refusals(res.stderr)
    ctx.check(res.returncode != 0 and len(lines) == 1 and len(res.stderr.splitlines()) == 1
              and not res.stdout, "dump --pid on %s: one line and a failure" % what,
              res.returncode, res.stdout, res.stderr)
    return lines[0]


@harness.once
def test_full_queue_squatter_has_a_deadline(ctx):
    """Another user binds the control name of a process that is not armed,
    listens with backlog 0, fills its queue and never accepts: dump gives up
    after its connect deadline, naming the full queue."""
    _need_root(ctx, "setpriv")
    a = Armed(ctx, env={"PYSAMPLE_ARM": "0"})
    name = ctl_name(a.pid)
    squat = subprocess.Popen(as_user(1000) + [sys.executable, "-c", SQUATTER, name], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _live.append(squat)
    ready = squat.stdout.readline()
    ctx.check(ready.startswith("full "), "the squatter could not fill its queue", ready, squat.stderr.read()
              if squat.poll() is not None else "")
    line = _dump_in_time(ctx, a.pid, "a full-queue squatter")
    ctx.check(("the control socket of process %d, @%s, took no connection" % (a.pid, name)) in line
              and "listen queue is full" in line, "the line names the full queue", line)
    squat.kill()
    check_program_unchanged(ctx, a, *a.finish())


@harness.once
def test_stopped_target_said(ctx):
    """An armed process stopped by SIGSTOP: dump says it is stopped, long
    before the answer deadline; resumed, it answers the next dump."""
    a = Armed(ctx)
    os.kill(a.pid, signal.SIGSTOP)
    try:
        ctx.check(harness.wait_for(lambda: _stat_state(a.pid) == "T", 10), "SIGSTOP did not stop it")
        line = _dump_in_time(ctx, a.pid, "a stopped process")
    finally:
        os.kill(a.pid, signal.SIGCONT)
    ctx.check(("process %d is stopped" % a.pid) in line and "kill -CONT %d" % a.pid in line,
              "the line says stopped", line)
    check_tool(ctx, tool(ctx, "dump", "--pid", str(a.pid)), "dump --pid once resumed")
    check_program_unchanged(ctx, a, *a.finish())


def _stat_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _cgroup2_mount():
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[2] == "cgroup2":
                return fields[1]
    return None


@harness.once
def test_frozen_cgroup_target_said(ctx):
    """An armed process in a frozen cgroup v2 (cgroup.freeze 1): dump says
    it is in a frozen cgroup; thawed, it answers again."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        ctx.skip("needs root on Linux (a cgroup v2 to freeze)")
    mount = _cgroup2_mount()
    group = os.path.join(mount or "/nonexistent", "pysample-test-%d" % os.getpid())
    try:
        os.mkdir(group)
    except OSError as e:
        ctx.skip("no writable cgroup v2 here (%s)" % (e.strerror or e))
    a = home = None
    try:
        if not os.path.exists(os.path.join(group, "cgroup.freeze")):
            ctx.skip("this kernel's cgroup v2 has no cgroup.freeze")
        a = Armed(ctx)
        home = _cgroup2_of(a.pid)
        try:
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write("%d\n" % a.pid)
        except OSError as e:
            ctx.skip("cannot move a process into a new cgroup v2 here (%s)" % (e.strerror or e))
        with open(os.path.join(group, "cgroup.freeze"), "w") as f:
            f.write("1\n")
        ctx.check(harness.wait_for(lambda: "frozen 1" in open(os.path.join(group, "cgroup.events")).read(), 10),
                  "the cgroup did not freeze")
        line = _dump_in_time(ctx, a.pid, "a process in a frozen cgroup")
        ctx.check(("process %d is in a frozen cgroup (%s)" % (a.pid, group)) in line, "the line says frozen", line)
    finally:
        _thaw(group, home and os.path.join(mount, home.lstrip("/")), a)
    check_tool(ctx, tool(ctx, "dump", "--pid", str(a.pid)), "dump --pid once thawed")
    check_program_unchanged(ctx, a, *a.finish())


def _cgroup2_of(pid):
    with open("/proc/%d/cgroup" % pid) as f:
        return [l.split(":", 2)[2].strip() for l in f if l.startswith("0::")][0]


def _thaw(group, home, armed):
    """Thaws the group, moves the process back to its cgroup (home),
    removes the group."""
    if os.path.exists(os.path.join(group, "cgroup.freeze")):
        with open(os.path.join(group, "cgroup.freeze"), "w") as f:
            f.write("0\n")
    if home is not None and armed.proc.poll() is None:
        with open(os.path.join(home, "cgroup.procs"), "w") as f:
            f.write("%d\n" % armed.pid)
    harness.wait_for(lambda: not open(os.path.join(group, "cgroup.procs")).read().strip(), 10)
    os.rmdir(group)


# A process that was not started armed, read from outside (docs/attach.md).
from outside_scenarios import (test_outside_dump, test_outside_record_proportions,  # noqa: E402,F401
                               test_outside_other_user_refused)
