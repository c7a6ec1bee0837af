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
that found a SIGURG sent after the block) and, on stderr, "raced N".

With the argument "sighold" the thread blocks and unblocks SIGURG with
the C library's System V sighold()/sigrelse() (through ctypes, as a C
extension would call them), which change the mask through the C
library's own sigprocmask, not the one the library stands in for; with
"raw", through the rt_sigprocmask system call, which nothing sees (the
check that the test can fail: there SIGURGs are sent to the blocked
thread within the 10 ms the library remembers a mask)."""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402

ROUNDS = 10
ROUND_S = 0.02
TICKS = 5
SETTLE_S = 0.004
seen = {"pending": 0, "turns": 0, "raced": 0}


def spin():
    x = 0
    until = sampled.Until(ROUND_S, TICKS)
    while until.more():
        x += 1
    return x


def settle():
    """SETTLE_S more of spinning without asking the library anything.
    spin() ends by calling pysample_status(), whose critical section
    changes the mask through the library's own pthread_sigmask and so
    makes the sampler read every thread's mask again: a block right after
    it would be seen whatever the stand-ins did, and the test could not
    fail.  After this the sampler has read the mask since that call and
    remembers "not blocked" when the thread blocks."""
    end = time.perf_counter() + SETTLE_S
    while time.perf_counter() < end:
        pass


def mask_functions():
    """(block, unblock) of SIGURG, as argv[1] asks."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    urg = int(signal.SIGURG)

    def call(f, *args):
        if f(*args) != 0:
            raise OSError(ctypes.get_errno(), "masking SIGURG failed")
    if sys.argv[1:] == ["sighold"]:
        return lambda: call(libc.sighold, urg), lambda: call(libc.sigrelse, urg)
    if sys.argv[1:] == ["raw"]:
        bit = ctypes.c_uint64(1 << (urg - 1))
        nr = {"x86_64": 14, "aarch64": 135}[os.uname().machine]
        return (lambda: call(libc.syscall, nr, 0, ctypes.byref(bit), None, 8),
                lambda: call(libc.syscall, nr, 1, ctypes.byref(bit), None, 8))
    return (lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGURG}),
            lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGURG}))


block, unblock = mask_functions()


def toggler():
    for _ in range(ROUNDS):
        spin()
        settle()
        block()
        if signal.SIGURG in signal.sigpending():
            seen["raced"] += 1
            signal.sigtimedwait({signal.SIGURG}, 0)
        spin()
        if signal.SIGURG in signal.sigpending():
            seen["pending"] += 1
            signal.sigtimedwait({signal.SIGURG}, 0)
        seen["turns"] += 1
        unblock()


t = threading.Thread(target=toggler, name="toggler")
t.start()
t.join()
print("pending %d blocked_turns %d" % (seen["pending"], seen["turns"]))
print("raced %d" % seen["raced"], file=sys.stderr)
