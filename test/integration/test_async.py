"""Issue 16: asyncio task-aware profiles (PYSAMPLE_ASYNC=1).

Each scenario of programs/async_tasks.py has a known task structure; the
profile must show it: the running task's markers between the loop's
frames and its coroutine's, every waiting task where it waits (wall mode),
the chain of awaiting tasks outermost first, and only the running task in
CPU mode.  Programs run until the sampler has woken often enough.
"""
import json
import re

import harness
from harness import program_lines

ASYNC = {"PYSAMPLE_ASYNC": "1", "PYSAMPLE_RATE": "200"}
MARK = re.compile(r'^\[task (.*) "(.*)"\]$')


def supported(ctx):
    """3.9-3.16 attribute tasks (GIL and free-threaded builds; 3.16.0a0 as 3.15); a newer
    Python is refused altogether (the core suite checks that)."""
    return (3, 9) <= ctx.version <= (3, 16)


def run(ctx, scenario, env=None, rc=0):
    if not supported(ctx):
        ctx.skip("asyncio tasks are attributed on 3.9-3.16")
    e = dict(ASYNC)
    e.update(env or {})
    res = ctx.run([ctx.program("async_tasks.py"), scenario], env=e, timeout=180)
    ctx.check_clean_run(res, rc)
    return res, res.profile(), json.loads(res.stdout.splitlines()[-1])


def tasks_of(stack):
    """The (name, coroutine) of each task marker in the stack, root first."""
    out = []
    for f in stack.frames:
        m = MARK.match(f.raw)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def last_task(stack):
    t = tasks_of(stack)
    return t[-1][0] if t else None


def names_after_last_marker(stack):
    idx = [i for i, f in enumerate(stack.frames) if MARK.match(f.raw)]
    return [(f.name, f.line) for f in stack.frames[idx[-1] + 1:]] if idx else []


def check_chains_possible(ctx, p):
    """No task twice in one chain, every marker followed by a frame or
    another marker or the end (a created, not yet started task)."""
    for s in p.stacks:
        t = tasks_of(s)
        names = [n for n, _ in t]
        ctx.check(len(names) == len(set(names)), "a task twice in one chain: %r" % s)


def test_running_and_waiting_share(ctx):
    prog = ctx.program("async_tasks.py")
    res, p, st = run(ctx, "share")
    burn_line = program_lines(prog, "@computer-burn")
    sleep_line = program_lines(prog, "@sleeper-sleep")
    comp = [s for s in p.stacks if last_task(s) == "computer"]
    slp = [s for s in p.stacks if last_task(s) == "sleeper"]
    ncomp = sum(s.count for s in comp)
    nslp = sum(s.count for s in slp)
    ctx.check(ncomp >= 300 and nslp >= 300, "too few task samples: computer %d, sleeper %d"
              % (ncomp, nslp), p.dump())
    # The running task: the loop's frames, then its markers, then its code.
    running = sum(s.count for s in comp
                  if any(f.name == "burn" for f in s.frames) and
                  any(f.name == ctx.qual("BaseEventLoop", "run_forever") for f in s.frames) and
                  ("computer", ctx.qual("computer", "computer").split(".")[-1]) in tasks_of(s))
    ctx.check(running >= 0.5 * ncomp, "computer's running samples lack the loop frames "
              "or its marker: %d of %d" % (running, ncomp), p.dump())
    # Shares against the program's own clock, +- 8 points, widened by what
    # the program's long stalls can shift (async_tasks.py: a loaded machine
    # took it off the CPU for 50 ms or more, and the sampler, in the same
    # process, may or may not have run meanwhile; seen: computer 69.2 %
    # sampled against 80.4 % measured, three suites and two hogs beside
    # it).  The computer burns while the sleeper sleeps and waits while the
    # sleeper burns, so stalls in the computer's burns lengthen the
    # computer's busy time and the sleeper's sleep alike, and stalls in the
    # sleeper's burns the other way round.  Idle, there are none.
    in_comp, in_slp = st["computer_stalled"], st["sleeper_stalled"]
    got_c = 100.0 * sum(s.count for s in comp if any(f.name == "burn" for f in s.frames)) / ncomp
    busy, life = st["computer_busy"], st["computer_life"]
    low, high = (100.0 * (busy - in_comp) / (life - in_comp), 100.0 * busy / (life - in_slp))
    ctx.check(low - 8 <= got_c <= high + 8, "computer: %.1f%% of its samples compute, measured "
              "%.1f-%.1f%% +- 8" % (got_c, low, high), st, p.dump())
    got_s = 100.0 * sum(s.count for s in slp
                        if any(f.name == "sleeper" and f.line == sleep_line for f in s.frames)
                        and s.frames[-1].name == "sleep") / nslp
    sleep, life = st["sleeper_sleep"], st["sleeper_life"]
    low, high = (100.0 * (sleep - in_comp) / (life - in_comp), 100.0 * sleep / (life - in_slp))
    ctx.check(low - 8 <= got_s <= high + 8, "sleeper: %.1f%% of its samples wait in sleep, "
              "measured %.1f-%.1f%% +- 8" % (got_s, low, high), st, p.dump())
    ctx.check(any(f.line == burn_line for s in comp for f in s.frames if f.name == "computer"),
              "computer never seen at line %d" % burn_line, p.dump())
    check_chains_possible(ctx, p)


@harness.not_emulated("qemu-user stretches the tick's look at the running task and its walk "
                       "of the thread, one after the other, to many 0.05 ms steps: 3-5 % of "
                       "samples unmarked, failed twice in one CI run, on retry in another")
def test_short_steps_keep_their_marker(ctx):
    """Forty tasks in steps of 0.05 ms (issue #35: 6 of 28 samples of a
    running task had no marker).  The tick reads the tasks, and which one
    runs, before it walks the thread: by then the loop has often gone on
    to another task's step.  The thread's stack says which task runs:
    nearly every sample inside a step is under a task's marker."""
    res, p, _ = run(ctx, "steps", env={"PYSAMPLE_RATE": "500"})
    inside = [s for s in p.stacks if any(f.name == "step_burn" for f in s.frames)]
    marked = sum(s.count for s in inside if tasks_of(s))
    total = sum(s.count for s in inside)
    ctx.check(total >= 100, "too few samples inside a step: %d" % total, p.dump())
    ctx.check(marked >= 0.97 * total, "%d of %d samples inside a step have no task marker"
              % (total - marked, total), p.dump())
    check_chains_possible(ctx, p)


def test_gather_three_named(ctx):
    prog = ctx.program("async_tasks.py")
    res, p, _ = run(ctx, "gather3")
    gather_line = program_lines(prog, "@gather-await")
    sleep_line = program_lines(prog, "@worker-sleep")
    for w in ("w0", "w1", "w2"):
        stacks = [s for s in p.stacks if last_task(s) == w]
        n = sum(s.count for s in stacks)
        ctx.check(n >= 30, "task %s: %d samples" % (w, n), p.dump())
        good = sum(s.count for s in stacks
                   if [t for t, _ in tasks_of(s)] == ["Task-1", w] and
                   ("gather3", gather_line) in [(f.name, f.line) for f in s.frames] and
                   ("worker", sleep_line) in names_after_last_marker(s))
        ctx.check(good >= 0.8 * n, "task %s: %d of %d samples show Task-1 (gather3:%d) > %s "
                  "(worker:%d)" % (w, good, n, gather_line, w, sleep_line), p.dump())
    check_chains_possible(ctx, p)


def test_nested_chain_in_order(ctx):
    prog = ctx.program("async_tasks.py")
    res, p, _ = run(ctx, "chain")
    want = [("outer", program_lines(prog, "@outer-await")),
            ("middle", program_lines(prog, "@middle-await")),
            ("inner", program_lines(prog, "@inner-sleep"))]
    stacks = [s for s in p.stacks if last_task(s) == "innertask"]
    n = sum(s.count for s in stacks)
    ctx.check(n >= 40, "innertask: %d samples" % n, p.dump())
    good = 0
    for s in stacks:
        t = [x for x, _ in tasks_of(s)]
        got = [(f.name, f.line) for f in s.frames if f.name in ("outer", "middle", "inner")]
        raw = [f.raw for f in s.frames]
        order_ok = (t[-2:] == ["outertask", "innertask"] and got == want and
                    raw.index('[task outertask "outer"]') < raw.index('[task innertask "inner"]'))
        if order_ok:
            good += s.count
    ctx.check(good >= 0.8 * n, "%d of %d samples show [task outertask] > outer > middle > "
              "[task innertask] > inner in order" % (good, n), p.dump())


def check_linked(ctx, p, outer_task, inner_task, want, between=()):
    """Every waiting sample of inner_task (at least 40) shows, in order,
    [task outer_task], the frames want[:-1] (with the frames named in
    between after them), [task inner_task], and want[-1]."""
    names = {n for n, _ in want}
    stacks = [s for s in p.stacks if last_task(s) == inner_task]
    n = sum(s.count for s in stacks)
    ctx.check(n >= 40, "%s: %d samples" % (inner_task, n), p.dump())
    good = 0
    for s in stacks:
        raw = [f.raw for f in s.frames]
        t = [x for x, _ in tasks_of(s)]
        got = [(f.name, f.line) for f in s.frames if f.name in names]
        if t[-2:] != [outer_task, inner_task] or got != want:
            continue
        o = raw.index(next(r for r in raw if r.startswith("[task %s " % outer_task)))
        i = raw.index(next(r for r in raw if r.startswith("[task %s " % inner_task)))
        outer_frames = [f.name for f in s.frames[o + 1:i]]
        inner_frames = [(f.name, f.line) for f in s.frames[i + 1:]]
        if (outer_frames[:1] == [want[0][0]] and all(b in outer_frames for b in between) and
                inner_frames[:1] == [want[-1]] and s.frames[-1].name == "sleep"):
            good += s.count
    ctx.check(good >= 0.8 * n, "%d of %d samples of %s show [task %s] > %s > %s [task %s] > "
              "%s:%d > sleep in order" % (good, n, inner_task, outer_task,
                                          "%s:%d" % want[0], " > ".join(between), inner_task,
                                          want[-1][0], want[-1][1]), p.dump())
    check_chains_possible(ctx, p)


def test_shield_links_to_awaiting_task(ctx):
    prog = ctx.program("async_tasks.py")
    res, p, _ = run(ctx, "shield")
    want = [("shield_outer", program_lines(prog, "@shield-await")),
            ("shielded", program_lines(prog, "@shielded-sleep"))]
    check_linked(ctx, p, "shieldouter", "shieldinner", want)


def test_wait_for_links_to_awaiting_task(ctx):
    prog = ctx.program("async_tasks.py")
    res, p, _ = run(ctx, "wait_for")
    want = [("wf_outer", program_lines(prog, "@wf-await")),
            ("wf_inner", program_lines(prog, "@wf-inner-sleep"))]
    check_linked(ctx, p, "wfouter", "wfinner", want, between=("wait_for",))


def test_taskgroup(ctx):
    if ctx.version < (3, 11):
        ctx.skip("TaskGroup is 3.11+")
    prog = ctx.program("async_tasks.py")
    res, p, _ = run(ctx, "taskgroup")
    with_line = program_lines(prog, "@tg-with")
    for c in ("child0", "child1"):
        stacks = [s for s in p.stacks if last_task(s) == c]
        n = sum(s.count for s in stacks)
        ctx.check(n >= 30, "%s: %d samples" % (c, n), p.dump())
        good = sum(s.count for s in stacks
                   if [t for t, _ in tasks_of(s)] == ["Task-1", c] and
                   ("taskgroup", with_line) in [(f.name, f.line) for f in s.frames] and
                   any(f.name == "TaskGroup.__aexit__" for f in s.frames))
        ctx.check(good >= 0.8 * n, "%s: %d of %d samples under Task-1 > taskgroup:%d > "
                  "TaskGroup.__aexit__" % (c, good, n, with_line), p.dump())


def test_second_loop_in_second_thread(ctx):
    prog = ctx.program("async_tasks.py")
    res, p, st = run(ctx, "two_loops")
    second = program_lines(prog, "@second-sleep")
    first = program_lines(prog, "@first-sleep")
    for tid, fn, line in ((st["second_tid"], "second_loop_main", second),
                          (st["main_tid"], "first_loop_main", first)):
        n = sum(s.count for s in p.stacks if s.thread.startswith("thread %d" % tid) and
                tasks_of(s) and (fn, line) in [(f.name, f.line) for f in s.frames])
        ctx.check(n >= 30, "thread %d: %d task samples waiting in %s:%d" % (tid, n, fn, line),
                  p.dump())
        wrong = sum(s.count for s in p.stacks if not s.thread.startswith("thread %d" % tid) and
                    any(f.name == fn for f in s.frames))
        ctx.check(wrong == 0, "%s attributed to another thread %d times" % (fn, wrong), p.dump())


def test_async_generator_and_async_with(ctx):
    prog = ctx.program("async_tasks.py")
    res, p, _ = run(ctx, "agen_with")
    want_for = [("consume", program_lines(prog, "@consume-for")),
                ("agen", program_lines(prog, "@agen-sleep"))]
    want_with = [("consume", program_lines(prog, "@consume-with")),
                 (ctx.qual("Resource", "__aenter__"), program_lines(prog, "@aenter-sleep"))]

    def has(s, want):
        got = names_after_last_marker(s)
        return got[:len(want)] == want and got[-1][0] == "sleep"
    nfor = sum(s.count for s in p.stacks if last_task(s) == "consumer" and has(s, want_for))
    nwith = sum(s.count for s in p.stacks if last_task(s) == "consumer" and has(s, want_with))
    ctx.check(nfor >= 20, "async for: %d samples of consumer > consume > agen > sleep" % nfor,
              p.dump())
    ctx.check(nwith >= 20, "async with: %d samples of consumer > consume > __aenter__ > sleep"
              % nwith, p.dump())


def test_cpu_mode_only_running(ctx):
    res, p, _ = run(ctx, "share", env={"PYSAMPLE_MODE": "cpu"})
    # A waiting task's stack starts with its marker; a running one's with
    # the thread's own frames (the loop running it).
    waiting = sum(s.count for s in p.stacks if s.frames and MARK.match(s.frames[0].raw))
    ctx.check(waiting == 0, "CPU mode counted waiting tasks %d times" % waiting, p.dump())
    comp = sum(s.count for s in p.stacks if last_task(s) == "computer" and
               any(f.name == "burn" for f in s.frames))
    ctx.check(comp >= 30, "CPU mode: %d samples of the running computer task" % comp, p.dump())


def test_churn_under_5khz(ctx):
    for _ in range(ctx.stress):
        res, p, st = run(ctx, "churn", env={"PYSAMPLE_RATE": "5000"})
        ctx.check(st["done"] == 10000, "program output changed: %r" % st)
        check_chains_possible(ctx, p)
        # A tiny task awaits nothing but a sleep(0); a chain is Task-1
        # (churn) above it, nothing else.
        for s in p.stacks:
            t = [n for n, _ in tasks_of(s)]
            if len(t) > 1:
                ctx.check(t[0] == "Task-1" and len(t) == 2 and re.match(r"^t\d+$", t[1]),
                          "impossible chain %r" % s)
        ctx.check(p.with_frame("churn") > 0, "churn never sampled", p.dump())


def test_late_import_found(ctx):
    """asyncio imported 0.7 s into the program is found when it is imported:
    the task's samples are there although the search had backed off."""
    if not supported(ctx):
        ctx.skip("asyncio tasks are attributed on 3.9-3.16")
    prog = ctx.program("async_late.py")
    res = ctx.run([prog], env=dict(ASYNC), timeout=120)
    ctx.check_clean_run(res, 0)
    p = res.profile()
    line = program_lines(prog, "@late-sleep")
    n = sum(s.count for s in p.stacks if ("late", "late_worker") in tasks_of(s) and
            ("late_worker", line) in [(f.name, f.line) for f in s.frames])
    ctx.check(n >= 20, "task late: %d samples waiting in late_worker:%d" % (n, line), p.dump())


def test_pure_python_asyncio_refused(ctx):
    if not supported(ctx):
        ctx.skip("asyncio tasks are attributed on 3.9-3.16")
    e = dict(ASYNC)
    res = ctx.run([ctx.program("async_tasks.py"), "pure_python"], env=e, timeout=120)
    ctx.check(res.rc == 0, "exit status %s" % res.rc, res.stderr)
    notes = harness.our_messages(res.stderr)
    ctx.check(len(notes) == 1 and "C accelerator" in notes[0],
              "expected one note about the missing accelerator: %r" % notes)
    p = res.profile()
    ctx.check(not any(tasks_of(s) for s in p.stacks), "task markers without the accelerator")
    ctx.check(p.count_where(lambda s: any(f.name.endswith("run_forever") for f in s.frames)) > 0,
              "the loop's thread is still sampled", p.dump())
