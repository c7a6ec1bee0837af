"""Recursion DEPTH frames deep, then busy at the bottom."""
import sys
import time

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 900
DURATION = float(sys.argv[2]) if len(sys.argv) > 2 else 0.8
sys.setrecursionlimit(DEPTH + 1000)


def bottom():
    end = time.perf_counter() + DURATION
    while time.perf_counter() < end: pass  # @bottom


def rec(n):
    if n == 1:
        return bottom()  # @rec-bottom
    return rec(n - 1)  # @rec


rec(DEPTH)
