/*
 * linux/ctlsock.c - the control socket on Linux (ctlsock.h): abstract
 * names by default, SO_PEERCRED for the peer, ppoll for nanosecond
 * deadlines, /proc for the namespaces and the overflow uid.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "platform/ctlsock.h"
#include "platform/platform.h"

const char *ps_ctlsock_default_dir(void)
{
    return "";
}

unsigned long long ps_ctlsock_pidns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* The address of shown ("@name" abstract, else a path) and its length. */
static int address(const char *shown, struct sockaddr_un *a, socklen_t *alen)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t n = strlen(shown);
    if (n == 0 || n >= sizeof a->sun_path)
        return -ENAMETOOLONG;
    memcpy(a->sun_path, shown, n);
    if (shown[0] == '@') {
        /* sun_path[0] == 0: the abstract namespace; the name is the bytes
         * that follow, exactly alen of them (no terminating NUL). */
        a->sun_path[0] = '\0';
        *alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        *alen = (socklen_t)sizeof *a;
    }
    return 0;
}

/* The file of our name, if there is one: removed if it is a socket of our
 * uid; anything else (another user's file, a symlink planted to make us
 * unlink or chmod something else) is left alone and refused. */
static int clear_own_name(const char *path, char *why, size_t whylen)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
        snprintf(why, whylen, "%s exists and is not a socket of uid %u: not touching it", path,
                 (unsigned)geteuid());
        return -EEXIST;
    }
    unlink(path);
    return 0;
}

int ps_ctlsock_listen(const char *dir, const char *base, const struct ps_ctlsock_names *out,
                      char *why, size_t whylen)
{
    char *shown = out->shown, *file = out->file;
    size_t shownlen = out->shownlen, filelen = out->filelen;
    file[0] = '\0';
    int n = dir[0] ? snprintf(shown, shownlen, "%s/%s" PS_CTLSOCK_SUFFIX, dir, base)
                   : snprintf(shown, shownlen, "@%s", base);
    struct sockaddr_un a;
    socklen_t alen;
    if (n < 0 || (size_t)n >= shownlen || address(shown, &a, &alen) != 0) {
        snprintf(why, whylen, "the socket path in %s is too long", dir);
        return -ENAMETOOLONG;
    }
    if (dir[0] != '\0') {
        int rc = clear_own_name(shown, why, whylen);
        if (rc != 0) {
            if (rc != -EEXIST)
                snprintf(why, whylen, "cannot use %s: %s", shown, strerror(-rc));
            return rc;
        }
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "cannot create the control socket: %s", strerror(e));
        return -e;
    }
    /* A file's mode is set here, on the socket, before bind makes the file
     * (Linux gives the file the socket's mode less the umask): never by
     * its name afterwards, which in a directory others may write can be a
     * symlink swapped in between bind and chmod (a root program would then
     * chmod whatever file it points to).  Not umask: that is the whole
     * process's, and the program's threads create files.  The mode keeps
     * others from even connecting; the checks on every connection
     * (control.c) are the protection. */
    if ((dir[0] != '\0' && fchmod(fd, 0600) != 0) || bind(fd, (struct sockaddr *)&a, alen) != 0 ||
        listen(fd, 16) != 0) {
        int e = errno;
        snprintf(why, whylen, "cannot listen on %s: %s%s", shown, strerror(e),
                 e == EADDRINUSE ? " (another process holds this process's name)" : "");
        close(fd);
        return -e;
    }
    if (dir[0])
        snprintf(file, filelen, "%s", shown);
    return fd;
}

int ps_ctlsock_bound_to(int fd, const char *shown)
{
    struct sockaddr_un want, got;
    socklen_t wlen, glen = (socklen_t)sizeof got;
    if (address(shown, &want, &wlen) != 0)
        return 0;
    memset(&got, 0, sizeof got);
    if (getsockname(fd, (struct sockaddr *)&got, &glen) != 0 || got.sun_family != AF_UNIX)
        return 0;
    if (shown[0] == '@') {
        size_t n = wlen - offsetof(struct sockaddr_un, sun_path);
        return glen == wlen && memcmp(got.sun_path, want.sun_path, n) == 0;
    }
    return strncmp(got.sun_path, want.sun_path, sizeof got.sun_path) == 0;
}

int ps_ctlsock_accept(int lfd, long *uid, long *pid)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof cr) {
        int e = errno ? errno : EPROTO;
        close(fd);
        return -e;
    }
    *uid = (long)cr.uid;
    *pid = (long)cr.pid;
    return fd;
}

static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int ps_ctlsock_same_userns(long pid)
{
    if (pid <= 0)
        return 0;  /* not in our PID namespace: nothing to compare */
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/ns/user", pid);
    return same_file(path, "/proc/self/ns/user");
}

long ps_ctlsock_overflow_uid(void)
{
    static long cached = -2;
    if (cached != -2)
        return cached;
    long v = 65534;  /* the kernel's default, if /proc does not say */
    int fd = open("/proc/sys/kernel/overflowuid", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[32];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = '\0';
            char *end;
            long x = strtol(buf, &end, 10);
            if (end != buf && x >= 0)
                v = x;
        }
    }
    cached = v;
    return v;
}

int ps_ctlsock_dumpable(void)
{
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0;
}

long ps_ctlsock_send(int fd, const void *buf, size_t len)
{
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    return n < 0 ? -(long)errno : (long)n;
}

int ps_ctlsock_pipe(int fds[2])
{
    return pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0 ? 0 : -errno;
}

int ps_ctlsock_poll(struct pollfd *fds, unsigned n, uint64_t deadline_ns)
{
    if (deadline_ns == UINT64_MAX)
        return ppoll(fds, n, NULL, NULL);
    uint64_t now = ps_now_ns();
    uint64_t left = deadline_ns > now ? deadline_ns - now : 0;
    struct timespec ts = { (time_t)(left / 1000000000ull), (long)(left % 1000000000ull) };
    return ppoll(fds, n, &ts, NULL);
}
