"""Run inside a sub-interpreter by subinterp_threads.py: spins in a
function named after the interpreter's role until the STOP pipe ends,
after reporting on the STARTED pipe that it spins (ROLE, STARTED and STOP
are set by the runner)."""
import os
import time

CHUNK = 0.05


def stopped():
    try:
        return os.read(STOP, 1) == b""  # noqa: F821
    except BlockingIOError:
        return False


def spin():
    os.write(STARTED, b"s")  # noqa: F821
    while True:
        end = time.perf_counter() + CHUNK
        while time.perf_counter() < end:  # si-spin
            pass
        if stopped():
            return


def work_a():
    spin()  # si-a


def work_b():
    spin()  # si-b


{"a": work_a, "b": work_b}[ROLE]()  # noqa: F821 (set by the runner)
