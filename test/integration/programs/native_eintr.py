"""Threads in blocking calls from C that do not retry on EINTR (native_lib.c
c_loop_*), with busy threads beside them, under native sampling: prints
each loop's call and EINTR counts, one line per call, as
    <name> <calls> <eintr>
The loops use short timeouts, so that threads go from running to blocked
and back all the time: the moments where our signal can meet a call that
is just starting.  Argument: the library, seconds."""
import ctypes
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402
from native_loops import LOOPS, call_loop, report  # noqa: E402

lib = ctypes.CDLL(sys.argv[1])
seconds = float(sys.argv[2])
results = {}


def add(name, calls, eintr):
    c, e = results.get(name, (0, 0))
    results[name] = (c + calls, e + eintr)


def run_loop(name, each_ms, secs):
    add(name, *call_loop(lib, name, secs, each_ms))


def reader(fd, secs):
    add("read", *call_loop(lib, "read", secs, fd))


def busy(stop):
    x = 0
    while not stop.is_set():
        x += 1


def one_round(secs):
    rfd, wfd = os.pipe()
    threads = [threading.Thread(target=run_loop, args=(n, 1, secs)) for n in LOOPS]
    threads.append(threading.Thread(target=reader, args=(rfd, secs)))
    for t in threads:
        t.start()
    # The pipe's writer: a byte every millisecond or so, then end of file,
    # so that the reader leaves its last read whenever its own deadline
    # falls (it starts its clock when it gets the GIL, which on a loaded
    # machine can be well after ours: with a final burst of bytes instead,
    # a reader whose deadline was more than a burst later blocked for ever
    # and the program hung -- seen once under 3.15t beside two test suites).
    end = time.monotonic() + secs
    while time.monotonic() < end:
        os.write(wfd, b"x")
        time.sleep(0.001)
    os.close(wfd)
    for t in threads:
        t.join()
    os.close(rfd)


def main():
    # Rounds of 0.5 s for `seconds` at least, and on until the sampler has
    # woken 300 times (a loaded machine delays it).
    until = sampled.Until(seconds, 300)
    stop = threading.Event()
    busies = [threading.Thread(target=busy, args=(stop,)) for _ in range(2)]
    for t in busies:
        t.start()
    while True:
        one_round(0.5)
        if not until.more():
            break
    stop.set()
    for t in busies:
        t.join()
    report(results)


main()
