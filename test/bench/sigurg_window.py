"""How often native mode's SIGURG reaches a thread that has blocked it
since the sampler read its mask (docs/native.md, "the window"): a
measurement, run by hand, not part of any suite.

    PYSAMPLE_NATIVE=1 PYSAMPLE_RATE=1000 PYSAMPLE_OUTPUT=/tmp/p.txt \\
    PYSAMPLE_STATS=/tmp/s.%p LD_PRELOAD=.../libpysample.so \\
        python3 sigurg_window.py SECONDS [MASKED_SPIN]

A thread toggles its mask in a loop for SECONDS: SIGURG blocked, a spin
of MASKED_SPIN iterations (default 50), a look at sigpending(), SIGURG
unblocked, the same spin.  A SIGURG pending at the look was sent by the
sampler after it read the mask as unblocked, and reached the thread once
it had blocked it: the window.  (It is handled by the library as soon as
the thread unblocks it.)  Prints the looks, the hits, and, from the
PYSAMPLE_STATS file written at exit, the signals sent (native_held).
"""
import signal
import sys
import threading
import time

seconds = float(sys.argv[1])
spin = int(sys.argv[2]) if len(sys.argv) > 2 else 50
result = {}


def toggler():
    looks = hits = 0
    urg = {signal.SIGURG}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(100):
            signal.pthread_sigmask(signal.SIG_BLOCK, urg)
            for _ in range(spin):
                pass
            looks += 1
            if signal.SIGURG in signal.sigpending():
                hits += 1
            signal.pthread_sigmask(signal.SIG_UNBLOCK, urg)
            for _ in range(spin):
                pass
    result.update(looks=looks, hits=hits)


t = threading.Thread(target=toggler)
t.start()
t.join()
print("looks %d hits %d (%.3f%% of looks)" % (result["looks"], result["hits"],
                                             100.0 * result["hits"] / max(1, result["looks"])))
