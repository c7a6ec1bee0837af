"""Four threads, each busy in a function of its own; prints tid -> function.

They spin for DURATION and until the sampler has woken TICKS times
(sampled.py), which the main thread watches: the workers' stacks hold
nothing but their own functions."""
import threading

import sampled

DURATION = 1.0
TICKS = 80
# Each worker appends here once it is in its function: the clock starts
# when all four are (sampled.run_threads).  list.append is a C call, so no
# frame of it shows above spin.
STARTED = []


def spin(stop):
    STARTED.append(1)
    while not stop:
        pass


def func0(d):
    spin(d)


def func1(d):
    spin(d)


def func2(d):
    spin(d)


def func3(d):
    spin(d)


def main():
    funcs = [func0, func1, func2, func3]
    ids = {}
    # The clock starts once every thread runs: without a GIL on 2 cores,
    # the busy threads started first can keep a later one from starting
    # for most of DURATION.
    ready = threading.Barrier(len(funcs) + 1)
    stop = []

    def run(f):
        ids[f.__name__] = threading.get_native_id()
        ready.wait()
        f(stop)

    threads = [threading.Thread(target=run, args=(f,), name="worker-%d" % i)
               for i, f in enumerate(funcs)]
    sampled.run_threads(threads, stop, DURATION, TICKS, ready, STARTED)
    for name, tid in sorted(ids.items()):
        print(name, tid)


if __name__ == "__main__":
    main()
