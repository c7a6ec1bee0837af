/*
 * linux/interpose.c - libc functions we stand in front of for the
 * lifecycle: the moments the program reaches that decide when a profile is
 * written.  (sigaction and signal, which answer what the program sees of
 * signal actions, are interpose_sigaction.c.)
 *
 *   _exit, _Exit
 *              os._exit() and multiprocessing children end this way,
 *              skipping atexit: the profile is written first;
 *   execve, execv, execvp, execvpe, fexecve
 *              the image that is about to be replaced writes what it has
 *              (the new one, if it is a Python, profiles itself);
 *   kill, raise
 *              a process that signals itself to death at default
 *              disposition (Python does, after an unhandled
 *              KeyboardInterrupt, once the sampler has stopped) writes
 *              first;
 *   fopen, fopen64, fclose
 *              CPython 3.12+ counts the process's threads right after
 *              os.fork() and warns (DeprecationWarning) if there is more
 *              than one; the sampler thread steps out for that moment
 *              (sampler/forkpause.c says how; only in the process our
 *              state belongs to, util/owner.h).
 *
 * Each forwards to libc's definition (linux/libc.c).  In a vfork() child
 * (posix_spawn, subprocess), which runs in our memory until it execs or
 * _exits, kill and raise only forward (util/owner.h); the lifecycle
 * decides what the others do there.  Calls go one way: the stand-ins report to the
 * lifecycle (lifecycle.h) and the fork pause (forkpause.h) and ask fatal.c
 * whether a signal kills us;
 * nothing calls back into this file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "lifecycle.h"
#include "platform/platform.h"
#include "platform/linux/linux.h"
#include "sampler/forkpause.h"
#include "util/owner.h"

#define PS_EXPORT __attribute__((visibility("default")))

PS_EXPORT int kill(pid_t pid, int sig)
{
    if (pid > 0 && ps_owner_here() && pid == getpid() && ps_fatal_signal_kills_us(sig))
        ps_lifecycle_self_signal();
    return ps_real_kill(pid, sig);
}

PS_EXPORT int raise(int sig)
{
    if (ps_owner_here() && ps_fatal_signal_kills_us(sig))
        ps_lifecycle_self_signal();
    return ps_real_raise(sig);
}

/* ---- exit and exec ------------------------------------------------------- */

PS_EXPORT _Noreturn void _exit(int status)
{
    ps_lifecycle_exit(status);
}

PS_EXPORT _Noreturn void _Exit(int status)
{
    ps_lifecycle_exit(status);
}

PS_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    ps_lifecycle_before_exec();
    return ps_real_execve(path, argv, envp);
}

PS_EXPORT int execv(const char *path, char *const argv[])
{
    ps_lifecycle_before_exec();
    return ps_real_execv(path, argv);
}

PS_EXPORT int execvp(const char *file, char *const argv[])
{
    ps_lifecycle_before_exec();
    return ps_real_execvp(file, argv);
}

PS_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    ps_lifecycle_before_exec();
    return ps_real_execvpe(file, argv, envp);
}

PS_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    ps_lifecycle_before_exec();
    return ps_real_fexecve(fd, argv, envp);
}

/* ---- the thread count after os.fork() (CPython 3.12+, forkpause.c) ------ */

static FILE *fopen_common(const char *path, const char *mode, int large)
{
    if (!ps_owner_here() || !ps_forkpause_fopen_begin(path))
        return ps_real_fopen(path, mode, large);
    FILE *f = ps_real_fopen(path, mode, large);
    int e = errno;
    ps_forkpause_fopen_end(f);
    errno = e;
    return f;
}

/* Named by their symbols: with _FILE_OFFSET_BITS=64 <stdio.h> maps the C
 * name fopen to the symbol fopen64, and programs call either. */
PS_EXPORT FILE *ps_fopen_std(const char *path, const char *mode) __asm__("fopen");
PS_EXPORT FILE *ps_fopen_large(const char *path, const char *mode) __asm__("fopen64");

FILE *ps_fopen_std(const char *path, const char *mode)
{
    return fopen_common(path, mode, 0);
}

FILE *ps_fopen_large(const char *path, const char *mode)
{
    return fopen_common(path, mode, 1);
}

PS_EXPORT int fclose(FILE *f)
{
    int rc = ps_real_fclose(f);
    int e = errno;
    if (ps_owner_here())
        ps_forkpause_fclosed(f);
    errno = e;
    return rc;
}
