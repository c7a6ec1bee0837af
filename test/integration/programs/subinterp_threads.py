"""Two sub-interpreters running at the same time on two threads (3.12+:
each with its own GIL), while the main interpreter waits in main_wait.
Used by test_embed.py: every interpreter's threads are sampled, each with
its own label."""
import os
import threading
import time

try:
    import _interpreters as interpreters     # 3.13+
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12

run = getattr(interpreters, "run_string", None) or getattr(interpreters, "exec")
WORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "subinterp_work.py")


def in_subinterpreter(role):
    iid = interpreters.create()
    run(iid, "ROLE = %r\nexec(compile(open(%r).read(), %r, 'exec'))\n" % (role, WORK, WORK))
    interpreters.destroy(iid)


def main_wait(threads):
    for t in threads:
        t.join()  # main-wait


threads = [threading.Thread(target=in_subinterpreter, args=(r,), name="si-" + r)
           for r in ("a", "b")]
for t in threads:
    t.start()
main_wait(threads)
print("done")
