"""The program owns SIGSEGV/SIGBUS handling while it is being sampled.

    stress_handlers.py SECONDS faulthandler   faulthandler.enable() first
    stress_handlers.py SECONDS ctypes         its own C-level handlers, SIGSEGV
                                              through sigaction() and SIGBUS
                                              through signal(), via ctypes
    stress_handlers.py SECONDS recover|onstack|resethand LIBFAULTPROBE
                                              a C library (faultprobe.c) with
                                              a SIGSEGV handler of its own that
                                              recovers from its own faults,
                                              over and over, while sampled;
                                              on its alternate stack (onstack),
                                              re-armed after each SA_RESETHAND
    stress_handlers.py SECONDS raw            SIGBUS set to SIG_IGN by a raw
                                              rt_sigaction system call, which
                                              no interposer sees

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
elif how in ("recover", "onstack", "resethand"):
    probe = ctypes.CDLL(sys.argv[3])
    for f in ("fp_probe", "fp_calls", "fp_on_alt", "fp_off_alt", "fp_masked"):
        getattr(probe, f).restype = ctypes.c_long
    if how == "onstack":
        assert probe.fp_altstack() == 0
    assert probe.fp_install(how == "onstack", how == "resethand") == 0
elif how == "raw":
    import platform
    import time

    import sampled

    # Our handlers go in on the sampler thread, before its first tick.  A
    # raw install that comes first is simply what we find and keep as the
    # program's own (SIGBUS stays ignored for it, the direct path stays
    # on): under load the sampler thread can start that late.  The case
    # to test is the one that comes after, so wait for the first tick.
    # (The workers below start after the install, and each runs until the
    # sampler has woken 20 times: stress_common.deadline.)
    sampled.repeat(lambda: time.sleep(0.001), 0, 1)

    class KernelSigaction(ctypes.Structure):
        _fields_ = [("handler", ctypes.c_void_p), ("flags", ctypes.c_ulong),
                    ("restorer", ctypes.c_void_p), ("mask", ctypes.c_uint64)]

    libc = ctypes.CDLL(None, use_errno=True)
    nr = {"x86_64": 13, "aarch64": 134}[platform.machine()]
    k = KernelSigaction(1, 0, None, 0)  # SIG_IGN
    assert libc.syscall(nr, int(signal.SIGBUS), ctypes.byref(k), None, 8) == 0
else:
    raise SystemExit("usage")


def worker(n):
    more = deadline(seconds)
    k = 0
    while more():
        m = (k * 37) % n + 1
        assert dive(m) == expected_dive(m)
        k += 1


def prober():
    """The C library's own faults, recovered by its own handler, while the
    sampler reads: every one must reach it, on the stack it asked for."""
    more = deadline(seconds)
    rounds = 0
    while more() or rounds == 0:
        if how == "resethand":
            # SA_RESETHAND: the handler is gone after one fault, as the
            # kernel would have it; the library re-arms it.
            assert probe.fp_probe(1) == 1
            assert probe.fp_is_default() == 1, "SA_RESETHAND did not reset"
            assert probe.fp_install(0, 1) == 0
            rounds += 1
        else:
            assert probe.fp_probe(50) == 50
            rounds += 50
        assert dive(20) == expected_dive(20)
    assert probe.fp_calls() == rounds, (probe.fp_calls(), rounds)
    assert probe.fp_masked() == rounds  # SIGSEGV blocked inside, no SA_NODEFER
    if how == "onstack":
        assert (probe.fp_on_alt(), probe.fp_off_alt()) == (rounds, 0)
    else:
        assert (probe.fp_on_alt(), probe.fp_off_alt()) == (0, rounds)


threads = [threading.Thread(target=worker, args=(n,)) for n in (3000, 700, 150)]
for t in threads:
    t.start()
if how in ("recover", "onstack", "resethand"):
    prober()  # the alternate stack is the main thread's
else:
    worker(2000)
for t in threads:
    t.join()
print("handlers ok")
