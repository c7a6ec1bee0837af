"""Helpers shared by the proc_*.py programs of test_process.py."""
import time

import sampled


def spin(seconds, ticks=20):
    """Burns CPU for the given time, and on until the sampler has woken
    `ticks` times meanwhile (sampled.py: on a loaded machine it wakes late;
    without the library the time alone counts).  The profile shows the
    caller."""
    until = sampled.Until(seconds, ticks)
    n = 0
    while True:
        while time.perf_counter() < until.deadline:
            n += 1
        if not until.extend():
            return n
