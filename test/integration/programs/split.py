"""Spends 60% / 30% / 10% of its wall time in three functions, interleaved
in rounds so that a slow moment of the machine cannot favour one.

    split.py [SECONDS [TICKS]]

Ten rounds take SECONDS (default 1.5); more rounds follow until the sampler
has woken TICKS times (default 400), so that a loaded machine, where it
wakes less often, still leaves enough samples for the proportions
(sampled.py).

At the end it prints, per function, the wall time it took and how much
of that went in long stalls ("sixty 5.43 0.21"): a gap of more than
50 ms between two clock reads of the spin loop is time a loaded machine
took the program off the CPU (300 ms and more were seen at load 10).
Short gaps are many and fall on each function in proportion to its
length; a few long ones can shift the split by several points.  A wall-clock sampler counts such a gap for
the function it stopped in only if the sampler itself ran meanwhile,
which on a loaded machine it may not: the test judges the profile within
the bounds those gaps allow."""
import sys
import time

import sampled

TOTAL = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
TICKS = int(sys.argv[2]) if len(sys.argv) > 2 else 400


SPENT = {"sixty": 0.0, "thirty": 0.0, "ten": 0.0}
STALLED = {"sixty": 0.0, "thirty": 0.0, "ten": 0.0}
current = None


def timed(name, fn):
    global current
    current = name
    t = time.perf_counter()
    fn()
    SPENT[name] += time.perf_counter() - t


def spin(seconds):
    sampled.spin(seconds, STALLED, current)


def sixty():
    spin(TOTAL * 0.06)


def thirty():
    spin(TOTAL * 0.03)


def ten():
    spin(TOTAL * 0.01)


if __name__ == "__main__":
    until = sampled.Until(TOTAL, TICKS)
    rounds = 0
    # Whole rounds only: the proportions hold at every round's end.
    while rounds < 10 or until.more():
        timed("sixty", sixty)
        timed("thirty", thirty)
        timed("ten", ten)
        rounds += 1
    for name, seconds in SPENT.items():
        print(name, "%.6f" % seconds, "%.6f" % STALLED[name])
