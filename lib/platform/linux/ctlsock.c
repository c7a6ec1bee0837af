/*
 * linux/ctlsock.c - the control socket on Linux (ctlsock.h): abstract
 * names by default, SO_PEERCRED for the peer, ppoll for nanosecond
 * deadlines.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
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

int ps_ctlsock_listen(const char *dir, char *shown, size_t shownlen, char *file, size_t filelen,
                      char *why, size_t whylen)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    unsigned uid = (unsigned)geteuid();
    long pid = (long)getpid();
    socklen_t alen;
    file[0] = '\0';
    if (dir[0] == '\0') {
        /* sun_path[0] == 0: the abstract namespace; the name is the bytes
         * that follow, exactly alen of them (no terminating NUL). */
        int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "pysample.%u.%ld", uid, pid);
        alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
        snprintf(shown, shownlen, "@%s", a.sun_path + 1);
    } else {
        int n = snprintf(a.sun_path, sizeof a.sun_path, "%s/pysample.%u.%ld.sock", dir, uid, pid);
        if (n < 0 || (size_t)n >= sizeof a.sun_path) {
            snprintf(why, whylen, "the socket path in %s is too long", dir);
            return -ENAMETOOLONG;
        }
        alen = (socklen_t)sizeof a;
        snprintf(shown, shownlen, "%s", a.sun_path);
        snprintf(file, filelen, "%s", a.sun_path);
        /* Our pid's name: whatever is there is not a live process's. */
        struct stat st;
        if (lstat(a.sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
            unlink(a.sun_path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "cannot create the control socket: %s", strerror(e));
        return -e;
    }
    if (bind(fd, (struct sockaddr *)&a, alen) != 0 || listen(fd, 8) != 0) {
        int e = errno;
        snprintf(why, whylen, "cannot listen on %s: %s", shown, strerror(e));
        close(fd);
        file[0] = '\0';
        return -e;
    }
    /* The uid check on every connection is the protection; the mode only
     * keeps others from even trying. */
    if (file[0] != '\0')
        chmod(file, 0600);
    return fd;
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
