"""Run inside a sub-interpreter by subinterp_threads.py: spins for
SECONDS in a function named after the interpreter's role."""
import time

SECONDS = 1.0


def spin():
    end = time.perf_counter() + SECONDS
    while time.perf_counter() < end:  # si-spin
        pass


def work_a():
    spin()  # si-a


def work_b():
    spin()  # si-b


{"a": work_a, "b": work_b}[ROLE]()  # noqa: F821 (set by the runner)
