"""Known functions at known lines (markers '# @...' are what the test reads).

    lines.py [SECONDS [TICKS]]

leaf runs SECONDS (default 1) and until the sampler has woken TICKS times
(default 20) during it (sampled.py)."""
import sys
import time

import sampled

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
TICKS = int(sys.argv[2]) if len(sys.argv) > 2 else 20


def leaf(until):
    x = 0
    while True:
        while time.perf_counter() < until.deadline: x += 1  # @leaf-loop
        if not until.extend():
            return x


def caller():
    return leaf(sampled.Until(DURATION, TICKS))  # @call-leaf


if __name__ == "__main__":
    caller()  # @call-caller
    print("done")
