# waiting.py - wait_for, shared by the tests that wait on other processes
# (test_serve.py here, test/servers/backend.py).
#
# SPDX-License-Identifier: MIT

import time


def wait_for(what, predicate, timeout, interval=0.05):
    """predicate()'s first true value, asked every interval s; an
    AssertionError naming `what` after timeout s."""
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("gave up after %d s waiting for %s" % (timeout, what))
