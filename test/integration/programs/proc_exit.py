"""os._exit(CODE) after some work: atexit never runs.

    proc_exit.py SECONDS CODE
"""
import os
import sys

from proc_common import spin


def work_then_exit(seconds):
    spin(seconds)


print(os.getpid(), flush=True)
work_then_exit(float(sys.argv[1]))
os._exit(int(sys.argv[2]))
