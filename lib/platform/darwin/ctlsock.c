/*
 * darwin/ctlsock.c - the control socket on macOS (ctlsock.h): no abstract
 * names, so always a file (in /tmp unless PYSAMPLE_CONTROL_DIR says);
 * getpeereid and LOCAL_PEERPID for the peer; SO_NOSIGPIPE instead of
 * MSG_NOSIGNAL; poll with millisecond deadlines, rounded up.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ucred.h>
#include <sys/un.h>
#include <unistd.h>

#include "platform/ctlsock.h"
#include "platform/platform.h"

#ifndef SOL_LOCAL
#define SOL_LOCAL 0
#endif

const char *ps_ctlsock_default_dir(void)
{
    return "/tmp";
}

static int nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
        return -errno;
    return 0;
}

unsigned long long ps_ctlsock_pidns(void)
{
    return 0;  /* no PID namespaces */
}

int ps_ctlsock_listen(const char *dir, const char *base, const struct ps_ctlsock_names *out,
                      char *why, size_t whylen)
{
    char *shown = out->shown, *file = out->file;
    size_t shownlen = out->shownlen, filelen = out->filelen;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (dir[0] == '\0')
        dir = ps_ctlsock_default_dir();
    int n = snprintf(a.sun_path, sizeof a.sun_path, "%s/%s" PS_CTLSOCK_SUFFIX, dir, base);
    file[0] = '\0';
    if (n < 0 || (size_t)n >= sizeof a.sun_path) {
        snprintf(why, whylen, "the socket path in %s is too long", dir);
        return -ENAMETOOLONG;
    }
    snprintf(shown, shownlen, "%s", a.sun_path);
    /* Removed only if it is a socket of our uid (linux/ctlsock.c says why). */
    struct stat st;
    if (lstat(a.sun_path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
            snprintf(why, whylen, "%s exists and is not a socket of uid %u: not touching it",
                     a.sun_path, (unsigned)geteuid());
            return -EEXIST;
        }
        unlink(a.sun_path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "cannot create the control socket: %s", strerror(e));
        return -e;
    }
    int rc = nonblock_cloexec(fd);
    if (rc != 0 || bind(fd, (struct sockaddr *)&a, (socklen_t)sizeof a) != 0 ||
        listen(fd, 16) != 0) {
        int e = rc != 0 ? -rc : errno;
        snprintf(why, whylen, "cannot listen on %s: %s", shown, strerror(e));
        close(fd);
        return -e;
    }
    snprintf(file, filelen, "%s", a.sun_path);
    /* macOS gives the file the umask's mode, whatever the socket's: set by
     * name, but never through a symlink swapped in since bind (a program
     * run as root would chmod whatever it points to). */
    fchmodat(AT_FDCWD, file, 0600, AT_SYMLINK_NOFOLLOW);
    return fd;
}

int ps_ctlsock_bound_to(int fd, const char *shown)
{
    struct sockaddr_un got;
    socklen_t glen = (socklen_t)sizeof got;
    memset(&got, 0, sizeof got);
    return getsockname(fd, (struct sockaddr *)&got, &glen) == 0 && got.sun_family == AF_UNIX &&
           strncmp(got.sun_path, shown, sizeof got.sun_path) == 0;
}

int ps_ctlsock_same_userns(long pid)
{
    (void)pid;
    return 1;  /* no user namespaces */
}

long ps_ctlsock_overflow_uid(void)
{
    return -1;
}

int ps_ctlsock_dumpable(void)
{
    return 1;  /* the uid check (control.c) is the rule here */
}

int ps_ctlsock_accept(int lfd, long *uid, long *pid)
{
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        return -errno;
    uid_t u;
    gid_t g;
    int one = 1, rc = nonblock_cloexec(fd);
    if (rc == 0 && getpeereid(fd, &u, &g) != 0)
        rc = -errno;
    if (rc == 0 && setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one) != 0)
        rc = -errno;
    if (rc != 0) {
        close(fd);
        return rc;
    }
    pid_t p = -1;
    socklen_t len = sizeof p;
    if (getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID, &p, &len) != 0)
        p = -1;
    *uid = (long)u;
    *pid = (long)p;
    return fd;
}

long ps_ctlsock_send(int fd, const void *buf, size_t len)
{
    ssize_t n = send(fd, buf, len, 0);
    return n < 0 ? -(long)errno : (long)n;
}

int ps_ctlsock_pipe(int fds[2])
{
    if (pipe(fds) != 0)
        return -errno;
    if (nonblock_cloexec(fds[0]) != 0 || nonblock_cloexec(fds[1]) != 0) {
        close(fds[0]);
        close(fds[1]);
        return -EIO;
    }
    return 0;
}

int ps_ctlsock_poll(struct pollfd *fds, unsigned n, uint64_t deadline_ns)
{
    int ms = -1;
    if (deadline_ns != UINT64_MAX) {
        uint64_t now = ps_now_ns();
        uint64_t left = deadline_ns > now ? deadline_ns - now : 0;
        uint64_t m = (left + 999999) / 1000000;
        ms = m > 86400000 ? 86400000 : (int)m;
    }
    return poll(fds, (nfds_t)n, ms);
}
