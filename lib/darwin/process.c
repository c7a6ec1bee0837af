/*
 * darwin/process.c - this process and its parent, on macOS (platform.h).
 * Not yet what Linux reads from /proc (docs/macos.md): the start time is
 * this image's (so an exec'ed image treats its predecessor's file as
 * another process's), and a parent is never recognised (a child of a
 * profiled Python with a template without %p takes the name only if free).
 */
#include <time.h>

#include "../platform.h"

void ps_process_start_time(struct timespec *out)
{
    clock_gettime(CLOCK_REALTIME, out);
}

int ps_parent_profiles_to(const char *tmpl)
{
    (void)tmpl;
    return 0;
}
