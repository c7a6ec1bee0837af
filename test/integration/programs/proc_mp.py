"""multiprocessing with one start method: two Processes, then a Pool of 2.

    proc_mp.py fork|forkserver|spawn SECONDS

Prints {"main": pid, "process": [pids], "process_status": [exitcodes],
"pool": [worker pids], "pool_ran": [pids that ran a task],
"forkserver": pid or null, "tracker": pid or null}.  Pool.__exit__
terminates the workers (SIGTERM), the Processes end through os._exit
(fork, forkserver) or a normal exit (spawn).
"""
import json
import multiprocessing
import os
import sys

from proc_common import spin


def mp_task(seconds):
    spin(seconds)
    return os.getpid()


def main():
    method, seconds = sys.argv[1], float(sys.argv[2])
    ctx = multiprocessing.get_context(method)
    procs = [ctx.Process(target=mp_task, args=(seconds,)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    with ctx.Pool(2) as pool:
        workers = [w.pid for w in pool._pool]
        ran = sorted(set(pool.map(mp_task, [seconds] * 4, chunksize=1)))
    forkserver = None
    if method == "forkserver":
        from multiprocessing import forkserver as fs
        forkserver = fs._forkserver._forkserver_pid
    tracker = None
    if method in ("forkserver", "spawn"):
        from multiprocessing import resource_tracker as rt
        tracker = rt._resource_tracker._pid
    print(json.dumps({"main": os.getpid(), "process": [p.pid for p in procs],
                      "process_status": [p.exitcode for p in procs], "pool": workers,
                      "pool_ran": ran, "forkserver": forkserver, "tracker": tracker}))


if __name__ == "__main__":
    main()
