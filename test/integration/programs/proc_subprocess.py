"""subprocess.run([sys.executable, ...]): a second Python, profiled itself.

    proc_subprocess.py SECONDS        the parent
    proc_subprocess.py SECONDS child  the child (prints its pid)

The parent prints {"parent": pid, "child": pid, "status": code}.
"""
import json
import os
import subprocess
import sys

from proc_common import spin


def sub_child_work(seconds):
    spin(seconds)


def sub_parent_work(seconds):
    spin(seconds)


def main():
    seconds = float(sys.argv[1])
    if len(sys.argv) > 2:
        sub_child_work(seconds)
        print(os.getpid())
        return
    sub_parent_work(seconds / 2)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), sys.argv[1], "child"],
                       stdout=subprocess.PIPE, text=True)
    sub_parent_work(seconds / 2)
    print(json.dumps({"parent": os.getpid(), "child": int(r.stdout), "status": r.returncode}))


if __name__ == "__main__":
    main()
