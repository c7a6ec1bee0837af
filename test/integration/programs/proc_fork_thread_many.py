"""os.fork() from a thread that is not the main thread, N times in a row:
each child's only thread returns at once, which ends the child (glibc:
the last thread to end calls exit(0)).  How long each child lived, from
fork() to the parent's waitpid() returning.

    proc_fork_thread_many.py N

Prints {"lived_ms": [each child's, in order]}.  A child that does not
end within 30 s is killed and counted as 30 s.
"""
import json
import os
import signal
import sys
import threading
import time
import warnings


def wait_bounded(pid, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.0002)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def forker(n, lived):
    for _ in range(n):
        t0 = time.monotonic()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            return  # the child's only thread ends here
        wait_bounded(pid, 30)
        lived.append(time.monotonic() - t0)


def main():
    lived = []
    t = threading.Thread(target=forker, args=(int(sys.argv[1]), lived))
    t.start()
    t.join()
    print(json.dumps({"lived_ms": [round(x * 1e3, 2) for x in lived]}), flush=True)


main()
