#!/usr/bin/env python3
"""One `pysample serve` for a fleet of armed processes, scraped as a
backend would (issue #38 item 4, docs/performance.md, docs/kubernetes.md).

    bench_fleet.py --build BUILDDIR [--processes 32] [--seconds 10] [--scrapes 3]

Runs test/tools/test_serve.py FleetTests with these figures (the suite runs
32 processes with 2 s scrapes): N small armed programs with
PYSAMPLE_CPU_BUDGET=1%, K scrapes of S s at 1000 Hz, every pid checked as
its own label, every sampler's CPU (the library's sampler_cpu_s over the
session) checked against its budget, serve's RSS growth bounded.  Prints the
test's figure line: sampler CPU per process, bytes per profile, serve's CPU
per scrape and RSS.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.join(HERE, "..", "tools", "test_serve.py")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True, help="the Meson build directory (has lib/libpysample.so)")
    parser.add_argument("--processes", type=int, default=32)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--scrapes", type=int, default=3)
    args = parser.parse_args()
    env = dict(os.environ, PYSAMPLE_TEST_BUILD_ROOT=os.path.abspath(args.build),
               PYSAMPLE_TEST_SERVE_FLEET=str(args.processes), PYSAMPLE_TEST_SERVE_SECONDS=str(args.seconds),
               PYSAMPLE_TEST_SERVE_SCRAPES=str(args.scrapes))
    return subprocess.call([sys.executable, TEST, "FleetTests", "-v"], env=env)


if __name__ == "__main__":
    sys.exit(main())
