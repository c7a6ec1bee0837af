"""A program started WITHOUT the library, read from outside (test_attach.py).

    unarmed.py STOPFILE

Thread "mixer" spends about 3/4 of its wall time in mix_long() and 1/4 in
mix_short(), busy-waiting on the clock; on a busy machine the split moves
(a function waiting for a CPU or the GIL overstays), so the program
measures it: STOPFILE.progress holds "<n> <s in mix_long> <s in mix_short>",
rewritten every 5 steps of the main thread's progress counter
(count_progress(), a step every 10 ms); thread "waiter" is blocked in
waiter_wait().  Prints "ready <pid>", works until
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
    while time.perf_counter() < end:  # long line
        pass


def mix_short():
    end = time.perf_counter() + 0.001
    while time.perf_counter() < end:  # short line
        pass


spent = [0.0, 0.0]  # wall seconds in mix_long, mix_short: the truth a profile is held to


def mixer():
    clock = time.perf_counter
    while not done.is_set():
        t0 = clock()
        mix_long()
        t1 = clock()
        mix_short()
        t2 = clock()
        spent[0] += t1 - t0
        spent[1] += t2 - t1


def count_progress():
    n = 0
    while not os.path.exists(stop):
        n += 1  # progress line
        if n % 5 == 0:
            with open(stop + ".progress.tmp", "w") as f:
                f.write("%d %.6f %.6f" % (n, spent[0], spent[1]))
            os.replace(stop + ".progress.tmp", stop + ".progress")
        time.sleep(0.01)
    return n


threads = [threading.Thread(target=waiter_wait, name="waiter", daemon=True),
           threading.Thread(target=mixer, name="mixer", daemon=True)]
for t in threads:
    t.start()
print("ready %d" % os.getpid(), flush=True)
n = count_progress()  # module line
# Both threads end before the interpreter does: CPython 3.13 built against
# musl dies of SIGSEGV at exit in about 1 run in 10 when a daemon thread is
# still running Python then (it reads its thread state in drop_gil() after
# finalization freed it; musl's malloc unmaps that memory, glibc's keeps
# it), with no library anywhere; the tests check this program's status.
done.set()
ev.set()
for t in threads:
    t.join()
print("progress %d" % n, flush=True)
sys.exit(7)
