"""A generator and a coroutine chain, each busy inside."""
import asyncio
import time

DURATION = 0.6


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def produce(n):
    for i in range(n):
        spin(DURATION / n)  # @gen-spin
        yield i


def consume():
    return sum(produce(30))  # @consume


async def coro_leaf():
    for _ in range(30):
        spin(DURATION / 30)  # @coro-spin
        await asyncio.sleep(0)


async def coro_main():
    await coro_leaf()  # @coro-await


consume()
asyncio.run(coro_main())
