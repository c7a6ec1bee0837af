"""Spends 60% / 30% / 10% of its wall time in three functions, interleaved
in ten rounds so that a slow moment of the machine cannot favour one."""
import sys
import time

TOTAL = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5


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
    for _ in range(10):
        sixty()
        thirty()
        ten()
