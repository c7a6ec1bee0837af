#!/usr/bin/env python3
"""The cost of watching for a late libpython (issue #13) in programs that
are not Python.  Reports, asserts nothing; docs/performance.md quotes it.

    dlwatch.py --build BUILDDIR [--reps N] [--iterations N]

Three variants, run interleaved in a shuffled order each repetition:
  bare       no library
  preloaded  LD_PRELOAD only: the library is inert (no PYSAMPLE_OUTPUT)
  watching   LD_PRELOAD and PYSAMPLE_OUTPUT: the dlopen watch is on
Two programs:
  bench_dlopen  10 000 dlopen+dlclose of libz (loaded and unloaded each
                time), then 10 000 of an object that stays loaded: CPU ns
                per call
  gcc           gcc -O2 compiling and linking a small C program (cc1, as,
                collect2, ld: five non-Python processes, ld dlopen()s its
                LTO plugin): wall and CPU time of the whole tree
Median over repetitions, min-max beside it.
"""
import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

SRC = r"""
#include <stdio.h>
#include <string.h>
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(int argc, char **argv) { printf("%d %zu\n", fib(argc + 20), strlen(argv[0])); return 0; }
"""


def env_for(variant, lib, outdir):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD",)
           and not k.startswith("PYSAMPLE_")}
    if variant != "bare":
        env["LD_PRELOAD"] = lib
    if variant == "watching":
        env["PYSAMPLE_OUTPUT"] = os.path.join(outdir, "prof.%p.txt")
    return env


def run_timed(cmd, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, wall, cpu


def fmt(xs, unit, scale=1.0):
    xs = [x * scale for x in xs]
    return "%8.1f %s (%.1f-%.1f)" % (statistics.median(xs), unit, min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=10000)
    a = ap.parse_args()
    lib = os.path.abspath(os.path.join(a.build, "lib", "libpysample.so"))
    bench = os.path.abspath(os.path.join(a.build, "test", "bench", "bench_dlopen"))
    tmp = tempfile.mkdtemp(prefix="pysample-dlwatch-")
    src = os.path.join(tmp, "fib.c")
    with open(src, "w") as f:
        f.write(SRC)
    variants = ["bare", "preloaded", "watching"]
    res = {v: {"fresh": [], "loaded": [], "gcc_wall": [], "gcc_cpu": []} for v in variants}
    for rep in range(a.reps):
        order = variants[:]
        random.shuffle(order)
        for v in order:
            env = env_for(v, lib, tmp)
            out, _, _ = run_timed([bench, "libz.so.1", str(a.iterations)], env)
            for line in out.splitlines():
                k, ns = line.split()
                res[v][k].append(float(ns))
            _, wall, cpu = run_timed(["gcc", "-O2", "-o", os.path.join(tmp, "fib"), src], env)
            res[v]["gcc_wall"].append(wall)
            res[v]["gcc_cpu"].append(cpu)
    left = [f for f in os.listdir(tmp) if f.startswith("prof")]
    print("dlopen watch, %d repetitions, %d iterations; load average %.2f"
          % (a.reps, a.iterations, os.getloadavg()[0]))
    print("%-10s %-28s %-28s %-28s %-28s" % ("variant", "dlopen+dlclose fresh (CPU)",
                                            "dlopen+dlclose loaded (CPU)", "gcc wall",
                                            "gcc CPU"))
    for v in variants:
        r = res[v]
        print("%-10s %-28s %-28s %-28s %-28s" % (v, fmt(r["fresh"], "ns"), fmt(r["loaded"], "ns"),
                                                fmt(r["gcc_wall"], "ms", 1000),
                                                fmt(r["gcc_cpu"], "ms", 1000)))
    print("profiles written by these non-Python programs: %d" % len(left))
    return 0


if __name__ == "__main__":
    sys.exit(main())
