"""A program that swaps its own file onto the library's read descriptors
while the sampler reads through them, with process_vm_readv refused (a
container's seccomp profile): the file must never receive a byte.

    stress_fdswap.py launch ENV PYTHON ARGS...
                                             refuses process_vm_readv
                                             (seccomp) and execs the rest
                                             with the environment ENV
                                             (a dict's repr): the launcher
                                             itself runs unprofiled
    stress_fdswap.py SECONDS TICKS           the program itself

One thread recurses and spins (frames to read); another finds every
descriptor that is not the program's own (/proc/self/fd) and, over and
over, dup2()s its victim file onto it and puts the original back.  Prints
the victim's size at the end: "victim 0" when nothing was written to it.
"""
import ctypes
import os
import struct
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
NR_PROCESS_VM_READV = 310   # x86-64
AUDIT_ARCH_X86_64 = 0xC000003E
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1


def refuse_process_vm_readv():
    """A seccomp filter (as Docker's default profile has) that makes
    process_vm_readv fail with EPERM; kept across exec."""
    def insn(code, jt, jf, k):
        return struct.pack("HBBI", code, jt, jf, k)
    prog = b"".join([
        insn(0x20, 0, 0, 4),                      # ld arch
        insn(0x15, 1, 0, AUDIT_ARCH_X86_64),      # jeq x86-64: skip next
        insn(0x06, 0, 0, SECCOMP_RET_ALLOW),      # other arch: allow
        insn(0x20, 0, 0, 0),                      # ld nr
        insn(0x15, 0, 1, NR_PROCESS_VM_READV),    # jeq process_vm_readv
        insn(0x06, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        insn(0x06, 0, 0, SECCOMP_RET_ALLOW),
    ])
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = struct.pack("HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fbuf), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")


def ours(fd, mine):
    """True for a descriptor the program did not open itself."""
    return fd > 2 and fd not in mine


def swapper(victim, mine, stop):
    """dup2()s the victim onto every descriptor not the program's own, and
    puts the original back, until stop."""
    saved = {}
    n = 0
    while not stop.is_set():
        if n % 64 == 0:
            for name in os.listdir("/proc/self/fd"):
                fd = int(name)
                if ours(fd, mine) and fd not in saved and fd not in saved.values():
                    try:
                        saved[fd] = os.dup(fd)
                        mine.add(saved[fd])
                    except OSError:
                        pass
        for fd, copy in list(saved.items()):
            try:
                os.dup2(victim, fd)
                os.dup2(copy, fd)
            except OSError:
                pass
        n += 1


def recurse(n, until):
    if n:
        return recurse(n - 1, until)
    x = 0
    while until.more():
        x += 1
    return x


def main():
    import sampled
    seconds, ticks = float(sys.argv[1]), int(sys.argv[2])
    victim_path = "/tmp/stress_fdswap.%d" % os.getpid()
    victim = os.open(victim_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.unlink(victim_path)
    mine = {victim}
    stop = threading.Event()
    t = threading.Thread(target=swapper, args=(victim, mine, stop), name="swapper")
    t.start()
    recurse(50, sampled.Until(seconds, ticks))
    stop.set()
    t.join()
    print("victim", os.fstat(victim).st_size)


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        refuse_process_vm_readv()
        os.execve(sys.argv[3], sys.argv[3:], eval(sys.argv[2]))
    main()
