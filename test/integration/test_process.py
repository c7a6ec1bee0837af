"""Issue 4: every process gets its profile -- fork, exec, multiprocessing,
subprocesses, os._exit, signals, long-running servers.

Each scenario runs its program twice at the same time, with the library
and without, and checks that the exit status (or the signal it died of)
and the output are the same; then that the profiles written are exactly
the expected set of files (one per process, no temporary file left over),
that each parses line by line (harness.Profile: no truncated or garbled
line) and that each shows its own process's functions and not another's.
The programs are test/integration/programs/proc_*.py.
"""
import json
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

import harness
from harness import Profile

RATE = {"PYSAMPLE_RATE": "200"}
TEMP_RE = re.compile(r"^\..*\.tmp$")


class Run:
    """One run of a program, with the library (lib=True) or without.

    Every run is the leader of its own session and process group, so that
    whatever it forked (prefork workers, multiprocessing children) can be
    killed with it: a run that fails or hangs must not leave processes
    behind that spin for the rest of the suite or hold its stdout open.
    Nothing here waits without a deadline (wait_line, finish), and
    teardown() below kills every run a scenario left running, however it
    ended."""

    def __init__(self, ctx, args, lib, output="prof.%p.txt", env=None, interp_args=(),
                 outdir=None, wrap=()):
        self.ctx = ctx
        self.lib = lib
        self.outdir = outdir or ctx.tmpdir()
        e = {}
        if lib:
            e["PYSAMPLE_OUTPUT"] = os.path.join(self.outdir, output)
        e.update(RATE)
        e.update(env or {})
        env = ctx.env(e, preload=lib)
        cmd = [ctx.python] + list(interp_args) + list(args)
        if wrap:
            # A C program that starts the interpreter (slowreap.c): the
            # library goes to the interpreter only, through env(1).
            pre = ["env", "LD_PRELOAD=" + env.pop("LD_PRELOAD")] if "LD_PRELOAD" in env else []
            cmd = list(wrap) + pre + cmd
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     cwd=os.path.dirname(ctx.program("proc_common.py")),
                                     preexec_fn=default_signals, start_new_session=True)
        LIVE.append(self)
        # stdout read so far by wait_line(), as bytes: it reads the pipe
        # itself (os.read), never through the buffered file object, whose
        # buffer communicate() would not see.
        self.head = b""
        self.rc = None
        self.stdout = self.stderr = ""

    def wait_line(self, want, timeout=60):
        """Reads stdout until a line equals want (the program is ready).
        Gives up at the deadline even if the program neither prints nor
        ends (a blocking readline() would wait for ever), and then kills
        the run before failing."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            lines = self.head.split(b"\n")
            if any(l.strip() == want.encode() for l in lines[seen:-1]):
                return
            seen = max(len(lines) - 1, 0)
            left = deadline - time.monotonic()
            if left <= 0:
                why = "never printed %r within %d s" % (want, timeout)
                break
            if not select.select([fd], [], [], min(left, 1.0))[0]:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                why = "closed stdout without printing %r" % want
                break
            self.head += chunk
        self.kill_group()
        self.reap()
        raise AssertionError("%s %s (lib=%s); got %r\nstderr:\n%s"
                             % (self.proc.args, why, self.lib,
                                self.head.decode(errors="replace")[-1500:],
                                (self.stderr or "")[-2500:]))

    def finish(self, timeout=120):
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Never leave a spinning program behind: kill it with everything
            # it forked (a worker that outlived it holds stdout, and a plain
            # communicate() would wait for ever) and say which one hung.
            self.kill_group()
            self.reap()
            raise AssertionError("%s did not end within %d s (lib=%s)\nstdout:\n%s\n"
                                 "stderr:\n%s" % (self.proc.args, timeout, self.lib,
                                                  self.stdout[-1500:], self.stderr[-2500:]))
        self.stdout = self.head.decode() + out
        self.stderr = err
        self.rc = self.proc.returncode
        return self

    def kill_group(self):
        """SIGKILL to the run's process group: the program and every
        process it forked that has not left the group.  Only while the
        program is not reaped: its pid, which names the group, cannot be
        reused until then (pid_max may be 32768 on a busy CI machine)."""
        if self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def reap(self):
        """After kill_group(): collects what is left of the output and the
        status, bounded, for the failure message."""
        try:
            out, err = self.proc.communicate(timeout=30)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            out, err = "", ""
        self.stdout = self.head.decode(errors="replace") + (out or "")
        self.stderr = err or ""
        self.rc = self.proc.returncode

    @property
    def files(self):
        return sorted(os.listdir(self.outdir))

    def profile(self, name):
        return Profile(os.path.join(self.outdir, name))


# Runs started by the current scenario (teardown() kills what is left).
LIVE = []


def teardown(ctx):
    """After every scenario, passed or failed (run.py): no process of it
    survives it.  A scenario that failed half-way (a wait_line that gave
    up, an assertion between start and finish) would otherwise leave
    programs spinning for the rest of the suite, on the same two cores as
    the scenarios after it."""
    while LIVE:
        run = LIVE.pop()
        if run.proc.returncode is None:
            run.kill_group()
            run.reap()
        for f in (run.proc.stdout, run.proc.stderr):
            if f is not None:
                f.close()


def default_signals():
    """The scenarios are about signals at their default disposition: do not
    let an ignored SIGHUP (nohup) or SIGINT (a shell's background job) leak
    in from whatever started the test run."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def pair(ctx, args, **kw):
    """Starts the program with and without the library at once."""
    return Run(ctx, args, True, **kw), Run(ctx, args, False, **kw)


def finish_pair(with_lib, without, timeout=120):
    """Both runs ended (they run at the same time: the second's deadline
    is mostly spent once the first's is).  If one fails, the other is
    killed too rather than left to its own deadline."""
    try:
        return with_lib.finish(timeout), without.finish(timeout)
    except AssertionError:
        for r in (with_lib, without):
            r.kill_group()
        raise


def describe(run):
    return "rc %s\nstdout:\n%s\nstderr:\n%s" % (run.rc, run.stdout[-1500:], run.stderr[-2500:])


def check_same_exit(ctx, lib, plain, expect=None):
    ctx.check(lib.rc == plain.rc, "exit status %s with the library, %s without" % (lib.rc, plain.rc),
              "with:\n" + describe(lib), "without:\n" + describe(plain))
    if expect is not None:
        ctx.check(plain.rc == expect, "the program itself ended with %s, expected %s"
                  % (plain.rc, expect), describe(plain))
    ctx.check(not harness.our_messages(lib.stderr), "unexpected message of ours", lib.stderr[-2000:])


def check_files(ctx, run, expected):
    """Exactly these profile files, no temporary file, mode 0600, each valid;
    returns {name: Profile}."""
    got = run.files
    temps = [f for f in got if TEMP_RE.match(f)]
    ctx.check(not temps, "temporary files left behind: %r" % temps)
    ctx.check(set(got) == set(expected), "files %r, expected %r" % (got, sorted(expected)),
              describe(run))
    profiles = {}
    for name in expected:
        mode = stat.S_IMODE(os.lstat(os.path.join(run.outdir, name)).st_mode)
        ctx.check(mode == 0o600, "%s has mode %o, expected 600" % (name, mode))
        profiles[name] = run.profile(name)
    return profiles


def names_in(profile):
    return {f.name for s in profile.stacks for f in s.frames}


def check_has(ctx, profile, present=(), absent=(), min_samples=1):
    """present functions have samples (one is enough: on a loaded machine
    the sampler may get little CPU, and the point here is which process's
    functions land in which file), absent ones none at all."""
    names = names_in(profile)
    for fn in present:
        n = profile.with_frame(fn)
        ctx.check(n >= min_samples, "%s: %s has %d samples, expected at least %d"
                  % (os.path.basename(profile.path), fn, n, min_samples), profile.dump(10))
    for fn in absent:
        ctx.check(fn not in names, "%s shows %s, which ran in another process"
                  % (os.path.basename(profile.path), fn), profile.dump(10))


def pid_file(pid, tmpl="prof.%d.txt"):
    return tmpl % pid


def no_fork_warning(ctx, lib, plain):
    """Our sampler thread must not make CPython 3.12+ warn about fork()."""
    w_lib = lib.stderr.count("is multi-threaded")
    w_plain = plain.stderr.count("is multi-threaded")
    ctx.check(w_lib == w_plain, "%d fork warnings with the library, %d without"
              % (w_lib, w_plain), lib.stderr[-2000:])


# ---- fork -----------------------------------------------------------------

def test_os_fork_children(ctx):
    # -W always: CPython 3.12+ would print its "multi-threaded ... fork()"
    # DeprecationWarning here if our sampler thread were counted.
    lib, plain = finish_pair(*pair(ctx, [ctx.program("proc_fork.py"), "3", "0.4"],
                                   interp_args=["-W", "always::DeprecationWarning"]))
    check_same_exit(ctx, lib, plain, 0)
    no_fork_warning(ctx, lib, plain)
    ctx.check(plain.stderr == "" and not harness.other_lines(lib.stderr), "unexpected stderr", lib.stderr[-2000:],
              plain.stderr[-2000:])
    info = json.loads(lib.stdout)
    ctx.check(info["status"] == [0, 0, 0], "children ended with %r" % info["status"])
    files = [pid_file(info["parent"])] + [pid_file(c) for c in info["children"]]
    profiles = check_files(ctx, lib, files)
    check_has(ctx, profiles[files[0]], ["fork_parent_work"], ["fork_child_work"])
    for name in files[1:]:
        # A child starts with an empty profile: nothing of the parent's work.
        check_has(ctx, profiles[name], ["fork_child_work"], ["fork_parent_work"])


def test_fork_warning_still_given_for_real_threads(ctx):
    if ctx.version < (3, 12):
        ctx.skip("CPython warns about fork with threads from 3.12 on")
    lib, plain = finish_pair(*pair(ctx, [ctx.program("proc_fork.py"), "1", "0.2", "thread"],
                                   interp_args=["-W", "always::DeprecationWarning"]))
    check_same_exit(ctx, lib, plain, 0)
    ctx.check(plain.stderr.count("is multi-threaded") == 1, "CPython did not warn", plain.stderr)
    no_fork_warning(ctx, lib, plain)


def _slowreap(ctx):
    """programs/slowreap.c built into a fresh directory (or a skip)."""
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc):
        ctx.skip("no C compiler (%s)" % cc)
    path = os.path.join(ctx.tmpdir(), "slowreap")
    r = subprocess.run([cc, "-O2", "-o", path, ctx.program("slowreap.c")],
                       capture_output=True, text=True, timeout=120)
    ctx.check(r.returncode == 0, "building slowreap.c failed", r.stderr[-2000:])
    return path


@harness.not_emulated("qemu-user does not let one program trace another's threads")
def test_fork_warning_after_a_slow_reap(ctx):
    """The sampler thread leaves CPython's thread count for os.fork()
    (forkpause.c) by being joined; but a joined thread is still counted
    until the kernel releases it, a moment later (sampler.c,
    ps_sampler_stop).  Every thread of the program is traced here
    (slowreap.c) and reaped only 25 ms after it ends, so that moment lasts
    25 ms each time: without waiting for the release, all three forks
    warn.  The library must not add a warning, and the parent still has
    its samples."""
    if ctx.version < (3, 12):
        ctx.skip("CPython warns about fork with threads from 3.12 on")
    if not sys.platform.startswith("linux"):
        ctx.skip("ptrace is Linux's here (and macOS has no forkpause)")
    tracer = _slowreap(ctx)
    lib, plain = finish_pair(*pair(ctx, [ctx.program("proc_fork.py"), "3", "0.4"],
                                   interp_args=["-W", "always::DeprecationWarning"],
                                   wrap=[tracer, "25"]))
    if plain.rc == 125 and "slowreap:" in plain.stderr:
        ctx.skip("ptrace not permitted: %s" % plain.stderr.strip().splitlines()[-1])
    check_same_exit(ctx, lib, plain, 0)
    ctx.check(plain.stderr.count("is multi-threaded") == 0, "CPython warned without the library",
              plain.stderr[-2000:])
    no_fork_warning(ctx, lib, plain)
    info = json.loads(lib.stdout)
    ctx.check(info["status"] == [0, 0, 0], "children ended with %r" % info["status"])
    files = [pid_file(info["parent"])] + [pid_file(c) for c in info["children"]]
    profiles = check_files(ctx, lib, files)
    check_has(ctx, profiles[files[0]], ["fork_parent_work"], ["fork_child_work"])


# ---- multiprocessing --------------------------------------------------------

@harness.not_emulated("qemu-user starts a thread of its own in the child, which the library "
                      "rightly waits for (platform/linux/threads.c, ps_program_threads_gone)")
def test_fork_from_thread_child_ends(ctx):
    """Issue 25: a child forked by a thread other than the main thread ends
    when that thread returns, as without the library; our sampler thread
    used to keep it alive for ever (a zombie leader, "Zl"), so that the
    parent's waitpid never returned.  The program waits for its child at
    most 30 s and reports "hung"; the run itself is bounded too."""
    lib, plain = finish_pair(*pair(ctx, [ctx.program("proc_fork_thread.py"), "0.3"]), timeout=90)
    check_same_exit(ctx, lib, plain, 0)
    for run in (lib, plain):
        info = json.loads(run.stdout)
        ctx.check(info["status"] == 0, "the child ended with %r (lib=%s)" % (info["status"], run.lib),
                  describe(run))
    info = json.loads(lib.stdout)
    profiles = check_files(ctx, lib, [pid_file(lib.proc.pid), pid_file(info["child"])])
    check_has(ctx, profiles[pid_file(info["child"])], ["fork_thread_child_work"], [])


@harness.not_emulated("qemu-user starts a thread of its own in the child, which the library "
                      "rightly waits for (platform/linux/threads.c, ps_program_threads_gone)")
def test_fork_from_thread_child_ends_armed(ctx):
    """The same, armed and idle (PYSAMPLE_ARM, no output file), where the
    sampler thread sleeps until something wakes it: a program thread that
    ends wakes it to look (the child used to report "hung")."""
    res = ctx.run([ctx.program("proc_fork_thread.py"), "0.3"], output=None, timeout=90,
                  cwd=os.path.dirname(ctx.program("proc_common.py")),
                  env={"PYSAMPLE_ARM": "1", "PYSAMPLE_CONTROL_DIR": ctx.tmpdir()})
    ctx.check(res.rc == 0, "rc %s" % res.rc, res.stdout, res.stderr[-2000:])
    info = json.loads(res.stdout)
    ctx.check(info["status"] == 0, "the child ended with %r" % info["status"], res.stderr[-2000:])


@harness.not_emulated("qemu-user starts a thread of its own in the child, which the library "
                      "rightly waits for (platform/linux/threads.c, ps_program_threads_gone)")
def test_fork_from_thread_children_end_at_once_armed(ctx):
    """Armed and idle, 30 children forked by a thread end about as soon as
    without the library: the sampler looks again within a millisecond of
    the ending thread's word, and a wait under way ends for it (each child
    lived ~100 ms, the sampler's period of looking: 150 forks took 12-14 s
    against 0.8 s)."""
    cwd = os.path.dirname(ctx.program("proc_common.py"))
    prog = [ctx.program("proc_fork_thread_many.py"), "30"]
    bare = ctx.run(prog, output=None, preload=False, cwd=cwd)
    res = ctx.run(prog, output=None, timeout=120, cwd=cwd,
                  env={"PYSAMPLE_ARM": "1", "PYSAMPLE_CONTROL_DIR": ctx.tmpdir()})
    ctx.check(bare.rc == 0 and res.rc == 0 and not harness.our_messages(res.stderr), "rc %s" % res.rc,
              res.stdout, res.stderr[-2000:])
    b, a = json.loads(bare.stdout)["lived_ms"], json.loads(res.stdout)["lived_ms"]
    ctx.check(len(a) == len(b) == 30, "not every fork was made", a, b)
    # Children that lived 50 ms or more: about half of them before (the
    # thread's word came before it was gone, and the next look was 100 ms
    # later), none now but what the machine's load makes slow without us.
    slow_a, slow_b = sum(x >= 50 for x in a), sum(x >= 50 for x in b)
    print("    children lived: median %.1f ms armed, %.1f ms without the library; %d and %d of 30 "
          "lived 50 ms or more" % (sorted(a)[15], sorted(b)[15], slow_a, slow_b), flush=True)
    ctx.check(slow_a <= slow_b + 3, "%d of 30 children forked by a thread lived 50 ms or more (%d "
              "without the library)" % (slow_a, slow_b), a, b)


def mp_scenario(ctx, method):
    lib, plain = finish_pair(*pair(ctx, [ctx.program("proc_mp.py"), method, "0.3"],
                                   interp_args=["-W", "always::DeprecationWarning"]))
    check_same_exit(ctx, lib, plain, 0)
    no_fork_warning(ctx, lib, plain)
    info = json.loads(lib.stdout.strip().splitlines()[-1])
    base = json.loads(plain.stdout.strip().splitlines()[-1])
    ctx.check(info["process_status"] == base["process_status"] == [0, 0],
              "Process exit codes %r with the library, %r without"
              % (info["process_status"], base["process_status"]))
    expected = {pid_file(info["main"]): "main"}
    for pid in info["process"]:
        expected[pid_file(pid)] = "process"
    for pid in info["pool"]:
        expected[pid_file(pid)] = "pool"
    for role in ("forkserver", "tracker"):
        if info[role]:
            expected[pid_file(info[role])] = role
    profiles = check_files(ctx, lib, list(expected))
    for name, role in expected.items():
        p = profiles[name]
        if role == "main":
            check_has(ctx, p, ["main"], ["mp_task"])
        elif role == "process" or (role == "pool" and int(name.split(".")[1]) in info["pool_ran"]):
            check_has(ctx, p, ["mp_task"], [])
    return info


def test_multiprocessing_fork(ctx):
    mp_scenario(ctx, "fork")


def test_multiprocessing_forkserver(ctx):
    info = mp_scenario(ctx, "forkserver")
    ctx.check(info["forkserver"], "no fork server process?")


def test_multiprocessing_spawn(ctx):
    mp_scenario(ctx, "spawn")


# ---- subprocesses, servers --------------------------------------------------

def test_subprocess_python(ctx):
    lib, plain = finish_pair(*pair(ctx, [ctx.program("proc_subprocess.py"), "0.4"]))
    check_same_exit(ctx, lib, plain, 0)
    info = json.loads(lib.stdout)
    ctx.check(info["status"] == 0, "child ended with %r" % info["status"])
    parent, child = pid_file(info["parent"]), pid_file(info["child"])
    profiles = check_files(ctx, lib, [parent, child])
    check_has(ctx, profiles[parent], ["sub_parent_work"], ["sub_child_work"])
    check_has(ctx, profiles[child], ["sub_child_work"], ["sub_parent_work"])


def test_prefork_server_sigterm(ctx):
    lib, plain = pair(ctx, [ctx.program("proc_prefork.py"), "3"])
    # "ready" means every worker has set its own SIGTERM disposition (one
    # that still had the master's handler would survive the signal and
    # keep the run going) and has been sampled in worker_serve, and the
    # master in master_wait (proc_prefork.py): no time to wait after it.
    for r in (lib, plain):
        r.wait_line("ready")
    for r in (lib, plain):
        r.proc.send_signal(signal.SIGTERM)
    finish_pair(lib, plain)
    check_same_exit(ctx, lib, plain, 0)
    info = json.loads(lib.stdout.strip().splitlines()[-1])
    base = json.loads(plain.stdout.strip().splitlines()[-1])
    # Worker 0 stops gracefully through its own handler; the others die of
    # SIGTERM, as they do without the library.
    want = [0] + [-signal.SIGTERM] * 2
    ctx.check(info["status"] == base["status"] == want, "worker statuses %r with the library, "
              "%r without, expected %r" % (info["status"], base["status"], want))
    files = [pid_file(info["master"])] + [pid_file(w) for w in info["workers"]]
    profiles = check_files(ctx, lib, files)
    check_has(ctx, profiles[files[0]], ["master_wait"], ["worker_serve"])
    for name in files[1:]:
        check_has(ctx, profiles[name], ["worker_serve"], ["master_wait"])


# ---- exec, _exit -------------------------------------------------------------

def check_two_images(ctx, run):
    """proc_exec.py execed into itself: the same process, two images.  The
    first keeps the name; the second (same pid) must not overwrite it and
    takes the next one."""
    lines = run.stdout.split()
    ctx.check(len(lines) == 3 and lines[1:] == ["after", lines[0]],
              "exec'd image did not run: %r" % run.stdout, run.stderr)
    pid = int(lines[0])
    first, second = pid_file(pid), "prof.%d.1.txt" % pid
    profiles = check_files(ctx, run, [first, second])
    check_has(ctx, profiles[first], ["before_exec"], ["after_exec"])
    check_has(ctx, profiles[second], ["after_exec"], ["before_exec"])


def test_execv_into_python(ctx):
    lib, plain = finish_pair(*pair(ctx, [ctx.program("proc_exec.py"), "0.3", "python"]))
    check_same_exit(ctx, lib, plain, 0)
    check_two_images(ctx, lib)


@harness.once
@harness.not_emulated("runs this machine's qemu-user itself")
def test_execv_into_python_under_qemu(ctx):
    """The exec'd image runs under qemu-user, as every image of an emulated
    container does (docker --platform, the arm64 suite here): qemu answers
    /proc/self/stat itself, with a start time of its own instance, which
    begins anew at every exec.  A shell sleeps between the first image's
    write and the exec, so that start is surely after the first profile was
    written: read from there, the second image took that file for one left
    over from before it started and replaced it (one file, the second
    image's).  The start comes from /proc/self/task/<pid>/stat too, which
    qemu passes through (linux/process.c)."""
    qemu = shutil.which("qemu-%s-static" % os.uname().machine)
    if qemu is None or ctx.musl:
        ctx.skip("needs qemu-%s-static and a glibc interpreter (this machine's sh is glibc's)"
                 % os.uname().machine)
    res = ctx.run([ctx.program("proc_exec.py"), "0.3", "via", "/bin/sh", "-c",
                   'sleep 0.3; exec "$@"', "sh", qemu], env=RATE)
    ctx.check(res.rc == 0, "exit status %d" % res.rc, res.stderr)
    check_two_images(ctx, res)


@harness.once
@harness.not_emulated("mounts a file system of its own")
def test_execv_into_python_without_proc(ctx):
    """Where /proc cannot be read (a sandbox without it), the start time is
    not known.  It was taken as "now", when the image starts, so an exec'd
    image replaced its predecessor's profile as left over; now nothing
    counts as left over there (docs/processes.md)."""
    need_root_tools(ctx, "unshare")
    hide = 'mount -t tmpfs pysample-noproc /proc && exec "$@"'
    res = ctx.run(["unshare", "-m", "sh", "-c", hide, "sh", ctx.python,
                   ctx.program("proc_exec.py"), "0.3", "python"], python=False, env=RATE)
    ctx.check(res.rc == 0, "exit status %d" % res.rc, res.stderr)
    check_two_images(ctx, res)


def test_execv_into_true(ctx):
    args = [ctx.program("proc_exec.py"), "0.3", "true"]
    if ctx.musl:
        # A musl program (test/meson.build: ctrue, built by this build's
        # compiler): this machine's /bin/true is glibc's.
        true = os.environ.get("PYSAMPLE_TEST_TRUE")
        if not true or not os.path.exists(true):
            ctx.skip("no musl program to exec (test/meson.build: ctrue)")
        args.append(true)
    lib, plain = finish_pair(*pair(ctx, args))
    check_same_exit(ctx, lib, plain, 0)
    ctx.check(not harness.other_lines(lib.stderr), "stderr: %r" % lib.stderr)
    pid = int(lib.stdout.split()[0])
    profiles = check_files(ctx, lib, [pid_file(pid)])
    check_has(ctx, profiles[pid_file(pid)], ["before_exec"], [])


def test_os_exit_3(ctx):
    lib, plain = finish_pair(*pair(ctx, [ctx.program("proc_exit.py"), "0.3", "3"]))
    check_same_exit(ctx, lib, plain, 3)
    pid = int(lib.stdout.split()[0])
    profiles = check_files(ctx, lib, [pid_file(pid)])
    check_has(ctx, profiles[pid_file(pid)], ["work_then_exit"], [])


# ---- a program at its descriptor limit (issue 39) ---------------------------

FDLIMIT = 64


def at_fd_limit(ctx, seconds="1.0"):
    """proc_fdlimit.py last, started under prlimit --nofile=64 with and
    without the library: it opens /dev/null until EMFILE, frees one number
    and opens and closes that last one over and over for a second of CPU
    time (the library's orphan check looks every 100 ms meanwhile)."""
    if shutil.which("prlimit") is None:
        ctx.skip("needs prlimit")
    cmd = ["prlimit", "--nofile=%d" % FDLIMIT, ctx.python, ctx.program("proc_fdlimit.py"),
           "last", seconds]
    plain = {}
    t = threading.Thread(target=lambda: plain.setdefault(
        "run", ctx.run(cmd, output=None, python=False, preload=False)))
    t.start()
    lib = ctx.run(cmd, output="prof.txt", python=False, env=RATE)
    t.join()
    ctx.check("run" in plain, "the run without the library failed")
    return lib, plain["run"]


def test_descriptor_limit_keeps_exit_status(ctx):
    """A program that uses up its descriptors and keeps working ends with
    its own status (3) and writes its profile.  The orphan check took a
    failed open("/proc/self/stat") (EMFILE) for "the main thread ended",
    the next open of /proc/self/task succeeded in a moment the program
    had its last number free, and the library called exit(0): the program
    vanished silently, with status 0 and no profile."""
    lib, plain = at_fd_limit(ctx)
    ctx.check(plain.rc == 3, "the program itself ended with %s" % plain.rc, plain.stderr[-2000:])
    ctx.check(lib.rc == 3 and lib.stdout.startswith("held "),
              "with the library: exit status %s, stdout %r (the program's own: 3)"
              % (lib.rc, lib.stdout), lib.stderr[-2000:])
    ctx.check(not harness.our_messages(lib.stderr), "message of ours", lib.stderr[-2000:])
    p = lib.profile("prof.txt")
    ctx.check(p.with_frame("reopen_last") >= 10, "%d samples of reopen_last (20 = one look of "
              "the orphan check at 200 Hz)" % p.with_frame("reopen_last"), p.dump(10))


def test_last_descriptor_stays_the_programs(ctx):
    """With one number free below its limit, every open() the program makes
    gets it, with the library as without: the library's periodic /proc
    reads (the orphan check) use descriptors opened when profiling started
    and held at high numbers, not a fresh open() that takes the program's
    last number for a moment and hands it EMFILE."""
    lib, plain = at_fd_limit(ctx)
    for run, name in ((plain, "without"), (lib, "with")):
        ctx.check(run.rc == 3 and run.stdout.split()[2:] == ["failed", "0"],
                  "%s the library: exit status %s, stdout %r (failed: the opens of the last "
                  "free number that got EMFILE)" % (name, run.rc, run.stdout), run.stderr[-2000:])


def exitstorm(ctx):
    """build/test/libexitstorm.so (test/integration/programs/exitstorm.c)."""
    return ctx.built(os.path.join("test", "libexitstorm.so"), "PYSAMPLE_TEST_EXITSTORM")


def test_exit_in_signal_handler_storm(ctx):
    """Issue 25: a C SIGTERM handler calls _exit(3) (POSIX allows it) while
    the main thread is inside malloc, and every thread shares one malloc
    arena (MALLOC_ARENA_MAX=1, common in containers).  The process must end
    with 3 at once, every time: it used to wait for a final write that
    needed the very malloc lock the interrupted thread held, then join the
    stuck sampler, for ever (6 runs of 6 still alive after 10 s).  The
    profile the last periodic flush wrote stays, whole, if the final write
    cannot be made; here it can: it needs no malloc."""
    lib = exitstorm(ctx)
    args = [ctx.program("proc_exit_storm.py"), lib, "0.2", "3"]
    env = {"MALLOC_ARENA_MAX": "1", "PYSAMPLE_FLUSH_INTERVAL": "1"}
    plain = Run(ctx, args, False, env=env)
    plain.wait_line("ready")
    plain.proc.send_signal(signal.SIGTERM)
    ctx.check(plain.finish(30).rc == 3, "without the library: " + describe(plain))
    # 20 runs, 5 at a time.  The signal is sent as soon as each is ready,
    # while it loops in malloc.
    for batch in range(4):
        runs = [Run(ctx, args, True, env=env) for _ in range(5)]
        for run in runs:
            run.wait_line("ready")
        for run in runs:
            run.proc.send_signal(signal.SIGTERM)
        for run in runs:
            # 5 s is how long an exit waits for the final write at most.
            t0 = time.monotonic()
            run.finish(15)
            ctx.check(run.rc == 3, "batch %d: ended with %s, expected 3 (%.1f s)"
                      % (batch, run.rc, time.monotonic() - t0), describe(run))
            ctx.check(not harness.our_messages(run.stderr), "unexpected message of ours",
                      run.stderr[-2000:])
            pid = run.proc.pid
            profiles = check_files(ctx, run, [pid_file(pid)])
            check_has(ctx, profiles[pid_file(pid)], ["storm_work"], [])


def test_raise_in_signal_handler_storm(ctx):
    """Issue 25: raise(SIGTERM) from a C handler (SIGUSR1) that interrupted
    the main thread inside malloc, with sampling stopped (pysample_stop), so
    that the handler itself writes the profile before the process dies of
    SIGTERM: that write used to call malloc on the very thread holding the
    allocator's lock, and the process hung for ever.  It must die of
    SIGTERM, with its profile, every time (10 runs, 5 at a time)."""
    lib = exitstorm(ctx)
    args = [ctx.program("proc_exit_storm.py"), lib, "0.2", "raise"]
    env = {"MALLOC_ARENA_MAX": "1"}
    plain = Run(ctx, args, False, env=env)
    plain.wait_line("ready")
    plain.proc.send_signal(signal.SIGUSR1)
    ctx.check(plain.finish(30).rc == -signal.SIGTERM, "without the library: " + describe(plain))
    for batch in range(2):
        runs = [Run(ctx, args, True, env=env) for _ in range(5)]
        for run in runs:
            run.wait_line("ready")
        for run in runs:
            run.proc.send_signal(signal.SIGUSR1)
        for run in runs:
            run.finish(15)
            ctx.check(run.rc == -signal.SIGTERM, "batch %d: ended with %s, expected %d"
                      % (batch, run.rc, -signal.SIGTERM), describe(run))
            pid = run.proc.pid
            profiles = check_files(ctx, run, [pid_file(pid)])
            check_has(ctx, profiles[pid_file(pid)], ["storm_work"], [])


def test_full_stderr_does_not_stall_sampler(ctx):
    """Issue 25: a "pysample:" line said from the sampler thread while the
    program's stderr is a full pipe nobody reads (a daemon's, a test
    runner's) used to block the sampler in write() for as long as the pipe
    stayed full: no more samples, flushes or answers.  The line is dropped
    and counted instead (PYSAMPLE_STATS messages_dropped), and stderr's
    file status flags stay the program's."""
    outdir = ctx.tmpdir()
    stats = os.path.join(outdir, "stats.txt")
    run = Run(ctx, [ctx.program("proc_full_stderr.py")], True, outdir=outdir,
              env={"PYSAMPLE_ASYNC": "1", "PYSAMPLE_STATS": stats})
    # Nothing reads its stderr before it says it is done (finish() would).
    run.wait_line("done", 90)
    run.finish(60)
    ctx.check(run.rc == 0, describe(run))
    info = json.loads(run.stdout.splitlines()[0])
    ctx.check(info["ticks"] >= 400, "the sampler ticked %d times in 30 s with stderr full"
              % info["ticks"], describe(run))
    ctx.check(info["flags_kept"], "stderr's file status flags were changed")
    found = [f for f in os.listdir(outdir) if f.startswith("stats.txt")]
    ctx.check(len(found) == 1, "stats files %r" % os.listdir(outdir))
    with open(os.path.join(outdir, found[0])) as f:
        counts = dict(l.split(None, 1) for l in f.read().splitlines() if " " in l)
    ctx.check(int(counts.get("messages_dropped", 0)) >= 1,
              "no message was dropped: the scenario did not reach a full stderr", counts)


# ---- signals -----------------------------------------------------------------

def signal_scenario(ctx, sig, mode="", expect_rc=None):
    lib, plain = pair(ctx, [ctx.program("proc_busy.py")] + ([mode] if mode else []))
    # "ready": the disposition is set up and spin_until_killed sampled.
    for r in (lib, plain):
        r.wait_line("ready")
    for r in (lib, plain):
        r.proc.send_signal(sig)
    finish_pair(lib, plain)
    check_same_exit(ctx, lib, plain, -sig if expect_rc is None else expect_rc)
    # What the program sees of the dispositions (signal.getsignal) is the
    # same as without the library: SIG_DFL stays SIG_DFL.
    ctx.check(lib.stdout == plain.stdout, "program output differs: %r, without: %r"
              % (lib.stdout, plain.stdout))
    pid = lib.proc.pid
    profiles = check_files(ctx, lib, [pid_file(pid)])
    check_has(ctx, profiles[pid_file(pid)], ["spin_until_killed"], [])
    return lib, plain


def test_sigterm_busy(ctx):
    lib, _ = signal_scenario(ctx, signal.SIGTERM)
    views = lib.stdout.splitlines()[0]
    ctx.check("SIG_DFL" in views.split()[0] or views.split()[0] == "0",
              "getsignal(SIGTERM) said %r" % views)


def test_sighup_busy(ctx):
    signal_scenario(ctx, signal.SIGHUP)


def test_sigint_busy(ctx):
    # KeyboardInterrupt, then Python's own exit by SIGINT.
    lib, plain = signal_scenario(ctx, signal.SIGINT)
    ctx.check("KeyboardInterrupt" in lib.stderr, "no KeyboardInterrupt", lib.stderr)


def test_sigterm_program_handler_wins(ctx):
    signal_scenario(ctx, signal.SIGTERM, "handler", expect_rc=7)


def test_sigterm_default_restored(ctx):
    signal_scenario(ctx, signal.SIGTERM, "restored")


def sigkill_when_flushed(run, reads):
    # Flushes at about 1, 2, 3 s...  On a loaded machine they come late
    # and hold fewer samples: kill as soon as the reader has seen two of
    # them and the last holds the 20 samples checked below (up to a minute).
    give_up = time.monotonic() + 60
    while not (len(set(reads)) >= 2 and reads[-1][1] >= 20) and time.monotonic() < give_up:
        time.sleep(0.1)
    run.proc.send_signal(signal.SIGKILL)
    run.finish()


def test_sigkill_after_two_flushes(ctx):
    """PYSAMPLE_FLUSH_INTERVAL=1: a SIGKILLed process keeps what the last
    flush wrote; meanwhile a reader never sees a partial file."""
    run = Run(ctx, [ctx.program("proc_busy.py")], True, env={"PYSAMPLE_FLUSH_INTERVAL": "1"})
    run.wait_line("ready")
    path = os.path.join(run.outdir, pid_file(run.proc.pid))
    reads, bad = [], []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                p = Profile(path)
                reads.append((p.total, p.with_frame("spin_until_killed")))
            except FileNotFoundError:
                pass
            except (AssertionError, UnicodeDecodeError) as e:
                bad.append(str(e))
            time.sleep(0.003)
    t = threading.Thread(target=reader)
    t.start()
    try:
        sigkill_when_flushed(run, reads)
    finally:
        # Also when finish() fails: a reader left running would keep this
        # test process alive for ever.
        stop.set()
        t.join()
    ctx.check(run.rc == -signal.SIGKILL, "rc %s" % run.rc)
    ctx.check(not bad, "a reader saw a partial profile: %s" % bad[:3])
    ctx.check(len(set(reads)) >= 2, "expected at least two flushes, saw totals %r"
              % sorted(set(t for t, _ in reads)))
    got = [f for f in run.files if not TEMP_RE.match(f)]
    ctx.check(got == [pid_file(run.proc.pid)], "files %r" % run.files)
    p = run.profile(pid_file(run.proc.pid))
    # What reaches the disk is the last flush, which the reader saw with
    # at least 20 samples (at 200 Hz a second of spinning is 200).
    check_has(ctx, p, ["spin_until_killed"], [], 20)


# ---- file names and safety ---------------------------------------------------

def test_template_without_pid(ctx):
    """Without %p: the first process gets the plain name, every other one
    (forked, or started by a profiled Python) <name>.<pid>.txt; a profile
    left by an earlier run is replaced."""
    outdir = ctx.tmpdir()
    old = os.path.join(outdir, "prof.txt")
    with open(old, "w") as f:
        f.write("thread 1 (MainThread);old_run (old.py:1) 1\n")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    run = Run(ctx, [ctx.program("proc_fork.py"), "2", "0.3"], True, output="prof.txt",
              outdir=outdir).finish()
    ctx.check(run.rc == 0 and not harness.our_messages(run.stderr), describe(run))
    info = json.loads(run.stdout)
    files = ["prof.txt"] + [pid_file(c) for c in info["children"]]
    profiles = check_files(ctx, run, files)
    check_has(ctx, profiles["prof.txt"], ["fork_parent_work"], ["fork_child_work", "old_run"])
    for name in files[1:]:
        check_has(ctx, profiles[name], ["fork_child_work"], ["fork_parent_work"])

    # A Python started by a profiled Python: not the first process either.
    run = Run(ctx, [ctx.program("proc_subprocess.py"), "0.3"], True, output="prof.txt").finish()
    ctx.check(run.rc == 0 and not harness.our_messages(run.stderr), describe(run))
    info = json.loads(run.stdout)
    child = pid_file(info["child"])
    profiles = check_files(ctx, run, ["prof.txt", child])
    check_has(ctx, profiles["prof.txt"], ["sub_parent_work"], ["sub_child_work"])
    check_has(ctx, profiles[child], ["sub_child_work"], ["sub_parent_work"])


def test_planted_symlink_not_followed(ctx):
    outdir = ctx.tmpdir()
    victim = os.path.join(ctx.tmpdir(), "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.symlink(victim, os.path.join(outdir, "prof.txt"))
    run = Run(ctx, [ctx.program("proc_exit.py"), "0.2", "0"], True, output="prof.txt",
              outdir=outdir).finish()
    ctx.check(run.rc == 0, describe(run))
    with open(victim) as f:
        ctx.check(f.read() == "precious\n", "the symlink's target was written to")
    ctx.check(os.path.islink(os.path.join(outdir, "prof.txt")) and
              os.readlink(os.path.join(outdir, "prof.txt")) == victim, "the symlink was replaced")
    pid = int(run.stdout.split()[0])
    got = [f for f in run.files if f != "prof.txt"]
    ctx.check(got == [pid_file(pid)], "files %r, expected the symlink and %s" % (run.files, pid_file(pid)))
    mode = stat.S_IMODE(os.lstat(os.path.join(outdir, pid_file(pid))).st_mode)
    ctx.check(mode == 0o600, "mode %o" % mode)
    check_has(ctx, run.profile(pid_file(pid)), ["work_then_exit"], [])
    lines = [l for l in run.stderr.splitlines() if l.startswith("pysample: ")]
    ctx.check(len(lines) == 1 and "symbolic link" in lines[0] and pid_file(pid) in lines[0],
              "expected one line saying where the profile went, got %r" % run.stderr)


def test_short_process_profile_and_startup(ctx):
    """python -c pass: a valid (maybe empty) profile, and no slower."""
    times = {True: [], False: []}
    last = None
    for _ in range(3):
        for lib in (True, False):
            t0 = time.monotonic()
            r = Run(ctx, ["-c", "pass"], lib).finish()
            times[lib].append(time.monotonic() - t0)
            ctx.check(r.rc == 0 and not harness.other_lines(r.stderr), describe(r))
            if lib:
                last = r
    check_files(ctx, last, [pid_file(last.proc.pid)])
    best = {k: min(v) for k, v in times.items()}
    # The fastest of three (least disturbed by other load), and generous:
    # only a sampler that held up start-up or exit (a join on a sleeping
    # thread, a wait for a tick) would fail this.
    ctx.check(best[True] <= best[False] * 2 + 0.1, "python -c pass took %.3f s with the library, "
              "%.3f s without" % (best[True], best[False]))


# ---- privileges, host names, directories (issue #25) -------------------------

OTHER_UID = 1000


def as_other_user():
    """setpriv's arguments to run a command as another, unprivileged user."""
    return ["setpriv", "--reuid", str(OTHER_UID), "--regid", str(OTHER_UID), "--clear-groups"]


def need_root_tools(ctx, *tools):
    if os.geteuid() != 0:
        ctx.skip("needs root (CI runs as root)")
    for t in tools:
        if shutil.which(t) is None:
            ctx.skip("needs %s" % t)


def shared_dir():
    """A fresh directory another user can reach (the suite's own are 0700
    under a 0700 root); the caller removes it."""
    d = tempfile.mkdtemp(prefix="pysample-it-shared-")
    os.chmod(d, 0o755)
    return d


def file_facts(path):
    st = os.lstat(path)
    with open(path, "rb") as f:
        return (st.st_ino, st.st_uid, stat.S_IMODE(st.st_mode), f.read())


# A setuid copy of Debian's interpreter, statically linked with libpython:
# the loader runs it with AT_SECURE whatever its path.
SETUID_PYTHON = "/usr/bin/python3.11"

# Inside a private mount namespace: /etc/ld.so.preload names the library
# (a file bound over the host's, or an overlay on /etc when the host has
# none), then the program runs as another user.  The host's /etc is never
# touched.
PRELOAD_SCRIPT = r"""
set -e
mount --make-rprivate /
if [ -e /etc/ld.so.preload ]; then
    mount --bind "$D/preload" /etc/ld.so.preload
else
    mkdir "$D/upper" "$D/work"
    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$D/upper,workdir=$D/work" /etc
    cp "$D/preload" /etc/ld.so.preload
fi
exec "$@"
"""


@harness.once
def test_setuid_program_ignores_the_environment(ctx):
    """A setuid-root Python, with the library in /etc/ld.so.preload, run by
    another user who sets PYSAMPLE_OUTPUT to a root-owned file and
    PYSAMPLE_FILE_MODE=0666, PYSAMPLE_STATS to a new file: the library
    reads none of it (secure execution), so the root file stays as it was,
    nothing is created, and the program's output is its own."""
    need_root_tools(ctx, "unshare", "setpriv")
    if not os.path.exists(SETUID_PYTHON):
        ctx.skip("needs %s" % SETUID_PYTHON)
    d = shared_dir()
    try:
        if os.statvfs(d).f_flag & os.ST_NOSUID:
            ctx.skip("%s is on a nosuid file system" % d)
        py = os.path.join(d, "python")
        shutil.copy(SETUID_PYTHON, py)
        os.chmod(py, 0o4755)
        out = os.path.join(d, "out")
        os.mkdir(out)
        os.chmod(out, 0o1777)
        victim = os.path.join(out, "root-owned")
        with open(victim, "w") as f:
            f.write("root's data\n")
        os.chmod(victim, 0o600)
        os.utime(victim, (time.time() - 3600, time.time() - 3600))
        before = file_facts(victim)
        with open(os.path.join(d, "preload"), "w") as f:
            f.write(ctx.lib + "\n")
        code = ("import os, sys; print('ids', os.getuid(), os.geteuid(), sum(range(1000)));"
                "print('mapped', any('libpysample' in l for l in open('/proc/self/maps')),"
                " file=sys.stderr)")
        env = ctx.env({"PYSAMPLE_OUTPUT": victim, "PYSAMPLE_FILE_MODE": "0666",
                       "PYSAMPLE_STATS": os.path.join(out, "stats"), "PYSAMPLE_RATE": "1000",
                       "D": d}, preload=False)
        runs = {}
        for preloaded in (True, False):
            cmd = as_other_user() + [py, "-c", code]
            if preloaded:
                cmd = ["unshare", "-m", "sh", "-c", PRELOAD_SCRIPT, "sh"] + cmd
            runs[preloaded] = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                             timeout=60)
        lib, plain = runs[True], runs[False]
        ctx.check("mapped True" in lib.stderr, "the library was not loaded through "
                  "/etc/ld.so.preload, so this proves nothing", lib.stderr[-2000:])
        ctx.check(lib.returncode == plain.returncode == 0 and lib.stdout == plain.stdout
                  and lib.stdout.startswith("ids %d 0 " % OTHER_UID),
                  "output with the library %r (rc %s), without %r (rc %s)"
                  % (lib.stdout, lib.returncode, plain.stdout, plain.returncode), lib.stderr[-2000:])
        ctx.check(not harness.our_messages(lib.stderr), "messages of ours", lib.stderr[-2000:])
        ctx.check(file_facts(victim) == before, "the root-owned file changed: %r, was %r"
                  % (file_facts(victim)[:3], before[:3]))
        ctx.check(os.listdir(out) == ["root-owned"], "files created: %r" % os.listdir(out))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@harness.once
def test_stats_file_planted_by_another_user(ctx):
    """PYSAMPLE_STATS in a sticky, world-writable directory where another
    user planted a symbolic link to a root file, and a file of their own:
    neither is followed, truncated nor replaced.  Where nothing is planted
    the file is written, in PYSAMPLE_FILE_MODE."""
    need_root_tools(ctx, "setpriv")
    d = shared_dir()
    try:
        # Owned by the other user: the kernel's protected_symlinks, where
        # it is on, lets root follow a link planted there.
        sticky = os.path.join(d, "tmp")
        os.mkdir(sticky)
        os.chown(sticky, OTHER_UID, OTHER_UID)
        os.chmod(sticky, 0o1777)
        victim = os.path.join(d, "root-file")
        with open(victim, "w") as f:
            f.write("root's data\n")
        link, theirs, free = (os.path.join(sticky, n) for n in ("stats.link", "stats.theirs",
                                                                "stats.free"))
        subprocess.run(as_other_user() + ["sh", "-c", 'ln -s "$0" "$1" && echo mine > "$2"',
                                          victim, link, theirs], check=True, timeout=30)
        planted = {p: file_facts(p if p != link else victim) for p in (link, theirs)}
        for stats in (link, theirs, free):
            run = Run(ctx, [ctx.program("proc_exit.py"), "0.1", "0"], True,
                      env={"PYSAMPLE_STATS": stats, "PYSAMPLE_FILE_MODE": "0640"}).finish()
            ctx.check(run.rc == 0 and not harness.our_messages(run.stderr), describe(run))
        ctx.check(os.path.islink(link) and os.readlink(link) == victim,
                  "the planted link was replaced")
        ctx.check(file_facts(victim) == planted[link], "the link's target changed: %r"
                  % (file_facts(victim),))
        ctx.check(file_facts(theirs) == planted[theirs], "the other user's file changed: %r"
                  % (file_facts(theirs),))
        st = os.lstat(free)
        ctx.check(stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640,
                  "stats where nothing was planted: mode %o" % st.st_mode)
        with open(free) as f:
            ctx.check(re.search(r"^ticks \d+$", f.read(), re.M), "no ticks line in the stats")
        ctx.check(sorted(os.listdir(sticky)) == ["stats.free", "stats.link", "stats.theirs"],
                  "files left: %r" % os.listdir(sticky))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@harness.once
def test_host_name_adds_no_directory(ctx):
    """%h with a host name holding '/' and '..' (a UTS namespace, a pod's
    host name): the profile stays in the template's directory, the
    separators made '_'."""
    need_root_tools(ctx, "unshare")
    outdir = ctx.tmpdir()
    for sub in ("a/b", "x"):
        os.makedirs(os.path.join(outdir, sub))
    tmpl = os.path.join(outdir, "a", "b", "%h.txt")
    # hostname(1) refuses such a name; sethostname(2) takes it.  The helper
    # runs unprofiled and gives the program the library's environment.
    env = ctx.env({"PYSAMPLE_OUTPUT": tmpl, **RATE})
    helper = ("import os, socket, sys; socket.sethostname(sys.argv[1]);"
              "os.execve(sys.argv[3], sys.argv[3:], eval(sys.argv[2]))")
    r = subprocess.run(["unshare", "--uts", sys.executable, "-c", helper, "../../x/y", repr(env),
                        ctx.python, ctx.program("proc_exit.py"), "0.2", "0"],
                       env=ctx.env(preload=False), capture_output=True, text=True, timeout=60,
                       cwd=os.path.dirname(ctx.program("proc_common.py")))
    ctx.check(r.returncode == 0 and not harness.our_messages(r.stderr),
              "rc %s, stderr:\n%s" % (r.returncode, r.stderr[-2000:]))
    ctx.check(os.listdir(os.path.join(outdir, "x")) == [], "written outside the template's "
              "directory: x/%r" % os.listdir(os.path.join(outdir, "x")))
    got = os.listdir(os.path.join(outdir, "a", "b"))
    ctx.check(got == [".._.._x_y.txt"], "files %r, expected ['.._.._x_y.txt']" % got)
    check_has(ctx, Profile(os.path.join(outdir, "a", "b", got[0])), ["work_then_exit"])


@harness.once
def test_output_naming_a_directory(ctx):
    """PYSAMPLE_OUTPUT=<a directory>, with or without a trailing '/': the
    profile is <directory>/pysample-<pid>.txt, which ls shows, as
    `pysample record -o DIR` names it."""
    for tail in ("/", ""):
        outdir = ctx.tmpdir()
        run = Run(ctx, [ctx.program("proc_exit.py"), "0.2", "0"], True, outdir=outdir,
                  env={"PYSAMPLE_OUTPUT": outdir + tail}).finish()
        ctx.check(run.rc == 0 and not harness.our_messages(run.stderr), describe(run))
        pid = int(run.stdout.split()[0])
        profiles = check_files(ctx, run, ["pysample-%d.txt" % pid])
        check_has(ctx, profiles["pysample-%d.txt" % pid], ["work_then_exit"])


@harness.once
def test_user_namespace_after_pysample_stop(ctx):
    """The workaround docs/troubleshooting.md gives: unshare(CLONE_NEWUSER)
    fails with EINVAL while the sampler thread exists (the kernel wants a
    single-threaded process), works after pysample_stop(), and sampling
    resumes with pysample_start(0), before and after in one profile."""
    userns_scenario(ctx)


def userns_scenario(ctx, wrap=()):
    probe = subprocess.run([ctx.python, "-c", "import ctypes; "
                            "print(ctypes.CDLL(None).unshare(0x10000000))"],
                           env=ctx.env(preload=False), capture_output=True, text=True, timeout=60)
    if probe.stdout.strip() != "0":
        ctx.skip("user namespaces are not available here")
    run = Run(ctx, [ctx.program("proc_userns.py")], True, wrap=wrap).finish()
    if run.rc == 125 and "slowreap:" in run.stderr:
        ctx.skip("ptrace not permitted: %s" % run.stderr.strip().splitlines()[-1])
    ctx.check(run.rc == 0 and run.stdout == "plain 22\nstopped 0\nrestarted 0\n"
              and not harness.our_messages(run.stderr), describe(run))
    # Wrapped, the program is the tracer's child: one profile, its own.
    name = pid_file(run.proc.pid) if not wrap else (run.files + ["none"])[0]
    ctx.check(re.match(r"prof\.\d+\.txt$", name), "files %r" % run.files)
    p = check_files(ctx, run, [name])[name]
    check_has(ctx, p, ["before_unshare", "after_unshare"])


@harness.not_emulated("qemu-user does not let one program trace another's threads")
def test_user_namespace_after_pysample_stop_slow_reap(ctx):
    """The same with every thread traced and reaped 25 ms after it ends
    (slowreap.c, as in test_fork_warning_after_a_slow_reap): the joined
    sampler thread stays in the kernel's thread list until then, and
    pysample_stop() must return only once it is out (sampler.c,
    wait_released), or the unshare fails with EINVAL."""
    if not sys.platform.startswith("linux"):
        ctx.skip("ptrace and user namespaces are Linux's")
    userns_scenario(ctx, wrap=[_slowreap(ctx), "25"])


def test_fork_children_timelines(ctx):
    """PYSAMPLE_TIMELINE=1 and os.fork(): each process writes its own
    .timeline beside its own profile; a child's starts at its fork, with
    its own samples only (the parent's records name stacks the child's
    table does not have)."""
    res = ctx.run([ctx.program("proc_fork.py"), "2", "0.4"], env={"PYSAMPLE_TIMELINE": "1"})
    ctx.check_clean_run(res)
    info = json.loads(res.stdout)
    ctx.check(info["status"] == [0, 0], "children ended with %r" % info["status"])
    pids = [info["parent"]] + info["children"]
    files = [pid_file(p) for p in pids]
    ctx.check(sorted(res.files) == sorted(files + [f + ".timeline" for f in files]),
              "files %r" % res.files)
    starts = {}
    for pid, name in zip(pids, files):
        with open(os.path.join(res.outdir, name), encoding="utf-8") as f:
            profile = f.read().splitlines()
        with open(os.path.join(res.outdir, name + ".timeline"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        ctx.check(lines[0] == "# pysample timeline 1", "%s.timeline: not a timeline" % name, lines[:2])
        at = lines.index("stacks %d" % len(profile))
        ctx.check(lines[at + 1:at + 1 + len(profile)] == profile,
                  "%s.timeline: the stacks are not the profile's lines" % name)
        header = dict(l.split(" ") for l in lines[1:at])
        starts[pid] = int(header["start_unix_ns"])
        records = lines[at + 2 + len(profile):]
        ctx.check(int(lines[at + 1 + len(profile)].split()[1]) == len(records) and records,
                  "%s.timeline: records" % name, lines[at + 1 + len(profile):][:3])
        total = sum(int(l.rsplit(" ", 1)[1]) for l in profile)
        ctx.check(sum(int(r.split()[2]) for r in records) == total,
                  "%s.timeline: its records are not the profile's samples" % name)
        mine, theirs = (("fork_parent_work", "fork_child_work") if pid == info["parent"]
                        else ("fork_child_work", "fork_parent_work"))
        used = {int(r.split()[1]) for r in records}
        ctx.check(any(";%s (" % mine in profile[i] for i in used), "%s.timeline: no %s" % (name, mine))
        ctx.check(not any(";%s (" % theirs in l for l in profile), "%s shows %s" % (name, theirs))
    for child in info["children"]:
        ctx.check(starts[child] > starts[info["parent"]], "child %d's timeline starts before its "
                  "parent's: not at its fork" % child, starts)
