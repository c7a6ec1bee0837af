"""Stress for native stacks: threads starting and ending, copies of a C
library loaded and unloaded, C and Python frames on every stack, while
the sampler unwinds at a high rate.  Argument 1: the library, 2: a scratch
directory.  Prints "done"."""
import ctypes
import os
import shutil
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402

SRC, TMP = sys.argv[1], sys.argv[2]
try:
    from _ctypes import dlclose
except ImportError:
    dlclose = None


def load_and_drop(i):
    path = os.path.join(TMP, "churn_%d.so" % (i % 8))
    if not os.path.exists(path):
        shutil.copy(SRC, path)
    lib = ctypes.CDLL(path)
    lib.c_outer.argtypes = [ctypes.c_double]
    lib.c_outer(0.002)
    handle = lib._handle
    del lib
    if dlclose is not None:
        dlclose(handle)


def worker(i):
    load_and_drop(i)


def main():
    until = sampled.Until(1.5, 400)
    i = 0
    while until.more():
        ts = [threading.Thread(target=worker, args=(i + k,)) for k in range(4)]
        for t in ts:
            t.start()
        load_and_drop(i + 4)
        for t in ts:
            t.join()
        i += 5
    print("done")


main()
