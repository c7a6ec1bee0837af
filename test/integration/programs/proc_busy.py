"""A busy process waiting to be signalled.

    proc_busy.py [handler|restored]

Prints what signal.getsignal() says for SIGTERM, SIGHUP and SIGINT, then
spins in spin_until_killed, which prints "ready" once sampled.  "handler":
installs its own SIGTERM handler first, which prints "handled" and exits
with status 7.
"restored": installs a SIGTERM handler and puts the old action back (so
the default applies again).
"""
import signal
import sys

from proc_common import spin


def views():
    def name(h):
        return getattr(h, "__name__", None) or str(h)
    return " ".join(name(signal.getsignal(s)) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT))


def on_term(sig, frame):
    print("handled", flush=True)
    sys.exit(7)


def spin_until_killed():
    # "ready" (the test's cue to send the signal) once the sampler has seen
    # this function, however loaded the machine.
    spin(0.05, ticks=10)
    print("ready", flush=True)
    while True:
        spin(0.05)


mode = sys.argv[1] if len(sys.argv) > 1 else ""
print(views(), flush=True)
if mode == "handler":
    signal.signal(signal.SIGTERM, on_term)
elif mode == "restored":
    old = signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGTERM, old)
print(views(), flush=True)
spin_until_killed()
