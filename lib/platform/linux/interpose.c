/*
 * linux/interpose.c - libc functions we stand in front of.
 *
 *   sigaction, signal
 *              so that the program's own SIGSEGV/SIGBUS handler goes into
 *              its view behind ours, which delivers it every fault that
 *              is not one of our guarded reads (lib/memory/); and so that
 *              our handler of SIGTERM, SIGHUP, SIGINT and SIGQUIT stays
 *              hidden (below).  glibc's signal() calls its internal sigaction, not
 *              ours, so it needs its own stand-in;
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
 *              (lifecycle.c says how).
 *
 * Each forwards to libc's definition (linux/libc.c).  In a vfork() child
 * (posix_spawn, subprocess), which runs in our memory until it execs or
 * _exits, every stand-in only forwards (ps_lifecycle_owner()).  Calls go
 * one way: the stand-ins report to the lifecycle (lifecycle.h) and ask
 * the services below them (fatal.c for SIGTERM, SIGHUP, SIGQUIT and SIGINT
 * at default disposition, faultview.c for SIGSEGV/SIGBUS, regs.c for the
 * native-stack signal) what the program is to see; nothing calls back into
 * this file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lifecycle.h"
#include "memory/memread.h"
#include "native/native.h"
#include "platform/platform.h"
#include "platform/linux/linux.h"

#define PS_EXPORT __attribute__((visibility("default")))

PS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!ps_lifecycle_owner())
        return ps_real_sigaction(sig, act, old);
    /* SIGSEGV/SIGBUS: while ours is in front, the program's handler goes
     * into its view (faultview.c), not into the kernel. */
    if (sig == SIGSEGV || sig == SIGBUS)
        return ps_mem_fault_sigaction(sig, act, old);
    /* The signal of native stacks (regs.c), while ours is installed: the
     * program's action goes into its view. */
    int nrc = ps_native_sigaction(sig, act, old);
    if (nrc != -2)
        return nrc;
    int frc = ps_fatal_sigaction(sig, act, old);
    if (frc != -2)
        return frc;
    return ps_real_sigaction(sig, act, old);
}

/* What glibc's signal() asks of sigaction: BSD semantics, the signal
 * blocked while its handler runs. */
static void bsd_action(int sig, sighandler_t handler, struct sigaction *act)
{
    memset(act, 0, sizeof *act);
    act->sa_handler = handler;
    act->sa_flags = SA_RESTART;
    sigemptyset(&act->sa_mask);
    sigaddset(&act->sa_mask, sig);
}

PS_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    if (!ps_lifecycle_owner())
        return ps_real_signal(sig, handler);
    /* SIGSEGV/SIGBUS: while ours is in front, the program's handler goes
     * into its view (faultview.c), as for sigaction() above. */
    int fault = (sig == SIGSEGV || sig == SIGBUS) && handler != SIG_ERR;
    if (!fault && handler != SIG_ERR) {
        struct sigaction act, old;
        bsd_action(sig, handler, &act);
        int nrc = ps_native_sigaction(sig, &act, &old);
        if (nrc == 0)
            return old.sa_handler;
    }
    if (!fault && !ps_fatal_signal_managed(sig))
        return ps_real_signal(sig, handler);
    struct sigaction act, old;
    bsd_action(sig, handler, &act);
    int rc = fault ? ps_mem_fault_sigaction(sig, &act, &old) : ps_fatal_sigaction(sig, &act, &old);
    if (rc != 0)
        return SIG_ERR;
    /* sa_handler and sa_sigaction share storage: either way, the old one. */
    return old.sa_handler;
}

PS_EXPORT int kill(pid_t pid, int sig)
{
    if (pid > 0 && ps_lifecycle_owner() && pid == getpid() && ps_fatal_signal_kills_us(sig))
        ps_lifecycle_self_signal();
    return ps_real_kill(pid, sig);
}

PS_EXPORT int raise(int sig)
{
    if (ps_lifecycle_owner() && ps_fatal_signal_kills_us(sig))
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

/* ---- the thread count after os.fork() (CPython 3.12+, lifecycle.c) ------- */

static FILE *fopen_common(const char *path, const char *mode, int large)
{
    if (!ps_lifecycle_fopen_begin(path))
        return ps_real_fopen(path, mode, large);
    FILE *f = ps_real_fopen(path, mode, large);
    int e = errno;
    ps_lifecycle_fopen_end(f);
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
    ps_lifecycle_fclosed(f);
    errno = e;
    return rc;
}
