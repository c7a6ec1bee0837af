"""An armed program (PYSAMPLE_ARM=1) that does to its descriptors and
credentials what daemons do, for test_control.py.

    armed_fds.py STOPFILE closefds LOG SERVERPATH
    armed_fds.py STOPFILE dup2listen SERVERPATH
    armed_fds.py STOPFILE fdlimit
    armed_fds.py STOPFILE setuid UID

Each first waits until the library listens (its name in /proc/net/unix),
then:
  closefds  closes every descriptor from 3 on (os.closerange, as
            python-daemon does) and puts its own objects on the numbers
            the library had: its log file where the library's pipe write
            end was, its own pipe's read end where the library's read end
            was, its own listening socket (SERVERPATH) where the library's
            was; writes "log line" to the log and PIPEDATA into the pipe,
            prints "placed KINDS".  At the end it prints "pipe ok" if the
            pipe still holds PIPEDATA and "server ok" if the connection the
            test made to SERVERPATH is still there to accept, with the
            bytes the test sent ("hello").
  dup2listen  puts its own listening socket (SERVERPATH) over the
            library's listening socket with dup2() and nothing else, and
            prints "placed server": the library's wait still holds the old
            socket, and its name, for up to 2 s.  At the end as closefds.
  fdlimit   lowers its descriptor limit to 64 and opens files until it is
            reached; prints "full N".
  setuid    drops to UID (setgid, setuid: every thread), as a server
            started by root does.
Then prints "ready <pid>", computes in fds_work() until STOPFILE exists,
prints "done 1" and exits with status 7.
"""
import os
import resource
import socket
import sys
import time

stop, mode = sys.argv[1], sys.argv[2]


def listening():
    tail = ".%d" % os.getpid()
    with open("/proc/net/unix") as f:
        return any(l.split()[-1].startswith("@pysample.") and l.split()[-1].endswith(tail)
                   for l in f if len(l.split()) >= 8)


def library_fds():
    """{fd: (what, flags)} of the descriptors from 3 on: the library's."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            found[fd] = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            pass  # listdir's own
    out = {}
    for fd, what in found.items():
        if fd >= 3 and (what.startswith("pipe:") or what.startswith("socket:")):
            with open("/proc/self/fdinfo/%d" % fd) as f:
                flags = int(f.read().split("flags:")[1].split()[0], 8)
            out[fd] = (what, flags)
    return out


def fds_work():
    total = 0
    while not os.path.exists(stop):
        for i in range(20000):
            total = (total + i * i) % 1000003  # fds work line
    return total


deadline = time.monotonic() + 60
while not listening():
    if time.monotonic() > deadline:
        sys.exit("the library never listened")
    time.sleep(0.01)

if mode == "closefds":
    log_path, server_path = sys.argv[3], sys.argv[4]
    lib = library_fds()
    os.closerange(3, 65536)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    pr, pw = os.pipe()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(server_path)
    srv.listen(8)
    kinds = []
    for fd, (what, flags) in sorted(lib.items()):
        if what.startswith("pipe:") and flags & 3 == os.O_WRONLY:
            os.dup2(log, fd)
            kinds.append("log")
        elif what.startswith("pipe:"):
            os.dup2(pr, fd)
            kinds.append("pipe")
        else:
            os.dup2(srv.fileno(), fd)
            kinds.append("server")
    os.write(log, b"log line\n")
    os.write(pw, b"PIPEDATA")
    print("placed %s" % " ".join(sorted(kinds)), flush=True)
elif mode == "dup2listen":
    server_path = sys.argv[3]
    ours = [fd for fd, (what, _) in library_fds().items() if what.startswith("socket:")]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(server_path)
    srv.listen(8)
    for fd in ours:
        os.dup2(srv.fileno(), fd)
    print("placed %s" % " ".join(["server"] * len(ours)), flush=True)
elif mode == "fdlimit":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    held = []
    try:
        while True:
            held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    print("full %d" % len(held), flush=True)
elif mode == "setuid":
    uid = int(sys.argv[3])
    os.setgid(uid)
    os.setuid(uid)

print("ready %d" % os.getpid(), flush=True)
result = fds_work()
if mode == "closefds":
    os.set_blocking(pr, False)
    try:
        data = os.read(pr, 100)
    except BlockingIOError:
        data = b""
    print("pipe ok" if data == b"PIPEDATA" else "pipe lost: %r" % data, flush=True)
if mode in ("closefds", "dup2listen"):
    srv.settimeout(5)
    try:
        conn, _ = srv.accept()
        conn.settimeout(5)
        got = conn.recv(100)
        print("server ok" if got == b"hello\n" else "server lost: %r" % got, flush=True)
    except OSError as e:
        print("server lost: %s" % e, flush=True)
print("done %d" % (result >= 0), flush=True)
sys.exit(7)
