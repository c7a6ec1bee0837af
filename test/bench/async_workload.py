"""Workload of the benchmark's asyncio item (run.py, item 9).

    async_workload.py TASKS SECONDS

TASKS tasks wait, each three coroutines deep (handler -> service -> the
awaited future), while the main task sleeps SECONDS and the loop waits in
select: what a server with TASKS open connections looks like between
requests.  The sampler's cost per tick is what the benchmark reads.
"""
import asyncio
import sys


async def service(fut):
    return await fut


async def handler(fut):
    return await service(fut)


async def main(n, seconds):
    loop = asyncio.get_running_loop()
    futs = [loop.create_future() for _ in range(n)]
    tasks = [asyncio.create_task(handler(f), name="conn-%d" % i) for i, f in enumerate(futs)]
    await asyncio.sleep(0)          # every task starts and waits
    await asyncio.sleep(seconds)
    for f in futs:
        f.set_result(None)
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), float(sys.argv[2])))
