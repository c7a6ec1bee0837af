"""Lets a test program run a part until the sampler has looked at it often
enough, not for a fixed time.

On a loaded machine the sampler thread gets the CPU late and takes fewer
samples in a second than its rate says; a program that ran for a fixed
time would then leave too few samples for the test's assertions.  So a part
runs at least its stated time and, if by then the sampler has not woken up
`ticks` times since the part began, on until it has (giving up after
GIVE_UP seconds, so that a broken sampler fails the test's assertions
instead of hanging it).  Without the library, or when it does not sample
(profiling off, an unsupported or refused Python), a part runs just its
stated time, as before.

The tick count comes from pysample_status() of the preloaded library (or
of the handle given), read only once the stated time is over, and then
every EXTEND seconds: the program's hot loops stay what they were, and the
samples land in them, not in this module.

    until = sampled.Until(seconds=1.0, ticks=100)
    while True:
        while time.perf_counter() < until.deadline:
            work()
        if not until.extend():
            break

or, where a frame of this module on top of the stack does not matter,
`while until.more(): work()`, or `repeat(work, seconds, ticks)` where one
below the program's frames does not either.

Threads started together and stopped together once the part is over:
`run_threads(threads, stop, seconds, ticks)`.  The sampler's own counts
(samples, errors): `status()`.
"""
import ctypes
import time

GIVE_UP = 60.0
EXTEND = 0.05


class Status(ctypes.Structure):
    # struct pysample_status of include/pysample.h (it may grow at the end).
    _fields_ = [("running", ctypes.c_int), ("python_hexversion", ctypes.c_int),
                ("free_threaded", ctypes.c_int), ("rate_hz", ctypes.c_int),
                ("ticks", ctypes.c_uint64), ("samples", ctypes.c_uint64),
                ("errors", ctypes.c_uint64), ("distinct_stacks", ctypes.c_uint64)]


def _preloaded():
    try:
        lib = ctypes.CDLL(None)
        lib.pysample_status
    except (OSError, AttributeError):
        return None
    return lib


def status(lib=None):
    """pysample_status() of lib (default: the preloaded library), or None
    without one."""
    lib = lib if lib is not None else _preloaded()
    st = Status()
    if lib is None or lib.pysample_status(ctypes.byref(st), ctypes.sizeof(st)) != 0:
        return None
    return st


def print_counters(file):
    """Prints the sampler's "samples N errors N" on file, if it samples."""
    st = status()
    if st is not None:
        print("samples %d errors %d" % (st.samples, st.errors), file=file)


def sampler_ticks(lib):
    """The sampler's wake-ups so far, or None when it does not sample."""
    if lib is None:
        return None
    st = Status()
    if lib.pysample_status(ctypes.byref(st), ctypes.sizeof(st)) != 0 or not st.running:
        return None
    return st.ticks


class Until:
    """A part of the program: seconds at least, and until the sampler has
    woken `ticks` times during it, or, given enough (a test of status()),
    until enough(status) holds.  Threads may share one."""

    def __init__(self, seconds, ticks=0, lib=None, enough=None):
        self.lib = lib if lib is not None else _preloaded()
        now = time.perf_counter()
        self.deadline = now + seconds
        self.give_up = now + GIVE_UP
        self.want = ticks
        self.start = sampler_ticks(self.lib) or 0
        self.enough = enough or (lambda st: st.ticks - self.start >= self.want)
        self.done = False

    def extend(self):
        """Called when the deadline has passed: True (and the deadline
        moved on by EXTEND) while the part should go on."""
        if self.done:
            return False
        now = time.perf_counter()
        if now < self.deadline:
            return True
        st = status(self.lib)
        if st is None or not st.running or self.enough(st) or now >= self.give_up:
            self.done = True
            return False
        self.deadline = now + EXTEND
        return True

    def more(self):
        return time.perf_counter() < self.deadline or self.extend()


def repeat(work, seconds, ticks):
    """Calls work() over and over for seconds and until the sampler has
    woken ticks times."""
    until = Until(seconds, ticks)
    while until.more():
        work()


def run_threads(threads, stop, seconds, ticks, ready=None, started=None):
    """Starts threads, waits at the barrier ready (if any: the threads wait
    there too, asleep, so that those started first do not hold up the
    start of the others), lets them run for seconds and until the sampler
    has woken ticks times, then appends True to stop (the list the threads
    poll) and joins them.

    started (a list): each thread appends to it once it is in its own
    work, and the clock starts only when all have.  The barrier's release
    is not enough: at load ~15 a released free-threaded worker stayed in
    Barrier.wait, waiting for the CPU, through the whole part (its
    function never sampled), while three others spun.  Bounded by
    GIVE_UP, like the part itself."""
    for t in threads:
        t.start()
    if ready is not None:
        ready.wait()
    if started is not None:
        give_up = time.perf_counter() + GIVE_UP
        while len(started) < len(threads) and time.perf_counter() < give_up:
            time.sleep(0.001)
    until = Until(seconds, ticks)
    while until.more():
        time.sleep(0.01)
    stop.append(True)
    for t in threads:
        t.join()


# A gap of more than STALL between two clock reads of a spin is time a
# loaded machine took the program off the CPU (300 ms and more were seen).
# The sampler, in the same process, may or may not have run through it, so
# tests that judge shares of wall time widen their band by such stalls.
STALL = 0.05


def spin(seconds, stalls=None, key=None):
    """Busy for seconds of wall time; with stalls (a dict), each gap of
    more than STALL is added to stalls[key]."""
    t = last = time.perf_counter()
    while last - t < seconds:
        now = time.perf_counter()
        if stalls is not None and now - last > STALL:
            stalls[key] += now - last
        last = now
