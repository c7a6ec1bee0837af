"""Four threads, each busy in a function of its own; prints tid -> function."""
import threading
import time

DURATION = 1.0


def spin(deadline):
    while time.perf_counter() < deadline:
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
    deadline = [0.0]

    def run(f):
        ids[f.__name__] = threading.get_native_id()
        ready.wait()
        f(deadline[0])

    threads = [threading.Thread(target=run, args=(f,), name="worker-%d" % i)
               for i, f in enumerate(funcs)]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + DURATION
    ready.wait()
    for t in threads:
        t.join()
    for name, tid in sorted(ids.items()):
        print(name, tid)


if __name__ == "__main__":
    main()
