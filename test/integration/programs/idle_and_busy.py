"""One thread sleeps, the main thread computes.

The main thread computes for DURATION and until the sampler has woken TICKS
times and taken SAMPLES samples (sampled.py); the sleeper sleeps as long.
Samples, not only ticks: in cpu mode a tick charges the busy thread only
for CPU it got since the last look, and at load 11-25 it got so little in
150 ticks that fewer than 20 samples came of them (a failure seen under
load, with libraries before and after cpu mode's changes alike).

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
SAMPLES = 60
wake_r, wake_w = os.pipe()


def sleeper():
    os.read(wake_r, 1)  # @sleep


def busy():
    st = sampled.status()
    t0, s0 = (st.ticks, st.samples) if st is not None else (0, 0)
    until = sampled.Until(DURATION, TICKS,
                          enough=lambda st: st.ticks - t0 >= TICKS and st.samples - s0 >= SAMPLES)
    while True:
        while time.perf_counter() < until.deadline: pass  # @busy
        if not until.extend():
            break


t = threading.Thread(target=sleeper)
t.start()
busy()
os.write(wake_w, b"x")
t.join()
