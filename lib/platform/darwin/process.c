/*
 * darwin/process.c - this process and its parent, on macOS (platform.h).
 * Not yet what Linux reads from /proc (docs/macos.md): a parent is never
 * recognised (a child of a profiled Python with a template without %p
 * takes the name only if free), and the fatal signals are not taken over.
 */
#include <libproc.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"

int ps_secure_execution(void)
{
    return issetugid() || getuid() != geteuid() || getgid() != getegid();
}

/*
 * The process's start, which exec keeps (the kernel's proc, as Linux's
 * /proc/self/task/PID/stat): this image's own start made an exec'd image
 * take its predecessor's profile for one left over and replace it
 * (output.c).  Not known: the epoch, before every file, as on Linux.
 */
void ps_process_start_time(struct timespec *out)
{
    struct proc_bsdinfo info;
    out->tv_sec = 0;
    out->tv_nsec = 0;
    if (proc_pidinfo(getpid(), PROC_PIDTBSDINFO, 0, &info, (int)sizeof info) != (int)sizeof info ||
        info.pbi_start_tvusec >= 1000000)
        return;
    out->tv_sec = (time_t)info.pbi_start_tvsec;
    out->tv_nsec = (long)info.pbi_start_tvusec * 1000;
}

int ps_parent_profiles_to(const char *tmpl)
{
    (void)tmpl;
    return 0;
}

/* CPython 3.14+ describes asyncio in __DATA,AsyncioDebug: not read on macOS
 * yet (getsectiondata on the image would be the way); tasks_search.c refuses. */
int ps_image_section(const char *path, uintptr_t inside, const char *section, uintptr_t *addr,
                     size_t *size)
{
    (void)path;
    (void)inside;
    (void)section;
    (void)addr;
    (void)size;
    return -1;
}

/* Not yet on macOS (docs/macos.md): SIGTERM/SIGHUP/SIGINT keep their
 * default action, and with no fopen stand-in CPython 3.12+ counts the
 * sampler thread after os.fork(). */
void ps_fatal_signals_take_over(void (*write_first)(int sig))
{
    (void)write_first;
}
