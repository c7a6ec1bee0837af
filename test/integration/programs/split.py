"""Spends 60% / 30% / 10% of its wall time in three functions, interleaved
in rounds so that a slow moment of the machine cannot favour one.

    split.py [SECONDS [TICKS]]

Ten rounds take SECONDS (default 1.5); more rounds follow until the sampler
has woken TICKS times (default 400), so that a loaded machine, where it
wakes less often, still leaves enough samples for the proportions
(sampled.py)."""
import sys
import time

import sampled

TOTAL = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
TICKS = int(sys.argv[2]) if len(sys.argv) > 2 else 400


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
        sixty()
        thirty()
        ten()
        rounds += 1
