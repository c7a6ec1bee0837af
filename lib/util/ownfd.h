/*
 * ownfd.h - the library's own descriptors (armed mode's, /proc's), kept
 * out of the program's way and never used once the program may have taken
 * their number.
 *
 * A program may close descriptors it did not open (os.closerange(3, N) as
 * python-daemon does, a close-everything before exec) and get the same
 * numbers back for its own files, pipes and sockets.  So each descriptor
 * is moved to a high number (the program's own open() takes the lowest
 * free one), and its device and inode are remembered: before every use
 * they are compared (fstat), and on a mismatch the number is forgotten,
 * never closed (it is the program's now), and the caller makes a new one.
 * lib/platform/linux/read.c holds its /proc/self/mem, pipe and memfd here.
 */
#ifndef PS_OWNFD_H
#define PS_OWNFD_H

#include <stdint.h>

struct ps_fd {
    int fd;            /* -1: none */
    uint64_t dev, ino;
};

#define PS_FD_NONE { -1, 0, 0 }

/* Takes fd over: moves it to a high number (close-on-exec) and remembers
 * what it is.  0, or a negative errno (fd is closed then). */
int ps_fd_own(struct ps_fd *o, int fd);

/* 1 if o->fd is still the descriptor we made. */
int ps_fd_ours(const struct ps_fd *o);

/* Closes it if it is still ours; forgets it either way. */
void ps_fd_release(struct ps_fd *o);

/* The number, moved high: for a descriptor that needs atomics (the wake
 * pipe); dev and ino of it through *dev, *ino.  fd, or a negative errno
 * (fd closed). */
int ps_fd_move_high(int fd, uint64_t *dev, uint64_t *ino);

/* 1 if fd is open with that device and inode. */
int ps_fd_is(int fd, uint64_t dev, uint64_t ino);

#endif
