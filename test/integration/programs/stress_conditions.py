"""Threads entering and leaving `with cond:` at a high rate, alternating
with a call of another shape, so that the same data-stack slots (3.11+)
hold different functions from one microsecond to the next.

    stress_conditions.py [SECONDS]

Each worker runs worker -> locked -> Condition.__enter__/__exit__ and
worker -> other -> leaf, nothing else: a sampled stack that puts
Condition.__exit__ under other, or leaf under locked, is a frame read
after it was popped (or before it was written) and linked to the frame
that now sits where its caller was.  The program runs SECONDS and until
the sampler has woken TICKS times (sampled.py), then prints the sampler's
"samples N errors N" on stderr (walks dropped as inconsistent count as
errors).
"""
import sys
import threading

import sampled

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
TICKS = 500
THREADS = 4

cond = threading.Condition()


def locked():
    with cond:
        pass


def leaf(a, b, c):
    return a + b + len(c)


def other(n):
    # More locals and a deeper value stack than locked(): a frame of
    # another size, so its callee lands at another address.
    a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = n
    return leaf(a1 + a2 + a3, a4 + a5 + a6, (a7, a8, (n, (n, n))))


def worker(stop):
    i = 0
    while not stop:
        locked()
        other(i)
        i += 1


def main():
    stop = []
    threads = [threading.Thread(target=worker, args=(stop,)) for _ in range(THREADS)]
    sampled.run_threads(threads, stop, DURATION, TICKS)
    print("conditions ok")
    sampled.print_counters(sys.stderr)


if __name__ == "__main__":
    main()
