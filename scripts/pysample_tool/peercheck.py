# peercheck.py - that the process listening on a control name is the target
# itself, proved rather than read off a number (remote.py's Connection;
# Linux only).
#
# SO_PEERCRED's pid of a listening socket is whoever called listen(), kept
# as a number after that process has exited and its pid has gone to
# another: anyone may listen on the name a future pid will want (a child
# that listens and exits, its parent keeping the socket), wait for the pid
# counter to wrap, and be believed by a check of numbers.  So:
#   * the listener's uid must be the target's effective uid;
#   * SO_PEERPIDFD (Linux 6.5+) gives a pidfd of the listener, which names
#     one process and never a later holder of its pid: that process must
#     be alive and be the target (its fdinfo's pid that of a pidfd of the
#     target: both as the same /proc shows them);
#   * where the kernel has no SO_PEERPIDFD, the listening socket bound to
#     the name (/proc/net/unix) must be one of the target's own
#     descriptors (/proc/PID/fd "socket:[INODE]").
#
# SPDX-License-Identifier: MIT

import errno
import os
import socket
import struct

SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)
SO_ACCEPTCON = 0x10000  # /proc/net/unix's flag of a listening socket


def _pidfd_pid(fd):
    """The pid of pidfd fd's process as /proc shows it (-1: it has exited,
    Linux 6.16+), or None; closes fd."""
    try:
        with open("/proc/self/fdinfo/%d" % fd) as f:
            for line in f:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    finally:
        os.close(fd)
    return None


def listener_pid(sock):
    """The pid (as /proc shows it) of the live process that called listen()
    on the socket sock is connected to; -1 if that process has exited (its
    pid may be another's now); None where the kernel cannot say."""
    try:
        fd = struct.unpack("i", sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD, 4))[0]
    except OSError as e:
        # Linux 6.5-6.15 refuse a pidfd of a process that has exited.
        return -1 if e.errno in (errno.ESRCH, errno.EINVAL) else None
    return _pidfd_pid(fd)


def shown_pid(pid):
    """The target's pid as /proc shows it in a pidfd's fdinfo (the PID
    namespace of the /proc mount, which may not be ours: nsenter --pid
    without --mount), so that it compares with listener_pid's."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return pid
    shown = _pidfd_pid(fd)
    return pid if shown is None else shown


def socket_inodes(pid):
    """The inodes of the sockets process pid holds.  PermissionError when
    we may not read its /proc/PID/fd (another user's, or not dumpable)."""
    d = "/proc/%d/fd" % pid
    held = set()
    for name in os.listdir(d):
        try:
            link = os.readlink(os.path.join(d, name))
        except OSError:
            continue  # closed meanwhile
        if link.startswith("socket:[") and link.endswith("]"):
            held.add(int(link[8:-1]))
    return held


def listeners(shown):
    """The inodes of the listening sockets bound to shown ("@name" or a
    path), from /proc/net/unix (one per abstract name)."""
    want = shown if shown.startswith("@") else os.path.normpath(shown)
    found = set()
    try:
        with open("/proc/net/unix") as f:
            next(f, None)
            for line in f:
                cols = line.split()
                if len(cols) < 8 or not int(cols[3], 16) & SO_ACCEPTCON:
                    continue
                path = cols[7] if cols[7].startswith("@") else os.path.normpath(cols[7])
                if path == want:
                    found.add(int(cols[6]))
    except (OSError, ValueError):
        pass
    return found


def verify(sock, pid, uid, euid, shown):
    """None if the listener sock is connected to (SO_PEERCRED: pid, whose
    uid is uid) is process pid itself, whose effective uid is euid; else
    the line to say."""
    refuse = ": refusing to talk to it"
    reused = ("%s is held by a socket that process %d does not hold: another process listened there "
              "under pid %d and exited before process %d had that pid (pids are reused)%s (process %d "
              "says on its stderr that it cannot listen)" % (shown, pid, pid, pid, refuse, pid))
    alive = listener_pid(sock)
    if alive is not None:
        alive = pid if alive == shown_pid(pid) > 0 else -1
    if alive == -1:
        return reused
    if uid != euid:
        if alive == pid:
            return ("process %d runs as uid %d but listened on %s as uid %d: it changed its user since it "
                    "was armed, and then answers nobody (arm it as its final user)" % (pid, euid, shown, uid))
        return ("%s was made by uid %d and process %d runs as uid %d: either it changed its user since it "
                "was armed (it then answers nobody), or another process listened there under pid %d before "
                "process %d had it (pids are reused)%s" % (shown, uid, pid, euid, pid, pid, refuse))
    if alive == pid:
        return None
    try:
        held = socket_inodes(pid)
    except FileNotFoundError:
        return "process %d exited" % pid
    except PermissionError:
        return ("cannot tell whether %s is process %d's (its /proc/%d/fd is not readable to uid %d, and "
                "this kernel has no SO_PEERPIDFD)%s: run pysample as uid %d"
                % (shown, pid, pid, os.geteuid(), refuse, euid))
    return None if listeners(shown) & held else reused
