"""A prefork server: the master forks N workers that serve until SIGTERM.

    proc_prefork.py N

Worker 0 handles SIGTERM itself (a graceful stop, exit status 0), the
others keep the default action and die of it.  The master prints
"ready" once every worker and the master itself, in master_wait, have been
sampled (sampled.py; at once without the library), waits on; on SIGTERM it sends
SIGTERM to every worker, reaps them and prints {"master": pid,
"workers": [pids], "status": [exit codes]} (negative: killed by signal).
"""
import json
import os
import signal
import sys
import time

import sampled
from proc_common import spin


def worker_serve(graceful, ready):
    if graceful:
        signal.signal(signal.SIGTERM, lambda sig, frame: os._exit(0))
    spin(0.01, ticks=10)
    os.write(ready, b"r")
    os.close(ready)
    while True:
        spin(0.01)


def master_wait(stop, ready, workers):
    until = sampled.Until(0.01, 10)
    for _ in range(workers):
        os.read(ready, 1)
    while until.more():
        time.sleep(0.01)
    print("ready", flush=True)
    while not stop:
        time.sleep(0.01)


def main():
    n = int(sys.argv[1])
    stop = []
    signal.signal(signal.SIGTERM, lambda sig, frame: stop.append(sig))
    workers = []
    ready_r, ready_w = os.pipe()
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            # A worker starts from the default disposition, as gunicorn's do.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.close(ready_r)
            worker_serve(i == 0, ready_w)
        workers.append(pid)
    os.close(ready_w)
    master_wait(stop, ready_r, n)
    for pid in workers:
        os.kill(pid, signal.SIGTERM)
    status = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in workers]
    print(json.dumps({"master": os.getpid(), "workers": workers, "status": status}))


if __name__ == "__main__":
    main()
