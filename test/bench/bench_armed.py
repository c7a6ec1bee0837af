#!/usr/bin/env python3
"""What an armed process (PYSAMPLE_ARM=1) costs, and how well the CPU
budget (PYSAMPLE_CPU_BUDGET) holds.  Reports, asserts nothing.

    bench_armed.py --lib build/lib/libpysample.so [--python PY] [--seconds S] [--reps N]

idle    an armed program that sleeps: the library thread's CPU time
        (/proc/<pid>/task/<tid>/schedstat, ns on CPU) and its wake-ups
        (voluntary + involuntary context switches) over S seconds.
cpu     a CPU-bound program run bare, preloaded with nothing set, and armed
        (idle): the process's user+sys CPU time, median of N interleaved reps.
budget  (when the library has PYSAMPLE_CPU_BUDGET) a CPU-bound program pinned
        to one core, recorded at 10 kHz with a 1 % budget and with a generous
        one: the sampler's own CPU as a share of the process's, the achieved
        rate, the rate changes.
"""
import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts")

IDLE = "import threading, time\nprint('ready', flush=True)\nthreading.Event().wait(%f)\n"
BUSY = ("import time\n"
        "def work(n):\n"
        "    s = 0\n"
        "    for i in range(n):\n"
        "        s += i * i\n"
        "    return s\n"
        "print('ready', flush=True)\n"
        "end = time.monotonic() + %f\n"
        "while time.monotonic() < end:\n"
        "    work(10000)\n")
FIXED = "s = 0\nfor i in range(%d):\n    s += i * i\n"


def env_with(lib, extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSAMPLE_") and k != "LD_PRELOAD"}
    if lib:
        env["LD_PRELOAD"] = lib
    env.update(extra)
    return env


def thread_stats(pid, tid):
    with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
        on_cpu_ns = int(f.read().split()[0])
    switches = 0
    with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
        for line in f:
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                switches += int(line.split()[1])
    return on_cpu_ns, switches


def library_thread(pid):
    tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))
    others = [t for t in tids if t != pid]
    return others[0] if len(others) == 1 else None


def bench_idle(py, lib, seconds):
    p = subprocess.Popen([py, "-c", IDLE % (seconds + 30)], env=env_with(lib, {"PYSAMPLE_ARM": "1"}),
                         stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    time.sleep(0.5)
    tid = library_thread(p.pid)
    cpu0, sw0 = thread_stats(p.pid, tid)
    time.sleep(seconds)
    cpu1, sw1 = thread_stats(p.pid, tid)
    # One request, to show the thread still answers after its long sleep.
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "pysample_tool", "dump", "--pid", str(p.pid)],
                         env=dict(os.environ, PYTHONPATH=SCRIPTS), capture_output=True, text=True)
    answer_ms = (time.monotonic() - t0) * 1000
    p.kill()
    p.wait()
    return {"seconds": seconds, "library_thread_cpu_ns": cpu1 - cpu0, "wakeups": sw1 - sw0,
            "wakeups_per_s": (sw1 - sw0) / seconds, "dump_rc": out.returncode,
            "dump_round_trip_ms": round(answer_ms, 1)}


def run_fixed(py, lib, extra, n):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([py, "-c", FIXED % n], env=env_with(lib, extra), check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def bench_cpu(py, lib, reps, n):
    variants = {"bare": (None, {}), "preloaded, nothing set": (lib, {}), "armed, idle": (lib, {"PYSAMPLE_ARM": "1"})}
    times = {k: [] for k in variants}
    for _ in range(reps):
        order = list(variants)
        random.shuffle(order)
        for k in order:
            times[k].append(run_fixed(py, lib if variants[k][0] else None, variants[k][1], n))
    base = statistics.median(times["bare"])
    return {k: {"median_cpu_s": round(statistics.median(v), 3), "min": round(min(v), 3),
                "max": round(max(v), 3), "vs_bare": round(statistics.median(v) / base, 4)}
            for k, v in times.items()}


def bench_budget(py, lib, budget, rate, seconds):
    """Records a CPU-bound armed program pinned to CPU 0; returns the
    quality figures and the sampler's share of the process's CPU."""
    tmp = tempfile.mkdtemp()
    p = subprocess.Popen(["taskset", "-c", "0", py, "-c", BUSY % (seconds + 20)],
                         env=env_with(lib, {"PYSAMPLE_ARM": "1", "PYSAMPLE_CPU_BUDGET": budget}),
                         stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    tid = library_thread(p.pid)
    out = os.path.join(tmp, "b.txt")

    def proc_cpu():
        with open("/proc/%d/stat" % p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    c0, s0 = proc_cpu(), thread_stats(p.pid, tid)[0]
    r = subprocess.run([sys.executable, "-m", "pysample_tool", "record", "--pid", str(p.pid), "-d",
                        str(int(seconds)), "--rate", str(rate), "-o", out, "-q"],
                       env=dict(os.environ, PYTHONPATH=SCRIPTS), capture_output=True, text=True)
    c1, s1 = proc_cpu(), thread_stats(p.pid, tid)[0]
    p.kill()
    p.wait()
    if r.returncode != 0:
        return {"error": r.stderr.strip()}
    q = json.load(open(out + ".quality.json"))
    return {"budget": budget, "requested_rate_hz": rate, "achieved_rate_hz": q["achieved_rate_hz"],
            "rate_now_hz": q["rate_now_hz"], "budget_adjustments": q["budget_adjustments"],
            "sampler_share_of_process_cpu_pct": round(100.0 * (s1 - s0) / 1e9 / max(1e-9, c1 - c0), 3),
            "sampler_share_of_one_core_pct": round(100.0 * (s1 - s0) / 1e9 / seconds, 3),
            "quality_sampler_cpu_s": q["sampler_cpu_s"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--only", default="idle,cpu,budget")
    a = ap.parse_args()
    lib = os.path.abspath(a.lib)
    only = a.only.split(",")
    report = {"python": a.python}
    if "idle" in only:
        report["idle"] = bench_idle(a.python, lib, a.seconds)
    if "cpu" in only:
        report["cpu"] = bench_cpu(a.python, lib, a.reps, 3000000)
    if "budget" in only:
        report["budget"] = [bench_budget(a.python, lib, "1%", 10000, a.seconds),
                            bench_budget(a.python, lib, "50%", 10000, a.seconds)]
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
