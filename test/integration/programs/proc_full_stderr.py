"""The program's stderr is a pipe nobody reads, and full; then the library
has something to say from its sampler thread (PYSAMPLE_ASYNC with asyncio
running without its C accelerator).  Sampling must go on.

    proc_full_stderr.py

Fills stderr (non-blocking writes until the pipe refuses more, then the
file status flags exactly as they were), runs asyncio_work in an event
loop until the sampler has ticked 400 more times or 30 s have passed, and
prints {"ticks": ticks meanwhile, "flags_kept": stderr's flags unchanged}
and "done".
(The sampler looks for asyncio's tasks 10, 20, 40 ... ms apart once the
modules stop changing: it speaks within about 1.3 s of the import, 260
ticks at the process suite's 200 Hz.)
"""
import fcntl
import json
import os
import sys
import time

import sampled


def fill_stderr():
    flags = fcntl.fcntl(2, fcntl.F_GETFL)
    fcntl.fcntl(2, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        while True:
            os.write(2, b"x" * 4096)
    except BlockingIOError:
        pass
    finally:
        fcntl.fcntl(2, fcntl.F_SETFL, flags)
    return flags


def ticks():
    st = sampled.status()
    return st.ticks if st is not None else 0


async def asyncio_work(want):
    deadline = time.monotonic() + 30
    start = ticks()
    while ticks() - start < want and time.monotonic() < deadline:
        t = time.perf_counter() + 0.01
        while time.perf_counter() < t:
            pass
        await asyncio.sleep(0)
    return ticks() - start


def main():
    flags = fill_stderr()
    # Only now: the sampler speaks once it sees asyncio's tasks module.
    sys.modules["_asyncio"] = None   # asyncio's pure-Python tasks
    global asyncio
    import asyncio
    got = asyncio.run(asyncio_work(400))
    print(json.dumps({"ticks": got, "flags_kept": fcntl.fcntl(2, fcntl.F_GETFL) == flags}),
          flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
