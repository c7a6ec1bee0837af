"""Threads that sit in one blocking call each for long stretches (from C,
native_lib.c, which counts EINTR instead of retrying), a thread waiting on
a threading.Lock, and two threads contending for the GIL; for the
native-stack tests.  Prints "<name> <calls> <eintr>" per C loop.
Argument: the library."""
import ctypes
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402
from native_loops import LOOPS, call_loop, report  # noqa: E402

lib = ctypes.CDLL(sys.argv[1])
results = {}
EACH_MS = 400


def run_loop(name, secs):
    results[name] = call_loop(lib, name, secs, EACH_MS)


def reader(fd, secs):
    results["read"] = call_loop(lib, "read", secs, fd)


def lock_waiter(lock, stop):
    while not stop.is_set():
        lock.acquire(timeout=0.5)  # @lock-wait


def gil_spinner(stop):
    x = 0
    while not stop.is_set():
        x += 1  # @gil-spin


def main():
    secs = 1.5
    until = sampled.Until(secs, 300)
    stop = threading.Event()
    lock = threading.Lock()
    lock.acquire()
    rfd, wfd = os.pipe()
    threads = [threading.Thread(target=run_loop, args=(n, secs), name="loop-" + n)
               for n in LOOPS]
    threads.append(threading.Thread(target=reader, args=(rfd, secs), name="loop-read"))
    others = [threading.Thread(target=lock_waiter, args=(lock, stop), name="lock-waiter")]
    others += [threading.Thread(target=gil_spinner, args=(stop,), name="gil-%d" % i)
               for i in range(2)]
    for t in threads + others:
        t.start()
    # The reader gets a byte every half second; the loops end after secs.
    end = time.monotonic() + secs
    while time.monotonic() < end:
        time.sleep(0.5)
        os.write(wfd, b"x")
    # End of file, not a last burst of bytes: a reader whose own deadline
    # is later than ours (it starts its clock when it gets the GIL) then
    # returns at once from every read instead of blocking for ever.
    os.close(wfd)
    for t in threads:
        t.join()
    while until.more():
        time.sleep(0.05)
    stop.set()
    for t in others:
        t.join()
    report(results)
    # Free-threaded builds have no GIL to contend for.
    print("gil", int(getattr(sys, "_is_gil_enabled", lambda: True)()), 0)


main()
