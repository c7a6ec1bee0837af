"""Threads with the C library's default stack (musl: 128 KiB) running the
library's in-thread paths with only MARGIN bytes of it left
(programs/smallstack.c, test_core.py test_small_thread_stack).

    small_stack.py SMALLSTACK_SO MARGIN

Prints "stack N" (each thread's stack size), "rounds N" (the rounds of
calls each made), "raised N", "deepest N" (the most bytes of the MARGIN
any of it used, from the paint left) and "pid N", one line each."""
import ctypes
import os
import sys
import threading

import sampled

lib = ctypes.CDLL(sys.argv[1])
margin = int(sys.argv[2])
lib.ss_stack_size.restype = ctypes.c_size_t
lib.ss_near_end.argtypes = [ctypes.c_size_t]
lib.ss_near_end.restype = ctypes.c_long
lib.ss_raised.restype = ctypes.c_long
lib.ss_deepest.restype = ctypes.c_size_t
sizes, rounds = [], []
started = []


def worker():
    sizes.append(lib.ss_stack_size())
    started.append(True)
    rounds.append(lib.ss_near_end(margin))   # the GIL is released in there


threads = [threading.Thread(target=worker, name="small-%d" % i) for i in range(2)]
for t in threads:
    t.start()
while len(started) < len(threads):
    threading.Event().wait(0.001)
sampled.repeat(lambda: threading.Event().wait(0.01), 1.0, 100)
lib.ss_stop()
for t in threads:
    t.join()
print("stack", *sizes)
print("rounds", *rounds)
print("raised", lib.ss_raised())
print("deepest", lib.ss_deepest())
print("pid", os.getpid())
