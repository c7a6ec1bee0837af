"""An armed program (PYSAMPLE_ARM=1) with many idle threads, for
test_control.py: each sampler tick of a session records one sample per
thread.

    armed_threads.py STOPFILE THREADS

Starts THREADS threads blocked in idle_wait(), prints "ready <pid>",
sleeps until STOPFILE exists, prints "done 1" and exits with status 7.
"""
import os
import sys
import threading
import time

stop, count = sys.argv[1], int(sys.argv[2])
ev = threading.Event()


def idle_wait():
    ev.wait()  # idle line


threads = [threading.Thread(target=idle_wait, daemon=True) for _ in range(count)]
for t in threads:
    t.start()
print("ready %d" % os.getpid(), flush=True)
while not os.path.exists(stop):
    time.sleep(0.02)
print("done 1", flush=True)
sys.exit(7)
