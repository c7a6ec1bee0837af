"""The WSGI app of test/servers/backend.py (issue #38): each request spins
4 ms of its thread's CPU time in slow_function() and 1 ms in
fast_function(), so a CPU profile of a worker under load has slow_function
on top at about four times fast_function.  CPU time, not wall time: on a
loaded machine the split stays the same."""
import time


# The spin loops are written out in each function, so that each one is the
# leaf of its stacks (its self samples), not a shared helper.
def slow_function():
    end = time.thread_time() + 0.004
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


def fast_function():
    end = time.thread_time() + 0.001
    n = 0
    while time.thread_time() < end:
        n += 1
    return n


def application(environ, start_response):
    slow_function()
    fast_function()
    body = b"ok\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
