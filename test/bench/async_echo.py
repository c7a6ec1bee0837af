#!/usr/bin/env python3
"""An asyncio.start_server echo server under load, profiled with
PYSAMPLE_ASYNC=1 and without the library (docs/performance.md, issue 16).

    async_echo.py --python PY --lib LIBPYSAMPLE [--clients 50] [--seconds 3]
                  [--async 0|1] [--profile OUT]

The server (run under PY, with the library preloaded unless --lib '') handles
each connection in its own task: it reads a line, hashes it a few times
(handle -> digest), and writes it back.  A load generator in this process
keeps CLIENTS connections busy for SECONDS and counts round trips.  Prints
one JSON line: round trips per second, and the sampler's statistics.
"""
import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

SERVER = r'''
import asyncio, hashlib, sys

def digest(data):
    for _ in range(20):
        data = hashlib.sha256(data).digest()
    return data

async def handle(reader, writer):
    while True:
        line = await reader.readline()
        if not line:
            break
        writer.write(digest(line).hex().encode() + b"\n")
        await writer.drain()
    writer.close()

async def main(port):
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()

try:
    asyncio.run(main(int(sys.argv[1])))
except KeyboardInterrupt:
    pass
'''


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def client(port, deadline, counts):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    n = 0
    while time.perf_counter() < deadline:
        writer.write(b"x" * 64 + b"\n")
        await writer.drain()
        await reader.readline()
        n += 1
    counts.append(n)
    writer.close()


async def load(port, clients, seconds):
    counts = []
    deadline = time.perf_counter() + seconds
    await asyncio.gather(*(client(port, deadline, counts) for _ in range(clients)))
    return sum(counts) / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--async", dest="async_", default="1")
    ap.add_argument("--rate", default="100")
    ap.add_argument("--profile")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSAMPLE_")}
    stats = os.path.join(tmp, "stats")
    if args.lib:
        env.update(LD_PRELOAD=args.lib, PYSAMPLE_ASYNC=args.async_, PYSAMPLE_RATE=args.rate,
                   PYSAMPLE_STATS=stats,
                   PYSAMPLE_OUTPUT=args.profile or os.path.join(tmp, "prof.txt"))
    srv = subprocess.Popen([args.python, "-c", SERVER, str(port)], env=env,
                           stdout=subprocess.PIPE, text=True)
    srv.stdout.readline()
    t0 = time.process_time()
    rps = asyncio.run(load(port, args.clients, args.seconds))
    srv.send_signal(2)
    srv.wait(timeout=30)
    out = {"round_trips_per_s": round(rps), "clients": args.clients, "lib": bool(args.lib),
           "async": args.async_, "loadgen_cpu_s": round(time.process_time() - t0, 2)}
    if os.path.exists(stats):
        with open(stats) as f:
            for line in f:
                k, _, v = line.strip().partition(" ")
                if k in ("ticks", "samples", "sampler_cpu_ns", "tick_p50_ns", "tick_p99_ns",
                         "errors", "distinct_stacks", "active_ns"):
                    out[k] = int(v)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
