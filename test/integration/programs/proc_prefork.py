"""A prefork server: the master forks N workers that serve until SIGTERM.

    proc_prefork.py N

Worker 0 handles SIGTERM itself (a graceful stop, exit status 0), the
others keep the default action and die of it.  Each worker reports to the
master once it is what the test assumes: its SIGTERM disposition is its
own (a worker that still had the master's handler would survive the
master's SIGTERM and keep the run going) and the sampler has seen it in
worker_serve (sampled.py; at once without the library).  The master prints
"ready" once every worker has reported and it has itself been sampled in
master_wait, and waits on; on SIGTERM it sends SIGTERM to every worker,
reaps them and prints {"master": pid, "workers": [pids], "status": [exit
codes]} (negative: killed by signal).  A worker that dies before it
reports makes the master say so on stderr and exit with status 3, at once.
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
    # Set up and sampled: report.
    os.write(ready, b"r")
    os.close(ready)
    while True:
        spin(0.01)


def master_wait(stop, ready, workers):
    until = sampled.Until(0.01, 10)
    reported = 0
    while reported < len(workers):
        got = os.read(ready, len(workers) - reported)
        if not got:
            # Every write end is closed: a worker ended before reporting.
            sys.stderr.write("proc_prefork: %d of %d workers reported, then a worker "
                             "ended\n" % (reported, len(workers)))
            for pid in workers:
                os.kill(pid, signal.SIGKILL)
            os._exit(3)
        reported += len(got)
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
            # A worker starts from the default disposition, as gunicorn's
            # do; until this line it has the master's handler.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.close(ready_r)
            worker_serve(i == 0, ready_w)
        workers.append(pid)
    os.close(ready_w)
    master_wait(stop, ready_r, workers)
    for pid in workers:
        os.kill(pid, signal.SIGTERM)
    status = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in workers]
    print(json.dumps({"master": os.getpid(), "workers": workers, "status": status}))


if __name__ == "__main__":
    main()
