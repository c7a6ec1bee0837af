"""os.execv() into another Python, or into a program that is not Python.

    proc_exec.py SECONDS python|true [TRUE]
    proc_exec.py SECONDS via PROGRAM [ARG...]

Prints its pid, runs before_exec, then execs: "python" runs this file
again as "proc_exec.py SECONDS after", which runs after_exec and prints
"after <pid>"; "true" becomes /bin/true, or TRUE when given; "via" execs
PROGRAM ARG... with that same Python command line appended (PROGRAM then
execs or emulates it: a shell, qemu-user).
"""
import os
import shutil
import sys

from proc_common import spin


def before_exec(seconds):
    spin(seconds)


def after_exec(seconds):
    spin(seconds)


def main():
    seconds, what = float(sys.argv[1]), sys.argv[2]
    if what == "after":
        after_exec(seconds)
        print("after", os.getpid(), flush=True)
        return
    print(os.getpid(), flush=True)
    before_exec(seconds)
    again = [sys.executable, os.path.abspath(__file__), sys.argv[1], "after"]
    if what == "python":
        os.execv(sys.executable, again)
    if what == "via":
        os.execv(sys.argv[3], sys.argv[3:] + again)
    true = sys.argv[3] if len(sys.argv) > 3 else shutil.which("true") or "/bin/true"
    os.execv(true, [true])


if __name__ == "__main__":
    main()
