"""Programs the benchmark suite (test/bench/run.py) times and profiles.

    workload.py cpu ITERATIONS [OUT_JSON]
        CPU-bound, single-threaded pure Python (arithmetic, a dict, small
        function calls) about 12 frames deep: the program of the slowdown
        figures.  Profiling is switched on from the environment.  With
        OUT_JSON, the work's own wall and CPU times go there (see cpu()).

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

    workload.py truth SECONDS OUT_JSON [DEEP]
        Ground truth for the peers comparison (test/bench/peers.py): the
        main thread repeats burn 25 ms of CPU (phase_burn), sleep 15 ms
        (phase_sleep), wait 10 ms in select() (phase_select) inside
        truth_loop for SECONDS, timing each phase's wall (monotonic) and CPU
        (thread_time); a second thread, DEEP (default 800) frames of deep_rec
        deep, runs Python 2 ms of every 5 for the whole time.  OUT_JSON gets the
        phases' wall and CPU, the loop's, and the process's peak RSS, so a
        profile's shares can be checked against what really happened.

The idle and busy modes need libpysample preloaded and PYSAMPLE_STATS set;
the sampler writes its statistics there when pysample_stop() is called.
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


def cpu(iterations, out=None):
    if out is None:
        at_depth(12, lambda: work(iterations))
        return
    # The work alone, without start-up or exit, for the peers comparison:
    # its wall, the process's CPU (in-process samplers included) and, when
    # PYSAMPLE_BENCH_PARENT_CPU=1, the CPU its parent (an out-of-process
    # profiler that started it) used meanwhile.
    import json
    import os
    parent = os.getppid() if os.environ.get("PYSAMPLE_BENCH_PARENT_CPU") == "1" else 0
    w0, c0, p0 = time.monotonic(), time.process_time(), _tree_ns(parent)
    at_depth(12, lambda: work(iterations))
    w1, c1, p1 = time.monotonic(), time.process_time(), _tree_ns(parent)
    with open(out, "w") as f:
        json.dump({"wall": w1 - w0, "cpu": c1 - c0, "parent_cpu": (p1 - p0) / 1e9}, f)


def _tree_ns(pid):
    """Run time of every thread of pid, ns (/proc/PID/task/*/schedstat)."""
    import os
    if not pid:
        return 0
    total = 0
    base = "/proc/%d/task" % pid
    for tid in os.listdir(base):
        try:
            with open("%s/%s/schedstat" % (base, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


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


def phase_burn(seconds):
    # CPU seconds, not wall: on a loaded machine the phase still uses its
    # share of the thread's CPU.
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        work(200)


def phase_sleep(seconds):
    time.sleep(seconds)


def phase_select(fd, seconds):
    import select
    select.select([fd], [], [], seconds)


PHASES = (("burn", 0.025), ("sleep", 0.015), ("select", 0.010))


def truth_loop(seconds, fd, wall, cpu):
    end = time.monotonic() + seconds
    calls = {"burn": phase_burn, "sleep": phase_sleep,
             "select": lambda s: phase_select(fd, s)}
    while time.monotonic() < end:
        for name, length in PHASES:
            w0, c0 = time.monotonic(), time.thread_time()
            calls[name](length)
            wall[name] += time.monotonic() - w0
            cpu[name] += time.thread_time() - c0


def deep_leaf(done):
    # Running 2 ms of every 5: its top frames change under a sampler, and
    # the main thread still gets the GIL for most of its burn.
    while not done.is_set():
        end = time.monotonic() + 0.002
        while time.monotonic() < end:
            work(100)
        time.sleep(0.003)


def deep_rec(n, done):
    if n <= 1:
        return deep_leaf(done)
    return deep_rec(n - 1, done)


def truth(seconds, out, deep):
    import json
    import os
    sys.setrecursionlimit(deep * 2 + 200)
    threading.stack_size(64 << 20)
    done = threading.Event()
    t = threading.Thread(target=deep_rec, args=(deep, done), name="deep")
    t.start()
    r, w = os.pipe()
    wall = {n: 0.0 for n, _ in PHASES}
    cpu = dict(wall)
    w0, c0 = time.monotonic(), time.thread_time()
    at_depth(12, lambda: truth_loop(seconds, r, wall, cpu))
    loop_wall, loop_cpu = time.monotonic() - w0, time.thread_time() - c0
    done.set()
    t.join()
    # VmHWM, not getrusage's ru_maxrss: that one survives exec and holds
    # the peak of the forked parent that started us.
    with open("/proc/self/status") as f:
        hwm = next((int(l.split()[1]) for l in f if l.startswith("VmHWM:")), 0)
    with open(out, "w") as f:
        json.dump({"wall": wall, "cpu": cpu, "loop_wall": loop_wall, "loop_cpu": loop_cpu, "deep": deep,
                   "maxrss_kib": hwm}, f)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "cpu":
        cpu(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
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
    elif mode == "truth":
        truth(float(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 800)
    else:
        sys.exit(__doc__)
