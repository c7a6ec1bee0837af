"""PYSAMPLE_MODE=cpu: a spinner and a poller (sum(range(200)), then 4 ms
asleep, as event loops with timers and heartbeats do) run for DURATION and
until the sampler has woken TICKS times (sampled.py).  Each thread measures
its own CPU time (time.thread_time) over its whole function and the
program prints "spinner SECONDS" and "poller SECONDS"."""
import threading
import time

import sampled

DURATION = 1.0
TICKS = 100
STARTED = []
used = {}


def spinner(stop):
    t0 = time.thread_time()
    STARTED.append(1)
    while not stop:
        sum(range(200))
    used["spinner"] = time.thread_time() - t0


def poller(stop):
    t0 = time.thread_time()
    STARTED.append(1)
    while not stop:
        sum(range(200))
        time.sleep(0.004)
    used["poller"] = time.thread_time() - t0


stop = []
sampled.run_threads([threading.Thread(target=spinner, args=(stop,)),
                     threading.Thread(target=poller, args=(stop,))], stop, DURATION, TICKS,
                    started=STARTED)
for name in ("spinner", "poller"):
    print("%s %.6f" % (name, used[name]))
