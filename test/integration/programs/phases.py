"""Phase A (function phase_a), then phase B (phase_b), then phase A again,
each until the sampler has woken TICKS times (sampled.Until): a program
whose timeline must show a, b, a in that order.

    phases.py TICKS [REPEAT] [reset]

REPEAT (default 1) runs the three phases that many times (a long run for
the timeline's memory bound).  "reset": pysample_reset() after phase B,
so that the profile (and its timeline) holds the last phase A only; it
prints "reset <ns> <ns>", the time (time.time_ns) before and after the
call.  Prints "done".
"""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402


def work():
    return sum(i * i for i in range(200))


def phase_a(ticks):
    until = sampled.Until(0.05, ticks)
    while until.more():
        work()


def phase_b(ticks):
    until = sampled.Until(0.05, ticks)
    while until.more():
        work()


def main():
    ticks = int(sys.argv[1])
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    reset = "reset" in sys.argv[3:]
    for _ in range(repeat):
        phase_a(ticks)
        phase_b(ticks)
        if reset:
            before = time.time_ns()
            assert ctypes.CDLL(None).pysample_reset() == 0
            print("reset %d %d" % (before, time.time_ns()))
        phase_a(ticks)
    print("done")


main()
