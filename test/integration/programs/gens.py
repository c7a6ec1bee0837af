"""A generator and a coroutine chain, each busy inside for DURATION and
until the sampler has woken TICKS times (sampled.py), in steps of STEP."""
import asyncio
import time

import sampled

DURATION = 0.6
TICKS = 60
STEP = DURATION / 30


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def produce(until):
    i = 0
    while until.more():
        spin(STEP)  # @gen-spin
        yield i
        i += 1


def consume():
    return sum(produce(sampled.Until(DURATION, TICKS)))  # @consume


async def coro_leaf(until):
    while until.more():
        spin(STEP)  # @coro-spin
        await asyncio.sleep(0)


async def coro_main():
    await coro_leaf(sampled.Until(DURATION, TICKS))  # @coro-await


consume()
asyncio.run(coro_main())
