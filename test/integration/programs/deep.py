"""Recursion DEPTH frames deep, then busy at the bottom for DURATION and
until the sampler has woken TICKS times (sampled.py)."""
import sys
import time

import sampled

TICKS = 20
DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 900
DURATION = float(sys.argv[2]) if len(sys.argv) > 2 else 0.8
sys.setrecursionlimit(DEPTH + 1000)


def bottom():
    until = sampled.Until(DURATION, TICKS)  # @bottom-start
    while True:  # @bottom-loop
        while time.perf_counter() < until.deadline: pass  # @bottom
        if not until.extend():  # @bottom-extend
            return


def rec(n):
    if n == 1:
        return bottom()  # @rec-bottom
    return rec(n - 1)  # @rec


rec(DEPTH)
