#!/usr/bin/env python3
# demo.py - the program `pysample record` profiles when given no command.
#
# A small, made-up "report job" whose profile has something to look at:
#   ~60% compute_stats   (pure Python number crunching, fed by a generator)
#   ~30% render_report   (a recursive tree walk)
#   ~10% write_log       (json and zlib from the standard library)
# plus a background thread (Uploader) that compresses and sleeps, so that
# wall-clock and CPU profiles differ.  It runs for about 2.5 seconds
# (PYSAMPLE_DEMO_SECONDS changes that) and prints what it did.
#
# SPDX-License-Identifier: MIT

import json
import os
import random
import threading
import time
import zlib


def parse_records(rng, count):
    """A generator: the kind of lazy pipeline stage real programs have."""
    for i in range(count):
        yield {"id": i, "values": [rng.random() for _ in range(24)]}


def variance(values):
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


def compute_stats(rng, count):
    best = 0.0
    for record in parse_records(rng, count):
        best = max(best, variance(record["values"]))
    return best


class Node(object):
    def __init__(self, name, children):
        self.name = name
        self.children = children


def build_tree(rng, depth):
    if depth == 0:
        return Node("leaf%d" % rng.randrange(1000), [])
    return Node("node%d" % depth, [build_tree(rng, depth - 1) for _ in range(3)])


def render_node(node, indent, out):
    """Recursion shows up as a tower of identical frames."""
    out.append("  " * indent + node.name)
    for child in node.children:
        render_node(child, indent + 1, out)


def render_report(rng, depth):
    out = []
    render_node(build_tree(rng, depth), 0, out)
    return len("\n".join(out))


def write_log(rng, lines):
    entries = [json.dumps({"line": i, "value": rng.random(), "tags": ["a", "b", "c"]}) for i in range(lines)]
    return len(zlib.compress("\n".join(entries).encode(), 6))


class Uploader(threading.Thread):
    """Background work: a little CPU, mostly waiting (sleep)."""

    def __init__(self, stop):
        threading.Thread.__init__(self, name="Uploader", daemon=True)
        self.stop = stop
        self.uploaded = 0

    def run(self):
        payload = os.urandom(1 << 16)
        while not self.stop.is_set():
            self.uploaded += len(zlib.compress(payload, 1))
            self.stop.wait(0.05)


def main():
    seconds = float(os.environ.get("PYSAMPLE_DEMO_SECONDS", "2.5"))
    rng = random.Random(42)
    stop = threading.Event()
    uploader = Uploader(stop)
    uploader.start()
    deadline = time.time() + seconds
    rounds = 0
    while time.time() < deadline:
        compute_stats(rng, 570)
        render_report(rng, 6)
        write_log(rng, 110)
        rounds += 1
    stop.set()
    uploader.join()
    print("demo: %d rounds in %.1f s, uploaded %d bytes" % (rounds, seconds, uploader.uploaded))


if __name__ == "__main__":
    main()
