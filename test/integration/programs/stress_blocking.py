"""Threads that spend their time in blocking calls: sleep, select, read on a
pipe, a lock handed over by another thread.  Measures how late each wake-up
is and counts anything unexpected (an early return, an InterruptedError, a
wait that timed out although its event came).  Prints one line of JSON."""
import json
import os
import select
import sys
import threading
import time

import signal

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 40
PERIOD = 0.01
late = {"sleep": [], "select": [], "pipe": [], "lock": []}
problems = []


def record(kind, delay):
    late[kind].append(delay * 1000.0)


def sleeper():
    for _ in range(ROUNDS):
        t0 = time.monotonic()
        time.sleep(PERIOD)
        dt = time.monotonic() - t0
        if dt < PERIOD:
            problems.append("sleep returned early: %.6f" % dt)
        record("sleep", dt - PERIOD)


def selector():
    r, w = os.pipe()
    try:
        for _ in range(ROUNDS):
            t0 = time.monotonic()
            got = select.select([r], [], [], PERIOD)
            dt = time.monotonic() - t0
            if got != ([], [], []) or dt < PERIOD - 0.0005:
                problems.append("select returned early or with data: %r %.6f" % (got, dt))
            record("select", dt - PERIOD)
    finally:
        os.close(r)
        os.close(w)


def pipe_pair():
    r, w = os.pipe()

    def writer():
        for _ in range(ROUNDS):
            time.sleep(PERIOD)
            os.write(w, repr(time.monotonic()).encode().ljust(32))

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(ROUNDS):
            data = b""
            while len(data) < 32:
                chunk = os.read(r, 32 - len(data))
                if not chunk:
                    problems.append("pipe closed early")
                    break
                data += chunk
            record("pipe", time.monotonic() - float(data.decode()))
    except InterruptedError as e:
        problems.append("EINTR on read: %r" % e)
    t.join()
    os.close(r)
    os.close(w)


def lock_handover():
    for _ in range(ROUNDS):
        lock = threading.Lock()
        lock.acquire()
        released_at = []

        def releaser():
            time.sleep(PERIOD)
            released_at.append(time.monotonic())
            lock.release()

        t = threading.Thread(target=releaser)
        t.start()
        if not lock.acquire(timeout=5):
            problems.append("lock wake-up missed")
        else:
            record("lock", time.monotonic() - released_at[0])
        t.join()
        ev = threading.Event()
        threading.Timer(0.001, ev.set).start()
        if not ev.wait(5):
            problems.append("event wake-up missed")


# The profiler sends the program's threads no signals: any of these that
# arrives is counted (and would also have interrupted a blocking call).
received = []
for name in ("SIGPROF", "SIGALRM", "SIGVTALRM", "SIGUSR1", "SIGUSR2", "SIGURG", "SIGWINCH",
             "SIGIO", "SIGPIPE", "SIGCHLD"):
    signal.signal(getattr(signal, name), lambda sig, frame: received.append(sig))

threads = [threading.Thread(target=f) for f in (sleeper, selector, pipe_pair, lock_handover)]
for t in threads:
    t.start()
for t in threads:
    t.join()


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]


if received:
    problems.append("signals received: %r" % sorted(set(received)))
print(json.dumps({"problems": problems,
                  "median_ms": {k: pct(v, 0.5) for k, v in late.items()},
                  "p90_ms": {k: pct(v, 0.9) for k, v in late.items()},
                  "counts": {k: len(v) for k, v in late.items()}}))
