/*
 * message.c - one line on stderr for the user (message.h).  No stdio: the
 * caller may be on an exit path where stdio's locks are held.
 *
 * Whether the line can be written without blocking is asked with a poll()
 * of zero timeout; the program's file status flags (O_NONBLOCK) are shared
 * with every process that holds the same pipe and are the program's
 * business, so they are never changed.  A pipe that polls writable has a
 * free page, and a line (at most 1 KiB, below PIPE_BUF) is written whole
 * into it.  Left: another thread of the program filling the pipe between
 * the poll and the write; the write then waits as the program's own would.
 */
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/message.h"

static _Atomic uint64_t dropped;

/* 1 if a write to fd would not block now (or would fail at once). */
static int writable_now(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    return poll(&p, 1, 0) == 1;
}

void ps_say(const char *fmt, ...)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "pysample: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(msg);
    msg[len++] = '\n';
    if (!writable_now(STDERR_FILENO)) {
        atomic_fetch_add(&dropped, 1);
        return;
    }
    ssize_t w = write(STDERR_FILENO, msg, len);
    (void)w;
}

uint64_t ps_say_dropped(void)
{
    return atomic_load(&dropped);
}
