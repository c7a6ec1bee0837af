"""The WSGI app of test/servers/run.py, served by uWSGI and gunicorn.

handle_request() spins ~2 ms per request, so every worker that served
requests has it in its profile.  At import (in uWSGI's master, which loads
the app before forking) warm_up() runs for ~150 ms, so the master's own
profile is not empty either.  The first request a process serves leaves
served.<pid> in SERVED_DIR: the test then knows which workers must show
handle_request."""
import os
import time

SERVED_DIR = os.environ.get("SERVED_DIR", "")
_served = False


def warm_up():
    end = time.perf_counter() + 0.15
    n = 0
    while time.perf_counter() < end:  # warm-up
        n += 1
    return n


def handle_request(environ):
    end = time.perf_counter() + 0.002
    n = 0
    while time.perf_counter() < end:  # handler-loop
        n += 1
    return n


def application(environ, start_response):
    global _served
    if not _served and SERVED_DIR:
        _served = True
        open(os.path.join(SERVED_DIR, "served.%d" % os.getpid()), "w").close()
    handle_request(environ)
    body = b"ok\n"
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]


warm_up()
