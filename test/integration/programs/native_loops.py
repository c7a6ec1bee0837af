"""The blocking loops of native_lib.c, as the native-stack test programs
(native_blocked.py, native_eintr.py) call them and report them.

Each c_loop_<name>(seconds, arg, &eintr) makes one blocking call over and
over for `seconds` and counts the calls that failed with EINTR instead of
retrying them: the tests assert that the sampler's signal never shows."""
import ctypes

LOOPS = ["select", "poll", "epoll", "nanosleep", "sem", "futex"]


def call_loop(lib, name, seconds, arg):
    """Runs c_loop_<name> of lib; arg is each call's wait in ms, or for
    "read" the descriptor it reads.  Returns (calls, eintr)."""
    fn = getattr(lib, "c_loop_" + name)
    fn.restype = ctypes.c_long
    fn.argtypes = [ctypes.c_double, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    eintr = ctypes.c_int(0)
    calls = fn(seconds, arg, ctypes.byref(eintr))
    return calls, eintr.value


def report(results):
    """Prints "<name> <calls> <eintr>" per loop, the pipe reader last."""
    for name in LOOPS + ["read"]:
        calls, eintr = results[name]
        print(name, calls, eintr)
