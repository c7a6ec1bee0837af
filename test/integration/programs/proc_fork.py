"""os.fork() children: each does its own work and ends its own way.

    proc_fork.py N SECONDS [thread]

Forks N children; child i runs fork_child_work, then ends with os._exit(0)
(odd i) or by returning through sys.exit(0) (even i, so atexit runs in a
forked child).  The parent runs fork_parent_work before and after forking,
waits for all, and prints {"parent": pid, "children": [pid, ...],
"status": [exit codes]}.  With "thread", a Python thread sleeps while the
parent forks (CPython 3.12+ then warns about fork with threads, as it
should, with or without the profiler).
"""
import json
import os
import sys
import threading
import time

from proc_common import spin


def fork_child_work(seconds):
    spin(seconds)


def fork_parent_work(seconds):
    spin(seconds)


def main():
    n, seconds = int(sys.argv[1]), float(sys.argv[2])
    if len(sys.argv) > 3 and sys.argv[3] == "thread":
        # Long enough to outlive the forks on a loaded machine; a daemon
        # thread does not hold up the exit.
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    fork_parent_work(seconds / 2)
    children = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            fork_child_work(seconds)
            if i % 2:
                os._exit(0)
            sys.exit(0)
        children.append(pid)
    fork_parent_work(seconds / 2)
    status = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    print(json.dumps({"parent": os.getpid(), "children": children, "status": status}))


if __name__ == "__main__":
    main()
