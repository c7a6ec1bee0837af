"""A prefork server: the master forks N workers that serve until SIGTERM.

    proc_prefork.py N

Worker 0 handles SIGTERM itself (a graceful stop, exit status 0), the
others keep the default action and die of it.  The master prints
"ready" once all workers run, waits in master_wait; on SIGTERM it sends
SIGTERM to every worker, reaps them and prints {"master": pid,
"workers": [pids], "status": [exit codes]} (negative: killed by signal).
"""
import json
import os
import signal
import sys
import time

from proc_common import spin


def worker_serve(graceful):
    if graceful:
        signal.signal(signal.SIGTERM, lambda sig, frame: os._exit(0))
    while True:
        spin(0.01)


def master_wait(stop):
    while not stop:
        time.sleep(0.01)


def main():
    n = int(sys.argv[1])
    stop = []
    signal.signal(signal.SIGTERM, lambda sig, frame: stop.append(sig))
    workers = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            # A worker starts from the default disposition, as gunicorn's do.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            worker_serve(i == 0)
        workers.append(pid)
    print("ready", flush=True)
    master_wait(stop)
    for pid in workers:
        os.kill(pid, signal.SIGTERM)
    status = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in workers]
    print(json.dumps({"master": os.getpid(), "workers": workers, "status": status}))


if __name__ == "__main__":
    main()
