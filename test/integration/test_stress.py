"""Issue 3: never crash the profiled program, never change what it does.

Every scenario runs at 5 kHz in wall mode (every thread every tick) while
the program does what makes a sampler's reads go wrong: threads appearing
and vanishing, data-stack chunks mapped and unmapped (3.11+), code objects
freed and their memory reused, generator frames finalised, the program's
own SIGSEGV handlers, a real crash, and threads blocked in system calls.
Each must exit exactly as it does without the library, with the same
output, and leave a valid profile that shows its functions.

Each scenario is short by default (the suite runs under every interpreter
in CI); PYSAMPLE_STRESS_ITERATIONS=N repeats each one N times.
"""
import concurrent.futures
import json
import os
import re
import signal

import harness

STRESS = {"PYSAMPLE_RATE": "5000", "PYSAMPLE_MODE": "wall"}
SECONDS = "0.8"

# run.py runs these scenarios two at a time: what they assert (exit status,
# output, a valid profile with the functions, bounds on torn walks taken
# after enough wake-ups) holds on a busy machine, and a second stress
# program beside one is such a machine.  Those that compare timing with a
# run without the library, bound torn stacks tightly or start thousands of
# threads are marked `alone` and run by themselves.
TWO_AT_A_TIME = True


def stress_run(ctx, args, expect_stdout, env=None, timeout=120, interp_args=(), fast=False):
    """Runs a stress program with the library at 5 kHz; checks exit status 0,
    the exact stdout, no message of ours, and a well-formed profile
    (returned as a harness Profile, or as fast_stacks() if fast)."""
    e = dict(STRESS)
    e.update(env or {})
    res = ctx.run(list(interp_args) + args, env=e, timeout=timeout)
    ctx.check_clean_run(res)
    ctx.check(res.stdout == expect_stdout, "program output changed: %r, expected %r"
              % (res.stdout[-500:], expect_stdout), "stderr:\n" + res.stderr[-2000:])
    if fast:
        files = [f for f in res.files if not f.startswith(".")]
        ctx.check(len(files) == 1, "expected one profile, found %r" % files)
        p = fast_stacks(os.path.join(res.outdir, files[0]))
        total = sum(c for _, c in p)
    else:
        p = res.profile()  # parses every line: a torn or garbled profile fails here
        total = p.total
    ctx.check(total > 0, "no samples", res.stderr[-2000:])
    return res, p


def check_names(ctx, p, names, what):
    seen = {f.name for s in p.stacks for f in s.frames}
    missing = [n for n in names if n not in seen]
    ctx.check(not missing, "%s: functions %r never sampled" % (what, missing), p.dump())


def repeat(ctx):
    return range(ctx.stress)


def test_short_lived_threads(ctx):
    for _ in repeat(ctx):
        res, p = stress_run(ctx, [ctx.program("stress_threads.py"), SECONDS, "2000"],
                            "threads ok\n")
        started = int(re.search(r"started (\d+)", res.stderr).group(1))
        ctx.check(started >= 2000, "only %d threads started" % started)
        check_names(ctx, p, ["spawn_loop"], "threads")
        ctx.check(len(p.threads()) >= 2, "no short-lived thread was ever sampled",
                  p.threads())


# Starting 2000 threads is a matter of scheduling latency: beside another
# stress program on a free-threaded build with native stacks it took 13-37 s
# instead of 1.
test_short_lived_threads.alone = True


# A Python frame "name (file:line)"; native frames (PYSAMPLE_NATIVE=1, the
# suite run with --env) are "function (library)", "library+0x..." and
# "[native: ...]" markers.
PY_FRAME = re.compile(r" \(.*:-?\d+\)$")


def fast_stacks(path, python_only=True):
    """(names, count) per line of a profile, checking its form as the
    harness's Profile does, but fast enough for the 100+ MB that thousands
    of stacks 3000 frames deep make (Profile takes a minute on those).
    python_only: the Python frames (and pysample markers) only, so that
    the recursion checks hold with native frames among them."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    if text and not text.endswith("\n"):
        raise AssertionError("%s: last line not terminated" % path)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        stack, _, count = line.rpartition(" ")
        parts = stack.split(";")
        if not count.isdigit() or not parts[0].startswith("thread ") or len(parts) < 2:
            raise AssertionError("%s:%d: malformed line %r" % (path, n, line[:200]))
        frames = parts[1:]
        if python_only:
            frames = [f for f in frames if PY_FRAME.search(f) or f.startswith("[pysample:")]
        out.append(([f[:f.rfind(" (")] if f.endswith(")") else f for f in frames],
                    int(count)))
    return out


def check_recursion_profile(ctx, p, max_torn):
    """Checks the recursion's stacks; returns the deepest one seen.

    A thread is sampled while it runs, so now and then a walk meets a frame
    that is being set up over a popped one and comes back torn: cut short
    (no root) or mixing frames of two moments.  3.12+ recognise the cut
    ones (their chains end in an entry frame) and the sampler retries; what
    is left must stay a small fraction (max_torn) of the samples."""
    allowed = {"dive", "bottom", "expected_dive"}
    deepest = torn = dives = 0
    for names, count in p:
        if "dive" not in names:
            continue
        dives += count
        # <module> > recurse_loop > dive x N [> bottom | expected_dive]
        i = names.index("recurse_loop") if "recurse_loop" in names else -1
        tail = names[i + 1:]
        if i < 1 or names[0] != "<module>" or not set(tail) <= allowed or "bottom" in tail[:-1]:
            torn += count
            continue
        deepest = max(deepest, tail.count("dive"))
    ctx.check(torn <= max(2, max_torn * dives), "%d of %d recursion samples are torn"
              % (torn, dives))
    return deepest


def test_recursion_across_chunks(ctx):
    for _ in repeat(ctx):
        res, p = stress_run(ctx, [ctx.program("stress_recursion.py"), SECONDS],
                            "recursion ok\n", fast=True)
        deepest = check_recursion_profile(ctx, p, 0.03)
        ctx.check(deepest >= 500, "deepest sampled recursion only %d frames" % deepest)


test_recursion_across_chunks.alone = True


def test_recursion_on_every_syscall_path(ctx):
    # The fallbacks must keep sampling alive and correct where
    # process_vm_readv is refused (PYSAMPLE_READ_MODE is test-only).
    for _ in repeat(ctx):
        for mode in ("syscall", "procmem", "file", "pipe"):
            # 0.5 s and at least 100 sampler wake-ups: a walk of 1500 frames
            # through pipe reads takes milliseconds, and under load 0.5 s
            # alone once left no sample deeper than 95 frames.  100 wake-ups
            # left 56-85 samples deeper than 100 frames in each mode, with
            # native stacks on and a load average of 11 (3.9, 3.15); 300
            # took 10-25 s per interpreter with native stacks.
            res, p = stress_run(ctx, [ctx.program("stress_recursion.py"), "0.5", "1500", "100"],
                                "recursion ok\n", env={"PYSAMPLE_READ_MODE": mode}, fast=True)
            # A walk takes milliseconds here (~1.3 us per read), so more of
            # them overlap a call or return than on the direct path.
            deepest = check_recursion_profile(ctx, p, 0.2)
            ctx.check(deepest >= 100, "%s: deepest sampled recursion only %d frames"
                      % (mode, deepest))


@harness.once
def test_descriptors_swapped_under_the_read_path(ctx):
    """process_vm_readv refused (seccomp, as Docker's default profile
    does) and the syscall read path in use: a thread of the program puts
    its own file onto each of our descriptors and back, thousands of times
    a second, while the sampler reads at 5 kHz.  The file never receives a
    byte (the read path chosen reads /proc/self/mem, and writes through no
    descriptor), and sampling goes on."""
    import platform
    import subprocess
    import sys
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        ctx.skip("the seccomp filter is written for x86-64 Linux")
    outdir = ctx.tmpdir()
    stats = os.path.join(outdir, "stats")
    env = ctx.env(dict(STRESS, PYSAMPLE_OUTPUT=os.path.join(outdir, "prof.txt"),
                       PYSAMPLE_READ_MODE="syscall", PYSAMPLE_STATS=stats))
    prog = ctx.program("stress_fdswap.py")
    r = subprocess.run([ctx.python, prog, "launch", repr(env), ctx.python, prog, "0.5", "200"],
                       env=ctx.env(preload=False), capture_output=True, text=True, timeout=120)
    ctx.check(r.returncode == 0 and r.stdout == "victim 0\n" and not harness.our_messages(r.stderr),
              "rc %s, stdout %r (the victim file's size)" % (r.returncode, r.stdout),
              r.stderr[-2000:])
    with open(stats) as f:
        st = dict(l.split(" ", 1) for l in f.read().splitlines())
    ctx.check(st["read_mode"] == "procmem", "read mode %r" % st["read_mode"], st)
    p = harness.Profile(os.path.join(outdir, "prof.txt"))
    ctx.check(p.with_frame("recurse") > 0, "the recursion was never sampled", p.dump())


@harness.once
def test_cpu_mode_state_files_closed_and_reopened(ctx):
    """cpu mode keeps threads' /proc state files open (at most 8): a program
    that closes every descriptor above 2 and puts a watched file of its own
    on each of their numbers never has it read (the check comes before the
    pread), and the library makes descriptors of its own again; none is
    kept by a program near its descriptor limit; threads that ended give
    their places up."""
    import sys
    if not sys.platform.startswith("linux"):
        ctx.skip("the state files are Linux's /proc")
    res = ctx.run([ctx.program("stress_statfds.py"), "12", "100"],
                  env={"PYSAMPLE_MODE": "cpu", "PYSAMPLE_RATE": "1000"}, timeout=120)
    ctx.check_clean_run(res)
    out = dict(l.split(" ", 1) for l in res.stdout.splitlines())
    ctx.check(int(out.get("kept", 0)) >= 1, "no state file was kept open", res.stdout)
    ctx.check(out.get("accessed") == "0", "the library read through the program's file "
              "(inotify IN_ACCESS events: %s)" % out.get("accessed"), res.stdout)
    ctx.check(int(out.get("kept_after", 0)) >= 1, "no state file of its own after the "
              "program closed them", res.stdout)
    ctx.check(int(out.get("most", 99)) <= 8, "more than 8 state files open at once",
              res.stdout)
    # Near its descriptor limit (64, 20 held), the program keeps its numbers.
    res = ctx.run([ctx.program("stress_statfds.py"), "4", "100", "near-limit"],
                  env={"PYSAMPLE_MODE": "cpu", "PYSAMPLE_RATE": "1000"}, timeout=120)
    ctx.check_clean_run(res)
    ctx.check(res.stdout == "most 0\n", "state files kept open near the descriptor limit",
              res.stdout)
    # Threads that ended give their places up to new ones (after a second).
    res = ctx.run([ctx.program("stress_statfds.py"), "8", "100", "churn"],
                  env={"PYSAMPLE_MODE": "cpu", "PYSAMPLE_RATE": "1000"}, timeout=120)
    ctx.check_clean_run(res)
    out = dict(l.split(" ", 1) for l in res.stdout.splitlines())
    ctx.check(int(out.get("live", 0)) >= 3 and int(out.get("most", 99)) <= 8,
              "the state files kept stay with threads that ended", res.stdout)


@harness.once
def test_descriptors_closed_and_reopened_under_the_read_path(ctx):
    """process_vm_readv refused, so the library reads /proc/self/mem through
    a descriptor: the program's first open() still gets 3 (ours is held
    high), and a program that closes every descriptor above 2 and puts its
    own file on our number (a watched file; /dev/kmsg, whose reads take
    records, where it can be opened) never has it read: the check comes
    before the pread, not only after.  Sampling goes on through a new
    descriptor."""
    import platform
    import subprocess
    import sys
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        ctx.skip("the seccomp filter is written for x86-64 Linux")
    outdir = ctx.tmpdir()
    stats = os.path.join(outdir, "stats")
    env = ctx.env(dict(PYSAMPLE_RATE="1000", PYSAMPLE_OUTPUT=os.path.join(outdir, "prof.txt"),
                       PYSAMPLE_READ_MODE="syscall", PYSAMPLE_STATS=stats))
    prog = ctx.program("stress_fdreuse.py")
    rounds = 6
    r = subprocess.run([ctx.python, prog, "launch", repr(env), ctx.python, prog, str(rounds), "20"],
                       env=ctx.env(preload=False), capture_output=True, text=True, timeout=120)
    ctx.check(r.returncode == 0 and not harness.our_messages(r.stderr),
              "rc %s" % r.returncode, r.stdout, r.stderr[-2000:])
    out = dict(l.split(" ", 1) for l in r.stdout.splitlines())
    ctx.check(out.get("first_open") == "3", "the program's first open() got %r, not 3"
              % out.get("first_open"), r.stdout)
    ctx.check(out.get("rounds") == "%d found %d" % (rounds, rounds),
              "the library's /proc/PID/mem descriptor was missing in some round", r.stdout)
    ctx.check(out.get("accessed") == "0", "the library read through the program's file "
              "(inotify IN_ACCESS events: %s)" % out.get("accessed"), r.stdout)
    kmsg = out.get("kmsg", "0 lost 0").split()
    ctx.check(kmsg[2] == "0", "the library took %s /dev/kmsg records from the program's reader "
              "in %s rounds" % (kmsg[2], kmsg[0]), r.stdout)
    with open(stats) as f:
        st = dict(l.split(" ", 1) for l in f.read().splitlines())
    ctx.check(st["read_mode"] == "procmem", "read mode %r" % st["read_mode"], st)
    p = harness.Profile(os.path.join(outdir, "prof.txt"))
    ctx.check(p.with_frame("spin") > 0, "the program was never sampled", p.dump())


def test_code_churn(ctx):
    for _ in repeat(ctx):
        res, p = stress_run(ctx, [ctx.program("stress_codechurn.py"), SECONDS], "churn ok\n")
        check_names(ctx, p, ["churn"], "code churn")
        for s in p.stacks:
            for f in s.frames:
                if f.name.startswith("churn_fn_"):
                    ctx.check(re.match(r"^<churn-\d+>$", f.file or ""),
                              "%s attributed to %r" % (f.name, f.file))


def test_stack_table_limit(ctx):
    # Bounded memory: past PYSAMPLE_MAX_STACKS distinct stacks, samples are
    # counted on a marker stack, and none is lost: the profile's total is
    # exactly the number of samples the sampler took.
    for _ in repeat(ctx):
        e = dict(STRESS, PYSAMPLE_MAX_STACKS="100")
        res = ctx.run([ctx.program("stress_codechurn.py"), SECONDS, "api"], env=e)
        ctx.check_clean_run(res)
        m = re.match(r"^samples (\d+)\nchurn ok\n$", res.stdout)
        ctx.check(m, "unexpected output %r" % res.stdout, res.stderr[-2000:])
        p = res.profile()
        full = p.with_frame("[pysample: stack table full]")
        ctx.check(full > 0, "no '[pysample: stack table full]' stack with 100 stacks max",
                  p.dump())
        ctx.check(p.total == int(m.group(1)), "profile total %d != %s samples taken"
                  % (p.total, m.group(1)))
        real = [s for s in p.stacks if s.names() != ["[pysample: stack table full]"]]
        ctx.check(len(real) <= 100, "%d distinct stacks kept, limit 100" % len(real))


def test_generators_and_coroutines(ctx):
    for _ in repeat(ctx):
        res, p = stress_run(ctx, [ctx.program("stress_gens.py"), SECONDS], "gens ok\n")
        check_names(ctx, p, ["drive"], "generators")


def check_under_worker(ctx, res, p, ok):
    """Every sampled stack through worker() must be worker once with frames
    below it that ok(names below) accepts (a stack the program can have),
    the workers must have been sampled enough, and the walks dropped as
    torn (the "samples N errors N" the program prints on stderr) must stay
    rare."""
    m = re.search(r"samples (\d+) errors (\d+)", res.stderr)
    ctx.check(m is not None, "no sampler counters", res.stderr[-2000:])
    samples, errors = int(m.group(1)), int(m.group(2))
    n = 0
    for s in p.stacks:
        # The Python frames (the suite also runs with PYSAMPLE_NATIVE=1,
        # whose native frames have no line)
        names = [f.name for f in s.frames if f.line is not None]
        if "worker" not in names:
            continue
        n += s.count
        below = names[names.index("worker") + 1:]
        ctx.check(names.count("worker") == 1 and ok(below), "impossible stack under worker", s)
    ctx.check(n >= 200, "only %d samples of the workers" % n, p.dump())
    ctx.check(errors <= 0.05 * samples, "%d samples, %d dropped walks" % (samples, errors))


CONDITION_PATHS = [[], ["locked"], ["other"], ["other", "leaf"]]


def test_frames_reused_under_the_walk(ctx):
    """Threads enter and leave `with cond:` and call a function of another
    size in turn, so the data-stack slot above worker() holds
    Condition.__exit__ one moment and leaf() the next (3.11+).  A frame read
    just before it returned, linked to the caller that has since been
    replaced (worker;other;Condition.__exit__), is a stack the program
    never had: every sampled stack below worker must be one of its call
    paths, and the walks dropped instead must stay rare."""
    for _ in repeat(ctx):
        res, p = stress_run(ctx, [ctx.program("stress_conditions.py"), SECONDS],
                            "conditions ok\n")
        # 3.9/3.10 name methods without their class
        check_under_worker(ctx, res, p, lambda below: below in CONDITION_PATHS or (
            len(below) == 2 and below[0] == "locked" and
            below[1].split(".")[-1] in ("__enter__", "__exit__")))


def test_frame_objects_reused_under_the_walk(ctx):
    """3.9/3.10: four threads recurse 12 deep and back without pause, so a
    returning frame object goes to its code's zombie frame or the free list
    and the next call takes it back one level deeper, while two threads
    hash without the GIL beside the sampler.  A walk that read a frame and
    then followed its f_back after the thread had returned and called again
    stitches two moments into one stack (13 rec0 frames, seen once in core's
    concurrent_busy_threads on 3.10.13): every stack must be worker above at
    most 12 frames of one rec<i>, and the walks dropped instead (frames.c,
    frame_holds_callee, drops every walk whose callee returned under it)
    must stay rare.  Later versions run it too."""
    for _ in repeat(ctx):
        res, p = stress_run(ctx, [ctx.program("stress_frame_reuse.py"), SECONDS],
                            "frame reuse ok\n")
        check_under_worker(ctx, res, p, lambda below: len(below) <= 12 and len(set(below)) <= 1
                           and set(below) <= {"rec0", "rec1", "rec2", "rec3"})


# Two hashing threads beside the sampler are a load of their own.
test_frame_objects_reused_under_the_walk.alone = True


# The program's own SIGSEGV/SIGBUS handlers go behind ours (docs/safety.md):
# the sampler keeps reading directly, which PYSAMPLE_STATS shows.
STATS_FILE = ".stats.txt"


def handlers_run(ctx, args, interp_args=(), expect_modes=("direct",)):
    """stress_handlers.py ARGS; checks the read mode the sampler ended in."""
    stats_path = os.path.join(ctx.tmpdir(), STATS_FILE)
    res, p = stress_run(ctx, [ctx.program("stress_handlers.py"), SECONDS] + args,
                        "handlers ok\n", env={"PYSAMPLE_STATS": stats_path},
                        interp_args=interp_args)
    with open(stats_path) as f:
        stats = dict(l.split(" ", 1) for l in f.read().splitlines() if " " in l)
    ctx.check(stats.get("read_mode") in expect_modes, "%s: read mode %r, expected %s"
              % (" ".join(args), stats.get("read_mode"), " or ".join(expect_modes)))
    ctx.check("Fatal Python error" not in res.stderr, res.stderr[-2000:])
    check_names(ctx, p, ["dive"], " ".join(args))
    return res, p


def faultprobe(ctx):
    """build/test/libfaultprobe.so (test/integration/programs/faultprobe.c)."""
    return ctx.built(os.path.join("test", "libfaultprobe.so"), "PYSAMPLE_TEST_FAULTPROBE")


def test_faulthandler_enabled_by_program(ctx):
    for _ in repeat(ctx):
        handlers_run(ctx, ["faulthandler"])


def test_faulthandler_from_start(ctx):
    # -X faulthandler installs its handler while the interpreter starts,
    # before or after ours depending on timing: both orders must be safe,
    # and both keep the direct path.
    for _ in repeat(ctx):
        handlers_run(ctx, ["faulthandler"], interp_args=["-X", "faulthandler"])


def test_ctypes_signal_handlers(ctx):
    # SIGSEGV through sigaction(), SIGBUS through signal(): a fault of ours
    # reaching them would end the program with status 3.
    for _ in repeat(ctx):
        handlers_run(ctx, ["ctypes"])


def test_c_library_recovering_from_its_faults(ctx):
    # CUDA-like: a C library's handler recovers from its own faults with
    # siglongjmp, thousands of times while the sampler reads; each reaches
    # it with the kernel's mask, on its alternate stack when it asked for
    # SA_ONSTACK, and SA_RESETHAND resets it as the kernel would.
    lib = faultprobe(ctx)
    for _ in repeat(ctx):
        for how in ("recover", "onstack", "resethand"):
            handlers_run(ctx, [how, lib])


def test_raw_rt_sigaction(ctx):
    # A handler installed by a raw system call (no interposer sees it) is
    # noticed by the per-tick check: the sampler falls back to
    # process_vm_readv and goes on sampling correctly.
    for _ in repeat(ctx):
        handlers_run(ctx, ["raw"], expect_modes=("process_vm_readv", "file", "pipe"))


def current_thread_report(stderr):
    """faulthandler's lines about the crashing thread, addresses masked
    (the other threads' frames depend on timing)."""
    lines = stderr.splitlines()
    out = [l for l in lines if l.startswith("Fatal Python error")]
    for i, l in enumerate(lines):
        if l.startswith("Current thread"):
            for m in lines[i:]:
                if not m.strip():
                    break
                out.append(m)
            break
    return [re.sub(r"0x[0-9a-fA-F]+", "0x?", l) for l in out]


def both_ways(ctx, args, **kw):
    """{preload: ctx.run(args, preload=preload, **kw)} for False and True,
    the two runs at the same time."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {p: pool.submit(ctx.run, args, preload=p, **kw) for p in (False, True)}
        return {p: f.result() for p, f in futures.items()}


def test_real_segfault(ctx):
    # A genuine crash looks exactly as without the library: death by
    # SIGSEGV, and the same faulthandler report for the crashing thread.
    # The death is checked on every run.  The report is compared with a run
    # without the library made at the same time; if they differ, or one is cut
    # short, the pair is run again (up to 3 times): faulthandler itself now
    # and then leaves out the current thread on a free-threaded build while
    # it dumps another running thread, with or without us.
    variants = [("main", "null", True), ("thread", "null", True), ("main", "kill", True),
                ("main", "null", False)]
    for _ in repeat(ctx):
        for where, how, fh in variants:
            args = [ctx.program("stress_segfault.py"), "0.3", where, how]
            if fh:
                args.append("faulthandler")
            # No core files from these crashes.
            cmd = ["sh", "-c", 'ulimit -c 0; exec "$@"', "sh", ctx.python] + args
            name = "%s/%s/%s" % (where, how, "faulthandler" if fh else "plain")
            # A pair only says something about us when faulthandler's own
            # report, without the library, is complete: on free-threaded
            # 3.13 it is cut short in about half the runs by itself
            # (measured: 7 of 12).  Up to 3 such informative pairs are
            # tried among at most 8; the death by SIGSEGV is checked on all.
            informative = cut = different = 0
            same = False
            a = b = []
            for attempt in range(8):
                # The pair runs at the same time: nothing here is about
                # timing, and a crash report does not depend on the load.
                runs = both_ways(ctx, cmd, env=STRESS, python=False, timeout=60)
                for preload in (False, True):
                    res = runs[preload]
                    what = "%s %s" % (name, "with library" if preload else "without")
                    ctx.check(res.rc == -signal.SIGSEGV or res.rc == 128 + signal.SIGSEGV,
                              "%s: exit status %s, expected death by SIGSEGV" % (what, res.rc),
                              res.stderr[-2000:])
                    ctx.check(res.stdout == "before crash\n", "%s: stdout %r" % (what, res.stdout))
                    ctx.check(not harness.our_messages(res.stderr), res.stderr[-2000:])
                if not fh:
                    break
                a = current_thread_report(runs[False].stderr)
                b = current_thread_report(runs[True].stderr)

                def complete(r):
                    # Every variant crashes inside crash_now (a bad read, or
                    # kill() of itself): a report without it was cut short.
                    return bool(r) and r[0] == "Fatal Python error: Segmentation fault" and \
                        any("crash_now" in l for l in r)
                if not complete(a):
                    continue
                informative += 1
                if complete(b) and a == b:
                    same = True
                    break
                # A complete report that differs is on us; a report cut
                # short happens without us too, so only cut short every
                # time counts.
                if complete(b):
                    different += 1
                else:
                    cut += 1
                if informative >= 3:
                    break
            if fh and not same and (different > 0 or cut >= 3):
                ctx.check(False, "%s: faulthandler report %s with the library (%d of %d pairs "
                          "whose report without it was complete); last pair:"
                          % (name, "different" if different else "cut short", different + cut,
                             informative),
                          "without:\n" + "\n".join(a), "with:\n" + "\n".join(b))


def test_blocking_syscalls(ctx):
    # No signals reach the program's threads (PYSAMPLE_NATIVE=1's SIGURG
    # stops in our handler, and a call it interrupts is restarted), so
    # blocking calls neither see EINTR nor restart, wake-ups are not missed
    # and their timing holds.
    # Problems fail at once; timing is compared against a run without the
    # library made at the same time (so that both meet the same load: run
    # one after the other, a loaded machine's busier phase once fell on the
    # run with the library three times in a row), with generous bounds, and
    # a timing miss is measured again (up to 3 times): a loaded machine
    # delays a wake-up now and then, a signal-driven design would delay
    # them every time.
    for _ in repeat(ctx):
        for attempt in range(3):
            got = {}
            runs = both_ways(ctx, [ctx.program("stress_blocking.py"), "40"], env=STRESS,
                             timeout=60)
            for preload, res in sorted(runs.items()):
                ctx.check_clean_run(res)
                got[preload] = json.loads(res.stdout)
                ctx.check(not got[preload]["problems"], "%s: %r" % (
                    "with library" if preload else "without", got[preload]["problems"]))
                ctx.check(all(n == 40 for n in got[preload]["counts"].values()),
                          got[preload]["counts"])
            p = res.profile()
            check_names(ctx, p, ["sleeper", "lock_handover"], "blocking")
            base, lib = got[False], got[True]
            late = []
            # Idle, a wake-up is late by well under a millisecond and the
            # bounds are +2 ms (median) and +10 ms (p90): a restarted
            # relative sleep (a whole period late) or a wake-up missed until
            # the next tick would break them.  On a loaded machine a lock
            # handed over between threads waits 100 ms and more for the CPU,
            # with or without us, and varies by tens of percent between two
            # runs at the same time: there the bounds grow with the latency
            # without the library.
            for kind in base["median_ms"]:
                if lib["median_ms"][kind] > base["median_ms"][kind] * 1.25 + 2.0:
                    late.append("%s: median %.2f ms vs %.2f ms without the library"
                                % (kind, lib["median_ms"][kind], base["median_ms"][kind]))
                if lib["p90_ms"][kind] > base["p90_ms"][kind] * 1.5 + 10.0:
                    late.append("%s: p90 %.2f ms vs %.2f ms without the library"
                                % (kind, lib["p90_ms"][kind], base["p90_ms"][kind]))
            if not late:
                break
        ctx.check(not late, "wake-ups later with the library in 3 measurements; last: "
                  + "; ".join(late))


test_blocking_syscalls.alone = True
