"""PYSAMPLE_MODE=cpu: a spinner and a poller (sum(range(200)), then 4 ms
asleep, as event loops with timers and heartbeats do) run for DURATION and
until the sampler has woken TICKS times and counted SAMPLES (sampled.py).  Each thread measures
its own CPU time (time.thread_time) over its work and the program prints
"spinner SECONDS" and "poller SECONDS".

Around its work each thread sleeps until the sampler has woken twice: the
sampler's first look at it (where its count starts) comes before, and its
last look (where its count ends) after, even when a loaded machine stalls
the sampler for a while just then."""
import threading
import time

import sampled

DURATION = 1.0
TICKS = 100
SAMPLES = 80
STARTED = []
used = {}


def looked_at():
    until = sampled.Until(0.0, 2)
    while until.more():
        time.sleep(0.005)


def spinner(stop):
    looked_at()
    t0 = time.thread_time()
    STARTED.append(1)
    while not stop:
        sum(range(200))
    used["spinner"] = time.thread_time() - t0
    looked_at()


def poller(stop):
    looked_at()
    t0 = time.thread_time()
    STARTED.append(1)
    while not stop:
        sum(range(200))
        time.sleep(0.004)
    used["poller"] = time.thread_time() - t0
    looked_at()


stop = []
threads = [threading.Thread(target=spinner, args=(stop,)),
           threading.Thread(target=poller, args=(stop,))]
for t in threads:
    t.start()
give_up = time.perf_counter() + sampled.GIVE_UP
while len(STARTED) < len(threads) and time.perf_counter() < give_up:
    time.sleep(0.001)
# A loaded machine gives the threads far less CPU than DURATION (0.35 s
# of 1 s was seen at load 16): on until the profile holds SAMPLES periods
# of it, not only TICKS ticks (Until gives up after sampled.GIVE_UP).
first = sampled.status()
if first is None:
    time.sleep(DURATION)
else:
    until = sampled.Until(DURATION, enough=lambda st: st.ticks - first.ticks >= TICKS and
                          st.samples - first.samples >= SAMPLES)
    while until.more():
        time.sleep(0.01)
stop.append(True)
for t in threads:
    t.join()
for name in ("spinner", "poller"):
    print("%s %.6f" % (name, used[name]))
