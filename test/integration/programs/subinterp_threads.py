"""Two sub-interpreters running at the same time on two threads (3.12+:
each with its own GIL), while the main interpreter waits in main_wait.
Used by test_embed.py: every interpreter's threads are sampled, each with
its own label.

The sub-interpreters spin until the sampler has woken often enough while
both ran (sampled.py), not for a fixed time: on a loaded machine it wakes
late.  They cannot ask the sampler themselves (ctypes may not be
importable in an isolated sub-interpreter), so a watcher thread of the
main interpreter does: each sub-interpreter reports on the STARTED pipe
once it spins, the watcher then waits for SECONDS and TICKS sampler
wake-ups and closes the STOP pipe, which the spinners see as its end.
The main thread stays in main_wait all the while, as the test expects.
"""
import os
import select
import threading
import time

import sampled

try:
    import _interpreters as interpreters     # 3.13+
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12

run = getattr(interpreters, "run_string", None) or getattr(interpreters, "exec")
WORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "subinterp_work.py")
SECONDS = 1.0
TICKS = 80

started_r, started_w = os.pipe()
stop_r, stop_w = os.pipe()
# The spinners look at it between rounds: empty (still open) or its end.
os.set_blocking(stop_r, False)


def in_subinterpreter(role):
    iid = interpreters.create()
    run(iid, "ROLE, STARTED, STOP = %r, %d, %d\nexec(compile(open(%r).read(), %r, 'exec'))\n"
        % (role, started_w, stop_r, WORK, WORK))
    interpreters.destroy(iid)


def watch(threads):
    """Both spinning, then sampled enough: stop them.  If one never
    starts (an error in it), the other is stopped after the same wait."""
    started = 0
    while started < len(threads) and any(t.is_alive() for t in threads):
        if select.select([started_r], [], [], 0.1)[0]:
            started += len(os.read(started_r, len(threads)))
    until = sampled.Until(SECONDS, TICKS)
    while until.more():
        time.sleep(0.01)
    os.close(stop_w)


def main_wait(threads):
    for t in threads:
        t.join()  # main-wait


threads = [threading.Thread(target=in_subinterpreter, args=(r,), name="si-" + r)
           for r in ("a", "b")]
watcher = threading.Thread(target=watch, args=(threads,), name="watch")
for t in threads:
    t.start()
watcher.start()
main_wait(threads)
watcher.join()
print("done")
