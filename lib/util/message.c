/*
 * message.c - one line on stderr for the user (message.h).  No stdio: the
 * caller may be on an exit path where stdio's locks are held.
 *
 * The line is ours, but the values quoted in it are not: a PYSAMPLE_*
 * setting, a path, a peer's word.  A newline or an escape sequence among
 * them would forge lines in the program's log or drive the terminal, so
 * every control character of the formatted line (C0, DEL and C1 as UTF-8
 * encodes it) is written as \xNN; our own formats hold none.
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

/* The length of the control character at s (1, or 2 for a C1 control in
 * UTF-8: 0xC2 0x80-0x9F), or 0 if s is not one. */
static size_t control_at(const unsigned char *s)
{
    if (*s < 0x20 || *s == 0x7f)
        return 1;
    return s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f ? 2 : 0;
}

size_t ps_say_escape(const char *in, char *out, size_t outlen)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    while (*s && outlen > 0) {
        size_t c = control_at(s);
        if (c == 0) {
            if (o + 1 >= outlen)
                break;
            out[o++] = (char)*s++;
            continue;
        }
        if (o + 4 * c >= outlen)
            break;
        for (; c > 0; c--, s++) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[*s >> 4];
            out[o++] = hex[*s & 15];
        }
    }
    if (outlen > 0)
        out[o] = '\0';
    return o;
}

void ps_say(const char *fmt, ...)
{
    char raw[1024], msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    int n = snprintf(msg, sizeof msg, "pysample: ");
    size_t len = (size_t)n + ps_say_escape(raw, msg + n, sizeof msg - (size_t)n - 1);
    msg[len++] = '\n';
    if (!writable_now(STDERR_FILENO)) {
        atomic_fetch_add(&dropped, 1);
        return;
    }
    ssize_t w = write(STDERR_FILENO, msg, len);
    (void)w;
}

int ps_episode_turn(struct ps_episode *e, int rc)
{
    int now = rc != 0;
    return atomic_exchange(&e->failing, now) != now;
}

uint64_t ps_say_dropped(void)
{
    return atomic_load(&dropped);
}
