"""One thread sleeps, the main thread computes.

The main thread computes for DURATION and until the sampler has woken TICKS
times (sampled.py); the sleeper sleeps as long.

The sleeper blocks in read() on a pipe, which does not run until written to.
Not threading.Event: on free-threaded builds (3.14t) a thread waiting for a
lock really wakes ~28 times a second (measured with /proc/.../schedstat
without the library), so cpu mode rightly sees it run now and then."""
import os
import threading
import time

import sampled

DURATION = 1.0
TICKS = 150
wake_r, wake_w = os.pipe()


def sleeper():
    os.read(wake_r, 1)  # @sleep


def busy():
    until = sampled.Until(DURATION, TICKS)
    while True:
        while time.perf_counter() < until.deadline: pass  # @busy
        if not until.extend():
            break


t = threading.Thread(target=sleeper)
t.start()
busy()
os.write(wake_w, b"x")
t.join()
