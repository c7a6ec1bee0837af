"""Programs the benchmark suite (test/bench/run.py) times and profiles.

    workload.py cpu ITERATIONS
        CPU-bound, single-threaded pure Python (arithmetic, a dict, small
        function calls) about 12 frames deep: the program of the slowdown
        figures.  Profiling is switched on from the environment.

    workload.py idle DEPTH THREADS SECONDS RATE
        THREADS threads (the main thread among them) each DEPTH Python
        frames deep, blocked; then sampling runs at RATE Hz for SECONDS via
        the C API, so that only steady-state ticks are measured: the
        sampler thread's CPU per sample against depth and thread count.

    workload.py busy DEPTH THREADS SECONDS RATE
        The same, with every thread running Python code (they take turns
        on the GIL): the achieved-rate and lateness figures.

    workload.py sleep DEPTH SECONDS [fh]
        The main thread sleeping DEPTH frames deep for SECONDS, nothing
        else: the idle program (profiled from the environment, or by a peer
        profiler).  With fh, faulthandler.enable() is called 0.1 s in, after
        the library's handler went in, as pytest does in a profiled process
        (-X faulthandler and PYTHONFAULTHANDLER enable it at start-up,
        before or after the library's, depending on timing).

The last two need libpysample preloaded and PYSAMPLE_STATS set; the
sampler writes its statistics there when pysample_stop() is called.
"""
import ctypes
import sys
import threading
import time

# Ten distinct functions in the recursion, so a deep stack touches more
# than one code object, as real ones do.
def _make_levels():
    levels = []
    for k in range(10):
        src = (
            "def level_%d(depth, leaf):\n"
            "    if depth <= 1:\n"
            "        return leaf()\n"
            "    return LEVELS[(%d + 1) %% 10](depth - 1, leaf)\n" % (k, k)
        )
        ns = {}
        exec(compile(src, "<bench-level-%d>" % k, "exec"), ns)
        levels.append(ns["level_%d" % k])
    for f in levels:
        f.__globals__["LEVELS"] = levels
    return levels


LEVELS = _make_levels()


def at_depth(depth, leaf):
    """Calls leaf() with about depth Python frames on the stack."""
    depth -= len(_frames_here())
    return LEVELS[0](max(depth, 1), leaf)


def _frames_here():
    f, out = sys._getframe(1), []
    while f is not None:
        out.append(f)
        f = f.f_back
    return out


def work(n):
    table = {}
    total = 0
    for i in range(n):
        k = i % 97
        table[k] = table.get(k, 0) + (i * i) % 13
        total += step(i)
    return total + len(table)


def step(i):
    return (i << 1) ^ (i >> 3)


def cpu(iterations):
    at_depth(12, lambda: work(iterations))


def sampled(depth, nthreads, seconds, rate, busy):
    lib = ctypes.CDLL(None)
    try:
        start, stop = lib.pysample_start, lib.pysample_stop
    except AttributeError:
        sys.exit("libpysample is not loaded (LD_PRELOAD)")
    sys.setrecursionlimit(max(1000, depth * 2 + 100))
    threading.stack_size(64 << 20 if depth > 500 else 0)
    ready = threading.Barrier(nthreads)
    done = threading.Event()

    def leaf():
        ready.wait()
        if busy:
            while not done.is_set():
                work(2000)
        else:
            done.wait()

    threads = [threading.Thread(target=at_depth, args=(depth, leaf)) for _ in range(nthreads - 1)]
    for t in threads:
        t.start()

    def main_leaf():
        ready.wait()
        time.sleep(0.05)  # let the others reach their wait
        if start(rate) != 0:
            sys.exit("pysample_start failed")
        if busy:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                work(2000)
        else:
            time.sleep(seconds)
        stop()
        done.set()

    at_depth(depth, main_leaf)
    for t in threads:
        t.join()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "cpu":
        cpu(int(sys.argv[2]))
    elif mode in ("idle", "busy"):
        d, n, s, r = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
        sampled(d, n, s, r, mode == "busy")
    elif mode == "sleep":
        d, s = int(sys.argv[2]), float(sys.argv[3])
        sys.setrecursionlimit(max(1000, d * 2 + 100))
        if "fh" in sys.argv[4:]:
            import faulthandler
            time.sleep(0.1)
            faulthandler.enable()
            s -= 0.1
        at_depth(d, lambda: time.sleep(s))
    else:
        sys.exit(__doc__)
