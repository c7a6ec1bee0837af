"""A C SIGTERM handler calls _exit(CODE) while the main thread is inside
malloc (exitstorm.c): the process must end with CODE, at once.

    proc_exit_storm.py LIBEXITSTORM SECONDS CODE
    proc_exit_storm.py LIBEXITSTORM SECONDS raise

With "raise", the handler is for SIGUSR1 and raise()s SIGTERM (at its
default disposition: the process dies of it), and sampling is stopped
first (pysample_stop), so that nobody but the handler can write the
profile.

Runs storm_work (sampled); profiled (PYSAMPLE_OUTPUT, with a flush
interval), waits until the first periodic flush is on disk; prints its pid
and "ready", then allocates and frees in C until the signal comes.
"""
import ctypes
import os
import signal
import sys
import time

from proc_common import spin


def storm_work(seconds):
    spin(seconds)


def wait_for_flush():
    """The profile the last periodic flush wrote: what must stay on disk if
    the final write cannot be finished in time."""
    out = os.environ.get("PYSAMPLE_OUTPUT")
    if not out:
        return
    path = out.replace("%p", str(os.getpid()))
    deadline = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


def stop_sampling():
    """pysample_stop() of the preloaded library, if there is one."""
    try:
        ctypes.CDLL(None).pysample_stop()
    except AttributeError:
        pass


def main():
    lib = ctypes.CDLL(sys.argv[1])
    mode = sys.argv[3]
    if mode == "raise":
        rc = lib.es_install_raise(signal.SIGUSR1, signal.SIGTERM)
    else:
        rc = lib.es_install(int(mode))
    if rc != 0:
        print("cannot install the handler", flush=True)
        sys.exit(2)
    storm_work(float(sys.argv[2]))
    if mode == "raise":
        stop_sampling()
    else:
        wait_for_flush()
    print(os.getpid(), flush=True)
    print("ready", flush=True)
    lib.es_churn()


if __name__ == "__main__":
    main()
