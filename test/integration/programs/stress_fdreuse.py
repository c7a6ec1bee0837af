"""A program that closes every descriptor above 2 and opens files of its own
on the number the library's /proc/self/mem descriptor had, with
process_vm_readv refused (a container's seccomp profile) so that the
library reads through that descriptor: a read through the program's file
would take what the program was to read.

    stress_fdreuse.py launch ENV PYTHON ARGS...
                                     refuses process_vm_readv (seccomp,
                                     stress_fdswap.py) and execs the rest
                                     with the environment ENV
    stress_fdreuse.py ROUNDS SAMPLES the program itself

Its first open() must get descriptor 3.  Then, ROUNDS times, with sampling
stopped (pysample_stop joins the sampler, so no read of the library is
under way while the program swaps: the check the library makes is what is
tested, not a race with it): it notes the number of the library's
/proc/PID/mem descriptor, closes descriptors 3 and up (os.closerange, as
python-daemon does), puts a file of its own on that number, starts sampling
again and spins until SAMPLES more samples are taken.  The files:
  * a sparse file on tmpfs watched with inotify for IN_ACCESS: any read
    through it, even a pread that changes nothing, is an event;
  * in odd rounds, where it can be opened, /dev/kmsg: each read takes the
    next kernel log record from this descriptor's reader.  A second reader
    opened at the same moment must then read the same next record.
Prints "first_open N", "rounds R found F", "accessed A", "kmsg K lost L".
"""
import ctypes
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

IN_NONBLOCK, IN_ACCESS = 0o4000, 0x1


def library_mem_fd():
    """The number of the library's /proc/PID/mem descriptor, or None."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + name) == "/proc/%d/mem" % os.getpid():
                return int(name)
        except OSError:
            pass
    return None


def spin(samples):
    """Runs Python code until the sampler took `samples` more samples."""
    import sampled
    s0 = sampled.status().samples
    until = sampled.Until(0.01, enough=lambda st: st.samples - s0 >= samples)
    x = 0
    while until.more():
        x += 1
    return x


def watched_file(libc):
    """(fd, inotify fd) of a sparse tmpfs file as large as the address
    space (a pread at an interpreter address reads zeros, not end of file),
    or None where tmpfs is missing."""
    path = "/dev/shm/stress_fdreuse.%d" % os.getpid()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    try:
        os.ftruncate(fd, 1 << 57)
        ino = libc.inotify_init1(IN_NONBLOCK)
        if ino < 0 or libc.inotify_add_watch(ino, path.encode(), IN_ACCESS) < 0:
            os.close(fd)
            return None
    except OSError:
        os.close(fd)
        return None
    finally:
        os.unlink(path)
    return fd, ino


def accessed(ino):
    try:
        return len(os.read(ino, 4096)) // struct.calcsize("iIII")
    except BlockingIOError:
        return 0


def next_record(fd):
    """The next /dev/kmsg record of reader fd (one retry past EPIPE: the
    ring buffer overwrote the reader's position)."""
    for _ in range(2):
        try:
            return os.read(fd, 8192)
        except BrokenPipeError:
            continue
        except BlockingIOError:
            return b""
    return b""


def put_on(fd, number):
    if fd != number:
        os.dup2(fd, number)
        os.close(fd)


def one_round(lib, libc, samples, kmsg):
    """One round (module docstring): (found, accesses, kmsg used, lost)."""
    lib.pysample_stop()
    number = library_mem_fd()
    if number is None:
        lib.pysample_start(0)
        return 0, 0, 0, 0
    os.closerange(3, 1 << 16)
    acc = used = lost = 0
    if kmsg:
        a = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        b = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        put_on(a, number)
        lib.pysample_start(0)
        spin(samples)
        lib.pysample_stop()
        used, lost = 1, int(next_record(number) != next_record(b))
        os.close(b)
    else:
        w = watched_file(libc)
        if w is None:
            lib.pysample_start(0)
            return 1, 0, 0, 0
        fd, ino = w
        put_on(fd, number)
        lib.pysample_start(0)
        spin(samples)
        lib.pysample_stop()
        acc = accessed(ino)
        os.close(ino)
    os.close(number)
    lib.pysample_start(0)
    return 1, acc, used, lost


def can_read_kmsg():
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    ok = next_record(fd) != b""
    os.close(fd)
    return ok


def main():
    rounds, samples = int(sys.argv[1]), int(sys.argv[2])
    first = os.open("/dev/null", os.O_RDONLY)
    os.close(first)
    lib = ctypes.CDLL(None)
    libc = ctypes.CDLL(None, use_errno=True)
    kmsg = can_read_kmsg()
    found = acc = used = lost = 0
    for r in range(rounds):
        f, a, u, lo = one_round(lib, libc, samples, kmsg and r % 2 == 1)
        found, acc, used, lost = found + f, acc + a, used + u, lost + lo
    spin(samples)
    print("first_open", first)
    print("rounds %d found %d" % (rounds, found))
    print("accessed", acc)
    print("kmsg %d lost %d" % (used, lost))


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        from stress_fdswap import refuse_process_vm_readv
        refuse_process_vm_readv()
        os.execve(sys.argv[3], sys.argv[3:], eval(sys.argv[2]))
    main()
