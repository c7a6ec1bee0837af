"""Phase A (function phase_a), then phase B (phase_b), then phase A again,
each until the sampler has woken TICKS times (sampled.Until): a program
whose timeline must show a, b, a in that order.

    phases.py TICKS [REPEAT]

REPEAT (default 1) runs the three phases that many times (a long run for
the timeline's memory bound).  Prints "done".
"""
import os
import sys

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
    for _ in range(repeat):
        phase_a(ticks)
        phase_b(ticks)
        phase_a(ticks)
    print("done")


main()
