"""Thread names as programs set them, all threads busy at once for DURATION:
a Thread subclass renamed from the main thread after start, a thread whose
name needs escaping, a thread made by _thread (no threading.Thread, so no
name), and the main thread.  Prints "<role> <native id>" per thread.

The main thread runs for DURATION and until the sampler has woken TICKS
times (sampled.py), then stops the others."""
import _thread
import threading
import time

import sampled

DURATION = 1.5   # > 1 s: names are re-read about once a second
TICKS = 100


def spin(stop):
    while not stop:
        pass


def renamed_work(stop):
    spin(stop)


def escaped_work(stop):
    spin(stop)


def raw_work(stop):
    spin(stop)


def main_work(until, stop):
    while True:
        while time.perf_counter() < until.deadline:
            pass
        if not until.extend():
            break
    stop.append(True)


class Worker(threading.Thread):
    def __init__(self, go, ids):
        super().__init__(name="original")
        self.go = go
        self.ids = ids

    def run(self):
        self.ids["renamed"] = threading.get_native_id()
        self.go.wait()
        renamed_work(self.go.stop)


def main():
    go = threading.Event()
    ids = {}

    def escaped():
        ids["escaped"] = threading.get_native_id()
        go.wait()
        escaped_work(go.stop)

    raw_done = threading.Event()

    def raw():
        ids["raw"] = threading.get_native_id()
        go.wait()
        raw_work(go.stop)
        raw_done.set()

    w = Worker(go, ids)
    e = threading.Thread(target=escaped, name="wörker;1")
    w.start()
    w.name = "renamed"
    e.start()
    _thread.start_new_thread(raw, ())
    go.stop = []
    go.set()
    ids["main"] = threading.get_native_id()
    main_work(sampled.Until(DURATION, TICKS), go.stop)
    w.join()
    e.join()
    raw_done.wait()
    for role, tid in sorted(ids.items()):
        print(role, tid)


if __name__ == "__main__":
    main()
