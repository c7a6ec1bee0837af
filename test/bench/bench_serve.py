#!/usr/bin/env python3
"""What one `pysample serve` scrape costs (issue #38, docs/performance.md).

    bench_serve.py --lib LIBPYSAMPLE [--python PY] [--processes N] [--scrapes K] [--seconds S]

Starts N armed programs (CPU-bound, a few frames deep) and `pysample serve`,
then scrapes /debug/pprof/profile?seconds=S K times back to back and prints:
  - the profiled processes' library thread CPU per scrape (the sampler and
    the session's end: /proc/PID/task/TID/stat of every thread but the
    main one), per process;
  - the main thread's work done per second with and without a scrape under
    way (its own loop count), per process;
  - bytes per profile, gzipped as served and as pprof, and samples;
  - serve's own CPU per scrape and its RSS.
Nothing is asserted.
"""
import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PYSAMPLE = os.path.join(HERE, "..", "..", "scripts", "pysample")
TICK = os.sysconf("SC_CLK_TCK")

PROGRAM = """\
import os, sys, time
count = [0]
def leaf():
    return sum(range(200))
def middle():
    for _ in range(10):
        leaf()
def handler():
    middle()
def main():
    out = sys.argv[1]
    last = time.time()
    n = 0
    while True:
        handler()
        n += 1
        now = time.time()
        if now - last >= 0.5:
            with open(out, "a") as f:
                f.write("%f %d\\n" % (now, n))
            n, last = 0, now
main()
"""


def cpu_seconds(pid, main_too=False):
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        if int(tid) == pid and not main_too:
            continue
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def rate_between(path, start, end):
    """Loop iterations per second the program logged between two times."""
    n = span = 0
    with open(path) as f:
        for line in f:
            t, count = line.split()
            if start <= float(t) <= end:
                n += int(count)
                span += 0.5
    return n / span if span else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--scrapes", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rate", type=int, default=100)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-serve-")
    prog = os.path.join(tmp, "prog.py")
    with open(prog, "w") as f:
        f.write(PROGRAM)
    service = "bench%d" % os.getpid()
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(args.lib), PYSAMPLE_ARM="1", PYSAMPLE_SERVICE=service)
    procs = [subprocess.Popen([args.python, prog, os.path.join(tmp, "rate.%d" % i)], env=env)
             for i in range(args.processes)]
    port = 17000 + os.getpid() % 1000
    serve = subprocess.Popen([PYSAMPLE, "serve", "--listen", "127.0.0.1:%d" % port, "--select",
                              "service=" + service, "--rate", str(args.rate)],
                             stderr=open(os.path.join(tmp, "serve.log"), "w"))
    try:
        time.sleep(3)
        quiet_start = time.time()
        time.sleep(args.seconds)
        quiet_end = time.time()
        lib0 = [cpu_seconds(p.pid) for p in procs]
        serve0 = cpu_seconds(serve.pid, True)
        sizes = []
        t0 = time.time()
        for _ in range(args.scrapes):
            url = "http://127.0.0.1:%d/debug/pprof/profile?seconds=%d" % (port, args.seconds)
            with urllib.request.urlopen(url, timeout=args.seconds + 60) as answer:
                body = answer.read()
                sizes.append((len(body), len(gzip.decompress(body)), int(answer.headers["X-Pysample-Samples"])))
        t1 = time.time()
        lib1 = [cpu_seconds(p.pid) for p in procs]
        serve1 = cpu_seconds(serve.pid, True)
        per = [(b - a) / args.scrapes for a, b in zip(lib0, lib1)]
        print("processes %d, %d scrapes of %d s at %d Hz" % (args.processes, args.scrapes, args.seconds, args.rate))
        print("library thread CPU per scrape, per process: median %.1f ms (min %.1f, max %.1f)"
              % (sorted(per)[len(per) // 2] * 1e3, min(per) * 1e3, max(per) * 1e3))
        for i in range(min(3, args.processes)):
            path = os.path.join(tmp, "rate.%d" % i)
            print("process %d work/s: not scraped %.0f, scraped %.0f"
                  % (i, rate_between(path, quiet_start, quiet_end), rate_between(path, t0 + 1, t1 - 1)))
        for gz, raw, samples in sizes:
            print("profile: %d bytes gzipped (%d pprof), %d samples, %.1f bytes/sample gzipped"
                  % (gz, raw, samples, gz / max(1, samples)))
        print("serve: %.1f ms CPU per scrape, RSS %d kB"
              % ((serve1 - serve0) / args.scrapes * 1e3, rss_kb(serve.pid)))
    finally:
        serve.kill()
        for p in procs:
            p.kill()
            p.wait()
        serve.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
