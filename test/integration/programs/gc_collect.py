"""[gc] frames: the thread `collector` keeps a large heap alive (so that
a full collection takes milliseconds) and, over and over, makes cyclic
garbage and calls gc.collect() from `collector` itself; the thread
`spinner` spins in a loop that allocates nothing the collector tracks, so
it never starts a collection of its own.  They run for DURATION and until
the sampler has woken TICKS times (sampled.py).  Prints the collections
the collector made."""
import gc
import sys
import threading

import sampled

DURATION = 1.0
TICKS = 150
STARTED = []
COLLECTIONS = []


class Node:
    pass


def make_cycles(n):
    for _ in range(n):
        a, b = Node(), Node()
        a.other, b.other = b, a


def collector(stop):
    # Live objects every full collection has to traverse.
    heap = [[i] for i in range(200000)]
    STARTED.append(1)
    n = 0
    while not stop:
        make_cycles(2000)
        gc.collect()  # @collect
        n += 1
    COLLECTIONS.append(n)
    del heap


def spinner(stop):
    STARTED.append(1)
    n = 0
    while not stop:
        n += 1


# No automatic collections: every one is the collector's gc.collect().
# Start-up's garbage goes first: a generator in it would run Python code
# mid-collection, where the GIL can change hands.
gc.disable()
gc.collect()
stop = []
sampled.run_threads([threading.Thread(target=collector, args=(stop,), name="collector"),
                     threading.Thread(target=spinner, args=(stop,), name="spinner")],
                    stop, DURATION, TICKS, started=STARTED)
print("collections %d" % COLLECTIONS[0])
sys.stdout.flush()
