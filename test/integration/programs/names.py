"""The shapes of callables users write, each busy for DURATION and until
the sampler has woken TICKS times (sampled.py)."""
import time

import sampled

DURATION = 0.3
TICKS = 40


def spin():
    until = sampled.Until(DURATION, TICKS)
    while True:
        while time.perf_counter() < until.deadline:
            pass
        if not until.extend():
            return


class Klass:
    def method(self):
        spin()

    @staticmethod
    def static():
        spin()


def outer():
    def inner():
        spin()
    inner()


def comprehension():
    return [spin() for _ in range(1)]


def generator_expression():
    return list(spin() for _ in range(1))


square = lambda: spin()  # noqa: E731

Klass().method()
Klass.static()
outer()
comprehension()
generator_expression()
square()
