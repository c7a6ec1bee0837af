"""PYSAMPLE_GIL: one thread spins in Python code (holding the GIL), one
sleeps in time.sleep() (the GIL released) and wakes every 2 ms, and the
main thread waits; they run for DURATION and until the sampler has woken
TICKS times (sampled.py).  Prints "free-threaded 0|1"."""
import sysconfig
import threading
import time

import sampled

DURATION = 1.0
TICKS = 100
STARTED = []


def spinner(stop):
    STARTED.append(1)
    while not stop:
        pass


def sleeper(stop):
    STARTED.append(1)
    while not stop:
        time.sleep(0.002)


stop = []
sampled.run_threads([threading.Thread(target=spinner, args=(stop,)),
                     threading.Thread(target=sleeper, args=(stop,))], stop, DURATION, TICKS,
                    started=STARTED)
print("free-threaded %d" % (1 if sysconfig.get_config_var("Py_GIL_DISABLED") else 0))
