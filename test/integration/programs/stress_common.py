"""Shared by the stress programs: a deadline loop and a recursion whose
frames are large enough that, on 3.11+, it crosses data-stack chunk
boundaries (16 KiB each) every few dozen levels, so the chunks are mapped
and unmapped again and again while the sampler reads them."""
import sys

import sampled

sys.setrecursionlimit(20000)


def deadline(seconds, ticks=20):
    """A loop condition: true for seconds and on until the sampler has woken
    `ticks` times since this call (sampled.Until).  A fixed wall time
    alone once left a part unsampled on a loaded machine (stress_gens.py
    and 3.15t native at load ~12: "no samples"); idle, 20 ticks at the
    default 100 Hz take 0.2 s, less than any part here."""
    return sampled.Until(seconds, ticks).more


def bottom(n):
    s = 0
    for i in range(n):
        s += i
    return s


def dive(n, a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8):
    # Many locals: a bigger frame, so fewer fit in a chunk.
    i1 = i2 = i3 = i4 = i5 = i6 = i7 = i8 = n
    j1 = j2 = j3 = j4 = j5 = j6 = j7 = j8 = a
    if n <= 0:
        return bottom(20) + i1 - i8 + j1 - j8
    return dive(n - 1, b, c, d, e, f, g, h, a) + 1  # @dive-call


def expected_dive(n):
    return bottom(20) + n
