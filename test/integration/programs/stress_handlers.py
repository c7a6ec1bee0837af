"""The program owns SIGSEGV/SIGBUS handling while it is being sampled.

    stress_handlers.py SECONDS faulthandler   faulthandler.enable() first
    stress_handlers.py SECONDS ctypes         its own C-level handlers, SIGSEGV
                                              through sigaction() and SIGBUS
                                              through signal(), via ctypes

Then threads and recursion across data-stack chunks.  If a fault of the
profiler's ever reached the ctypes handler, it says so and exits 3; one
reaching faulthandler would print "Fatal Python error" and kill us."""
import ctypes
import faulthandler
import signal
import sys
import threading

from stress_common import deadline, dive, expected_dive

seconds, how = float(sys.argv[1]), sys.argv[2]

if how == "faulthandler":
    faulthandler.enable()
    assert faulthandler.is_enabled()
elif how == "ctypes":
    libc = ctypes.CDLL(None, use_errno=True)
    HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)

    class Sigaction(ctypes.Structure):
        # glibc's struct sigaction on 64-bit Linux.
        _fields_ = [("sa_handler", HANDLER), ("sa_mask", ctypes.c_ulong * 16),
                    ("sa_flags", ctypes.c_int), ("sa_restorer", ctypes.c_void_p)]

    import os

    def foreign_fault(sig):
        os.write(2, b"the program's own fault handler was called\n")
        os._exit(3)

    handler = HANDLER(foreign_fault)
    sa = Sigaction()
    sa.sa_handler = handler
    assert libc.sigaction(signal.SIGSEGV, ctypes.byref(sa), None) == 0
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, HANDLER]
    libc.signal(signal.SIGBUS, handler)
else:
    raise SystemExit("usage")


def worker(n):
    more = deadline(seconds)
    k = 0
    while more():
        m = (k * 37) % n + 1
        assert dive(m) == expected_dive(m)
        k += 1


threads = [threading.Thread(target=worker, args=(n,)) for n in (3000, 700, 150)]
for t in threads:
    t.start()
worker(2000)
for t in threads:
    t.join()
print("handlers ok")
