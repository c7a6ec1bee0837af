"""One thread sleeps, the main thread computes."""
import threading
import time

DURATION = 1.0


def sleeper():
    time.sleep(DURATION)  # @sleep


def busy():
    end = time.perf_counter() + DURATION
    while time.perf_counter() < end: pass  # @busy


t = threading.Thread(target=sleeper)
t.start()
busy()
t.join()
