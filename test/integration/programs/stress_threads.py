"""Thousands of short-lived threads, started and joined in batches."""
import sys
import threading

from stress_common import deadline


def short_lived_work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def spawn_loop(seconds, minimum):
    more = deadline(seconds)
    results = []
    started = 0
    while more() or started < minimum:
        batch = [threading.Thread(target=lambda: results.append(short_lived_work(300)))
                 for _ in range(50)]
        for t in batch:
            t.start()
        for t in batch:
            t.join()
        started += len(batch)
    return started, results


started, results = spawn_loop(float(sys.argv[1]), int(sys.argv[2]))
assert len(results) == started and set(results) == {short_lived_work(300)}
print("threads ok")
print("started %d" % started, file=sys.stderr)
