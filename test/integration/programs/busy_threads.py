"""Four threads busy at once, each only in functions of its own that call and
return all the time, so the sampler reads frame chains that are being pushed
and popped under it.  Without a GIL (3.13t, 3.14t) all four really run at
the same moment as the sampler; with one, they take turns.

    busy_threads.py [SECONDS]

They run SECONDS and until the sampler has woken TICKS times.

Prints "<thread index> <native id>" per thread, then "samples N errors N"
from the sampler's own counters (pysample_status through ctypes: the
preloaded library's).
"""
import sys
import threading

import sampled

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
TICKS = 100
# Each worker appends here once it is in work<i>: the clock starts when
# all four are (sampled.run_threads).  list.append is a C call: no frame.
STARTED = []


# Thread i runs only work<i> and rec<i>: a sample that shows one of them on
# another thread's stack would be a misread.
def rec0(n):
    return rec0(n - 1) if n else 0


def rec1(n):
    return rec1(n - 1) if n else 1


def rec2(n):
    return rec2(n - 1) if n else 2


def rec3(n):
    return rec3(n - 1) if n else 3


def work0(stop):
    STARTED.append(0)
    i = 0
    while not stop:
        rec0(i % 12)
        i += 1


def work1(stop):
    STARTED.append(1)
    i = 0
    while not stop:
        rec1(i % 12)
        i += 1


def work2(stop):
    STARTED.append(2)
    i = 0
    while not stop:
        rec2(i % 12)
        i += 1


def work3(stop):
    STARTED.append(3)
    i = 0
    while not stop:
        rec3(i % 12)
        i += 1


def main():
    funcs = [work0, work1, work2, work3]
    ids = {}
    ready = threading.Barrier(len(funcs) + 1)

    def run(i, f):
        ids[i] = threading.get_native_id()
        ready.wait()
        f(stop)

    stop = []
    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(funcs)]
    # Every thread is started before the clock runs: all four busy at once,
    # for DURATION and until the sampler has woken TICKS times (sampled.py).
    sampled.run_threads(threads, stop, DURATION, TICKS, ready, STARTED)
    for i in sorted(ids):
        print(i, ids[i])
    st = sampled.status()
    if st is not None:
        print("samples %d errors %d" % (st.samples, st.errors))


if __name__ == "__main__":
    main()
