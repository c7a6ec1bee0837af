"""A program working at its descriptor limit (issue 39), started under
`prlimit --nofile=N`.

    proc_fdlimit.py full SECONDS   opens /dev/null until EMFILE and, holding
                                   every descriptor, computes for SECONDS of
                                   CPU time (work_at_limit)
    proc_fdlimit.py last SECONDS   the same, then closes one and for SECONDS
                                   of CPU time opens and closes the last
                                   free number over and over (reopen_last),
                                   counting the opens that failed

Then it closes what it opened (the library needs a descriptor to write its
profile at exit), prints "held N failed M" and exits with status 3: its
own, which a library that ended it (exit(0)) would not give.
"""
import errno
import os
import sys
import time


def fill():
    fds = []
    while True:
        try:
            fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            if e.errno != errno.EMFILE:
                raise
            return fds


def work_at_limit(seconds):
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        for i in range(2000):
            x += i * i
    return 0


def reopen_last(seconds):
    end = time.process_time() + seconds
    failed = 0
    while time.process_time() < end:
        for _ in range(200):
            try:
                os.close(os.open("/dev/null", os.O_RDONLY))
            except OSError as e:
                if e.errno != errno.EMFILE:
                    raise
                failed += 1
    return failed


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    fds = fill()
    if mode == "last":
        os.close(fds.pop())
        failed = reopen_last(seconds)
    else:
        failed = work_at_limit(seconds)
    held = len(fds)
    for fd in fds:
        os.close(fd)
    print("held %d failed %d" % (held, failed), flush=True)
    sys.exit(3)


if __name__ == "__main__":
    main()
