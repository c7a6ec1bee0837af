"""An armed program (PYSAMPLE_ARM=1) for test_control.py.

    armed.py STOPFILE [fork]

Runs armed_work() on the main thread and a thread named "waiter" blocked
in waiter_wait(), prints "ready <pid>" (and, with fork, "child <pid>" of a
forked child that runs child_work() until STOPFILE.child appears), then
works until STOPFILE exists, prints "done <checksum>" and exits with
status 7: what the test compares with a run without the library.
"""
import os
import sys
import threading
import time

stop = sys.argv[1]
ev = threading.Event()


def waiter_wait():
    ev.wait()  # waiter line


def armed_work():
    total = 0
    while not os.path.exists(stop):
        for i in range(20000):
            total = (total + i * i) % 1000003  # work line
    return total


def child_work():
    total = 0
    while not os.path.exists(stop + ".child"):
        for i in range(20000):
            total = (total + i) % 999983  # child line
    os._exit(0)


# Forked while single-threaded (as far as the program knows: 3.12+ would
# warn about the sampler thread if the library did not step it out).
if len(sys.argv) > 2 and sys.argv[2] == "fork":
    pid = os.fork()
    if pid == 0:
        child_work()
    print("child %d" % pid, flush=True)
t = threading.Thread(target=waiter_wait, name="waiter", daemon=True)
t.start()
print("ready %d" % os.getpid(), flush=True)
result = armed_work()
ev.set()
t.join()
if len(sys.argv) > 2 and sys.argv[2] == "fork":
    open(stop + ".child", "w").close()
    os.waitpid(pid, 0)
print("done %d" % (result >= 0), flush=True)
sys.exit(7)
