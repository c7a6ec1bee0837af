"""A thread that blocks and unblocks SIGURG, in turns, while it spins in
Python (the main thread only waits for it): 10 rounds of ROUND_S
unblocked, then ROUND_S blocked, each until the sampler has looked a few
times.  The native path remembers that a thread does not block its
signal (lib/platform/linux/sigmask.c); once the thread has blocked it,
that memory must not lead to a signal sent, left pending.

A SIGURG sent just before the block (a sample that read the thread's
mask a moment before it changed: the race docs/native.md leaves, memory
or not) is pending right after it: the thread takes it then and counts it
apart ("raced").  Any SIGURG pending at the end of the blocked turn was
sent after the block.  Each is taken with a zero-timeout sigtimedwait
before the thread unblocks.  Prints "pending N blocked_turns N" (turns
that found a SIGURG sent after the block) and, on stderr, "raced N"."""
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402

ROUNDS = 10
ROUND_S = 0.02
TICKS = 5
seen = {"pending": 0, "turns": 0, "raced": 0}


def spin():
    x = 0
    until = sampled.Until(ROUND_S, TICKS)
    while until.more():
        x += 1
    return x


def toggler():
    for _ in range(ROUNDS):
        spin()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGURG})
        if signal.SIGURG in signal.sigpending():
            seen["raced"] += 1
            signal.sigtimedwait({signal.SIGURG}, 0)
        spin()
        if signal.SIGURG in signal.sigpending():
            seen["pending"] += 1
            signal.sigtimedwait({signal.SIGURG}, 0)
        seen["turns"] += 1
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGURG})


t = threading.Thread(target=toggler, name="toggler")
t.start()
t.join()
print("pending %d blocked_turns %d" % (seen["pending"], seen["turns"]))
print("raced %d" % seen["raced"], file=sys.stderr)
