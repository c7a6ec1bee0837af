#!/usr/bin/env python3
"""The benchmark suite of libpysample (issue 5).  Run it with scripts/bench.

    run.py --build BUILDDIR [--out DIR] [--only ITEMS] [--quick]
           [--primary LABEL] [--python PATH ...]

It reports, it asserts nothing.  Every figure is a ratio or a cost taken
inside one run: profiled and unprofiled runs are interleaved (each
repetition runs every variant once, in a shuffled order), repeated, and
reported as the median with the spread (min-max over repetitions) beside
it.  Cost is judged by CPU time -- the process's user+sys from wait4()
and the sampler thread's own CPU clock from PYSAMPLE_STATS -- with wall
time beside it, because wall time on a shared 2-core machine spreads
15-30 % between identical runs.

Items (--only takes their names, comma-separated):
  slowdown  1. CPU-bound single-threaded program at 100 Hz / 1 kHz / 10 kHz,
               free on both cores and pinned to one (taskset -c 0)
  cost      2. sampler CPU per sample vs stack depth (10/100/1000) and
               thread count (1/8/64); the platform's wake-up floor
  rate      3. achieved / requested rate 100 Hz..20 kHz, 1 and 16 threads,
               tick lateness p50/p99
  startup   4. /bin/true and python -c pass: bare, preloaded with profiling
               off, preloaded with profiling on
  memory    5. resident memory and output time, 100..1M samples over
               10..100k distinct stacks (test/bench/bench_stacktab.c)
  versions  6. items 1 (pinned), 2 (1 thread), 3 (1 thread) and 4 (python)
               under every other installed CPython 3.9+
  idle      7. sampler CPU per second of an idle program (a thread asleep
               40 frames deep) at 100 Hz / 1 kHz / 2 kHz / 10 kHz, plain,
               with -X faulthandler and with faulthandler enabled after the
               sampler started (pytest's order), free and pinned, each
               beside the wake-up floor measured in the same rounds
  wake      8. the wake-up floor alone, pinned and free: condition variable
               vs clock_nanosleep, default timer slack vs 1 ns
  async     9. PYSAMPLE_ASYNC=1: the sampler's cost per tick with 10 / 1 000
               / 10 000 live asyncio tasks waiting three coroutines deep
               (test/bench/async_workload.py), beside the same program
               without task attribution; wall mode, 100 Hz
  native   10. PYSAMPLE_NATIVE=1: sampler CPU per sample at Python depth
               10 and 50, one thread blocked (registers from /proc) and one
               running (held by the signal), beside PYSAMPLE_NATIVE=0;
               1 kHz (docs/native.md)
  rooted   11. PYSAMPLE_NATIVE=1 in real programs (scripts/demo.py and
               test/bench/native_mix.py: json, hashlib, zlib in three
               threads) under 3.12.1 (-O3, no frame pointers), Debian's
               stripped python3.11 and the 3.15 build (frame pointers):
               the fraction of samples that unwound to the root, and of
               the others, why not (PYSAMPLE_STATS native_* counters)
  timeline 12. PYSAMPLE_TIMELINE=1: sampler CPU per tick and per sample, 1 and
               64 threads blocked 10 frames deep at 1 kHz, and the memory a
               sample adds (peak RSS over samples), beside PYSAMPLE_TIMELINE=0
  peers    13. libpysample beside py-spy (blocking, --nonblocking), austin,
               ddtrace's profiler and CPython 3.15's profiling.sampling, on
               the same programs, pinned, in shuffled rounds: added CPU per
               sample, wall slowdown, achieved rate, accuracy against the
               program's own ground truth, 800-deep stacks whole, start-up,
               memory (test/bench/peers.py says how; it installs the peers
               in a venv outside the repository).  Not in the default set:
               --peers runs it alone, on --peers-on LABELS (default 3.12.1
               and the primary, plus any 3.15)
  floor    14. issue #36's pinned 10 kHz target alone: added CPU per sample
               beside a no-op thread waking at 10 kHz in the same program
               (test/bench/libwaker.c, preloaded in our place; twice: its
               thread waiting on a condition variable, two system calls a
               wake-up as the sampler's wait was, and with clock_nanosleep,
               one, as its futex wait is since #36 round 4), 15 shuffled
               rounds of ~1.2 s, judged on the paired difference and its
               standard error (item 1 shows the same at every rate)

Every figure of items 1, 2 and 7 is reported beside the platform's floor
(test/bench/bench_wake.c: a bare thread that only wakes at the rate), run
in the same rounds, pinned and free.  A peer profiler can be measured
beside us in items 1 and 7: PYSAMPLE_BENCH_PEER is its command line, with
{rate} (Hz) and {interval_us} replaced, the program's argv appended, e.g.
    PYSAMPLE_BENCH_PEER='austin -i {interval_us} -o /dev/null'
Nothing is downloaded: the peer must be installed.

Results go to DIR (default /tmp/pysample-bench): results.json and
results.md, the tables docs/performance.md is made from.
"""
import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORKLOAD = os.path.join(HERE, "workload.py")
ASYNC_WORKLOAD = os.path.join(HERE, "async_workload.py")
NATIVE_MIX = os.path.join(HERE, "native_mix.py")
DEMO = os.path.join(ROOT, "scripts", "demo.py")

# Issue #14's targets ("The targets move").  Pinned cost is judged per
# sample against the floor measured in the same rounds, not as a share of
# the program's CPU.
TARGETS = {
    "pinned_per_sample_x_floor": 1.10,
    "per_sample_10_ns": 2000, "per_frame_ns": 20,
    "rate_ratio": 0.99, "rate_ratio_16": 0.95,
    "idle_faulthandler_x_plain": 1.5,
    "true_off_ms": 0.3, "python_on_ms": 3.0,
    "write_100k_s": 0.5,
}


# ---- running things -------------------------------------------------------

def base_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYSAMPLE_") and k != "LD_PRELOAD"}
    env.pop("PYTHONPATH", None)
    return env


def run(argv, env, pin=False, timeout=600):
    """Runs argv; returns (wall s, user+sys s, exit status)."""
    if pin:
        argv = ["taskset", "-c", "0"] + argv
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if p.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(argv), p.returncode, err[-2000:]))
    return wall, ru.ru_utime + ru.ru_stime, err


def read_stats(path):
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition(" ")
            try:
                out[k] = int(v)
            except ValueError:
                out[k] = v
    os.unlink(path)
    return out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs, fmt="%.3f"):
    if not xs:
        return "-"
    return (fmt + "-" + fmt) % (min(xs), max(xs))


def pooled_per_sample(diffs_s, samples):
    """Added CPU per sample over all rounds (sum of the paired differences
    over the sum of samples, ns) and its standard error.  At 100 Hz a run
    takes ~60 samples while identical runs' CPU differs by tens of ms: a
    per-round ratio is then thousands of us either way, and the ratio of
    two such figures is meaningless.  The standard error says when the
    difference is below what the rounds can resolve."""
    n = len(diffs_s)
    total = sum(samples)
    if n == 0 or total <= 0:
        return float("nan"), float("nan")
    mean_samples = total / n
    est = sum(diffs_s) / total * 1e9
    se = (statistics.stdev(diffs_s) / math.sqrt(n) / mean_samples * 1e9) if n > 1 else float("inf")
    return est, se


class Ctx:
    def __init__(self, args):
        self.build = os.path.abspath(args.build)
        self.lib = os.path.join(self.build, "lib", "libpysample.so")
        self.bench_stacktab = os.path.join(self.build, "test", "bench", "bench_stacktab")
        self.bench_wake = os.path.join(self.build, "test", "bench", "bench_wake")
        self.libwaker = os.path.join(self.build, "test", "bench", "libwaker.so")
        for p in (self.lib, self.bench_stacktab, self.bench_wake, self.libwaker):
            if not os.path.exists(p):
                sys.exit("run.py: %s is missing; build first (meson compile -C %s)" % (p, args.build))
        self.quick = args.quick
        self.tmp = tempfile.mkdtemp(prefix="pysample-bench-")
        self.n = 0

    def path(self, what):
        self.n += 1
        return os.path.join(self.tmp, "%s.%d" % (what, self.n))

    def waker_env(self, rate, out, wait="cond"):
        """Environment of a run with the in-process floor: libwaker's bare
        thread waking at rate inside the program (waiting the way wait
        says: cond or nanosleep), no profiler."""
        env = base_env()
        env.update(LD_PRELOAD=self.libwaker, BENCH_WAKER_RATE=str(rate), BENCH_WAKER_OUT=out,
                   BENCH_WAKER_WAIT=wait)
        return env

    def env(self, rate=None, stats=None, output=True):
        """Environment of a profiled run (rate None: unprofiled)."""
        env = base_env()
        if rate is None:
            return env
        env["LD_PRELOAD"] = self.lib
        if output:
            env["PYSAMPLE_OUTPUT"] = self.path("prof")
            env["PYSAMPLE_RATE"] = str(rate)
        if stats:
            env["PYSAMPLE_STATS"] = stats
        return env


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


# ---- 1. slowdown ------------------------------------------------------------

def calibrate(ctx, py, target_s):
    """Iterations of workload.py cpu that take about target_s of CPU."""
    n = 200000
    _, cpu, _ = run([py, WORKLOAD, "cpu", str(n)], ctx.env())
    _, cpu0, _ = run([py, "-c", "pass"], ctx.env())
    per = max(cpu - cpu0, 1e-3) / n
    return int(target_s / per)


def peer_argv(rate):
    """The peer profiler's command line for rate, or None (PYSAMPLE_BENCH_PEER)."""
    cmd = os.environ.get("PYSAMPLE_BENCH_PEER", "").strip()
    if not cmd:
        return None
    return cmd.replace("{rate}", str(rate)).replace("{interval_us}", str(1000000 // rate)).split()


def wake_floor_once(ctx, rate, pin, seconds=1.0, method="cond", slack=0):
    """One run of bench_wake: the floor's CPU per wake-up and lateness."""
    argv = [ctx.bench_wake, str(rate), str(max(100, int(rate * seconds))), method, str(slack)]
    if pin:
        argv = ["taskset", "-c", "0"] + argv
    p = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def busy_floor_once(ctx, rate, pin, millions=100):
    """bench_wake busy: process CPU of a C busy loop with a bare waker
    thread at rate (0: none), and its wake-ups."""
    argv = [ctx.bench_wake, "busy", str(rate), str(millions)]
    if pin:
        argv = ["taskset", "-c", "0"] + argv
    p = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def waker_once(ctx, py, iters, rate, pin, wait="cond"):
    """The workload with libwaker's thread waking at rate inside it:
    (wall s, process CPU s, wake-ups)."""
    out = ctx.path("wakes")
    wall, cpu, _ = run([py, WORKLOAD, "cpu", str(iters)], ctx.waker_env(rate, out, wait), pin=pin)
    with open(out) as f:
        wakes = int(f.readline())  # then the thread's own CPU (ns)
    os.unlink(out)
    return wall, cpu, wakes


def inproc_floor(rows, base, r, key, prefix):
    """The in-process floor of the waker rows[key] beside ours at rate r:
    its added CPU per wake-up, and ours minus it paired round by round
    (both share the round's unprofiled run, so its noise cancels)."""
    wk = rows[key]
    floor, se = pooled_per_sample([c - b for c, b in zip(wk["cpu"], base["cpu"])], wk["samples"])
    paired = [((c - b) / max(n, 1) - (w - b) / max(m, 1)) * 1e9 for c, w, b, n, m in
              zip(rows[r]["cpu"], wk["cpu"], base["cpu"], rows[r]["samples"], wk["samples"])]
    return {prefix + "_ns_per_wake": floor, prefix + "_se_ns": se,
            "over_" + prefix + "_ns": statistics.mean(paired),
            "over_" + prefix + "_se_ns": (statistics.stdev(paired) / math.sqrt(len(paired))
                                          if len(paired) > 1 else float("inf"))}


def bench_slowdown(ctx, py, pins=(False, True), reps=5, target_s=0.6, rates=(100, 1000, 10000),
                   peers_too=True, waker_waits=("cond",)):
    """waker_waits: the in-process floors run beside ours (libwaker's
    cond, the default, and nanosleep; keys inproc_floor and
    inproc_<wait>_floor)."""
    iters = calibrate(ctx, py, target_s)
    rates = [None] + list(rates)
    peers = [("peer", r) for r in rates[1:]] if peers_too and peer_argv(100) else []
    wakers = [("waker", r) if w == "cond" else ("waker", r, w) for r in rates[1:] for w in waker_waits]
    res = {}
    for pin in pins:
        rows = {r: {"wall": [], "cpu": [], "sampler_cpu": [], "samples": []} for r in rates + peers + wakers}
        floor = {r: [] for r in rates[1:]}
        busy = {r: [] for r in rates[1:]}
        for rep in range(reps):
            order = rates + peers + wakers
            random.shuffle(order)
            # The floor as the issue states it: what a bare waker costs a
            # busy program on the same placement, paired in this round.
            b0 = busy_floor_once(ctx, 0, pin)
            for r in rates[1:]:
                b = busy_floor_once(ctx, r, pin)
                busy[r].append((b["process_cpu_ns"] - b0["process_cpu_ns"]) / max(b["wakes"], 1))
            for r in order:
                if isinstance(r, tuple) and r[0] == "waker":
                    wall, cpu, wakes = waker_once(ctx, py, iters, r[1], pin, r[2] if len(r) > 2 else "cond")
                    rows[r]["wall"].append(wall)
                    rows[r]["cpu"].append(cpu)
                    rows[r]["samples"].append(wakes)
                    continue
                if isinstance(r, tuple):
                    wall, cpu, _ = run(peer_argv(r[1]) + [py, WORKLOAD, "cpu", str(iters)],
                                       ctx.env(), pin=pin)
                    rows[r]["wall"].append(wall)
                    rows[r]["cpu"].append(cpu)
                    continue
                stats = ctx.path("stats") if r else None
                wall, cpu, _ = run([py, WORKLOAD, "cpu", str(iters)], ctx.env(r, stats), pin=pin)
                rows[r]["wall"].append(wall)
                rows[r]["cpu"].append(cpu)
                if r:
                    st = read_stats(stats)
                    rows[r]["sampler_cpu"].append(st["sampler_cpu_ns"] / 1e9)
                    rows[r]["samples"].append(st["samples"])
                    floor[r].append(wake_floor_once(ctx, r, pin, 0.3)["cpu_ns_per_wake"])
        base = rows[None]
        out = {"iterations": iters, "rounds": reps, "base_wall_s": med(base["wall"]),
               "base_cpu_s": med(base["cpu"])}
        for pr in peers:
            cpu_r = [c / b for c, b in zip(rows[pr]["cpu"], base["cpu"])]
            wall_r = [w / b for w, b in zip(rows[pr]["wall"], base["wall"])]
            out["peer_%d" % pr[1]] = {"cpu_ratio": med(cpu_r), "cpu_ratio_spread": spread(cpu_r),
                                      "wall_ratio": med(wall_r), "wall_ratio_spread": spread(wall_r)}
        for r in rates[1:]:
            # Added process CPU per sample, beside the floor's CPU per
            # wake-up measured in the same rounds on the same placement.
            added = [(c - b) / max(n, 1) * 1e9 for c, b, n in
                     zip(rows[r]["cpu"], base["cpu"], rows[r]["samples"])]
            pooled, se = pooled_per_sample([c - b for c, b in zip(rows[r]["cpu"], base["cpu"])],
                                           rows[r]["samples"])
            # The in-process floors (libwaker): the same program, the same
            # rounds, a bare thread waking at the rate instead of ours.
            inproc = inproc_floor(rows, base, r, ("waker", r), "inproc_floor")
            for w in waker_waits:
                if w != "cond":
                    inproc.update(inproc_floor(rows, base, r, ("waker", r, w), "inproc_%s_floor" % w))
            out.setdefault("per_sample", {})[str(r)] = {
                "added_cpu_ns_per_sample": med(added), "spread": spread(added, "%.0f"),
                "pooled_ns_per_sample": pooled, "pooled_se_ns": se,
                "floor_cpu_ns_per_wake": med(floor[r]), "floor_spread": spread(floor[r], "%.0f"),
                "busy_floor_ns_per_wake": med(busy[r]), "busy_floor_spread": spread(busy[r], "%.0f"),
                **inproc}
        for r in rates[1:]:
            # Ratios pair each profiled run with the unprofiled run of the
            # same repetition, so that slow phases of the machine cancel.
            cpu_r = [c / b for c, b in zip(rows[r]["cpu"], base["cpu"])]
            wall_r = [w / b for w, b in zip(rows[r]["wall"], base["wall"])]
            share = [s / c for s, c in zip(rows[r]["sampler_cpu"], rows[r]["cpu"])]
            out[str(r)] = {
                "cpu_ratio": med(cpu_r), "cpu_ratio_spread": spread(cpu_r),
                "wall_ratio": med(wall_r), "wall_ratio_spread": spread(wall_r),
                "sampler_cpu_share": med(share), "samples": med(rows[r]["samples"]),
                "sampler_cpu_s": med(rows[r]["sampler_cpu"]),
            }
        res["pinned" if pin else "free"] = out
        log("  slowdown %s: %s" % ("pinned" if pin else "free",
                                   ", ".join("%s Hz cpu x%.3f wall x%.3f" % (r, out[str(r)]["cpu_ratio"],
                                                                           out[str(r)]["wall_ratio"])
                                             for r in rates[1:])))
    return res


# ---- 2. sampler cost per sample -------------------------------------------

def sampled_run(ctx, py, mode, depth, threads, seconds, rate):
    stats = ctx.path("stats")
    env = ctx.env(rate, stats, output=False)
    run([py, WORKLOAD, mode, str(depth), str(threads), str(seconds), str(rate)], env)
    return read_stats(stats)


def bench_cost(ctx, py, depths=(10, 100, 1000), threads=(1, 8, 64), reps=3, seconds=1.0, rate=1000):
    res = {}
    for rep in range(reps):
        combos = [(d, t) for d in depths for t in threads]
        random.shuffle(combos)
        for d, t in combos:
            st = sampled_run(ctx, py, "idle", d, t, seconds, rate)
            if st["samples"] == 0:
                continue
            r = res.setdefault("%d/%d" % (d, t), {"all_in": [], "walk": [], "tick_p50": [],
                                                 "errors": [], "ticks": []})
            r["all_in"].append(st["sampler_cpu_ns"] / st["samples"])
            # The tick's own work (wall time inside the tick, median tick,
            # per thread sampled): what a sample costs beyond the wake-up.
            r["walk"].append(st["tick_p50_ns"] / max(st["samples"] / max(st["ticks"], 1), 1))
            r["tick_p50"].append(st["tick_p50_ns"])
            r["errors"].append(st["errors"])
            r["ticks"].append(st["ticks"])
    out = {}
    for k, r in res.items():
        out[k] = {"all_in_ns": med(r["all_in"]), "all_in_spread": spread(r["all_in"], "%.0f"),
                  "walk_ns": med(r["walk"]), "walk_spread": spread(r["walk"], "%.0f"),
                  "tick_p50_ns": med(r["tick_p50"]), "errors": max(r["errors"]),
                  "ticks": med(r["ticks"])}
    d0, d1 = min(depths), max(depths)
    if "%d/1" % d0 in out and "%d/1" % d1 in out:
        out["per_frame_ns"] = (out["%d/1" % d1]["walk_ns"] - out["%d/1" % d0]["walk_ns"]) / (d1 - d0)
    log("  cost: " + ", ".join("%s %.0f/%.0f ns" % (k, v["all_in_ns"], v["walk_ns"])
                               for k, v in sorted(out.items()) if isinstance(v, dict)))
    return out


def bench_async(ctx, py, tasks=(10, 1000, 10000), reps=3, seconds=1.5, rate=100):
    """Item 9: tick cost with and without asyncio task attribution."""
    res = {}
    for rep in range(reps):
        combos = [(n, a) for n in tasks for a in (0, 1)]
        random.shuffle(combos)
        for n, a in combos:
            stats = ctx.path("stats")
            env = ctx.env(rate, stats)
            env["PYSAMPLE_ASYNC"] = str(a)
            run([py, ASYNC_WORKLOAD, str(n), str(seconds)], env)
            st = read_stats(stats)
            if st.get("ticks", 0) == 0:
                continue
            r = res.setdefault("%d/%d" % (n, a), {"tick_p50": [], "tick_p99": [], "cpu_tick": [],
                                                 "samples_tick": []})
            r["tick_p50"].append(st["tick_p50_ns"])
            r["tick_p99"].append(st["tick_p99_ns"])
            r["cpu_tick"].append(st["sampler_cpu_ns"] / st["ticks"])
            r["samples_tick"].append(st["samples"] / st["ticks"])
    out = {}
    for k, r in res.items():
        out[k] = {"tick_p50_us": med(r["tick_p50"]) / 1e3, "tick_p99_us": med(r["tick_p99"]) / 1e3,
                  "cpu_tick_us": med(r["cpu_tick"]) / 1e3,
                  "cpu_spread": spread([x / 1e3 for x in r["cpu_tick"]], "%.1f"),
                  "samples_per_tick": med(r["samples_tick"])}
    log("  async: " + ", ".join("%s %.1f us/tick" % (k, v["cpu_tick_us"]) for k, v in sorted(out.items())))
    return out


def bench_timeline(ctx, py, threads=(1, 64), reps=3, seconds=1.5, rate=1000):
    """Item 12: the timeline's cost: the sampler's CPU per tick and per
    sample in a real process with and without PYSAMPLE_TIMELINE, and the
    memory and time per sample in bench_stacktab (the very code, in one
    process: a child's peak RSS from wait4() counts the parent's pages
    from before the exec, and hides a few MB)."""
    res = {}
    for rep in range(reps):
        combos = [(t, tl) for t in threads for tl in (0, 1)]
        random.shuffle(combos)
        for t, tl in combos:
            stats = ctx.path("stats")
            env = ctx.env(rate, stats, output=False)
            env["PYSAMPLE_TIMELINE"] = str(tl)
            run([py, WORKLOAD, "idle", "10", str(t), str(seconds), str(rate)], env)
            st = read_stats(stats)
            if st.get("ticks", 0) == 0 or st.get("samples", 0) == 0:
                continue
            r = res.setdefault("%d/%d" % (t, tl), {"cpu_tick": [], "cpu_sample": [], "tick_p50": []})
            r["cpu_tick"].append(st["sampler_cpu_ns"] / st["ticks"])
            r["cpu_sample"].append(st["sampler_cpu_ns"] / st["samples"])
            r["tick_p50"].append(st["tick_p50_ns"])
    out = {}
    for k, r in res.items():
        out[k] = {"cpu_tick_us": med(r["cpu_tick"]) / 1e3,
                  "cpu_tick_spread": spread([x / 1e3 for x in r["cpu_tick"]], "%.1f"),
                  "cpu_sample_ns": med(r["cpu_sample"]), "tick_p50_us": med(r["tick_p50"]) / 1e3}
    mem = {}
    for samples in (100000, 1000000):
        for tl in ("", "timeline"):
            vals = []
            for _ in range(reps):
                p = subprocess.run([ctx.bench_stacktab, str(samples), "10000", ctx.tmp] + ([tl] if tl else []),
                                   capture_output=True, text=True, check=True)
                vals.append(json.loads(p.stdout))
            mem["%d/%d" % (samples, 1 if tl else 0)] = {k: med([v[k] for v in vals]) for k in vals[0]}
        off, on = mem["%d/0" % samples], mem["%d/1" % samples]
        on["bytes_per_sample"] = (on["rss_table_kib"] - off["rss_table_kib"]) * 1024.0 / samples
        on["add_ns_extra"] = on["add_ns_per_sample"] - off["add_ns_per_sample"]
    out["memory"] = mem
    log("  timeline: " + ", ".join("%s %.1f us/tick %.0f ns/sample" % (k, v["cpu_tick_us"], v["cpu_sample_ns"])
                                   for k, v in sorted(out.items()) if k != "memory") +
        "; " + ", ".join("%s %.1f B/sample" % (k, v["bytes_per_sample"]) for k, v in mem.items()
                         if "bytes_per_sample" in v))
    return out


def bench_native(ctx, py, depths=(10, 50), reps=3, seconds=1.0, rate=1000):
    """Item 10: the cost of a native sample, blocked and running, beside
    the Python-only sample of the same program."""
    res = {}
    for rep in range(reps):
        combos = [(m, d, n) for m in ("idle", "busy") for d in depths for n in (0, 1)]
        random.shuffle(combos)
        for m, d, n in combos:
            stats = ctx.path("stats")
            env = ctx.env(rate, stats, output=False)
            env["PYSAMPLE_NATIVE"] = str(n)
            run([py, WORKLOAD, m, str(d), "1", str(seconds), str(rate)], env)
            st = read_stats(stats)
            if st.get("samples", 0) == 0:
                continue
            r = res.setdefault("%s/%d/%d" % (m, d, n), {"cpu": [], "tick": [], "native": [],
                                                       "lost": [], "unwind": [], "frames": []})
            if st.get("native_unwinds", 0) > 0:
                # The unwind alone (wall, inside ps_unwind), and its depth.
                r["unwind"].append(st["native_unwind_ns"] / st["native_unwinds"])
                r["frames"].append(st["native_unwind_frames"] / st["native_unwinds"])
            r["cpu"].append(st["sampler_cpu_ns"] / st["samples"])
            r["tick"].append(st["tick_p50_ns"])
            r["native"].append(st.get("native_blocked", 0) + st.get("native_held", 0))
            r["lost"].append(st.get("native_lost", 0) + st.get("native_gone", 0))
    out = {}
    for k, r in res.items():
        out[k] = {"cpu_ns": med(r["cpu"]), "cpu_spread": spread(r["cpu"], "%.0f"),
                  "tick_p50_ns": med(r["tick"]), "native": med(r["native"]),
                  "lost": max(r["lost"]), "unwind_ns": med(r["unwind"]),
                  "unwind_spread": spread(r["unwind"], "%.0f"), "frames": med(r["frames"])}
    log("  native: " + ", ".join("%s %.1f us (unwind %.0f ns, %.0f frames)" %
                                 (k, v["cpu_ns"] / 1e3, v["unwind_ns"], v["frames"])
                                 for k, v in sorted(out.items())))
    return out


# Interpreters of item 11: without frame pointers, Debian's stripped one,
# with frame pointers (labels of test/find_pythons.py).
ROOTED_PYTHONS = r"3\.12\.1|debian-3\.11\.\d+|3\.15"


def bench_rooted(ctx, pythons, reps=2, seconds=3.0, rate=200):
    """Item 11: what fraction of native samples unwound to the root in
    real programs, and why the others did not."""
    progs = {"demo": lambda: [DEMO], "mix": lambda: [NATIVE_MIX, str(seconds)]}
    out = {}
    for label, py in pythons:
        if not re.fullmatch(ROOTED_PYTHONS, label):
            continue
        for name, argv in progs.items():
            tot = {}
            for rep in range(reps):
                stats = ctx.path("stats")
                env = ctx.env(rate, stats)
                env["PYSAMPLE_NATIVE"] = "1"
                env["PYSAMPLE_DEMO_SECONDS"] = str(seconds)
                try:
                    run([py] + argv(), env)
                except RuntimeError as e:
                    log("  rooted %s %s: %s" % (label, name, str(e)[:300]))
                    continue
                for k, v in read_stats(stats).items():
                    if k.startswith("native_") and isinstance(v, int):
                        tot[k] = tot.get(k, 0) + v
            n = sum(tot.get("native_" + k, 0) for k in ("root", "truncated", "unavailable", "mismatch"))
            if n == 0:
                continue
            r = {"samples": n}
            for k in ("root", "truncated", "unavailable", "mismatch"):
                r[k] = tot.get("native_" + k, 0) / n
            r["causes"] = {k[len("native_truncated_"):]: v for k, v in tot.items()
                           if k.startswith("native_truncated_") and v}
            for k in ("rule_hits", "rule_misses", "fp_frames", "nocfi_frames", "lost", "gone", "failed"):
                r[k] = tot.get("native_" + k, 0)
            out["%s/%s" % (name, label)] = r
            log("  rooted %s %s: %d samples, root %.1f %%, truncated %.1f %% %s, unavailable %.1f %%, "
                "mismatch %.1f %%" % (name, label, n, 100 * r["root"], 100 * r["truncated"], r["causes"],
                                      100 * r["unavailable"], 100 * r["mismatch"]))
    return out


def bench_wake(ctx, rates=(100, 1000, 10000)):
    out = {}
    for r in rates:
        vals = []
        for _ in range(3):
            vals.append(wake_floor_once(ctx, r, False, 0.5))
        out[str(r)] = {k: med([v[k] for v in vals]) for k in vals[0] if k != "method"}
    log("  wake floor: " + ", ".join("%s Hz %.0f ns" % (k, v["cpu_ns_per_wake"]) for k, v in out.items()))
    return out


def bench_wake_methods(ctx, rates=(1000, 10000), reps=3):
    """Item 8: the floor pinned and free, condition variable (what the
    sampler waits on) vs clock_nanosleep, default slack vs 1 ns."""
    combos = [(r, pin, m, sl) for r in rates for pin in (False, True)
              for m in ("cond", "nanosleep") for sl in (0, 1)]
    res = {}
    for _ in range(reps):
        random.shuffle(combos)
        for r, pin, m, sl in combos:
            v = wake_floor_once(ctx, r, pin, 1.0, m, sl)
            x = res.setdefault("%d/%s/%s/%s" % (r, "pinned" if pin else "free", m,
                                                "1ns" if sl else "default"), {"cpu": [], "p50": [], "p99": []})
            x["cpu"].append(v["cpu_ns_per_wake"])
            x["p50"].append(v["late_p50_ns"])
            x["p99"].append(v["late_p99_ns"])
    out = {k: {"cpu_ns": med(x["cpu"]), "cpu_spread": spread(x["cpu"], "%.0f"),
               "late_p50_us": med(x["p50"]) / 1e3, "late_p99_us": med(x["p99"]) / 1e3}
           for k, x in res.items()}
    log("  wake methods: " + ", ".join("%s %.0f ns p50 %.0f us" % (k, v["cpu_ns"], v["late_p50_us"])
                                      for k, v in sorted(out.items())))
    return out


# ---- 7. an idle program ------------------------------------------------------

IDLE_VARIANTS = {"plain": ([], []), "-X faulthandler": (["-X", "faulthandler"], []),
                 "faulthandler after start": ([], ["fh"])}


def bench_idle(ctx, py, rates=(100, 1000, 2000, 10000), pins=(False, True), reps=3, seconds=1.5,
               depth=40):
    """Sampler CPU per second of a program whose only thread sleeps depth
    frames deep, per rate, plain and with faulthandler, beside the wake-up
    floor (bench_wake) run in the same shuffled rounds.  Profiled from the
    environment, as a user runs it (the sampler's start-up is included)."""
    combos = [(r, pin, v) for r in rates for pin in pins for v in list(IDLE_VARIANTS) + ["floor"]]
    if peer_argv(100):
        combos += [(r, pin, "peer") for r in rates for pin in pins] + \
                  [(0, pin, "unprofiled") for pin in pins]
    res = {}
    for _ in range(reps):
        random.shuffle(combos)
        for r, pin, v in combos:
            key = "%d/%s/%s" % (r, "pinned" if pin else "free", v)
            x = res.setdefault(key, {"ms_per_s": [], "mode": set(), "achieved": []})
            if v == "floor":
                f = wake_floor_once(ctx, r, pin, seconds)
                x["ms_per_s"].append(f["cpu_ns_per_wake"] * r / 1e6)
                continue
            if v in ("peer", "unprofiled"):
                # The whole process tree's CPU (the peer is another process),
                # less the unprofiled program's, per second.
                argv = ([] if v == "unprofiled" else peer_argv(r)) + \
                    [py, WORKLOAD, "sleep", str(depth), str(seconds)]
                _, cpu, _ = run(argv, ctx.env(), pin=pin)
                x["ms_per_s"].append(cpu * 1e3 / seconds)
                continue
            pre, post = IDLE_VARIANTS[v]
            stats = ctx.path("stats")
            env = ctx.env(r, stats)
            run([py] + pre + [WORKLOAD, "sleep", str(depth), str(seconds)] + post, env, pin=pin)
            if os.path.exists(env["PYSAMPLE_OUTPUT"]):
                os.unlink(env["PYSAMPLE_OUTPUT"])
            st = read_stats(stats)
            x["ms_per_s"].append(st["sampler_cpu_ns"] / st["active_ns"] * 1e3)
            x["mode"].add(st["read_mode"])
            x["achieved"].append(st["ticks"] / (st["active_ns"] / 1e9) / r)
    out = {}
    for k, x in res.items():
        out[k] = {"ms_per_s": med(x["ms_per_s"]), "spread": spread(x["ms_per_s"], "%.2f"),
                  "read_mode": ",".join(sorted(x["mode"])), "achieved": med(x["achieved"])}
    for pin in pins:
        pl = "pinned" if pin else "free"
        for r in rates:
            base = out.get("0/%s/unprofiled" % pl)
            if base and "%d/%s/peer" % (r, pl) in out:
                out["%d/%s/peer" % (r, pl)]["ms_per_s"] -= base["ms_per_s"]
    log("  idle: " + ", ".join("%s %.2f ms/s %s" % (k, v["ms_per_s"], v["read_mode"])
                               for k, v in sorted(out.items())))
    return out


# ---- 3. achieved rate ------------------------------------------------------

def bench_rate(ctx, py, rates=(100, 1000, 5000, 10000, 20000), threads=(1, 16), reps=2, seconds=1.5):
    res = {}
    for rep in range(reps):
        combos = [(r, t) for r in rates for t in threads]
        random.shuffle(combos)
        for r, t in combos:
            st = sampled_run(ctx, py, "busy", 20, t, seconds, r)
            achieved = st["ticks"] / (st["active_ns"] / 1e9) / r
            x = res.setdefault("%d/%d" % (r, t), {"ratio": [], "p50": [], "p99": [], "skipped": [],
                                                 "cpu": []})
            x["ratio"].append(achieved)
            x["p50"].append(st["late_p50_ns"] / 1e3)
            x["p99"].append(st["late_p99_ns"] / 1e3)
            x["skipped"].append(st["skipped_ticks"])
            x["cpu"].append(st["sampler_cpu_ns"] / st["active_ns"])
    out = {}
    for k, x in res.items():
        out[k] = {"ratio": med(x["ratio"]), "ratio_spread": spread(x["ratio"]),
                  "late_p50_us": med(x["p50"]), "late_p99_us": med(x["p99"]),
                  "late_p99_spread": spread(x["p99"], "%.0f"),
                  "skipped": med(x["skipped"]), "sampler_core_share": med(x["cpu"])}
    log("  rate: " + ", ".join("%s %.3f p99 %.0fus" % (k, v["ratio"], v["late_p99_us"])
                               for k, v in sorted(out.items(), key=lambda kv: [int(s) for s in kv[0].split("/")])))
    return out


# ---- 4. start-up -----------------------------------------------------------

def bench_startup(ctx, argv, runs):
    variants = {"bare": ctx.env(), "preload_off": dict(ctx.env(), LD_PRELOAD=ctx.lib)}
    res = {v: {"wall": [], "cpu": []} for v in ("bare", "preload_off", "preload_on")}
    for i in range(runs):
        order = list(res)
        random.shuffle(order)
        for v in order:
            env = variants.get(v) or ctx.env(100)
            wall, cpu, _ = run(argv, env)
            res[v]["wall"].append(wall * 1e3)
            res[v]["cpu"].append(cpu * 1e3)
            if v == "preload_on" and os.path.exists(env["PYSAMPLE_OUTPUT"]):
                os.unlink(env["PYSAMPLE_OUTPUT"])
    out = {}
    for v, r in res.items():
        w = sorted(r["wall"])
        q1, q3 = w[len(w) // 4], w[3 * len(w) // 4]
        out[v] = {"wall_ms": med(r["wall"]), "wall_iqr": "%.2f-%.2f" % (q1, q3), "cpu_ms": med(r["cpu"])}
    for v in ("preload_off", "preload_on"):
        out[v]["added_wall_ms"] = out[v]["wall_ms"] - out["bare"]["wall_ms"]
        out[v]["added_cpu_ms"] = out[v]["cpu_ms"] - out["bare"]["cpu_ms"]
    log("  startup %s: off +%.3f ms, on +%.3f ms" % (os.path.basename(argv[0]), out["preload_off"]["added_wall_ms"],
                                                    out["preload_on"]["added_wall_ms"]))
    return out


# ---- 5. memory -------------------------------------------------------------

def bench_memory(ctx, reps=3):
    out = {}
    for samples in (100, 10000, 1000000):
        for distinct in (10, 10000, 100000):
            if distinct > samples:
                continue
            vals = []
            for _ in range(reps):
                p = subprocess.run([ctx.bench_stacktab, str(samples), str(distinct), ctx.tmp],
                                   capture_output=True, text=True, check=True)
                vals.append(json.loads(p.stdout))
            r = {k: med([v[k] for v in vals]) for k in vals[0]}
            r["write_total_spread"] = spread([v["render_s"] + v["write_s"] for v in vals])
            out["%d/%d" % (samples, distinct)] = r
            log("  memory %d/%d: table %d KiB, render %.3f s, write %.3f s" %
                (samples, distinct, r["rss_table_kib"], r["render_s"], r["write_s"]))
    return out


# ---- 13. peers --------------------------------------------------------------

def bench_peers(ctx, pythons, primary, labels, quick):
    """test/bench/peers.py on each chosen interpreter; a 3.15 is added
    when one is installed (its own sampler only profiles 3.15)."""
    import peers
    if labels:
        want = labels.split(",")
    else:
        want = ["3.12.1", primary[0]] + [l for l, _ in pythons if l.startswith("3.15")]
    out = {}
    if not any(l.startswith("3.15") for l, _ in pythons):
        why = "no CPython 3.15 installed (test/find_pythons.py found none): profiling.sampling skipped"
        log("peers: " + why)
        out["3.15"] = {"skipped": why}
    for label in dict.fromkeys(want):
        py = dict(pythons).get(label)
        if py is None:
            log("peers: %s is not installed; skipped" % label)
            continue
        if refusal(ctx, py):
            continue
        log("peers on %s" % label)
        out[label] = peers.measure(ctx, label, py, reps=1 if quick else 3, truth_s=1.5 if quick else 3.0,
                                   cost_s=0.3 if quick else 0.6)
    return out


# ---- the whole suite --------------------------------------------------------

def find_pythons(extra):
    """The interpreters test/find_pythons.py lists, [(label, path)], and the
    label of the one it marks primary (None if it marks none): the
    integration suite's rule, so that there is one."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "test", "find_pythons.py"),
                        "--mark-primary"] + extra, capture_output=True, text=True, check=True)
    out, primary = [], None
    for line in p.stdout.splitlines():
        label, path = line.split(" ", 1)
        if path.endswith(" primary"):
            path = path[:-len(" primary")]
            primary = label
        m = re.search(r"(\d+)\.(\d+)", label)
        major_minor = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        if major_minor < (3, 9):
            continue  # refused by design: nothing to measure
        out.append((label, path))
    return out, primary


def refusal(ctx, py):
    """The library's message if it refuses this interpreter (a version
    past the newest supported, a 3.9-3.12 trace-refs build): profiling is
    off, so no statistics are written.  None if it profiles."""
    stats = ctx.path("stats")
    env = ctx.env(100, stats)
    _, _, err = run([py, "-c", "pass"], env)
    if os.path.exists(env["PYSAMPLE_OUTPUT"]):
        os.unlink(env["PYSAMPLE_OUTPUT"])
    if os.path.exists(stats):
        os.unlink(stats)
        return None
    said = [l for l in err.splitlines() if l.startswith("pysample:")]
    return " ".join(said) or "no statistics written and nothing said"


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "load_before": os.getloadavg()[0],
            "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}


def items(ctx, results, pythons, primary, args, q):
    """The suite's items in the order they run: (name for --only, a
    function that measures and stores into results)."""
    py = primary[1]

    def put(key, fn):
        return lambda: results.__setitem__(key, fn())

    def cost():
        results["wake_floor"] = bench_wake(ctx)
        results["cost"] = bench_cost(ctx, py, reps=1 if q else 3)

    def startup():
        results["startup_true"] = bench_startup(ctx, ["/bin/true"], 50 if q else 300)
        results["startup_python"] = bench_startup(ctx, [py, "-c", "pass"], 10 if q else 40)

    return [
        ("slowdown", put("slowdown", lambda: bench_slowdown(ctx, py, reps=3 if q else 7))),
        ("cost", cost),
        ("rate", put("rate", lambda: bench_rate(ctx, py, reps=1 if q else 2,
                                                seconds=1.0 if q else 1.5))),
        ("startup", startup),
        ("memory", put("memory", lambda: bench_memory(ctx, reps=1 if q else 3))),
        ("idle", put("idle", lambda: bench_idle(ctx, py, reps=2 if q else 5,
                                                seconds=1.0 if q else 1.5))),
        ("wake", put("wake_methods", lambda: bench_wake_methods(ctx, reps=1 if q else 3))),
        ("async", put("async", lambda: bench_async(ctx, py, reps=1 if q else 3))),
        ("native", put("native", lambda: bench_native(ctx, py, reps=1 if q else 3))),
        ("rooted", put("rooted", lambda: bench_rooted(ctx, pythons, reps=1 if q else 2))),
        ("timeline", put("timeline", lambda: bench_timeline(ctx, py, reps=1 if q else 3))),
        ("peers", put("peers", lambda: bench_peers(ctx, pythons, primary, args.peers_on, q))),
        # Item 14: the pinned 10 kHz target alone, in more and longer
        # rounds than item 1 can afford, so that its standard error is
        # below the 10 % it is judged by.
        ("floor", put("floor", lambda: bench_slowdown(ctx, py, pins=(True,), reps=5 if q else 15,
                                                      target_s=0.5 if q else 1.2, rates=(10000,),
                                                      peers_too=False,
                                                      waker_waits=("cond", "nanosleep")))),
        ("versions", put("versions", lambda: bench_versions(ctx, pythons, primary, q))),
    ]


def bench_versions(ctx, pythons, primary, q):
    """Item 6: items 1-4 in short, under every other interpreter."""
    per = {}
    for label, path in pythons:
        if label == primary[0]:
            continue
        log("version %s" % label)
        v = {}
        why = refusal(ctx, path)
        if why:
            v["refused"] = why
            log("  refused: %s" % why)
            per[label] = v
            continue
        try:
            v["slowdown"] = bench_slowdown(ctx, path, pins=(True,), reps=2 if q else 3, target_s=0.4)
            v["cost"] = bench_cost(ctx, path, threads=(1,), reps=1 if q else 2, seconds=0.7)
            v["rate"] = bench_rate(ctx, path, rates=(1000, 10000), threads=(1,), reps=1, seconds=1.0)
            v["startup_python"] = bench_startup(ctx, [path, "-c", "pass"], 8 if q else 20)
        except (RuntimeError, OSError) as e:
            # An interpreter the library refuses (a trace-refs build)
            # leaves no statistics: say so and go on.
            v["error"] = str(e)[:500]
            log("  failed: %s" % v["error"])
        per[label] = v
    return per


def run_item(results, name, fill, out):
    """Runs one item; an item that raises is recorded under "errors" and
    the suite goes on (a whole run once stopped at item 12 and wrote
    nothing).  The results so far are saved after each item, so that a run
    cut short keeps what it measured."""
    try:
        fill()
    except Exception as e:  # noqa: BLE001 - any failure of one item
        why = "%s: %s" % (type(e).__name__, str(e)[:500])
        results.setdefault("errors", {})[name] = why
        log("item %s failed: %s" % (name, why))
        traceback.print_exc()
    save_json(results, out)


def save_json(results, out):
    tmp = os.path.join(out, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, os.path.join(out, "results.json"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", default="/tmp/pysample-bench")
    ap.add_argument("--only", default="slowdown,cost,rate,startup,memory,versions,idle,wake,async,native,rooted,"
                    "timeline,floor")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    ap.add_argument("--peers", action="store_true", help="only item 13, the peers comparison")
    ap.add_argument("--peers-on", help="interpreter labels for item 13, comma-separated")
    ap.add_argument("--primary", help="label of the interpreter measured in full "
                    "(default: the one test/find_pythons.py --mark-primary marks)")
    ap.add_argument("--python", action="append", default=[], help="extra interpreter")
    args = ap.parse_args()
    ctx = Ctx(args)
    only = {"peers"} if args.peers else set(args.only.split(","))
    q = args.quick
    pythons, marked = find_pythons(args.python)
    if not pythons:
        sys.exit("run.py: no CPython 3.9+ found")
    # Default primary: the one test/find_pythons.py marks for the
    # integration suite (the newest supported release build from pyenv;
    # debug "d", free-threaded "t", "-static" and distribution builds are
    # measured under item 6).
    primary = next((p for p in pythons if p[0] == args.primary), None) or \
        next((p for p in pythons if p[0] == marked), None)
    if primary is None:
        sys.exit("run.py: no supported CPython found (test/find_pythons.py marks none primary)")
    py = primary[1]
    started = time.time()
    results = {"machine": machine(), "primary": primary[0], "pythons": pythons,
               "command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M"),
               "lib": ctx.lib, "peer": os.environ.get("PYSAMPLE_BENCH_PEER", "")}
    log("primary interpreter %s (%s); %d interpreters" % (primary[0], py, len(pythons)))
    random.seed(5)
    os.makedirs(args.out, exist_ok=True)
    try:
        for name, fill in items(ctx, results, pythons, primary, args, q):
            if name in only:
                run_item(results, name, fill, args.out)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    results["duration_s"] = round(time.time() - started)
    results["machine"]["load_after"] = os.getloadavg()[0]
    save_json(results, args.out)
    md = render(results)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    print(md)
    log("took %d s; results in %s" % (results["duration_s"], args.out))


# ---- report -----------------------------------------------------------------

def mark(ok):
    return "**met**" if ok else "**not met**"


def heading(L, title, intro=None):
    """A numbered section of the report: its title, and the paragraph that
    says how to read it, each followed by a blank line."""
    L.append("### " + title)
    L.append("")
    if intro is not None:
        L.append(intro)
        L.append("")


def table_head(L, header):
    """A Markdown table's header row and the separator with as many columns."""
    L.append(header)
    L.append("|" + "---|" * (header.count("|") - 1))


def per_sample_row(place, r, x):
    """One row of the per-sample table; noise is said, not divided."""
    est, se = x.get("pooled_ns_per_sample"), x.get("pooled_se_ns")
    floor = x["busy_floor_ns_per_wake"]
    if est is None:
        # Results of an older run.py: the median of rounds, noise when the
        # rounds' spread reaches across zero.
        est, se = x["added_cpu_ns_per_sample"], float("nan")
        lo_hi = re.fullmatch(r"(-?[\d.]+)-(-?[\d.]+)", x["spread"])
        noise = lo_hi is None or float(lo_hi.group(1)) <= 0 or floor <= 0
    else:
        noise = not (abs(est) >= 2 * se) or floor <= 0
    fig = "%.1f us +- %.1f" % (est / 1e3, se / 1e3) if se == se else "%.1f us" % (est / 1e3)
    if noise:
        ratio, ok = "noise", "not judged (noise)"
    else:
        ratio = "%.2f" % (est / floor)
        ok = mark(est / floor <= TARGETS["pinned_per_sample_x_floor"])
    tgt = "<= %.2f x floor" % TARGETS["pinned_per_sample_x_floor"] if place == "pinned" else ""
    return "| %s | %s Hz | %s | %s | %.1f us | %s | %s | %.1f us | %s | %s |" % (
        place, r, fig, x["spread"], floor / 1e3, x["busy_floor_spread"], ratio,
        x["floor_cpu_ns_per_wake"] / 1e3, tgt, ok if tgt else "")


def inproc_judgement(x, prefix="inproc_floor"):
    """Issue #36's pinned target against the in-process floor: ours per
    sample within 10 % of libwaker's per wake-up.  Judged on the paired
    difference and its standard error: met when even two standard errors
    above it stay within the margin, not met when two below it do not,
    otherwise the rounds cannot tell (said, with the figures)."""
    floor, over, se = x[prefix + "_ns_per_wake"], x["over_" + prefix + "_ns"], x["over_" + prefix + "_se_ns"]
    margin = (TARGETS["pinned_per_sample_x_floor"] - 1) * floor
    if not floor > 0 or se != se:
        return "noise", "not judged (noise)"
    ratio = "%.2f (%.2f-%.2f)" % ((floor + over) / floor, (floor + over - 2 * se) / floor,
                                  (floor + over + 2 * se) / floor)
    if over + 2 * se <= margin:
        return ratio, mark(True)
    if over - 2 * se > margin:
        return ratio, mark(False)
    return ratio, "not settled (two standard errors reach both sides)"


def inproc_row(place, r, x, prefix="inproc_floor", wait="cond"):
    """One row of the table against an in-process floor (its wait: cond,
    or nanosleep for prefix inproc_nanosleep_floor)."""
    ratio, ok = inproc_judgement(x, prefix)
    tgt = "<= %.2f x floor" % TARGETS["pinned_per_sample_x_floor"] if place == "pinned" else ""
    return "| %s | %s Hz | %s | %.1f us +- %.1f | %.1f us +- %.1f | %+.1f us +- %.1f | %s | %s | %s |" % (
        place, r, wait, x["pooled_ns_per_sample"] / 1e3, x["pooled_se_ns"] / 1e3,
        x[prefix + "_ns_per_wake"] / 1e3, x[prefix + "_se_ns"] / 1e3,
        x["over_" + prefix + "_ns"] / 1e3, x["over_" + prefix + "_se_ns"] / 1e3, ratio, tgt, ok if tgt else "")


def inproc_table(L, slow, rates=("100", "1000", "10000")):
    """Added CPU per sample beside the in-process floor (libwaker), when
    the results have it (run.py before 2026-11-29 did not)."""
    rows = [(place, r) for place in ("free", "pinned") for r in rates
            if "inproc_floor_ns_per_wake" in slow.get(place, {}).get("per_sample", {}).get(r, {})]
    if not rows:
        return
    L.append("")
    L.append("The same beside the floor as issue #36 states it: a no-op thread waking at the same rate "
             "*in the same process* (test/bench/libwaker.c preloaded into the same workload in place of "
             "libpysample, in the same shuffled rounds), added process CPU per wake-up; then ours minus "
             "it, paired round by round, +- standard errors.  Ratio: ours / floor with its two-standard-"
             "error range; met when the whole range is within 10 %.  The floor's wait: cond, a condition "
             "variable (two system calls a wake-up); nanosleep, clock_nanosleep (one, as the sampler's "
             "futex wait since #36 round 4).")
    L.append("")
    table_head(L, "| placement | rate | floor's wait | ours: added CPU per sample | in-process floor per wake-up | ours - floor | ratio (range) | target | |")
    for place, r in rows:
        x = slow[place]["per_sample"][r]
        L.append(inproc_row(place, r, x))
        for k in sorted(x):
            if k.startswith("inproc_") and k.endswith("_floor_ns_per_wake") and k != "inproc_floor_ns_per_wake":
                L.append(inproc_row(place, r, x, k[:-len("_ns_per_wake")], k[len("inproc_"):-len("_floor_ns_per_wake")]))


def render(R):
    L = []
    m = R["machine"]
    L.append("Run %s, %d s: `%s`" % (R["date"], R["duration_s"], R["command"]))
    L.append("")
    L.append("Machine: %s, %d cores, %.0f GiB, Linux %s, load average %.1f at start, %.1f at the end.  "
             "Primary interpreter: %s.  Others: %s." %
             (m["cpu"], m["cores"], m["mem_gib"], m["kernel"], m["load_before"], m.get("load_after", 0), R["primary"],
              ", ".join(l for l, _ in R["pythons"] if l != R["primary"]) or "none"))
    L.append("")
    for name, why in sorted(R.get("errors", {}).items()):
        L.append("**Item `%s` failed, no figures:** %s" % (name, why))
        L.append("")
    if "floor" in R:
        heading(L, "14. Pinned 10 kHz against the in-process floor (%s, %d rounds)" %
                (R["primary"], R["floor"]["pinned"]["rounds"]))
        inproc_table(L, R["floor"], rates=("10000",))
        L.append("")
    if "slowdown" in R:
        heading(L, "1. Slowdown, CPU-bound single-threaded program (%s)" % R["primary"])
        table_head(L, "| placement | rate | added CPU (user+sys) | spread | wall ratio | spread | sampler share of CPU | target | |")
        for place in ("free", "pinned"):
            s = R["slowdown"].get(place)
            if not s:
                continue
            for r in ("100", "1000", "10000"):
                x = s[r]
                added = x["cpu_ratio"] - 1
                if place == "pinned":
                    tgt, ok = "per sample: next table", ""
                elif r in ("100", "1000"):
                    tgt, ok = "wall within noise", mark(min(float(v) for v in x["wall_ratio_spread"].split("-")) <= 1.0
                                                         or x["wall_ratio"] - 1 <= 0.03)
                else:
                    tgt, ok = "-", ""
                L.append("| %s | %s Hz | %+.1f%% | %s | x%.3f | %s | %.1f%% | %s | %s |" %
                         (place, r, added * 100, x["cpu_ratio_spread"], x["wall_ratio"], x["wall_ratio_spread"],
                          x["sampler_cpu_share"] * 100, tgt, ok))
        L.append("")
        L.append("Added process CPU per sample beside the floor, both run in the same rounds and placement: "
                 "what a bare waker thread (bench_wake busy) adds to a C busy loop per wake-up (the issue's "
                 "floor), and the waker's own CPU per wake-up; target pinned: within 10 % of the first.  "
                 "Pooled over the rounds (sum of paired CPU differences / sum of samples) +- its standard "
                 "error; a figure within two standard errors of zero is noise, and so is a ratio to it.")
        L.append("")
        table_head(L, "| placement | rate | added CPU per sample | spread | floor: added to a busy loop per wake-up | spread | ratio | waker's own CPU per wake-up | target | |")
        for place in ("free", "pinned"):
            s = R["slowdown"].get(place)
            if not s or "per_sample" not in s:
                continue
            for r in ("100", "1000", "10000"):
                x = s["per_sample"][r]
                L.append(per_sample_row(place, r, x))
        inproc_table(L, R["slowdown"])
        peer_rows = [(place, r) for place in ("free", "pinned") for r in ("100", "1000", "10000")
                     if "peer_" + r in R["slowdown"].get(place, {})]
        if peer_rows:
            L.append("")
            L.append("Peer profiler (`%s`), same rounds:" % R.get("peer", "?"))
            L.append("")
            table_head(L, "| placement | rate | peer added CPU | spread | peer wall ratio | libpysample added CPU | wall ratio |")
            for place, r in peer_rows:
                x, y = R["slowdown"][place]["peer_" + r], R["slowdown"][place][r]
                L.append("| %s | %s Hz | %+.1f%% | %s | x%.3f | %+.1f%% | x%.3f |" %
                         (place, r, (x["cpu_ratio"] - 1) * 100, x["cpu_ratio_spread"], x["wall_ratio"],
                          (y["cpu_ratio"] - 1) * 100, y["wall_ratio"]))
        L.append("")
        L.append("Unprofiled run: %.2f s CPU free, %.2f s pinned (median)." %
                 (R["slowdown"]["free"]["base_cpu_s"] if "free" in R["slowdown"] else float("nan"),
                  R["slowdown"]["pinned"]["base_cpu_s"] if "pinned" in R["slowdown"] else float("nan")))
        L.append("")
    if "cost" in R:
        c = R["cost"]
        heading(L, "2. Sampler cost per sample (%s, 1 kHz, threads blocked at depth)" % R["primary"],
                "All-in: the sampler thread's CPU clock / samples (includes the timer wake-up, shared by the "
                "threads of a tick).  Walk: the median tick's own time / threads in it.")
        table_head(L, "| depth | threads | all-in ns/sample | spread | walk ns/sample | spread | median tick us | ticks | errors |")
        for k in sorted((k for k in c if "/" in k), key=lambda k: [int(x) for x in k.split("/")]):
            x = c[k]
            d, t = k.split("/")
            L.append("| %s | %s | %.0f | %s | %.0f | %s | %.1f | %.0f | %d |" %
                     (d, t, x["all_in_ns"], x["all_in_spread"], x["walk_ns"], x["walk_spread"],
                      x["tick_p50_ns"] / 1e3, x["ticks"], x["errors"]))
        L.append("")
        if "10/1" in c:
            w = c["10/1"]["walk_ns"]
            L.append("- 10-frame stack: %.0f ns per sample of walking (target <= %d ns: %s); "
                     "%.0f ns all-in, of which the wake-up floor below is most." %
                     (w, TARGETS["per_sample_10_ns"], mark(w <= TARGETS["per_sample_10_ns"]),
                      c["10/1"]["all_in_ns"]))
        if "per_frame_ns" in c:
            L.append("- Per additional frame, code objects cached: %.1f ns (target <= %d ns: %s)." %
                     (c["per_frame_ns"], TARGETS["per_frame_ns"],
                      mark(c["per_frame_ns"] <= TARGETS["per_frame_ns"])))
        if "wake_floor" in R:
            L.append("- Platform floor (test/bench/bench_wake.c, a bare timed-wait loop): " +
                     ", ".join("%s Hz: %.1f us CPU per wake-up, lateness p50 %.0f us / p99 %.0f us" %
                               (k, v["cpu_ns_per_wake"] / 1e3, v["late_p50_ns"] / 1e3, v["late_p99_ns"] / 1e3)
                               for k, v in R["wake_floor"].items()) + ".")
        L.append("")
    if "rate" in R:
        heading(L, "3. Achieved rate and tick lateness (%s, threads running Python at depth 20)" % R["primary"])
        table_head(L, "| rate | threads | achieved / requested | spread | lateness p50 | p99 | p99 spread | skipped ticks | sampler CPU (share of a core) | target | |")
        for k in sorted(R["rate"], key=lambda k: [int(x) for x in k.split("/")]):
            x = R["rate"][k]
            r, t = k.split("/")
            tgt, ok = "", ""
            if t == "1" and int(r) <= 10000:
                tgt = ">= 99%%, p99 < %g us" % (1e6 / int(r))
                ok = mark(x["ratio"] >= TARGETS["rate_ratio"] and x["late_p99_us"] < 1e6 / int(r))
            elif t == "16" and r == "5000":
                tgt = ">= %.0f%%" % (TARGETS["rate_ratio_16"] * 100)
                ok = mark(x["ratio"] >= TARGETS["rate_ratio_16"])
            L.append("| %s Hz | %s | %.3f | %s | %.0f us | %.0f us | %s | %.0f | %.1f%% | %s | %s |" %
                     (r, t, x["ratio"], x["ratio_spread"], x["late_p50_us"], x["late_p99_us"],
                      x["late_p99_spread"], x["skipped"], x["sampler_core_share"] * 100, tgt, ok))
        L.append("")
    for key, name, tkey in (("startup_true", "/bin/true", "true_off_ms"), ("startup_python", "python -c pass", "python_on_ms")):
        if key not in R:
            continue
        s = R[key]
        heading(L, "4. Start-up: %s (%s)" % (name, R["primary"] if "python" in key else "C program"))
        table_head(L, "| variant | wall ms (median) | IQR | added wall ms | CPU ms | added CPU ms | target | |")
        for v in ("bare", "preload_off", "preload_on"):
            x = s[v]
            tgt, ok = "", ""
            # Judged by CPU time like everything else; the wall figure is
            # beside it (on a loaded machine it moves by milliseconds).
            if key == "startup_true" and v == "preload_off":
                tgt, ok = "<= +0.3 ms", mark(x["added_cpu_ms"] <= TARGETS[tkey]) + " (CPU)"
            if key == "startup_python" and v == "preload_on":
                tgt, ok = "<= +3 ms", mark(x["added_cpu_ms"] <= TARGETS[tkey]) + " (CPU)"
            L.append("| %s | %.2f | %s | %s | %.2f | %s | %s | %s |" %
                     (v.replace("_", ", "), x["wall_ms"], x["wall_iqr"],
                      "%+.2f" % x["added_wall_ms"] if "added_wall_ms" in x else "",
                      x["cpu_ms"], "%+.2f" % x["added_cpu_ms"] if "added_cpu_ms" in x else "", tgt, ok))
        L.append("")
    if "memory" in R:
        heading(L, "5. Memory and output (test/bench/bench_stacktab.c: 4 threads, depth 8-40, 3000 functions)",
                "Sort: the lines put in order (under the profile lock in the library); make+write: the "
                "lines made a chunk at a time and written (the lock released).")
        table_head(L, "| samples | distinct stacks | table RSS KiB | per stack B | add ns/sample | sort s (CPU) | make+write s (CPU) | sort+write wall spread | extra peak while writing KiB | output MB | target | |")
        for k, x in R["memory"].items():
            s, d = k.split("/")
            tgt, ok = "", ""
            if d == "100000":
                tgt = "<= 0.5 s"
                ok = mark(x["render_s"] + x["write_s"] <= TARGETS["write_100k_s"]) + \
                    " (wall %.2f s, CPU %.2f s)" % (x["render_s"] + x["write_s"], x["render_cpu_s"] + x["write_cpu_s"])
            L.append("| %s | %s | %d | %.0f | %.0f | %.3f (%.3f) | %.3f (%.3f) | %s | %d | %.1f | %s | %s |" %
                     (s, d, x["rss_table_kib"], x["rss_table_kib"] * 1024 / x["stacks_in_table"],
                      x["add_ns_per_sample"], x["render_s"], x["render_cpu_s"], x["write_s"], x["write_cpu_s"],
                      x["write_total_spread"],
                      x["peak_write_extra_kib"], x["output_bytes"] / 1e6, tgt, ok))
        L.append("")
    if "idle" in R:
        I = R["idle"]
        heading(L, "7. Sampler CPU per second of an idle program (%s, one thread asleep 40 frames deep)" % R["primary"],
                "ms of CPU per second of the program (%% of a core / 10).  Floor: a bare thread waking at the "
                "rate (bench_wake), same rounds and placement.  Targets: with faulthandler within 1.5 x plain; "
                "plain no more than the floor plus the walk (item 2: a few us per tick), judged by eye.")
        table_head(L, "| placement | rate | floor | plain | x floor | achieved | -X faulthandler | x plain | faulthandler after start | x plain | read modes | peer | target | |")
        rates = sorted({int(k.split("/")[0]) for k in I if not k.startswith("0/")})
        for place in ("free", "pinned"):
            for r in rates:
                g = lambda v: I.get("%d/%s/%s" % (r, place, v))
                fl, pl, fx, fa, peer = g("floor"), g("plain"), g("-X faulthandler"), g("faulthandler after start"), g("peer")
                if not pl:
                    continue
                worst = max(fx["ms_per_s"], fa["ms_per_s"]) / max(pl["ms_per_s"], 1e-9)
                L.append("| %s | %d Hz | %.2f | %.2f (%s) | %.2f | %.3f | %.2f | %.2f | %.2f | %.2f | %s | %s | <= 1.5 x plain | %s |" %
                         (place, r, fl["ms_per_s"], pl["ms_per_s"], pl["spread"], pl["ms_per_s"] / max(fl["ms_per_s"], 1e-9),
                          pl["achieved"], fx["ms_per_s"], fx["ms_per_s"] / max(pl["ms_per_s"], 1e-9),
                          fa["ms_per_s"], fa["ms_per_s"] / max(pl["ms_per_s"], 1e-9),
                          "/".join([pl["read_mode"], fx["read_mode"], fa["read_mode"]]),
                          "%.2f" % peer["ms_per_s"] if peer else "-", mark(worst <= 1.5)))
        L.append("")
    if "wake_methods" in R:
        W = R["wake_methods"]
        heading(L, "8. The wake-up floor: condition variable vs clock_nanosleep, timer slack")
        table_head(L, "| rate | placement | wait | timer slack | CPU per wake-up | spread | lateness p50 | p99 |")
        for k in sorted(W, key=lambda k: (int(k.split("/")[0]), k)):
            r, pl, m, sl = k.split("/")
            x = W[k]
            L.append("| %s Hz | %s | %s | %s | %.1f us | %s | %.0f us | %.0f us |" %
                     (r, pl, m, "50 us (default)" if sl == "default" else "1 ns", x["cpu_ns"] / 1e3,
                      x["cpu_spread"], x["late_p50_us"], x["late_p99_us"]))
        L.append("")
    if "async" in R:
        A = R["async"]
        heading(L, "9. asyncio task attribution (%s, 100 Hz, wall mode, tasks waiting 3 coroutines deep)" % R["primary"],
                "Sampler CPU per tick and the tick's own work (wall, p50/p99), without and with "
                "PYSAMPLE_ASYNC=1.  At most 1024 tasks are read per tick; the rest are counted on "
                "`[pysample: asyncio tasks not sampled]`.")
        table_head(L, "| live tasks | async | CPU per tick | spread | tick p50 | tick p99 | samples per tick | extra CPU per task read |")
        for n in sorted({int(k.split("/")[0]) for k in A}):
            off, on = A.get("%d/0" % n), A.get("%d/1" % n)
            for a, x in ((0, off), (1, on)):
                if not x:
                    continue
                per = "-"
                if a == 1 and off:
                    per = "%.2f us" % ((x["cpu_tick_us"] - off["cpu_tick_us"]) / min(n, 1024))
                L.append("| %d | %s | %.1f us | %s | %.1f us | %.1f us | %.1f | %s |" %
                         (n, "on" if a else "off", x["cpu_tick_us"], x["cpu_spread"], x["tick_p50_us"],
                          x["tick_p99_us"], x["samples_per_tick"], per))
        L.append("")
    if "timeline" in R:
        T = R["timeline"]
        heading(L, "12. Timeline (%s, 1 kHz, threads blocked 10 frames deep, PYSAMPLE_TIMELINE=0 / 1)"
                % R["primary"], "Sampler CPU per tick and per sample (its thread's CPU clock) and the "
                "tick's own work (wall, p50), without and with the timeline.")
        table_head(L, "| threads | timeline | CPU per tick | spread | CPU per sample | tick p50 |")
        for k in sorted((k for k in T if k != "memory"), key=lambda k: tuple(int(x) for x in k.split("/"))):
            x = T[k]
            t, tl = k.split("/")
            L.append("| %s | %s | %.1f us | %s | %.0f ns | %.1f us |" %
                     (t, "on" if tl == "1" else "off", x["cpu_tick_us"], x["cpu_tick_spread"],
                      x["cpu_sample_ns"], x["tick_p50_us"]))
        L.append("")
        L.append("Memory and time per sample (test/bench/bench_stacktab.c, 10 000 distinct stacks): "
                 "the table's resident memory, the time to count a sample, and the timeline file's "
                 "write time and size.")
        L.append("")
        table_head(L, "| samples | timeline | table RSS | bytes per sample | add per sample | timeline write | timeline file |")
        for k in sorted(T.get("memory", {}), key=lambda k: tuple(int(x) for x in k.split("/"))):
            x = T["memory"][k]
            n, tl = k.split("/")
            L.append("| %s | %s | %d KiB | %s | %.0f ns | %s | %s |" %
                     (n, "on" if tl == "1" else "off", x["rss_table_kib"],
                      "%.1f" % x["bytes_per_sample"] if "bytes_per_sample" in x else "-",
                      x["add_ns_per_sample"], "%.3f s" % x["timeline_write_s"] if tl == "1" else "-",
                      "%.1f MB" % (x["timeline_bytes"] / 1e6) if tl == "1" else "-"))
        L.append("")
    if "native" in R:
        N = R["native"]
        heading(L, "10. Native stacks (%s, 1 kHz, one thread, PYSAMPLE_NATIVE=0 / 1)" % R["primary"],
                "Sampler CPU per sample (its thread's CPU clock over samples) and the tick's "
                "own work (wall, p50).  Blocked: the thread waits on an Event, its registers "
                "come from /proc/self/task/TID/syscall; running: it runs Python code and is "
                "held in the SIGURG handler while its stack is unwound.")
        table_head(L, "| thread | Python depth | native | CPU per sample | spread | tick p50 | unwind (frames) | native samples | lost |")
        for k in sorted(N, key=lambda k: (k.split("/")[0], int(k.split("/")[1]), k.split("/")[2])):
            m, d, n = k.split("/")
            x = N[k]
            uw = "-" if x.get("unwind_ns", float("nan")) != x.get("unwind_ns") or n == "0" else \
                "%.2f us (%.0f)" % (x["unwind_ns"] / 1e3, x["frames"])
            L.append("| %s | %s | %s | %.1f us | %s ns | %.1f us | %s | %d | %d |" %
                     ("blocked" if m == "idle" else "running", d, "on" if n == "1" else "off",
                      x["cpu_ns"] / 1e3, x["cpu_spread"], x["tick_p50_ns"] / 1e3, uw, x["native"],
                      x["lost"]))
        L.append("")
    if "rooted" in R:
        N = R["rooted"]
        heading(L, "11. Native samples that unwound to the root (PYSAMPLE_NATIVE=1, 200 Hz)",
                "demo: scripts/demo.py; mix: test/bench/native_mix.py (json, hashlib, zlib in "
                "three threads).  Truncated: the walk stopped early, by cause; unavailable: no "
                "registers (a running thread that did not answer the signal in time, or a "
                "blocked one that left its call while read); mismatch: the native and Python "
                "walks disagreed.")
        table_head(L, "| program | interpreter | samples | to the root | truncated (causes) | unavailable | mismatch | rules cached / looked up | fp frames | no-CFI frames |")
        for k in sorted(N):
            prog, label = k.split("/", 1)
            x = N[k]
            causes = ", ".join("%s %d" % kv for kv in sorted(x["causes"].items())) or "-"
            L.append("| %s | %s | %d | %.1f %% | %.1f %% (%s) | %.1f %% | %.1f %% | %d / %d | %d | %d |" %
                     (prog, label, x["samples"], 100 * x["root"], 100 * x["truncated"], causes,
                      100 * x["unavailable"], 100 * x["mismatch"], x["rule_hits"], x["rule_misses"],
                      x["fp_frames"], x["nocfi_frames"]))
        L.append("")
    if "versions" in R:
        heading(L, "6. Per interpreter (items 1 pinned, 2 with one thread, 3 with one thread, 4 python)")
        table_head(L, "| interpreter | pinned +CPU 100 Hz | 1 kHz | 10 kHz | walk ns/sample d10 | d100 | d1000 | ns/frame | all-in ns d10 | rate 1k | rate 10k | p99 late 10k us | python -c pass on: +CPU ms (+wall) | off: +CPU ms (+wall) |")
        rows = dict(R["versions"])
        prim = {}
        if "slowdown" in R and "pinned" in R["slowdown"] and "cost" in R and "rate" in R and "startup_python" in R:
            prim = {"slowdown": {"pinned": R["slowdown"]["pinned"]}, "cost": R["cost"], "rate": R["rate"],
                    "startup_python": R["startup_python"]}
            rows = dict([(R["primary"] + " (primary)", prim)] + list(rows.items()))
        for label, v in rows.items():
            if "refused" in v:
                L.append("| %s | refused by the library: `%s` |" % (label, v["refused"].replace("|", "/")[:300]))
                continue
            if "error" in v:
                L.append("| %s | failed: %s |" % (label, v["error"].replace("|", "/")[:200]))
                continue
            p = v["slowdown"]["pinned"]
            c = v["cost"]
            r = v["rate"]
            sp = v["startup_python"]
            L.append("| %s | %+.1f%% | %+.1f%% | %+.1f%% | %.0f | %.0f | %.0f | %.1f | %.0f | %.3f | %.3f | %.0f | %+.2f (%+.1f) | %+.2f (%+.1f) |" %
                     (label, (p["100"]["cpu_ratio"] - 1) * 100, (p["1000"]["cpu_ratio"] - 1) * 100,
                      (p["10000"]["cpu_ratio"] - 1) * 100, c["10/1"]["walk_ns"], c["100/1"]["walk_ns"],
                      c["1000/1"]["walk_ns"], c.get("per_frame_ns", float("nan")), c["10/1"]["all_in_ns"],
                      r["1000/1"]["ratio"], r["10000/1"]["ratio"], r["10000/1"]["late_p99_us"],
                      sp["preload_on"]["added_cpu_ms"], sp["preload_on"]["added_wall_ms"],
                      sp["preload_off"]["added_cpu_ms"], sp["preload_off"]["added_wall_ms"]))
        L.append("")
    if "peers" in R:
        import peers
        heading(L, "13. Peers: the same programs under each profiler, pinned to one core",
                "Added CPU per sample: the CPU-bound program's user+sys (the whole process "
                "tree: an out-of-process profiler's own CPU included) minus the bare run of the "
                "same round, over the samples the profile holds; CPU x / wall x: the same pair's "
                "ratios.  Achieved: the main thread's samples in the wall-mode profile of the "
                "truth program over its loop's wall time.  Error: the largest difference, in "
                "points, between a phase's share (burn / sleep / select / rest) in the profile "
                "and its true share measured by the program itself (wall: of its wall time, "
                "cpu and gil: of its CPU time).  800-deep whole: the share of the deep "
                "thread's samples holding all 800 frames.  Medians of the rounds.")
        peers.render(L, R["peers"])
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    main()
