/*
 * message.c - one line on stderr for the user (message.h).  No stdio: the
 * caller may be on an exit path where stdio's locks are held.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/message.h"

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
    ssize_t w = write(STDERR_FILENO, msg, len);
    (void)w;
}
