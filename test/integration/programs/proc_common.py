"""Helpers shared by the proc_*.py programs of test_process.py."""
import time


def spin(seconds):
    """Burns CPU for the given time (the profile shows the caller)."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n
