"""Known functions at known lines (markers '# @...' are what the test reads)."""
import sys
import time

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


def leaf(deadline):
    x = 0
    while time.perf_counter() < deadline: x += 1  # @leaf-loop
    return x


def caller():
    return leaf(time.perf_counter() + DURATION)  # @call-leaf


if __name__ == "__main__":
    caller()  # @call-caller
    print("done")
