"""asyncio programs with known task structure (test_async.py).

    async_tasks.py SCENARIO

Every scenario runs until the sampler has woken often enough
(sampled.Until), prints a JSON line of what it measured, and exits 0.
"""
import sys

if sys.argv[1:] == ["pure_python"]:
    sys.modules["_asyncio"] = None  # asyncio falls back to its Python tasks

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402


def burn(sec, stats=None, key=None):
    """Busy for sec; with stats, its long stalls are added to stats[key]
    (sampled.spin): test_async judges the shares within what they can
    shift."""
    sampled.spin(sec, stats, key)


# --- share: one task computes in steps, one sleeps between short bursts ---

async def computer(until, stats):
    t0 = time.perf_counter()
    while until.more():
        t = time.perf_counter()
        burn(0.02, stats, "computer_stalled")  # @computer-burn
        stats["computer_busy"] += time.perf_counter() - t
        await asyncio.sleep(0)
    stats["computer_life"] = time.perf_counter() - t0


async def sleeper(until, stats):
    t0 = time.perf_counter()
    while not until.done:
        t = time.perf_counter()
        burn(0.1, stats, "sleeper_stalled")  # the computer waits meanwhile: ~25 % of its life
        stats["sleeper_busy"] += time.perf_counter() - t
        t = time.perf_counter()
        await asyncio.sleep(0.3)  # @sleeper-sleep
        stats["sleeper_sleep"] += time.perf_counter() - t
    stats["sleeper_life"] = time.perf_counter() - t0


async def share():
    stats = {"computer_busy": 0.0, "sleeper_busy": 0.0, "sleeper_sleep": 0.0,
             "computer_stalled": 0.0, "sleeper_stalled": 0.0}
    # 400 ticks: each task gets ~400 samples, so a share is known to about
    # +-2.5 points (one standard deviation), well inside the test's +-8.
    until = sampled.Until(1.5, 400)
    a = asyncio.create_task(computer(until, stats), name="computer")
    b = asyncio.create_task(sleeper(until, stats), name="sleeper")
    await asyncio.gather(a, b)
    return stats


# --- gather of three named tasks ---

async def worker(until):
    while until.more():
        await asyncio.sleep(0.01)  # @worker-sleep


async def gather3():
    until = sampled.Until(0.5, 150)
    workers = [asyncio.create_task(worker(until), name="w%d" % i) for i in range(3)]
    await asyncio.gather(*workers)  # @gather-await
    return {}


# --- outer -> await middle -> await inner task ---

async def inner(until):
    while until.more():
        await asyncio.sleep(0.01)  # @inner-sleep


async def middle(until):
    await asyncio.create_task(inner(until), name="innertask")  # @middle-await


async def outer(until):
    await middle(until)  # @outer-await


async def chain():
    until = sampled.Until(0.5, 150)
    await asyncio.create_task(outer(until), name="outertask")
    return {}


# --- await asyncio.shield(task), await asyncio.wait_for(task, timeout) ---
# Before 3.14 (shield) and 3.12 (wait_for) the awaiting task waits on a
# private future only the inner task's done-callbacks know.

async def shielded(until):
    while until.more():
        await asyncio.sleep(0.01)  # @shielded-sleep


async def shield_outer(until):
    inner = asyncio.create_task(shielded(until), name="shieldinner")
    await asyncio.shield(inner)  # @shield-await


async def shield_scenario():
    until = sampled.Until(0.5, 150)
    await asyncio.create_task(shield_outer(until), name="shieldouter")
    return {}


async def wf_inner(until):
    while until.more():
        await asyncio.sleep(0.01)  # @wf-inner-sleep


async def wf_outer(until):
    inner = asyncio.create_task(wf_inner(until), name="wfinner")
    await asyncio.wait_for(inner, 600)  # @wf-await


async def wait_for_scenario():
    until = sampled.Until(0.5, 150)
    await asyncio.create_task(wf_outer(until), name="wfouter")
    return {}


# --- TaskGroup (3.11+) ---

async def tg_child(until):
    while until.more():
        await asyncio.sleep(0.01)  # @tg-child-sleep


async def taskgroup():
    until = sampled.Until(0.5, 150)
    async with asyncio.TaskGroup() as tg:  # @tg-with
        for i in range(2):
            tg.create_task(tg_child(until), name="child%d" % i)
    return {}


# --- a second loop in a second thread ---

async def second_loop_main(until):
    while until.more():
        await asyncio.sleep(0.01)  # @second-sleep


def second_thread(until, out):
    out["tid"] = threading.get_native_id()
    asyncio.run(second_loop_main(until))


async def first_loop_main(until):
    while until.more():
        await asyncio.sleep(0.01)  # @first-sleep


def two_loops():
    # 150 ticks for 30 asserted samples per thread: the ticks are counted
    # from here, and on a loaded machine the second thread's loop can
    # start many ticks late (a run at load 15 saw 28 of 60).
    until = sampled.Until(0.5, 150)
    out = {}
    t = threading.Thread(target=second_thread, args=(until, out), name="loop2")
    t.start()
    asyncio.run(first_loop_main(until))
    t.join()
    return {"second_tid": out["tid"], "main_tid": threading.get_native_id()}


# --- async generator and async with ---

async def agen(until):
    while until.more():
        await asyncio.sleep(0.01)  # @agen-sleep
        yield 1


class Resource:
    async def __aenter__(self):
        # 0.3 s and 40 sampler ticks, like the async for before it: a fixed
        # 0.3 s sleep got 19 samples at load ~25, the test wants 20.
        until = sampled.Until(0.3, 40)
        while until.more():
            await asyncio.sleep(0.01)  # @aenter-sleep
        return self

    async def __aexit__(self, *exc):
        return False


async def consume(until):
    async for _ in agen(until):  # @consume-for
        pass
    async with Resource():  # @consume-with
        pass


async def agen_with():
    until = sampled.Until(0.4, 40)
    await asyncio.create_task(consume(until), name="consumer")
    return {}


# --- stress: tasks created and finished without end ---

async def tiny(i):
    if i % 3 == 0:
        await asyncio.sleep(0)
    return i


async def churn():
    n = int(os.environ.get("ASYNC_CHURN", "10000"))
    done = 0
    while done < n:
        batch = [asyncio.create_task(tiny(i), name="t%d" % i) for i in range(done, done + 500)]
        done += len(await asyncio.gather(*batch))  # @churn-gather
    return {"done": done}


# --- steps: forty tasks in short steps, as a server's handlers run ---

def step_burn():
    sampled.spin(0.00005)


async def stepper(until):
    while until.more():
        step_burn()
        await asyncio.sleep(0)


async def steps():
    until = sampled.Until(0.5, 250)
    await asyncio.gather(*(asyncio.create_task(stepper(until)) for _ in range(40)))
    return {}


SCENARIOS = {"steps": steps, "share": share, "gather3": gather3, "chain": chain, "taskgroup": taskgroup,
             "agen_with": agen_with, "churn": churn, "shield": shield_scenario,
             "wait_for": wait_for_scenario}

if __name__ == "__main__":
    name = sys.argv[1]
    if name == "two_loops":
        result = two_loops()
    elif name == "pure_python":
        result = asyncio.run(gather3())
    else:
        result = asyncio.run(SCENARIOS[name]())
    print(json.dumps(result))
