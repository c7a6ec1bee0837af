"""Issue 2: correct collapsed stacks for real programs, and an inert library
where it should be inert.  Every test runs under each interpreter."""
import os
import shutil
import subprocess
import sys

import harness
from harness import PROGRAMS, program_lines

# For programs written by a test: `until`, 0.x s and until the sampler has
# woken 40 times (programs/sampled.py).
UNTIL_SAMPLED = ("sys.path.insert(0, %r)\n" % PROGRAMS).replace("%", "%%") + \
    "import sampled\nuntil = sampled.Until(%s, 40)\n"


def test_exact_lines(ctx):
    prog = ctx.program("lines.py")
    res = ctx.run([prog, "1.0", "100"], env={"PYSAMPLE_RATE": "200"})
    ctx.check_clean_run(res)
    ctx.check(res.stdout == "done\n", "program output changed: %r" % res.stdout)
    p = res.profile()
    loop = program_lines(prog, "@leaf-loop")
    call_leaf = program_lines(prog, "@call-leaf")
    call_caller = program_lines(prog, "@call-caller")
    want = [("<module>", call_caller), ("caller", call_leaf), ("leaf", loop)]

    def is_wanted(s):
        got = [(f.name, f.line) for f in s.frames if f.file == prog]
        return got == want and all(f.file == prog for f in s.frames)
    hits = p.count_where(is_wanted)
    # 1 s at 200 Hz, and on until the sampler has woken 100 times (a
    # loaded machine delays it); most samples must be this exact stack.
    ctx.check(hits >= 25 and hits >= 0.9 * p.with_frame("leaf"), "only %d samples of <module>:%d > caller:%d > leaf:%d"
              % (hits, call_caller, call_leaf, loop), p.dump())
    main = [s for s in p.stacks if s.thread.endswith("(MainThread)")]
    ctx.check(main, "no stack labelled MainThread", p.dump())


def test_split_60_30_10(ctx):
    res = ctx.run([ctx.program("split.py"), "1.5", "800"], env={"PYSAMPLE_RATE": "500"})
    ctx.check_clean_run(res)
    p = res.profile()
    counts = {n: p.with_frame(n) for n in ("sixty", "thirty", "ten")}
    total = sum(counts.values())
    # Proportions are the assertion; the count only has to make them
    # meaningful.  split.py adds rounds until the sampler has woken 800
    # times (a loaded 2-core machine delays its ticks; idle, 1.5 s at
    # 500 Hz is about that many).
    ctx.check(total >= 0.3 * 750, "too few samples: %d" % total, p.dump())
    # Each function's share of the samples against the wall time it
    # really took (split.py measures it, and its long stalls: gaps of more
    # than 50 ms off the CPU).  On an idle machine that is 60/30/10 with no
    # stalls, and the band is +-8 points.  Under load the program can be
    # stalled for 300 ms and more (seen beside two other full suites and
    # two CPU hogs: thirty took 45.6 % of the wall time), and whether a
    # stall shows in the profile depends on whether the sampler, in the
    # same process, ran meanwhile.  So each share must lie within +-8
    # points of the range the stalls allow: from none of them counted to
    # all of its own counted.  (Moving 15 % of sixty's samples to thirty
    # fails this check in runs at load 10.)
    # The intended split is still required within a wider band, so that a
    # broken split.py cannot hide a broken profile.
    real = {}
    for line in res.stdout.splitlines():
        name, took, off = line.split()
        real[name] = (float(took), float(off))
    on_cpu = {n: t - g for n, (t, g) in real.items()}
    clean = sum(on_cpu.values())
    for name, share in (("sixty", 60), ("thirty", 30), ("ten", 10)):
        took, off = real[name]
        got = 100.0 * counts[name] / total
        ctx.check(abs(100.0 * on_cpu[name] / clean - share) <= 15, "split.py itself: %s ran "
                  "%.1f%% of the time on the CPU, meant %d%%"
                  % (name, 100.0 * on_cpu[name] / clean, share), real)
        others_off = sum(g for n, (_, g) in real.items() if n != name)
        low = 100.0 * on_cpu[name] / (clean + others_off)
        high = 100.0 * took / (clean + off)
        ctx.check(low - 8 <= got <= high + 8, "%s: %.1f%% of samples, it took %.1f-%.1f%% of the "
                  "wall time (+- 8)" % (name, got, low, high), counts, real)


def test_four_threads(ctx):
    res = ctx.run([ctx.program("threads4.py")], env={"PYSAMPLE_RATE": "200"})
    ctx.check_clean_run(res)
    p = res.profile()
    tids = dict(line.split() for line in res.stdout.splitlines())
    for fname, tid in tids.items():
        stacks = [s for s in p.stacks if any(f.name == fname for f in s.frames)]
        ctx.check(stacks, "%s never sampled" % fname, p.dump())
        labels = {s.thread.split()[1] for s in stacks}
        ctx.check(labels == {tid}, "%s seen on threads %s, it ran on %s" % (fname, labels, tid))
        others = {"func%d" % i for i in range(4)} - {fname}
        mixed = [s for s in p.stacks if s.thread.split()[1] == tid
                 and any(f.name in others for f in s.frames)]
        ctx.check(not mixed, "thread %s shows another thread's function" % tid, mixed[:3])
        samples = sum(s.count for s in stacks)
        ctx.check(samples >= 40, "%s: only %d samples in 1 s at 200 Hz" % (fname, samples))
        # funcN runs on worker-N: the OS name on 3.14+, read from the
        # Thread object on 3.9-3.13 (lib/python/threadnames.c).
        want = "thread %s (worker-%s)" % (tid, fname[-1])
        # Never another name; unnamed only for the odd sample taken while
        # the name could not be read yet (it is retried on the next one).
        bare = "thread %s" % tid
        ctx.check({s.thread for s in stacks} <= {want, bare},
                  "%s: labelled other than %r" % (fname, want), {s.thread for s in stacks})
        named = sum(s.count for s in stacks if s.thread == want)
        ctx.check(named >= 0.9 * samples, "%s: only %d of %d samples labelled %r"
                  % (fname, named, samples, want), {s.thread for s in stacks})


def test_thread_names(ctx):
    prog = ctx.program("thread_names.py")
    res = ctx.run([prog], env={"PYSAMPLE_RATE": "200"})
    ctx.check_clean_run(res)
    p = res.profile()
    tids = dict(line.split() for line in res.stdout.splitlines())

    def labels(func):
        """{thread label: samples} of the stacks that run func."""
        got = {}
        for s in p.stacks:
            if any(f.name == func and f.file == prog for f in s.frames):
                got[s.thread] = got.get(s.thread, 0) + s.count
        return got

    for func, want in (("main_work", "thread %s (MainThread)" % tids["main"]),
                       ("escaped_work", "thread %s (wörker%%3B1)" % tids["escaped"]),
                       # _thread.start_new_thread: no Thread object, no name
                       ("raw_work", "thread %s" % tids["raw"])):
        got = labels(func)
        ctx.check(sum(got.values()) >= 40 and set(got) == {want}, "%s: expected only %r, got %r"
                  % (func, want, got), p.dump())

    # A Thread subclass renamed after start: the name is read again about
    # once a second, so a sample taken before the rename may keep the old
    # one for up to a second of the 1.5 s run; never anything else.
    base = "thread %s" % tids["renamed"]
    got = labels("renamed_work")
    total = sum(got.values())
    ctx.check(total >= 40 and set(got) <= {base + " (renamed)", base + " (original)"},
              "renamed_work: labels %r" % got, p.dump())
    if ctx.version < (3, 14):
        # (3.14+ shows the OS name, which a rename from another thread
        # does not change.)
        ctx.check(got.get(base + " (renamed)", 0) >= 0.2 * total,
                  "renamed_work: the new name on only %r" % got)


def test_deep_recursion_900(ctx):
    prog = ctx.program("deep.py")
    res = ctx.run([prog, "900", "0.8"], env={"PYSAMPLE_RATE": "200"})
    ctx.check_clean_run(res)
    p = res.profile()
    rec_line = program_lines(prog, "@rec")
    bottom_line = program_lines(prog, "@bottom")
    last_line = program_lines(prog, "@rec-bottom")
    # bottom spends its time on its busy line; between two waits it runs
    # its loop and the call of until.extend() for a moment, where a sample
    # may land too (seen once under load on 3.12), and before the first
    # wait it builds its Until: the class call allocates in C before
    # __init__ has a frame (seen once in CI under 3.11-dbg).
    bottom_lines = {bottom_line, program_lines(prog, "@bottom-loop"),
                    program_lines(prog, "@bottom-extend"),
                    program_lines(prog, "@bottom-start")}
    whole = [s for s in p.stacks if s.frames and s.frames[-1].name == "bottom"]
    ctx.check(whole, "no sample at the bottom of the recursion", p.dump(5))
    for s in whole:
        names = s.names()
        ctx.check(names[0] == "<module>", "stack does not reach <module>: starts %r" % names[:3])
        ctx.check(names.count("rec") == 900, "%d rec frames, expected 900" % names.count("rec"))
        recs = [f.line for f in s.frames if f.name == "rec"]
        ctx.check(recs[:-1] == [rec_line] * 899 and recs[-1] == last_line
                  and s.frames[-1].line in bottom_lines, "wrong lines in the deep stack",
                  repr(s)[-300:])
        ctx.check(not any(f.name.startswith("[pysample:") for f in s.frames), "marker in a whole stack")
    busy = sum(s.count for s in whole if s.frames[-1].line == bottom_line)
    ctx.check(busy >= 0.9 * sum(s.count for s in whole),
              "only %d of the bottom's samples on its busy line" % busy, p.dump(5))


def test_truncation_marker(ctx):
    res = ctx.run([ctx.program("deep.py"), "200", "0.4"],
                  env={"PYSAMPLE_RATE": "200", "PYSAMPLE_MAX_DEPTH": "50"})
    ctx.check_clean_run(res)
    p = res.profile()
    cut = [s for s in p.stacks if s.frames and s.frames[-1].name == "bottom"]
    ctx.check(cut, "no sample at the bottom", p.dump(5))
    for s in cut:
        ctx.check(s.frames[0].name == "[pysample: truncated]", "cut stack has no marker: %r"
                  % s.frames[:2])
        ctx.check(len(s.frames) == 51, "%d frames, expected marker + 50" % len(s.frames))


def test_generators_and_coroutines(ctx):
    prog = ctx.program("gens.py")
    res = ctx.run([prog], env={"PYSAMPLE_RATE": "300"})
    ctx.check_clean_run(res)
    p = res.profile()

    def chain(s, names):
        got = [f.name for f in s.frames if f.file == prog]
        return got[-len(names):] == names
    gen = p.count_where(lambda s: chain(s, ["<module>", "consume", "produce", "spin"]))
    ctx.check(gen >= 15, "generator chain consume > produce > spin: %d samples" % gen, p.dump())
    gen_line = program_lines(prog, "@gen-spin")
    ctx.check(p.with_frame("produce", line=gen_line) >= 0.9 * gen, "produce not at line %d" % gen_line)
    co = p.count_where(lambda s: chain(s, ["coro_main", "coro_leaf", "spin"]))
    ctx.check(co >= 15, "coroutine chain coro_main > coro_leaf > spin: %d samples" % co, p.dump())
    ctx.check(p.with_frame("coro_main", line=program_lines(prog, "@coro-await")) >= 0.9 * co,
              "coro_main not at its await line")


def test_callable_names(ctx):
    prog = ctx.program("names.py")
    res = ctx.run([prog], env={"PYSAMPLE_RATE": "300"})
    ctx.check_clean_run(res)
    p = res.profile()
    expect = [ctx.qual("Klass", "method"), ctx.qual("Klass", "static"),
              "outer.<locals>.inner" if ctx.version >= (3, 11) else "inner",
              "<lambda>", "<genexpr>" if ctx.version < (3, 11) else
              "generator_expression.<locals>.<genexpr>"]
    if ctx.version < (3, 12):   # PEP 709 inlined comprehensions in 3.12
        expect.append("<listcomp>" if ctx.version < (3, 11) else "comprehension.<locals>.<listcomp>")
    for name in expect:
        n = p.count_where(lambda s: any(f.name == name and f.file == prog for f in s.frames)
                          and s.frames[-1].name == "spin")
        ctx.check(n >= 10, "%r calling spin: %d samples" % (name, n), p.dump())
    n = p.count_where(lambda s: [f.name for f in s.frames][-2:] == ["comprehension", "spin"])
    if ctx.version >= (3, 12):
        ctx.check(n >= 10, "inlined comprehension: comprehension > spin only %d" % n, p.dump())


def test_non_ascii_names_and_path(ctx):
    d = ctx.tmpdir()
    path = os.path.join(d, "prögrâm_файл_名前.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write("import sys, time\n"
                "def función_ñ(until):\n"
                "    while True:\n"
                "        while time.perf_counter() < until.deadline: pass\n"
                "        if not until.extend(): return\n"
                "def 関数_λ(until):\n"
                "    función_ñ(until)\n"
                "def deseret_𐐀(until):\n"
                "    関数_λ(until)\n"
                + UNTIL_SAMPLED % 0.4 +
                "deseret_𐐀(until)\n")
    res = ctx.run([path], env={"PYSAMPLE_RATE": "300"})
    ctx.check_clean_run(res)
    p = res.profile()
    n = p.count_where(lambda s: [(f.name, f.file, f.line) for f in s.frames][-3:] ==
                      [("deseret_𐐀", path, 9), ("関数_λ", path, 7), ("función_ñ", path, 4)])
    ctx.check(n >= 10, "non-ASCII stack deseret_𐐀 > 関数_λ > función_ñ: %d samples" % n, p.dump())


def test_escaping_of_separators(ctx):
    d = ctx.tmpdir()
    path = os.path.join(d, "semi;colon 100%.py")
    with open(path, "w") as f:
        f.write("import sys, time\n"
                "def work(until):\n"
                "    while True:\n"
                "        while time.perf_counter() < until.deadline: pass\n"
                "        if not until.extend(): return\n"
                + UNTIL_SAMPLED % 0.3 +
                "work(until)\n")
    res = ctx.run([path], env={"PYSAMPLE_RATE": "300"})
    ctx.check_clean_run(res)
    p = res.profile()
    ctx.check("semi%3Bcolon 100%25.py" in p.text, "path not escaped as documented", p.text[:500])
    ctx.check(p.with_frame("work", line=4) >= 10, "escaped path broke parsing", p.dump())


def test_lines_off(ctx):
    res = ctx.run([ctx.program("lines.py"), "0.5"], env={"PYSAMPLE_LINES": "0"})
    ctx.check_clean_run(res)
    p = res.profile()
    frames = [f for s in p.stacks for f in s.frames]
    ctx.check(frames and all(f.line is None for f in frames), "line numbers present",
              p.dump(5))
    leaf = [s for s in p.stacks if s.frames[-1].name == "leaf"]
    ctx.check(len(leaf) == 1, "one stack expected per function path, got %d" % len(leaf), p.dump())


def test_cpu_mode_skips_idle_thread(ctx):
    prog = ctx.program("idle_and_busy.py")
    wall = ctx.run([prog], env={"PYSAMPLE_RATE": "200"})
    cpu = ctx.run([prog], env={"PYSAMPLE_RATE": "200", "PYSAMPLE_MODE": "cpu"})
    ctx.check_clean_run(wall)
    ctx.check_clean_run(cpu)
    pw, pc = wall.profile(), cpu.profile()
    # Both threads live for the whole second: wall mode sees them alike,
    # cpu mode sees only the one that computes.  (Ratios, because a loaded
    # machine delays ticks; the counts only need to make them meaningful.)
    w_sleep, w_busy = pw.with_frame("sleeper"), pw.with_frame("busy")
    ctx.check(w_busy >= 20 and w_sleep >= 0.5 * w_busy,
              "wall mode: sleeper %d vs busy %d samples" % (w_sleep, w_busy), pw.dump())
    c_sleep, c_busy = pc.with_frame("sleeper"), pc.with_frame("busy")
    ctx.check(c_busy >= 20, "cpu mode: busy thread has %d samples" % c_busy, pc.dump())
    ctx.check(c_sleep <= 0.05 * c_busy + 2, "cpu mode: sleeping thread sampled %d times (busy %d)"
              % (c_sleep, c_busy), pc.dump())


def test_ctypes_api(ctx):
    d = ctx.tmpdir()
    out = os.path.join(d, "api.txt")
    res = ctx.run([ctx.program("api_ctypes.py"), ctx.lib, out], output=None, preload=False,
                  outdir=d)
    ctx.check_clean_run(res)
    p = res.profile("api.txt")
    ctx.check(p.with_frame("busy_api") >= 25, "API-driven profile lacks busy_api", p.dump())


# What is left of a thread's stack when it runs the library's paths (its
# SIGURG handler for native stacks, its stand-ins for pthread_create,
# sigaction, signal, raise, kill, the signal masks, fopen, dlopen, and its
# fork handlers): 16 KiB of musl's default 128 KiB.
SMALL_STACK_MARGIN = 16 * 1024


def test_small_thread_stack(ctx):
    """Issue 37: a musl thread has a 128 KiB stack by default (glibc's
    8 MiB).  Threads with the default stack use it up to its last 16 KiB,
    then spin there (the sampler's SIGURG lands on that stack) and make the
    calls the library stands in front of (programs/smallstack.c): the
    program runs to its end, unchanged, sampled with its native frames.
    Under the musl interpreters (where the stack is 128 KiB: checked) and
    the primary one."""
    musl = ctx.musl
    if not (musl or ctx.primary):
        ctx.skip("under the musl interpreters and the primary one")
    helper = os.environ.get("PYSAMPLE_TEST_SMALLSTACK")
    if not helper or not os.path.exists(helper):
        ctx.skip("programs/smallstack.c not built")
    import platform
    # (musl: native stacks are refused, test_native_refused_on_musl.)
    native = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "aarch64") and not musl
    env = {"PYSAMPLE_RATE": "200", "PYSAMPLE_NATIVE": "1" if native else "0"}
    args = [ctx.program("small_stack.py"), helper, str(SMALL_STACK_MARGIN)]
    res = ctx.run(args, env=env)
    ctx.check_clean_run(res)
    out = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    sizes = [int(x) for x in out["stack"].split()]
    rounds = [int(x) for x in out["rounds"].split()]
    # musl 1.2.3 maps 128 KiB and its thread's TLS area as one stack.
    ctx.check(not musl or all(128 * 1024 <= s <= 136 * 1024 for s in sizes),
              "musl threads' stacks are %s bytes, expected about 128 KiB" % sizes)
    ctx.check(min(rounds) >= 1 and int(out["raised"]) == sum(rounds),
              "calls near the stack's end failed: %s" % res.stdout)
    # The paint below the spinning frame (SMALL_STACK_MARGIN less 512
    # bytes) must have its lowest KiB untouched: a path that went deeper
    # may have written past musl's one guard page without a fault.  Seen
    # here with native stacks on: 4.3 KiB under musl (3.8 without the
    # library), 4.8 KiB under glibc (3.7 without).
    deepest = int(out["deepest"])
    ctx.check(0 < deepest < SMALL_STACK_MARGIN - 512 - 1024,
              "the calls near the stack's end used %d of the %d bytes left" % (deepest, SMALL_STACK_MARGIN),
              res.stdout)
    # Each fork child writes its own profile: the program's is its pid's.
    p = res.profile("prof.%s.txt" % out["pid"])
    spun = p.with_frame("ss_busy") if native else p.with_frame("worker")
    ctx.check(spun >= 10, "%d samples in the threads near their stack's end" % spun, p.dump())
    plain = ctx.run(args, output=None, preload=False)
    ctx.check(plain.rc == 0 and "rounds" in plain.stdout,
              "without the library: rc %d, %r" % (plain.rc, plain.stdout))


def test_native_refused_on_musl(ctx):
    """musl issues its blocking calls through __syscall_cp_asm, after which
    the call our SIGURG interrupted cannot be told, so it could not be
    restarted: a C extension's select() returned EINTR 13 times in 900
    calls at 1 kHz.  Under musl, PYSAMPLE_NATIVE=1 is refused in one line
    and the Python frames are sampled as usual."""
    if not ctx.musl:
        ctx.skip("under the musl interpreters")
    prog = ctx.program("deep.py")
    res = ctx.run([prog, "30", "0.3"], env={"PYSAMPLE_NATIVE": "1", "PYSAMPLE_RATE": "200"})
    lines = res.stderr.splitlines()
    ctx.check(res.rc == 0 and len(lines) == 1 and lines[0].startswith("pysample: PYSAMPLE_NATIVE: native "
              "stacks need glibc"), "rc %d, stderr %r" % (res.rc, res.stderr))
    p = res.profile()
    ctx.check(p.with_frame("bottom") >= 10 and not any(f.name.startswith("[native") for s in p.stacks
                                                       for f in s.frames),
              "Python frames only", p.dump(5))


@harness.not_emulated("qemu-user runs threads of its own in the process")
def test_profiling_off_is_inert(ctx):
    res = ctx.run([ctx.program("count_threads.py")], output=None)
    ctx.check(res.rc == 0 and res.stderr == "", "rc %d stderr %r" % (res.rc, res.stderr))
    ctx.check(res.stdout.strip() == "1", "profiler thread started without PYSAMPLE_OUTPUT: %s"
              % res.stdout)
    on = ctx.run([ctx.program("count_threads.py")])
    ctx.check(on.stdout.strip() == "2", "expected exactly one sampler thread, got %s threads"
              % on.stdout.strip())


@harness.not_emulated("the commands are this machine's, the library is the emulated one's")
def test_non_python_processes_are_inert(ctx):
    if ctx.musl:
        ctx.skip("this machine's commands are glibc programs; scripts/check-musl runs a musl "
                 "one (musl/library/inert_in_other_programs)")
    for cmd in (["bash", "-c", "true"], ["ls", "/"], ["sh", "-c", "echo hi"]):
        res = ctx.run(cmd, python=False)
        ctx.check(res.rc == 0, "%s failed: %d" % (cmd, res.rc))
        ctx.check(res.stderr == "", "%s printed %r" % (cmd, res.stderr))
        ctx.check(res.files == [], "%s left files %r" % (cmd, res.files))


@harness.once
def test_invalid_settings_are_reported(ctx):
    prog = ctx.program("lines.py")
    for var, val, want in (("PYSAMPLE_RATE", "abc", "PYSAMPLE_RATE='abc'"),
                           ("PYSAMPLE_RATE", "0", "PYSAMPLE_RATE='0'"),
                           ("PYSAMPLE_RATE", "1000001", "PYSAMPLE_RATE='1000001'"),
                           ("PYSAMPLE_MODE", "gpu", "PYSAMPLE_MODE='gpu'"),
                           ("PYSAMPLE_MAX_DEPTH", "-3", "PYSAMPLE_MAX_DEPTH='-3'")):
        res = ctx.run([prog, "0.2"], env={var: val})
        ctx.check(res.rc == 0 and res.stdout == "done\n", "program affected by %s=%s" % (var, val))
        lines = harness.other_lines(res.stderr)
        ctx.check(len(lines) == 1 and lines[0].startswith("pysample: ") and want in lines[0],
                  "%s=%s: expected one 'pysample:' line naming it, got %r" % (var, val, res.stderr))
        p = res.profile()
        ctx.check(p.with_frame("leaf") > 0, "no profile after falling back to the default")


MISSPELT = "pysample: unknown setting PYSAMPLE_OUPUT (did you mean PYSAMPLE_OUTPUT?)"


@harness.once
def test_misspelt_setting_is_named(ctx):
    """An unknown PYSAMPLE_ name gets one line naming the setting it is
    closest to, and the program runs on (issue #35: PYSAMPLE_OUPUT was
    ignored without a word).  With only the misspelt name set, the line
    also says that nothing is profiled.  The tool's names and the tests'
    own switches are known: no line."""
    prog = ctx.program("lines.py")
    stray = ctx.tmpdir()
    res = ctx.run([prog, "0.2"], env={"PYSAMPLE_OUPUT": os.path.join(stray, "p.txt")})
    ctx.check(res.rc == 0 and res.stdout == "done\n", "program affected: rc %d" % res.rc)
    ctx.check(harness.other_lines(res.stderr) == [MISSPELT],
              "expected exactly %r, got %r" % (MISSPELT, res.stderr))
    ctx.check(res.profile().with_frame("leaf") > 0, "no profile beside the misspelt name")
    alone = ctx.run([prog, "0.2"], output=None,
                    env={"PYSAMPLE_OUPUT": os.path.join(stray, "p.txt")})
    lines = harness.other_lines(alone.stderr)
    ctx.check(alone.rc == 0 and alone.stdout == "done\n", "program affected: rc %d" % alone.rc)
    ctx.check(len(lines) == 1 and lines[0].startswith(MISSPELT) and "nothing is profiled" in lines[0],
              "with only the misspelt name: expected one line saying so, got %r" % alone.stderr)
    ctx.check(os.listdir(stray) == [], "files written: %r" % os.listdir(stray))
    quiet = ctx.run([prog, "0.2"], env={"PYSAMPLE_TEST_ANYTHING": "1", "PYSAMPLE_SERVICE": "web"})
    ctx.check(harness.other_lines(quiet.stderr) == [],
              "known names reported: %r" % quiet.stderr)


@harness.not_emulated("the commands are this machine's, the library is the emulated one's")
def test_misspelt_setting_silent_in_other_programs(ctx):
    """The same environment in a shell: not a Python process, so the
    library says nothing (the shell that starts the profiled program must
    not print our lines)."""
    if ctx.musl:
        ctx.skip("this machine's sh is a glibc program")
    stray = ctx.tmpdir()
    for out in (None, "prof.%p.txt"):
        res = ctx.run(["sh", "-c", "echo hi"], output=out, python=False,
                      env={"PYSAMPLE_OUPUT": os.path.join(stray, "p.txt")})
        ctx.check(res.rc == 0 and res.stdout == "hi\n", "sh affected: rc %d" % res.rc)
        ctx.check(res.stderr == "", "sh printed %r" % res.stderr)


@harness.once
def test_settings_cannot_forge_lines(ctx):
    """A newline, an escape sequence or a C1 control in a PYSAMPLE_* value
    quoted in our line is written as \\xNN: one line, ours, whatever the
    value holds (issue #39: a value forged whole log lines)."""
    prog = ctx.program("lines.py")
    forged = "pysample: forged"
    for var, val, shown in (("PYSAMPLE_RATE", "5\n" + forged, "5\\x0apysample: forged"),
                            ("PYSAMPLE_MODE", "\x1b[2J\rgpu", "\\x1b[2J\\x0dgpu"),
                            ("PYSAMPLE_NATIVE", "\u009b31m", "\\xc2\\x9b31m"),
                            ("PYSAMPLE_OUTPUT", "/nonexistent\n%s/p.txt" % forged,
                             "/nonexistent\\x0apysample: forged/p.txt")):
        env = {var: val}
        res = ctx.run([prog, "0.2"], output=None if var == "PYSAMPLE_OUTPUT" else "prof.%p.txt", env=env)
        ctx.check(res.rc == 0 and res.stdout == "done\n", "program affected by %s=%r" % (var, val))
        lines = harness.other_lines(res.stderr)
        ctx.check(len(lines) == 1 and lines[0].startswith("pysample: ") and shown in lines[0]
                  and not any(c in res.stderr[:-1] for c in "\n\r\x1b\x9b"),
                  "%s=%r: expected one line with the value escaped, got %r" % (var, val, res.stderr))


@harness.once
def test_refused_side_files_said_once(ctx):
    """A symbolic link planted at the timeline's and the quality figures'
    names: neither is followed, each is said once in all the writes, and
    says what was refused ("File exists" said nothing; the quality figures
    went without a word)."""
    d = ctx.tmpdir()
    prof = os.path.join(d, "prof.txt")
    target = os.path.join(d, "target")
    with open(target, "w") as f:
        f.write("untouched\n")
    for side in (".timeline", ".quality.json"):
        os.symlink(target, prof + side)
    res = ctx.run([ctx.program("side_files.py"), prof, "3"], output=None, outdir=d,
                  env={"PYSAMPLE_OUTPUT": prof, "PYSAMPLE_FLUSH_INTERVAL": "1",
                       "PYSAMPLE_TIMELINE": "1", "PYSAMPLE_QUALITY": "1"})
    ctx.check(res.rc == 0 and res.stdout == "writes 3\ndone\n", "program affected", res.rc, res.stdout,
              res.stderr)
    with open(target) as f:
        ctx.check(f.read() == "untouched\n", "the link was followed")
    lines = harness.our_messages(res.stderr)
    for side in (".timeline", ".quality.json"):
        said = [l for l in lines if (prof + side + ":") in l]
        ctx.check(len(said) == 1 and "a symbolic link is there, which the library neither follows "
                  "nor replaces" in said[0], "%s: one line saying a link was refused" % side, res.stderr)
    ctx.check(len(lines) == 2, "two lines in all", res.stderr)


@harness.once
@harness.not_emulated("mounts a file system of its own")
def test_timeline_disk_full_said_once(ctx):
    """The timeline cannot be written for want of space for several
    flushes, then can again: one line when it begins, one when it ends
    (it was said on every flush: ~2 900 lines a day)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        ctx.skip("needs root and unshare (a tmpfs of its own)")
    d = ctx.tmpdir()
    prof = os.path.join(d, "prof.txt")
    mount = 'mount -t tmpfs -o size=1m pysample-full "$0" && exec "$@"'
    res = ctx.run(["unshare", "-m", "sh", "-c", mount, d, ctx.python, ctx.program("side_files.py"),
                   prof, "2", "diskfull"], python=False, output=None, outdir=d,
                  env={"PYSAMPLE_OUTPUT": prof, "PYSAMPLE_FLUSH_INTERVAL": "1", "PYSAMPLE_TIMELINE": "1",
                       "PYSAMPLE_RATE": "2000"})
    ctx.check(res.rc == 0 and res.stdout == "writes 2\ndone\n", "program affected", res.rc, res.stdout,
              res.stderr)
    lines = harness.our_messages(res.stderr)
    ctx.check(len(lines) == 2 and "cannot write the timeline %s.timeline: No space left on device"
              % prof in lines[0] and "the timeline %s.timeline is written again" % prof in lines[1],
              "one line as the disk filled, one as it emptied", res.stderr)


@harness.once
def test_unwritable_output_reported_at_start(ctx):
    prog = ctx.program("lines.py")
    res = ctx.run([prog, "0.2"], output=None,
                  env={"PYSAMPLE_OUTPUT": "/nonexistent-dir/sub/prof.%p.txt"})
    ctx.check(res.rc == 0 and res.stdout == "done\n", "program affected: rc %d" % res.rc)
    lines = [l for l in res.stderr.splitlines() if l]
    ctx.check(len(lines) == 1 and lines[0].startswith("pysample: ") and
              "/nonexistent-dir/sub/prof." in lines[0], "expected one clear line, got %r" % res.stderr)
    bad = ctx.run([prog, "0.2"], output=None, env={"PYSAMPLE_OUTPUT": "prof.%q"})
    ctx.check(bad.rc == 0 and "pysample: " in bad.stderr and "%q" in bad.stderr,
              "unknown placeholder not reported: %r" % bad.stderr)


@harness.once
def test_dev_null_output_is_off(ctx):
    """PYSAMPLE_OUTPUT=/dev/null, the usual "off", is off: not a word, no
    sampler thread, and nothing created in /dev (as root it made
    /dev/null.<pid> and temporary files there).  Another name in /dev, or a
    FIFO, is refused in one line; /dev still gains nothing."""
    prog = ctx.program("lines.py")
    before = set(os.listdir("/dev"))
    off = ctx.run([prog, "0.2"], output=None, env={"PYSAMPLE_OUTPUT": "/dev/null"})
    ctx.check(off.rc == 0 and off.stdout == "done\n" and off.stderr == "",
              "/dev/null: the program as it is", off.rc, off.stdout, off.stderr)
    fifo = os.path.join(ctx.tmp_root, "out.fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    for where in ("/dev/stderr", "/dev/shm/../prof.%p.txt", fifo):
        res = ctx.run([prog, "0.2"], output=None, env={"PYSAMPLE_OUTPUT": where})
        lines = [l for l in res.stderr.splitlines() if l]
        ctx.check(res.rc == 0 and res.stdout == "done\n", "%s: program affected" % where, res.rc)
        ctx.check(len(lines) == 1 and lines[0].startswith("pysample: ") and "profiling is off" in lines[0],
                  "%s: expected one line, got %r" % (where, res.stderr))
    made = sorted(set(os.listdir("/dev")) - before)
    ctx.check(made == [], "files created in /dev: %r" % made)


def test_unsupported_python_refused(ctx):
    """A CPython older than 3.9 (2.7 and 3.6 too, which have no _PyRuntime)
    runs on unprofiled, with one line naming its version; without
    PYSAMPLE_OUTPUT, not a word.  (Python 2 can run the program.)"""
    prog = "import time\nend = time.time() + 0.2\nwhile time.time() < end: pass\nprint('done')\n"
    res = ctx.run(["-c", prog])
    ctx.check(res.rc == 0 and res.stdout == "done\n", "program affected: rc %d" % res.rc)
    lines = [l for l in res.stderr.splitlines() if l]
    name = "this Python (%d.%d) is older than 3.9" % ctx.version
    ctx.check(len(lines) == 1 and lines[0].startswith("pysample: ") and name in lines[0],
              "expected one line saying %r, got %r" % (name, res.stderr))
    ctx.check(res.files == [], "files written for an unsupported Python: %r" % res.files)
    off = ctx.run(["-c", prog], output=None)
    ctx.check(off.rc == 0 and off.stdout == "done\n" and off.stderr == "",
              "profiling off: the program as it is", off.stderr)


test_unsupported_python_refused.old_python = True
test_unsupported_python_refused.old_python_only = True


def check_refused(ctx, what, line_ok, line_desc):
    """A refused interpreter: the program runs unchanged and prints only our
    one line (line_ok tells it), no file is written, and the C API answers
    -ENOTSUP without starting."""
    res = ctx.run([ctx.program("lines.py"), "0.2"])
    ctx.check(res.rc == 0 and res.stdout == "done\n", "program affected: rc %d, stdout %r"
              % (res.rc, res.stdout), res.stderr[-2000:])
    lines = [l for l in res.stderr.splitlines() if l]
    ctx.check(len(lines) == 1 and line_ok(lines[0]),
              "expected %s, got %r" % (line_desc, res.stderr))
    ctx.check(res.files == [], "files written for a refused Python: %r" % res.files)
    d = ctx.tmpdir()
    code = ("import ctypes, sys; ps = ctypes.CDLL(sys.argv[1]); "
            "print(ps.pysample_start(100), ps.pysample_is_running())")
    api = ctx.run(["-c", code, ctx.lib], output=None, preload=False, outdir=d)
    ctx.check(api.rc == 0 and api.stdout.split() == ["-95", "0"],
              "pysample_start on %s: expected -ENOTSUP (-95) and not running, "
              "got %r" % (what, api.stdout), api.stderr[-2000:])


def test_newer_python_refused(ctx):
    """A CPython newer than the newest version known here (3.16: CPython's
    main branch, read as 3.15 while its _Py_DebugOffsets is laid out as
    3.15's) may keep that layout and still change what the values mean, so
    it is refused, with one line naming its version, the supported range
    and how its block compares with the newest layout known (run.py runs
    only this test there; no such interpreter is built here today)."""
    want = "pysample: CPython %d.%d." % ctx.version
    check_refused(ctx, "a newer Python",
                  lambda l: l.startswith(want) and
                  "is not supported (supported: 3.9-3.16); its _Py_DebugOffsets " in l and
                  l.endswith("; profiling is off"),
                  "one line %r... naming the supported range" % want)


test_newer_python_refused.new_python_only = True


def test_concurrent_busy_threads(ctx):
    """Four threads busy at once in functions of their own, calling and
    returning all the time, sampled at 1000 Hz.  Without a GIL (3.13t/3.14t)
    they run on other CPUs while their frame chains are read: no thread may
    be lost, and no stack may mix one thread's frames into another's."""
    prog = ctx.program("busy_threads.py")
    res = ctx.run([prog, "1.0"], env={"PYSAMPLE_RATE": "1000"})
    ctx.check_clean_run(res)
    p = res.profile()
    out = res.stdout.splitlines()
    tids = dict(line.split() for line in out[:-1])
    ctx.check(sorted(tids) == ["0", "1", "2", "3"], "program output changed: %r" % res.stdout)
    counters = out[-1].split()
    samples, errors = int(counters[1]), int(counters[3])
    for i, tid in tids.items():
        mine = {"work" + i, "rec" + i}
        theirs = {f + j for f in ("work", "rec") for j in "0123" if j != i}
        stacks = [s for s in p.stacks if any(f.name in mine for f in s.frames)]
        n = sum(s.count for s in stacks)
        # Wall mode samples every thread on every tick, busy or waiting for
        # the GIL; a loaded machine may lose most ticks, not all.
        ctx.check(n >= 50, "thread %s (work%s): only %d samples in 1 s at 1000 Hz" % (tid, i, n),
                  p.dump())
        wrong = {s.thread for s in stacks if s.thread.split()[1] != tid}
        ctx.check(not wrong, "work%s/rec%s seen on %s, it ran on thread %s" % (i, i, wrong, tid))
        for s in stacks:
            names = [f.name for f in s.frames]
            ctx.check(not theirs & set(names), "thread %s shows another thread's function" % tid,
                      s)
            # work<i> calls rec<i> 0..11 deep; rec<i> only calls itself.
            first = names.index("work" + i)
            recs = names[first + 1:]
            ctx.check(names.count("work" + i) == 1 and set(recs) <= {"rec" + i}
                      and len(recs) <= 12, "impossible stack on thread %s" % tid, s)
    # Walks that failed because a frame changed under the reader are
    # dropped and counted; they must stay rare even without a GIL.
    ctx.check(samples >= 200 and errors <= 0.05 * samples,
              "%d samples, %d dropped walks" % (samples, errors))


def test_trace_refs_build_refused(ctx):
    """A 3.9-3.12 --with-trace-refs build (sys.getobjects exists) moves every
    object field by two pointers: the library must refuse it with one line
    and leave the program alone (run.py runs only this test there)."""
    check_refused(ctx, "a trace-refs build",
                  lambda l: l.startswith("pysample: ") and "trace-refs" in l,
                  "one 'pysample:' line about --with-trace-refs")


test_trace_refs_build_refused.trace_refs_only = True


@harness.not_emulated("the main thread's GIL moments last 5-10 times longer: the 5% bound "
                      "is this machine's")
def test_gil_only_samples_the_holder(ctx):
    """PYSAMPLE_GIL=1 samples only the thread holding the GIL: a spinner,
    not a thread asleep in time.sleep() nor the main thread waiting for
    them (in wall mode all three count alike).  A free-threaded build has
    no GIL: one line says so and every thread is sampled."""
    prog = ctx.program("gil_threads.py")
    res = ctx.run([prog], env={"PYSAMPLE_GIL": "1"})
    ctx.check(res.rc == 0, "exit status %d" % res.rc, res.stderr[-2000:])
    p = res.profile()
    spin, sleep = p.with_frame("spinner"), p.with_frame("sleeper")
    # The main thread waiting for the others (blocked in join() under
    # wait_for_them); its imports before they start hold the GIL, rightly.
    main = p.count_where(lambda s: s.thread.endswith("(MainThread)")
                         and any(f.name == "wait_for_them" for f in s.frames))
    if res.stdout.strip() == "free-threaded 1":
        lines = harness.our_messages(res.stderr)
        ctx.check(len(lines) == 1 and "PYSAMPLE_GIL" in lines[0] and "no GIL" in lines[0],
                  "one line: no GIL to sample by", res.stderr)
        ctx.check(spin >= 20 and sleep >= 0.5 * spin, "every thread sampled: spinner %d, "
                  "sleeper %d" % (spin, sleep), p.dump())
        return
    ctx.check_clean_run(res)
    ctx.check(spin >= 20, "spinner has %d samples" % spin, p.dump())
    # The sleeper holds the GIL for a few microseconds every 2 ms, the
    # waiting main thread not at all until the others end.
    ctx.check(sleep <= 0.05 * spin + 2 and main <= 0.05 * spin + 2,
              "threads without the GIL sampled: sleeper %d, main %d, spinner %d"
              % (sleep, main, spin), p.dump())


def test_gc_frames(ctx):
    """While the interpreter collects garbage, the collecting thread's
    samples end in a [gc] frame on top of the frame that started the
    collection: `collector`, at its gc.collect() line.  The spinner, which
    runs at the same time and never collects, never gets one."""
    prog = ctx.program("gc_collect.py")
    res = ctx.run([prog])
    ctx.check_clean_run(res)
    p = res.profile()
    collect_line = program_lines(prog, "@collect")
    collector = p.with_frame("collector")
    in_gc = p.count_where(lambda s: len(s.frames) >= 2 and s.frames[-1].name == "[gc]" and
                          s.frames[-2].name == "collector" and s.frames[-2].line == collect_line)
    spinner = p.with_frame("spinner")
    spinner_gc = p.count_where(lambda s: any(f.name == "spinner" for f in s.frames) and
                               any(f.name == "[gc]" for f in s.frames))
    misplaced = p.count_where(lambda s: any(f.name == "[gc]" for f in s.frames[:-1]))
    ctx.check(collector >= 40 and spinner >= 40, "collector %d, spinner %d samples" %
              (collector, spinner), p.dump())
    # Full collections of a 200,000-list heap take most of the collector's
    # time; free-threaded builds mark only their stop-the-world phases.
    ctx.check(in_gc >= 0.2 * collector, "[gc] on top of collector at line %d in %d of its %d "
              "samples (%s)" % (collect_line, in_gc, collector, res.stdout.strip()), p.dump())
    ctx.check(spinner_gc == 0, "the spinner never collects, yet %d of its samples show [gc]" %
              spinner_gc, p.dump())
    ctx.check(misplaced == 0, "[gc] is always the innermost frame (%d stacks)" % misplaced, p.dump())


def _cpu_mode_run(ctx):
    """cpu_share.py in cpu mode: (result, profile, {thread: CPU seconds
    it measured}, the period one sample stands for, in seconds)."""
    res = ctx.run([ctx.program("cpu_share.py")],
                  env={"PYSAMPLE_MODE": "cpu", "PYSAMPLE_RATE": "200", "PYSAMPLE_QUALITY": "1"},
                  output="prof.txt")
    ctx.check_clean_run(res)
    used = {}
    for line in res.stdout.split("\n"):
        if line:
            name, secs = line.split()
            used[name] = float(secs)
    return res, res.profile("prof.txt"), used, 1.0 / 200


def test_cpu_mode_counts_cpu_time(ctx):
    """cpu mode weighs each sample by the CPU time its thread used since it
    was last looked at: a poller that wakes every 4 ms (about 1 % of a CPU)
    gets its share of the CPU, not a sample for every tick it ran in (it
    had as many as the spinner), and each thread's count is its CPU time /
    the period (to within the periods lost where its life begins and ends)."""
    res, p, used, period = _cpu_mode_run(ctx)
    counts = {n: p.with_frame(n) for n in ("spinner", "poller")}
    ctx.check(counts["spinner"] >= 40, "spinner has %d samples" % counts["spinner"], p.dump())
    total_used, total_counts = sum(used.values()), sum(counts.values())
    for name in ("spinner", "poller"):
        share, cpu_share = counts[name] / total_counts, used[name] / total_used
        ctx.check(abs(share - cpu_share) <= 0.05, "%s: %.1f %% of the samples, %.1f %% of the "
                  "CPU time (%r; counts %r)" % (name, 100 * share, 100 * cpu_share, used, counts),
                  p.dump())
        # Not more than the CPU it used, and all of it but the period
        # carried at the end (and what a loaded machine hides: 20 %).  The
        # thread also runs outside the span it measures (its start, the
        # looked_at() calls around it): under qemu-user that is 1.1-1.2
        # periods of CPU the library rightly counts, so two periods above.
        ctx.check(used[name] * 0.8 - 3 * period <= counts[name] * period <= used[name] + 2 * period,
                  "%s: %d samples of %.0f ms for %.1f ms of CPU" % (name, counts[name],
                  1000 * period, 1000 * used[name]), p.dump())


def test_cpu_mode_charges_cpu_where_it_was_spent(ctx):
    """cpu mode at 100 Hz, a thread that burns 25 ms of CPU, sleeps 15 ms
    and waits in select() 10 ms, over and over: nearly all its samples are
    in the burn, next to none in the waits, though many looks at it find it
    waiting right after a burn (issue 36: the CPU used since the last look
    was charged to the stack the thread had then, and the sleep got 24-28 %
    of the samples for 0.4 % of the CPU; 6-10 % at load 15 on 2 cores)."""
    res = ctx.run([ctx.program("cpu_then_wait.py"), "120"],
                  env={"PYSAMPLE_MODE": "cpu", "PYSAMPLE_RATE": "100"})
    ctx.check_clean_run(res)
    used = dict((n, float(s)) for n, s in (line.split() for line in res.stdout.splitlines()))
    p = res.profile()
    counts = {n: p.with_frame(n) for n in ("cpu_burn", "sleeper", "waiter")}
    # The cycles' samples: the start-up's imports are CPU of their own.
    total = p.with_frame("cycle")
    cpu = sum(used.values())
    waits = used["sleeper"] + used["waiter"]
    # The program's own split: the waits used next to no CPU.
    ctx.check(waits <= 0.03 * cpu, "the waits themselves used %.1f ms of %.1f ms of CPU"
              % (1000 * waits, 1000 * cpu), used)
    ctx.check(total >= 80, "only %d samples of the cycle (10 ms of CPU each)" % total, p.dump())
    ctx.check(counts["cpu_burn"] >= 0.9 * total, "cpu_burn: %d of %d samples for %.1f %% of the "
              "CPU" % (counts["cpu_burn"], total, 100 * used["cpu_burn"] / cpu), counts, p.dump())
    ctx.check(counts["sleeper"] + counts["waiter"] <= 0.05 * total, "the waits: %d and %d of %d "
              "samples for %.1f %% of the CPU" % (counts["sleeper"], counts["waiter"], total,
              100 * waits / cpu), counts, p.dump())


def test_cpu_mode_pprof_values_are_cpu_time(ctx):
    """`pysample convert --to pprof` of a cpu-mode profile: the "cpu"
    values of each thread's samples add up to the CPU time it measured
    (nanoseconds, to within the periods lost where its life begins and ends)."""
    res, p, used, period = _cpu_mode_run(ctx)
    out = os.path.join(res.outdir, "prof.pb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSAMPLE_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(harness.HERE)), "scripts")
    conv = subprocess.run([sys.executable, "-m", "pysample_tool", "convert",
                           os.path.join(res.outdir, "prof.txt"), "--to", "pprof", "-o", out],
                          env=env, capture_output=True, text=True, timeout=120)
    ctx.check(conv.returncode == 0, "convert failed", conv.stderr[-2000:])
    with open(out, "rb") as f:
        cpu = harness.values_by_leaf(harness.decode_pprof(f.read()), "cpu")
    for name in ("spinner", "poller"):
        ns = cpu.get(name, 0)
        ctx.check(used[name] * 0.8 - 3 * period <= ns / 1e9 <= used[name] + period,
                  "%s: pprof says %.1f ms of CPU, it measured %.1f ms" % (name, ns / 1e6,
                  1000 * used[name]), cpu)


# ---------------------------------------------------------------------------
# PYSAMPLE_TIMELINE (issue #29): <profile>.timeline, the samples in time order
# ---------------------------------------------------------------------------

def read_timeline(ctx, path):
    """(header {key: int}, stack lines, records [(t_us, line, weight)]) of
    a timeline file (docs/format.md#timeline), checking its structure."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    ctx.check(lines[0] == "# pysample timeline 1" and lines[-1] == "",
              "not a timeline, or not ending in a newline", lines[:3])
    header, i = {}, 1
    while not lines[i].startswith("stacks "):
        key, value = lines[i].split(" ")
        header[key] = int(value)
        i += 1
    n = int(lines[i].split(" ")[1])
    stacks = lines[i + 1:i + 1 + n]
    i += 1 + n
    ctx.check(lines[i].startswith("records "), "no records line after %d stacks" % n, lines[i])
    m = int(lines[i].split(" ")[1])
    records = [tuple(int(x) for x in l.split(" ")) for l in lines[i + 1:i + 1 + m]]
    ctx.check(len(records) == m and all(len(r) == 3 for r in records) and lines[i + 1 + m:] == [""],
              "records section: %d announced" % m, lines[i:i + 5])
    ctx.check(all(0 <= line < n and w > 0 for _, line, w in records), "a record names no stack")
    return header, stacks, records


def timeline_run(ctx, args, extra_env=None):
    """Runs phases.py with a timeline: (result, profile lines, header,
    stacks, records)."""
    env = {"PYSAMPLE_RATE": "200", "PYSAMPLE_TIMELINE": "1"}
    env.update(extra_env or {})
    res = ctx.run([ctx.program("phases.py")] + args, env=env)
    ctx.check_clean_run(res)
    ctx.check(res.stdout.endswith("done\n"), "program output changed: %r" % res.stdout)
    names = [f for f in res.files if not f.startswith(".")]
    ctx.check(len(names) == 2 and names[1] == names[0] + ".timeline",
              "expected a profile and its .timeline", names)
    with open(os.path.join(res.outdir, names[0]), encoding="utf-8") as f:
        profile = f.read().splitlines()
    header, stacks, records = read_timeline(ctx, os.path.join(res.outdir, names[1]))
    # The same moment as the profile: its lines, in order, and its samples.
    ctx.check(stacks == profile, "the timeline's stacks are not the profile's lines",
              stacks[:3], profile[:3])
    total = sum(int(l.rsplit(" ", 1)[1]) for l in profile)
    kept = sum(w for _, _, w in records)
    ctx.check(header["samples"] == kept and kept + header["dropped_samples"] == total,
              "timeline %d + dropped %d samples, the profile %d" % (kept, header["dropped_samples"], total),
              header)
    times = [t for t, _, _ in records]
    ctx.check(times == sorted(times) and times[-1] <= header["end_us"], "records not in time order",
              times[:20])
    return res, profile, header, stacks, records


def phase_sequence(stacks, records):
    """The records' phases in time order, one letter per sample: "a" for
    phase_a, "b" for phase_b, none for the others (start-up, exit)."""
    which = ["a" if ";phase_a (" in s else "b" if ";phase_b (" in s else "" for s in stacks]
    return "".join(which[line] * w for _, line, w in records)


def startup_records(stacks, records):
    """How many records come before the first sample of a phase."""
    for i, (_, line, _) in enumerate(records):
        if ";phase_a (" in stacks[line] or ";phase_b (" in stacks[line]:
            return i
    return len(records)


def test_timeline_phases_in_order(ctx):
    """Phase A, then B, then A again, each for 40 sampler ticks: the
    timeline's samples say a..., b..., a... in that order."""
    _, _, header, stacks, records = timeline_run(ctx, ["40"])
    ctx.check(header["dropped_records"] == 0 and header["rate_hz"] == 200, "header", header)
    seq = phase_sequence(stacks, records)
    # The best split of the sequence into a | b | a: the samples out of
    # place under it (a sample taken as a phase ended may show the next
    # phase's call; allow a few).
    n = len(seq)
    pre_b = [0]
    for c in seq:
        pre_b.append(pre_b[-1] + (c == "b"))
    pre_a = [i - b for i, b in enumerate(pre_b)]
    best = min((pre_b[i] + (pre_a[j] - pre_a[i]) + (pre_b[n] - pre_b[j]), i, j)
               for i in range(n + 1) for j in range(i, n + 1))
    misplaced, i, j = best
    ctx.check(misplaced <= 2, "%d samples out of order a|b|a" % misplaced, seq)
    # Each phase ran 40 ticks at least: its part holds most of them.
    ctx.check(seq[:i].count("a") >= 20 and seq[i:j].count("b") >= 20 and seq[j:].count("a") >= 20,
              "phases too short: %d a, %d b, %d a" % (seq[:i].count("a"), seq[i:j].count("b"),
                                                        seq[j:].count("a")), seq)


@harness.not_emulated("start-up alone takes about 100 ticks at 200 Hz under qemu: the 100 "
                      "records kept are mostly start-up")
def test_timeline_bounded(ctx):
    """A long run with a bound of 100 records: 100 are kept, the earliest,
    and the rest is counted, not recorded."""
    bound = 100
    _, _, header, stacks, records = timeline_run(ctx, ["40", "2"], {"PYSAMPLE_TIMELINE_MAX": str(bound)})
    startup = startup_records(stacks, records)
    if startup > bound - 40:
        # On a loaded machine the interpreter's start-up alone can fill the
        # 100 records (86 of them seen under a load of 26): the bound is
        # then set past the start-up this machine had, so that the kept
        # window reaches into the first phase as the checks below need.
        bound = startup + 100
        _, _, header, stacks, records = timeline_run(ctx, ["40", "2"],
                                                     {"PYSAMPLE_TIMELINE_MAX": str(bound)})
    ctx.check(len(records) == bound and header["max_records"] == bound, "%d records" % len(records),
              header)
    ctx.check(header["dropped_records"] > 0 and header["dropped_samples"] >= header["dropped_records"],
              "nothing dropped past the bound", header)
    ctx.check(records[-1][0] <= header["first_dropped_us"] <= header["end_us"],
              "the kept records are not the earliest", records[-1], header)
    # 6 phases of at least 40 ticks: the 100 kept begin with the first
    # phase A.  How far past it they reach depends on the machine (start-up
    # of a debug build, a phase running on until the sampler is asked: 82
    # samples of the first phase A were seen with 3.11-dbg under load).
    seq = phase_sequence(stacks, records)
    ctx.check(seq.startswith("a" * 20), "the earliest samples are not the first phase A", seq)


def test_timeline_after_reset(ctx):
    """pysample_reset() after phase B: the profile and its timeline hold the
    last phase A only, the timeline starting at the reset."""
    res, profile, header, stacks, records = timeline_run(ctx, ["40", "1", "reset"])
    seq = phase_sequence(stacks, records)
    ctx.check("b" not in seq and seq.count("a") >= 20, "after the reset: %s" % seq)
    ctx.check(not any(";phase_b (" in l for l in profile), "the profile kept phase B")
    before, after = (int(x) for x in res.stdout.split()[1:3])
    ctx.check(before <= header["start_unix_ns"] <= after, "time 0 is not the reset (%d..%d)"
              % (before, after), header)


@harness.once
def test_settings_in_any_case(ctx):
    """Words are read in any case and yes/no also as on/off: no message, and
    the setting holds (the figures say cpu).  A file mode that the owner
    cannot read is refused for that reason, not called "not an octal mode"."""
    prog = ["-c", "import time\nend = time.time() + 0.3\nwhile time.time() < end: pass\n"]
    res = ctx.run(prog, output="prof.txt",
                  env={"PYSAMPLE_MODE": "CPU", "PYSAMPLE_ASYNC": "On", "PYSAMPLE_QUALITY": "YES"})
    ctx.check_clean_run(res)
    with open(os.path.join(res.outdir, "prof.txt.quality.json")) as f:
        ctx.check('"mode": "cpu"' in f.read(), "PYSAMPLE_MODE=CPU is cpu mode")
    bad = ctx.run(prog, env={"PYSAMPLE_FILE_MODE": "0200"})
    lines = harness.our_messages(bad.stderr)
    ctx.check(len(lines) == 1 and "PYSAMPLE_FILE_MODE='0200'" in lines[0] and "read" in lines[0]
              and "not an octal" not in lines[0], "one line saying why 0200 is refused", bad.stderr)
