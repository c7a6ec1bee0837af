"""Python calling a C extension module (native_ext.c, built by the test
against this interpreter's headers).  Arguments: the module's directory,
the scenario (chain: py_caller -> nativeext.spin; reentry: py_outer ->
nativeext.call_back -> py_inner -> nativeext.spin)."""
import os
import sys

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nativeext  # noqa: E402
import sampled  # noqa: E402


def py_caller():
    nativeext.spin(0.1)  # @ext-call


def py_inner():
    nativeext.spin(0.1)  # @ext-inner


def py_outer():
    nativeext.call_back(py_inner)  # @ext-outer


def main():
    sampled.repeat(py_caller if sys.argv[2] == "chain" else py_outer, 1.0, 150)
    print("done")


main()
