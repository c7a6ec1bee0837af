"""PYSAMPLE_MODE=cpu: a spinner and a poller (sum(range(200)), then 4 ms
asleep, as event loops with timers and heartbeats do) run for DURATION,
until the sampler has woken TICKS times (sampled.py) and until the spinner
has used SPIN_CPU seconds of CPU (a loaded machine gives it far less than
DURATION: 0.35 s of 1 s was seen at load 16).  Each thread measures
its own CPU time (time.thread_time) over its whole function and the
program prints "spinner SECONDS" and "poller SECONDS"."""
import threading
import time

import sampled

DURATION = 1.0
TICKS = 100
SPIN_CPU = 0.6
STARTED = []
used = {}
spun = [0.0]    # the spinner's CPU time so far


def spinner(stop):
    t0 = time.thread_time()
    STARTED.append(1)
    while not stop:
        sum(range(200))
        spun[0] = time.thread_time() - t0
    used["spinner"] = time.thread_time() - t0


def poller(stop):
    t0 = time.thread_time()
    STARTED.append(1)
    while not stop:
        sum(range(200))
        time.sleep(0.004)
    used["poller"] = time.thread_time() - t0


stop = []
threads = [threading.Thread(target=spinner, args=(stop,)),
           threading.Thread(target=poller, args=(stop,))]
for t in threads:
    t.start()
give_up = time.perf_counter() + sampled.GIVE_UP
while len(STARTED) < len(threads) and time.perf_counter() < give_up:
    time.sleep(0.001)
until = sampled.Until(DURATION, TICKS)
while (until.more() or spun[0] < SPIN_CPU) and time.perf_counter() < give_up:
    time.sleep(0.01)
stop.append(True)
for t in threads:
    t.join()
for name in ("spinner", "poller"):
    print("%s %.6f" % (name, used[name]))
