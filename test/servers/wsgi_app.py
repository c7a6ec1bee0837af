"""The WSGI app of test/servers/run.py, served by uWSGI and gunicorn.

handle_request() spins for 6 ms of its thread's CPU time per request, so
every worker that served a handful of requests has it in its profile (at
200 Hz, 8 requests are ~10 samples expected: none is a 1-in-10 000 event).
CPU time, not wall time: on a loaded machine a worker gets a fraction of a
core, and a 6 ms wall-clock spin then held the handler for only a fraction
of 6 ms of the sampler's clock too (seen: 8 requests, no sample, at load
15).  Spinning on CPU time stretches the request's wall time instead, which
is what the sampler's wall-clock ticks see.  At import (in uWSGI's master, which loads
the app before forking) warm_up() runs for 150 ms of CPU time and 10
sampler ticks, so the master's own profile is not empty either.  Each request a process serves adds a byte
to served.<pid> in SERVED_DIR: the test then knows which workers served
how many requests."""
import os
import sys
import time

# The integration programs' sampled.py: the preloaded library's tick count.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration",
                                "programs"))
import sampled  # noqa: E402

SERVED_DIR = os.environ.get("SERVED_DIR", "")


def warm_up():
    """150 ms of CPU time, and on until the sampler has woken 10 times (at
    most sampled.GIVE_UP): a wall-clock 150 ms once left the master
    re-executed by a HUP without a sample at load ~12 (and so without a
    profile)."""
    until = sampled.Until(0, 10)
    end = time.thread_time() + 0.15
    n = 0
    while True:
        while time.thread_time() < end:  # warm-up
            n += 1
        if not until.more():
            return n
        end = time.thread_time() + 0.01


def handle_request(environ):
    end = time.thread_time() + 0.006
    n = 0
    while time.thread_time() < end:  # handler-loop
        n += 1
    return n


def application(environ, start_response):
    if SERVED_DIR:
        with open(os.path.join(SERVED_DIR, "served.%d" % os.getpid()), "a") as f:
            f.write("x")
    handle_request(environ)
    body = b"ok\n"
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]


warm_up()
