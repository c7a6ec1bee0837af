"""asyncio imported late (test_async.py: late_import_found).

The program runs 0.7 s without asyncio -- past the sampler's searches at
10, 30, 70, 150, 310 and 630 ms, so that its back-off alone would next
look at 1.27 s -- then imports asyncio and runs one named task until the
sampler has woken 60 times.  The library must find asyncio when it is
imported (sys.modules grew), not a back-off step later.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402

t0 = time.perf_counter()
while time.perf_counter() - t0 < 0.7:
    time.sleep(0.01)

import asyncio  # noqa: E402


async def late_worker(until):
    while until.more():
        await asyncio.sleep(0.01)  # @late-sleep


async def main():
    until = sampled.Until(0.3, 60)
    await asyncio.create_task(late_worker(until), name="late")


asyncio.run(main())
print("{}")
