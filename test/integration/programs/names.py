"""The shapes of callables users write, each busy for a while."""
import time

DURATION = 0.3


def spin():
    end = time.perf_counter() + DURATION
    while time.perf_counter() < end:
        pass


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
