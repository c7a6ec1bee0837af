"""os.fork() from a thread that is not the main thread: the child's only
thread is the forking one, and when its function returns the child ends
(glibc: the last thread to end calls exit(0)).  CPython's own
test_threading.test_main_thread_after_fork_from_nonmain_thread.

    proc_fork_thread.py SECONDS

The child runs fork_thread_child_work, then its thread returns.  The
parent waits for the child at most 30 s (never for ever: a child that
does not end is killed and reported), then prints
{"child": pid, "status": exit code or "hung"}.
"""
import json
import os
import signal
import sys
import threading
import time
import warnings

from proc_common import spin


def fork_thread_child_work(seconds):
    spin(seconds)


def wait_bounded(pid, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hung"


def forker(seconds, result):
    with warnings.catch_warnings():
        # 3.12+ warns about fork() with threads: there are two here.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        fork_thread_child_work(seconds)
        sys.stdout.flush()
        return
    result["child"] = pid
    result["status"] = wait_bounded(pid, 30)


def main():
    result = {}
    t = threading.Thread(target=forker, args=(float(sys.argv[1]), result))
    t.start()
    t.join()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
