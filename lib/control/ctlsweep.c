/*
 * ctlsweep.c - stale control sockets removed (ctlsweep.h).
 *
 * The directory may be writable by others (/tmp, a shared volume), so
 * nothing in it is trusted:
 *   - "nobody listens" is asked of the kernel by connecting, not guessed
 *     from the pid (another PID namespace sharing the directory may be
 *     using it), and the connect is non-blocking: a socket planted by
 *     another user that never accepts fills its backlog and answers
 *     EAGAIN at once, where a blocking connect() hung the sampler thread
 *     (and, joined at exit, the program) for good;
 *   - only sockets owned by our uid are touched (lstat: a symlink named
 *     like a socket is not followed, so we never connect to, nor unlink
 *     the name of, a socket somewhere else);
 *   - the name is unlinked only if it is still the file that refused
 *     (same device and inode);
 *   - a bounded number of entries, and a deadline.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/ctlsweep.h"
#include "platform/ctlsock.h"
#include "platform/platform.h"

#define SWEEP_ENTRIES 4096  /* directory entries read at most */
#define SWEEP_CHECKS 256    /* sockets connected to at most */

/* 1 if name is "pysample.<uid>.<n>.<n>.sock" (ctlsock.h), uid's. */
static int our_name(const char *name, unsigned uid)
{
    unsigned u;
    unsigned long long ns;
    long pid;
    char tail[8];
    return sscanf(name, PS_CTLSOCK_NAME ".%7s", &u, &ns, &pid, tail) == 4 && u == uid &&
           strcmp(tail, &PS_CTLSOCK_SUFFIX[1]) == 0;  /* past its dot */
}

/* 1 if path is a socket that refuses connections: nobody listens. */
static int refuses(const char *path)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    /* Non-blocking (set after socket(): macOS has no SOCK_NONBLOCK). */
    int fl = fcntl(fd, F_GETFL);
    int dead = fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0 &&
               connect(fd, (struct sockaddr *)&a, (socklen_t)sizeof a) != 0 &&
               errno == ECONNREFUSED;
    close(fd);
    return dead;
}

int ps_ctlsweep(const char *dir, unsigned uid, const char *own, uint64_t deadline)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    struct dirent *e;
    int read_n = 0, checked = 0, removed = 0;
    while ((e = readdir(d)) != NULL && read_n++ < SWEEP_ENTRIES && checked < SWEEP_CHECKS &&
           ps_now_ns() < deadline) {
        if (!our_name(e->d_name, uid) || strcmp(e->d_name, own) == 0)
            continue;
        char path[sizeof ((struct sockaddr_un *)0)->sun_path];
        int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st, again;
        if (n < 0 || (size_t)n >= sizeof path || lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode) ||
            st.st_uid != uid)
            continue;
        checked++;
        if (refuses(path) && lstat(path, &again) == 0 && again.st_dev == st.st_dev &&
            again.st_ino == st.st_ino && unlink(path) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
