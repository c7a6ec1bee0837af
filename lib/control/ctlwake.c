/*
 * ctlwake.c - the wake-up pipe (ctlwake.h).
 *
 * The write end is used by any thread, so it is kept in atomics, its
 * inode stored before its number: a waker that sees the new number sees
 * its inode too, and one that sees the old number finds it no longer ours
 * and writes nothing.  A wake-up lost that way is not lost for good: the
 * flags a waker sets are set before it reads the number, and the sampler,
 * having made a new pipe, looks at its flags before it waits (control.c's
 * check_fds).
 */
#include <stdatomic.h>
#include <unistd.h>

#include "util/ownfd.h"
#include "control/ctlwake.h"
#include "platform/ctlsock.h"

static struct ps_fd rd = PS_FD_NONE;
static _Atomic int wr = -1;
static _Atomic uint64_t wr_dev, wr_ino;

int ps_ctlwake_make(void)
{
    int p[2];
    int rc = ps_ctlsock_pipe(p);
    if (rc != 0)
        return rc;
    if ((rc = ps_fd_own(&rd, p[0])) != 0) {
        close(p[1]);
        return rc;
    }
    uint64_t dev, ino;
    int w = ps_fd_move_high(p[1], &dev, &ino);
    if (w < 0) {
        ps_fd_release(&rd);
        return w;
    }
    atomic_store(&wr_dev, dev);
    atomic_store(&wr_ino, ino);
    atomic_store(&wr, w);
    return 0;
}

static int write_end_ours(int w)
{
    return ps_fd_is(w, atomic_load(&wr_dev), atomic_load(&wr_ino));
}

void ps_ctlwake_drop(void)
{
    int w = atomic_exchange(&wr, -1);
    if (write_end_ours(w))
        close(w);
    ps_fd_release(&rd);
}

int ps_ctlwake_ours(void)
{
    return ps_fd_ours(&rd) && write_end_ours(atomic_load(&wr));
}

int ps_ctlwake_fd(void)
{
    return rd.fd;
}

void ps_ctlwake_drain(void)
{
    char buf[64];
    while (ps_fd_ours(&rd) && read(rd.fd, buf, sizeof buf) > 0)
        ;
}

void ps_ctlwake_signal(void)
{
    int w = atomic_load(&wr);
    if (write_end_ours(w)) {
        char b = 1;
        ssize_t n = write(w, &b, 1);  /* full pipe: already woken */
        (void)n;
    }
}
