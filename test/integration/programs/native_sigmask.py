"""A thread that blocks SIGURG spins in Python while the main thread spins
too, both until the sampler has looked often enough; for the native-stack
test that such a thread is never sent our signal.  The masked thread then
prints what the program itself would see: the signals pending for it, and
whether a zero-timeout sigtimedwait takes a SIGURG."""
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402

SECONDS = 0.5
TICKS = 200
seen = {}


def masked_spin():
    x = 0
    until = sampled.Until(SECONDS, TICKS)
    while until.more():
        x += 1  # @masked-spin
    return x


def masked():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGURG})
    masked_spin()
    seen["pending"] = sorted(s.name for s in signal.sigpending())
    got = signal.sigtimedwait({signal.SIGURG}, 0)
    seen["received"] = None if got is None else signal.Signals(got.si_signo).name


def main_spin():
    x = 0
    until = sampled.Until(SECONDS, TICKS)
    while until.more():
        x += 1  # @main-spin
    return x


t = threading.Thread(target=masked, name="masked")
t.start()
main_spin()
t.join()
print("pending %s received %s" % (seen["pending"], seen["received"]))
