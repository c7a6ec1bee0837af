"""Python calling C (native_lib.c through ctypes), for the native-stack
tests.  Argument 1: the library; argument 2: the scenario.

  chain     py_caller -> c_outer -> c_middle -> c_leaf (spins)
  reentry   py_outer -> c_call_back -> py_inner -> c_outer -> ... -> c_leaf

Runs until the sampler has woken often enough (sampled.py): 150 times, or
argument 3 times."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402

lib = ctypes.CDLL(sys.argv[1])
lib.c_outer.argtypes = [ctypes.c_double]
lib.c_outer.restype = ctypes.c_uint64
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
lib.c_call_back.argtypes = [CALLBACK, ctypes.c_int]
lib.c_call_back.restype = ctypes.c_int


def py_caller():
    lib.c_outer(0.1)  # @call-c-outer


def py_inner(n):
    lib.c_outer(0.1)  # @inner-calls-c
    return n


CB = CALLBACK(py_inner)


def py_outer():
    lib.c_call_back(CB, 1)  # @outer-calls-back


def main():
    ticks = int(sys.argv[3]) if len(sys.argv) > 3 else 150
    sampled.repeat(py_caller if sys.argv[2] == "chain" else py_outer, 1.0, ticks)
    print("done")


main()
