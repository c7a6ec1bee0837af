"""Four threads busy at once, each only in functions of its own that call and
return all the time, so the sampler reads frame chains that are being pushed
and popped under it.  Without a GIL (3.13t, 3.14t) all four really run at
the same moment as the sampler; with one, they take turns.

    busy_threads.py [SECONDS]

Prints "<thread index> <native id>" per thread, then "samples N errors N"
from the sampler's own counters (pysample_status through ctypes; the
library is the one in LD_PRELOAD).
"""
import ctypes
import os
import sys
import threading
import time

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


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


def work0(deadline):
    i = 0
    while time.perf_counter() < deadline:
        rec0(i % 12)
        i += 1


def work1(deadline):
    i = 0
    while time.perf_counter() < deadline:
        rec1(i % 12)
        i += 1


def work2(deadline):
    i = 0
    while time.perf_counter() < deadline:
        rec2(i % 12)
        i += 1


def work3(deadline):
    i = 0
    while time.perf_counter() < deadline:
        rec3(i % 12)
        i += 1


class Status(ctypes.Structure):
    _fields_ = [("running", ctypes.c_int), ("python_hexversion", ctypes.c_int),
                ("free_threaded", ctypes.c_int), ("rate_hz", ctypes.c_int),
                ("ticks", ctypes.c_uint64), ("samples", ctypes.c_uint64),
                ("errors", ctypes.c_uint64), ("distinct_stacks", ctypes.c_uint64)]


def main():
    funcs = [work0, work1, work2, work3]
    ids = {}
    ready = threading.Barrier(len(funcs) + 1)

    def run(i, f):
        ids[i] = threading.get_native_id()
        ready.wait()
        f(deadline[0])

    deadline = [0.0]
    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(funcs)]
    for t in threads:
        t.start()
    # Every thread is started before the clock runs: all four busy at once.
    deadline[0] = time.perf_counter() + DURATION
    ready.wait()
    for t in threads:
        t.join()
    for i in sorted(ids):
        print(i, ids[i])
    lib = os.environ.get("LD_PRELOAD", "").split(":")[0]
    st = Status()
    if lib and ctypes.CDLL(lib).pysample_status(ctypes.byref(st), ctypes.sizeof(st)) == 0:
        print("samples %d errors %d" % (st.samples, st.errors))


if __name__ == "__main__":
    main()
