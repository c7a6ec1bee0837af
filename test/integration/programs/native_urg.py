"""The program's own SIGURG handlers under PYSAMPLE_NATIVE (whose signal
for running threads is SIGURG): a handler installed with sigaction sees
what the kernel would have shown it, and one installed with a raw
rt_sigaction (as Go's runtime does) is not sent our signal.
Arguments: the native test library.  Prints one line per probe; a run
without the library must print the same."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402

lib = ctypes.CDLL(sys.argv[1])
SA_NODEFER, SA_RESETHAND = 0x40000000, 0x80000000


def spin(seconds, ticks):
    x = 0
    until = sampled.Until(seconds, ticks)
    while until.more():
        x += 1
    return x


# The sampler has started (and installed its handler) and signals this
# running thread.
spin(0.2, 20)
for name, flags in (("plain", 0), ("nodefer", SA_NODEFER), ("resethand", SA_RESETHAND),
                    ("both", SA_NODEFER | SA_RESETHAND)):
    out = (ctypes.c_int * 5)()
    rc = lib.c_urg_probe(ctypes.c_int(flags - 2**32 if flags >= 2**31 else flags), out)
    print(name, rc, "urg_blocked %d usr1_blocked %d usr2_blocked %d calls %d reset %d"
          % tuple(out))
rc = lib.c_urg_raw_install()
spin(0.3, 60)
# One request in flight may reach the raw handler; more means we kept
# signalling threads whose SIGURG is no longer ours.
print("raw", rc, "signalled", lib.c_urg_raw_calls() > 1, "seen", lib.c_urg_raw_seen())
