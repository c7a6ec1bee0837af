"""A thread that blocks SIGURG spins in Python while the main thread spins
too, both until the sampler has looked often enough; for the native-stack
test that such a thread is never sent our signal.  The masked thread then
prints what the program itself would see: the signals pending for it, and
whether a zero-timeout sigtimedwait takes a SIGURG.

The thread blocks SIGURG once it runs, so a tick may read its mask just
before the block and send the signal just after it: the race
docs/native.md leaves, as long as the sampler is descheduled between its
read and its send.  As native_sigmask_toggle.py does, the thread takes
such a SIGURG apart ("raced N" on stderr), but only once the tick that
was under way at the block is over, so that one sent late by a
descheduled sampler counts as raced too, not just one already pending
right after the block.  A tick that begins after the block reads the
mask afresh (the block went through the library's pthread_sigmask, which
makes it forget what it remembered): a SIGURG pending at the end was
sent to a thread the library had seen blocking it, or never looked at."""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402

SECONDS = 0.5
TICKS = 200
seen = {}


def past_race():
    """Sleeps until the sampler has woken twice since now (a thread that is
    not running is not signalled): ticks do not overlap (one sampler
    thread), so the second began after now, and the one under way at the
    block, wherever in a tick the count grows, is over."""
    until = sampled.Until(0, 2)
    while until.more():
        time.sleep(0.001)


def masked_spin():
    x = 0
    until = sampled.Until(SECONDS, TICKS)
    while until.more():
        x += 1  # @masked-spin
    return x


def masked():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGURG})
    past_race()
    seen["raced"] = 0
    if signal.SIGURG in signal.sigpending():
        seen["raced"] = 1
        signal.sigtimedwait({signal.SIGURG}, 0)
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
print("raced %d" % seen["raced"], file=sys.stderr)
