"""The WSGI app of test/servers/run.py, served by uWSGI and gunicorn.

handle_request() spins ~6 ms per request, so every worker that served a
handful of requests has it in its profile (at 200 Hz, 8 requests are ~10
samples expected: none is a 1-in-10 000 event).  At import (in uWSGI's master, which loads
the app before forking) warm_up() runs for ~150 ms, so the master's own
profile is not empty either.  Each request a process serves adds a byte
to served.<pid> in SERVED_DIR: the test then knows which workers served
how many requests."""
import os
import time

SERVED_DIR = os.environ.get("SERVED_DIR", "")


def warm_up():
    end = time.perf_counter() + 0.15
    n = 0
    while time.perf_counter() < end:  # warm-up
        n += 1
    return n


def handle_request(environ):
    end = time.perf_counter() + 0.006
    n = 0
    while time.perf_counter() < end:  # handler-loop
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
