"""A program started WITHOUT the library, read from outside (test_attach.py).

    unarmed.py STOPFILE

Thread "mixer" spends about 3/4 of its wall time in mix_long() and 1/4 in
mix_short() (busy-waiting on the clock, so a busy machine keeps the
ratio); thread "waiter" is blocked in waiter_wait(); the main thread
counts its progress in count_progress() (into STOPFILE.progress).  Prints "ready <pid>", works until
STOPFILE exists, then prints "progress <n>" and exits with status 7.
"""
import os
import sys
import threading
import time

stop = sys.argv[1]
ev = threading.Event()
done = threading.Event()


def waiter_wait():
    ev.wait()  # waiter line


def mix_long():
    end = time.perf_counter() + 0.003
    while time.perf_counter() < end:
        pass  # long line


def mix_short():
    end = time.perf_counter() + 0.001
    while time.perf_counter() < end:
        pass  # short line


def mixer():
    while not done.is_set():
        mix_long()
        mix_short()


def count_progress():
    n = 0
    while not os.path.exists(stop):
        n += 1  # progress line
        if n % 20 == 0:
            with open(stop + ".progress.tmp", "w") as f:
                f.write(str(n))
            os.replace(stop + ".progress.tmp", stop + ".progress")
        time.sleep(0.001)
    return n


threading.Thread(target=waiter_wait, name="waiter", daemon=True).start()
threading.Thread(target=mixer, name="mixer", daemon=True).start()
print("ready %d" % os.getpid(), flush=True)
n = count_progress()
done.set()
print("progress %d" % n, flush=True)
sys.exit(7)
