"""PYSAMPLE_GIL: one thread spins in Python code (holding the GIL), one
sleeps in time.sleep() (the GIL released) and wakes every 2 ms, and the
main thread waits for them in wait_for_them(), blocked in join() without
the GIL.  The spinner decides when the part ends: DURATION and until the
sampler has woken TICKS times (sampled.py).  The main thread does not poll:
on a loaded machine a poller that wakes holds the GIL until it is put back
on a CPU, and is rightly sampled as the holder.  Prints
"free-threaded 0|1"."""
import sysconfig
import threading

import time

import sampled

DURATION = 1.0
TICKS = 100
STARTED = []


def spinner(stop):
    STARTED.append(1)
    until = sampled.Until(DURATION, TICKS)
    while until.more():
        for _ in range(1000):
            pass
    stop.append(True)


def sleeper(stop):
    STARTED.append(1)
    while not stop:
        time.sleep(0.002)


def wait_for_them(threads):
    for t in threads:
        t.join()


stop = []
threads = [threading.Thread(target=spinner, args=(stop,)),
           threading.Thread(target=sleeper, args=(stop,))]
for t in threads:
    t.start()
wait_for_them(threads)
print("free-threaded %d" % (1 if sysconfig.get_config_var("Py_GIL_DISABLED") else 0))
