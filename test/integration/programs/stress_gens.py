"""Generators, coroutines and async generators created, suspended and
finalised in bulk (their frames live outside the data stack, and are
freed when the object is)."""
import gc
import sys
import types

from stress_common import deadline


def gen_body(n):
    s = 0
    for i in range(n):
        s += yield i
    return s


@types.coroutine
def suspend():
    yield "tick"


async def coro_body(n):
    total = 0
    for i in range(n):
        await suspend()
        total += i
    return total


async def agen_body(n):
    for i in range(n):
        await suspend()
        yield i


def drive(seconds):
    more = deadline(seconds)
    rounds = 0
    while more():
        gens = [gen_body(5) for _ in range(300)]
        for k, g in enumerate(gens):
            next(g)
            if k % 3 == 0:
                g.send(1)
            if k % 3 == 1:
                g.close()
        coros = [coro_body(4) for _ in range(300)]
        for k, c in enumerate(coros):
            c.send(None)
            if k % 2:
                c.close()
            else:
                try:
                    while True:
                        c.send(None)
                except StopIteration as e:
                    assert e.value == 6
        agens = [agen_body(3) for _ in range(100)]
        for a in agens:
            step = a.__anext__()
            assert step.send(None) == "tick"
            step.close()
        del gens, coros, agens  # the rest are finalised here
        if rounds % 10 == 0:
            gc.collect()
        rounds += 1
    return rounds


drive(float(sys.argv[1]))
print("gens ok")
