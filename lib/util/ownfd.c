/*
 * ownfd.c - descriptors kept out of the program's way (ownfd.h).
 *
 * fstat and fcntl are async-signal-safe: ps_fd_is serves the wake-up,
 * which any thread and signal handlers make.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/ownfd.h"

/* Half the soft limit, at most 1024: above what a program usually holds,
 * below select()'s FD_SETSIZE games and any limit we could be given. */
static int high_floor(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 2048)
        return 1024;
    return rl.rlim_cur >= 16 ? (int)(rl.rlim_cur / 2) : 3;
}

/* What fd is, read before it is moved: the program may put something of
 * its own on the new number at once (dup2 onto numbers it saw before), and
 * reading it there would take the program's file for ours. */
int ps_fd_move_high(int fd, uint64_t *dev, uint64_t *ino)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, high_floor());
    if (hi < 0)
        return fd;  /* no number free up there: the low one, checked like the rest */
    close(fd);
    return hi;
}

int ps_fd_own(struct ps_fd *o, int fd)
{
    int hi = ps_fd_move_high(fd, &o->dev, &o->ino);
    o->fd = hi >= 0 ? hi : -1;
    return hi >= 0 ? 0 : hi;
}

int ps_fd_is(int fd, uint64_t dev, uint64_t ino)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == dev &&
           (uint64_t)st.st_ino == ino;
}

int ps_fd_ours(const struct ps_fd *o)
{
    return ps_fd_is(o->fd, o->dev, o->ino);
}

void ps_fd_release(struct ps_fd *o)
{
    if (ps_fd_ours(o))
        close(o->fd);
    o->fd = -1;
}
