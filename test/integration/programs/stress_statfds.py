"""cpu mode keeps threads' /proc state files open (lib/platform/linux/threads.c,
"Kept state files"): a program that closes every descriptor above 2 and
puts files of its own on those numbers must never have them read, and the
library must go on with descriptors of its own, never more than 8.

    stress_statfds.py THREADS SAMPLES
    stress_statfds.py THREADS SAMPLES near-limit
    stress_statfds.py THREADS SAMPLES churn


THREADS threads each burn ~2 ms of CPU and sleep ~1 ms over and over (so
they are not busy throughout a tick: their state is asked).  Until SAMPLES
samples are taken; then, with sampling stopped (pysample_stop joins the
sampler: the check the library makes is what is tested, not a race with
it), the numbers of the library's stat descriptors are noted, every
descriptor from 3 up is closed (os.closerange, as python-daemon does), a
sparse tmpfs file watched with inotify for IN_ACCESS (any read through it,
even a pread, is an event) is put on each of those numbers, sampling starts
again until SAMPLES more.  Prints "kept K" (the library's stat descriptors
before), "accessed A" (IN_ACCESS events), "kept_after K" (its own ones
after), "most M" (the most seen at once).  With near-limit, the program
first lowers its descriptor limit to 64 and holds 20 descriptors, then only
runs until SAMPLES samples: "most M", counting only numbers 32-63 (below
the limit, where the library would hold one: a look that opens and closes
takes the lowest free, and one kept before the limit was lowered sits
above it), must be 0 (near its limit, the library holds none).  With
churn, THREADS threads run until SAMPLES samples and end, 1.2 s pass, and
THREADS new ones run until SAMPLES more: "live L" is how many of the
library's state files then name a thread that is alive (a thread that
ended gives its place up after a second).
"""
import ctypes
import os
import re
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sampled  # noqa: E402

IN_NONBLOCK, IN_ACCESS = 0o4000, 0x1
STAT = re.compile(r"^/proc/\d+/task/\d+/stat$")


def stat_fds(lowest=0, limit=1 << 30):
    out = []
    for name in os.listdir("/proc/self/fd"):
        if not lowest <= int(name) < limit:
            continue
        try:
            if STAT.match(os.readlink("/proc/self/fd/" + name)):
                out.append(int(name))
        except OSError:
            pass
    return out


stop = threading.Event()


def worker():
    while not stop.is_set():
        end = time.thread_time() + 0.002
        x = 0
        while time.thread_time() < end:
            x += 1
        time.sleep(0.001)


def spin(samples, most, near=False):
    s0 = sampled.status().samples
    until = sampled.Until(0.05, enough=lambda st: st.samples - s0 >= samples)
    while until.more():
        most[0] = max(most[0], len(stat_fds(32, 64) if near else stat_fds()))
        time.sleep(0.002)


def watched_file(libc):
    path = "/dev/shm/stress_statfds.%d" % os.getpid()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, 1 << 20)
        ino = libc.inotify_init1(IN_NONBLOCK)
        if ino < 0 or libc.inotify_add_watch(ino, path.encode(), IN_ACCESS) < 0:
            raise OSError("inotify")
    finally:
        os.unlink(path)
    return fd, ino


def churn(nthreads, samples):
    most = [0]
    for batch in range(2):
        stop.clear()
        threads = [threading.Thread(target=worker) for _ in range(nthreads)]
        for t in threads:
            t.start()
        spin(samples, most)
        if batch == 0:
            stop.set()
            for t in threads:
                t.join()
            time.sleep(1.2)
    alive = set(os.listdir("/proc/self/task"))
    live = 0
    for n in stat_fds():
        try:
            if os.readlink("/proc/self/fd/%d" % n).split("/")[4] in alive:
                live += 1
        except OSError:
            pass
    stop.set()
    for t in threads:
        t.join()
    print("live", live)
    print("most", most[0])


def main():
    nthreads, samples = int(sys.argv[1]), int(sys.argv[2])
    lib = ctypes.CDLL(None)
    libc = ctypes.CDLL(None, use_errno=True)
    if sys.argv[3:] == ["churn"]:
        return churn(nthreads, samples)
    held = []
    if sys.argv[3:] == ["near-limit"]:
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        held = [os.open("/dev/null", os.O_RDONLY) for _ in range(20)]
    threads = [threading.Thread(target=worker) for _ in range(nthreads)]
    for t in threads:
        t.start()
    most = [0]
    spin(samples, most, bool(held))
    if held:
        stop.set()
        for t in threads:
            t.join()
        print("most", most[0])
        return
    lib.pysample_stop()
    kept = stat_fds()
    os.closerange(3, 1 << 16)
    fd, ino = watched_file(libc)
    for n in kept:
        os.dup2(fd, n)
    lib.pysample_start(0)
    spin(samples, most)
    lib.pysample_stop()
    acc = 0
    try:
        acc = len(os.read(ino, 4096)) // struct.calcsize("iIII")
    except BlockingIOError:
        pass
    after = [n for n in stat_fds() if n not in kept]
    stop.set()
    for t in threads:
        t.join()
    print("kept", len(kept))
    print("accessed", acc)
    print("kept_after", len(after))
    print("most", most[0])


if __name__ == "__main__":
    main()
