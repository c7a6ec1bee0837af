"""One thread sleeps, the main thread computes.

The main thread computes for DURATION and until the sampler has woken TICKS
times (sampled.py); the sleeper sleeps as long."""
import threading
import time

import sampled

DURATION = 1.0
TICKS = 150
done = threading.Event()


def sleeper():
    done.wait()  # @sleep


def busy():
    until = sampled.Until(DURATION, TICKS)
    while True:
        while time.perf_counter() < until.deadline: pass  # @busy
        if not until.extend():
            break


t = threading.Thread(target=sleeper)
t.start()
busy()
done.set()
t.join()
