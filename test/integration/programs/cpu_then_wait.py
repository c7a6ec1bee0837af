"""PYSAMPLE_MODE=cpu: a thread that burns CPU, then waits, in a cycle: 25 ms
of its own CPU time in cpu_burn, 15 ms asleep in sleeper (time.sleep), 10
ms in waiter (select() with nothing to wait for but its timeout).  At a
low rate most looks at it fall in a wait right after a burn: the CPU of
that burn must not be charged to the wait (issue 36).

It runs for DURATION and until the profile holds SAMPLES periods of CPU
(sampled.py), then prints the CPU time each part measured, in seconds:
"cpu_burn S", "sleeper S", "waiter S"."""
import select
import sys
import time

import sampled

DURATION = 1.0
SAMPLES = int(sys.argv[1]) if len(sys.argv) > 1 else 120
used = {"cpu_burn": 0.0, "sleeper": 0.0, "waiter": 0.0}


def cpu_burn(seconds):
    # CPU time, not wall time: a loaded machine stretches the burn, never
    # shrinks its CPU.
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(100))


def sleeper(seconds):
    time.sleep(seconds)


def waiter(seconds):
    select.select([], [], [], seconds)


def cycle():
    for func, seconds in ((cpu_burn, 0.025), (sleeper, 0.015), (waiter, 0.010)):
        t0 = time.thread_time()
        func(seconds)
        used[func.__name__] += time.thread_time() - t0


first = sampled.status()
if first is None:
    sampled.repeat(cycle, DURATION, 0)
else:
    until = sampled.Until(DURATION, enough=lambda st: st.samples - first.samples >= SAMPLES)
    while until.more():
        cycle()
for name, secs in used.items():
    print("%s %.6f" % (name, secs))
