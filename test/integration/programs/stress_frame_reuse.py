"""Threads recursing DEPTH deep and back without pause, so that frame
objects (3.9/3.10) are freed and handed out again within microseconds,
while other threads hash without the GIL and take the CPU from the
sampler in the middle of its walks.

    stress_frame_reuse.py [SECONDS]

Thread i runs worker -> rec<i> -> ... -> rec<i>, DEPTH rec<i> frames,
nothing else.  On 3.9/3.10 a returning frame goes to its code's zombie
frame or the interpreter's free list, and the next call takes it back one
level deeper: the frame that was second innermost becomes the innermost.
A walk that read the innermost frame, then followed its f_back after the
thread had returned and called again, would find that caller at its new
depth and stitch two moments into one stack (DEPTH + 1 rec frames).
Prints "frame reuse ok", then the sampler's "samples N errors N" on stderr.
"""
import hashlib
import sys
import threading

import sampled
# Thread i runs only rec<i>: another thread's on its stack is a misread too.
from busy_threads import rec0, rec1, rec2, rec3

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
TICKS = 500
DEPTH = 12
BURNERS = 2


def worker(rec, stop):
    while not stop:
        rec(DEPTH - 1)


def burn(stop):
    # Hashing a large buffer runs without the GIL: these threads take CPU
    # from the sampler in the middle of its walks, as a loaded machine
    # does, so that the workers return and call again between two reads.
    data = b"x" * (1 << 22)
    while not stop:
        hashlib.sha256(data).digest()


def main():
    stop = []
    threads = [threading.Thread(target=worker, args=(f, stop))
               for f in (rec0, rec1, rec2, rec3)]
    threads += [threading.Thread(target=burn, args=(stop,)) for _ in range(BURNERS)]
    sampled.run_threads(threads, stop, DURATION, TICKS)
    print("frame reuse ok")
    sampled.print_counters(sys.stderr)


if __name__ == "__main__":
    main()
