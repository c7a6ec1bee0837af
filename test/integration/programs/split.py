"""Spends 60% / 30% / 10% of its wall time in three functions, interleaved
in rounds so that a slow moment of the machine cannot favour one.

    split.py [SECONDS [TICKS]]

Ten rounds take SECONDS (default 1.5); more rounds follow until the sampler
has woken TICKS times (default 400), so that a loaded machine, where it
wakes less often, still leaves enough samples for the proportions
(sampled.py).

At the end it prints, per function, the wall time it really took
("sixty 5.43"): a loaded machine can deschedule the program for tens of
milliseconds just before a function's deadline, and that function then
overruns its share.  The profile is judged against the time each function
really took, which is what a wall-clock profile must show."""
import sys
import time

import sampled

TOTAL = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
TICKS = int(sys.argv[2]) if len(sys.argv) > 2 else 400


SPENT = {"sixty": 0.0, "thirty": 0.0, "ten": 0.0}


def timed(name, fn):
    t = time.perf_counter()
    fn()
    SPENT[name] += time.perf_counter() - t


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


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
        print(name, "%.6f" % seconds)
