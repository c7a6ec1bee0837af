"""Recursion whose depth keeps changing between 1 and 3000, so that on
3.11+ data-stack chunks are allocated and munmap()ed continuously.

    stress_recursion.py SECONDS [MAX_DEPTH [TICKS]]

runs SECONDS at least and, with TICKS, on until the sampler has woken TICKS
times (sampled.py): on the slow read paths under load a fixed time leaves
too few deep samples to judge."""
import random
import sys

import sampled
from stress_common import dive, expected_dive


def recurse_loop(seconds, max_depth, ticks):
    more = sampled.Until(seconds, ticks).more
    rng = random.Random(3)
    dives = 0
    while more():
        # Every depth up to max_depth, shallow ones more often: deep stacks
        # make large profiles, and every depth crosses chunk boundaries.
        n = 1 + int((max_depth - 1) * rng.random() ** 2)
        assert dive(n) == expected_dive(n)
        # Then hover around that depth's chunk boundary a few times.
        for k in range(5):
            m = max(1, n + rng.randint(-40, 40))
            assert dive(m) == expected_dive(m)
        dives += 6
    return dives


recurse_loop(float(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3000,
             int(sys.argv[3]) if len(sys.argv) > 3 else 0)
print("recursion ok")
