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
 * one way: the stand-ins report to the lifecycle (lifecycle.h); the
 * lifecycle reaches this file only through platform.h, handing over what
 * our fatal-signal handler is to call.
 *
 * Fatal signals at default disposition.  SIGTERM (Kubernetes, systemd,
 * multiprocessing's terminate()) and SIGHUP kill a Python process without
 * running any exit code, and so does SIGINT once a program has set it back
 * to SIG_DFL.  The options were: only the periodic flush (loses up to an
 * interval); a thread that waits for the signal (only works if every thread
 * blocks it, which is the program's choice, not ours); or a handler of our
 * own while the program believes the default is installed.  We do the
 * last:
 *   - at start-up (before Python's own signal set-up) our handler goes in
 *     for each of the three whose disposition is SIG_DFL; one that is
 *     ignored (nohup, a background job) is left alone;
 *   - sigaction() and signal() then report to the program what it would
 *     see without us: SIG_DFL with the flags and mask it last asked for,
 *     so signal.getsignal() says SIG_DFL and a saved-and-restored action
 *     comes back unchanged;
 *   - a handler or SIG_IGN the program installs replaces ours at once (the
 *     program wins); setting SIG_DFL again puts ours back in its stead;
 *   - our handler has the profile written (lifecycle.c: the sampler thread
 *     writes; the interrupted thread may hold any lock, malloc's included,
 *     so it does no such work itself), waited for at most 5 s, then restores the
 *     default action and re-sends the signal to itself: the process dies of
 *     the same signal, with the same status, as without us.
 * Not seen: changes made through raw system calls, bsd_signal()/sysv_signal()
 * /sigset(), or by a library bound to the C library's internal names.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lifecycle.h"
#include "memory/memread.h"
#include "native/native.h"
#include "platform/platform.h"
#include "platform/linux/linux.h"

#define PS_EXPORT __attribute__((visibility("default")))

/* ---- fatal signals ------------------------------------------------------- */

struct managed {
    int sig;
    struct sigaction view;   /* the default action as the program set it */
};

static struct managed managed_sigs[] = { { SIGTERM, { .sa_handler = SIG_DFL } },
                              { SIGHUP, { .sa_handler = SIG_DFL } },
                              /* gunicorn's master sends it to its workers;
                               * one that is already exiting (Python has put
                               * the default back) dies of it. */
                              { SIGQUIT, { .sa_handler = SIG_DFL } },
                              { SIGINT, { .sa_handler = SIG_DFL } } };
static _Atomic int signals_on;
static void (*write_first)(int sig);   /* set before signals_on */

static struct managed *managed(int sig)
{
    for (size_t i = 0; i < sizeof managed_sigs / sizeof managed_sigs[0]; i++)
        if (managed_sigs[i].sig == sig)
            return &managed_sigs[i];
    return NULL;
}

static void on_fatal(int sig, siginfo_t *si, void *uc);

static int is_ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fatal;
}

static int is_default(const struct sigaction *sa)
{
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

static int install_ours(struct managed *m)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    /* One fatal signal at a time on this thread. */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof managed_sigs / sizeof managed_sigs[0]; i++)
        sigaddset(&sa.sa_mask, managed_sigs[i].sig);
    return ps_real_sigaction(m->sig, &sa, NULL);
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    int saved = errno;
    struct managed *m = managed(sig);
    if (m == NULL)
        return;
    if (write_first != NULL)
        write_first(sig);
    /* Die as we would have without us: the program's default action back,
     * the signal again, and unblocked so that it is delivered now. */
    struct sigaction dfl = m->view;
    dfl.sa_handler = SIG_DFL;
    dfl.sa_flags &= ~SA_SIGINFO;
    ps_real_sigaction(sig, &dfl, NULL);
    syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid), (long)sig);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    /* Still alive: something else holds the signal back.  Carry on as the
     * program would have, with our handler in place for the next one. */
    install_ours(m);
    errno = saved;
}

void ps_fatal_signals_take_over(void (*write)(int sig))
{
    write_first = write;
    for (size_t i = 0; i < sizeof managed_sigs / sizeof managed_sigs[0]; i++) {
        struct sigaction cur;
        if (ps_real_sigaction(managed_sigs[i].sig, NULL, &cur) != 0 || !is_default(&cur))
            continue;
        managed_sigs[i].view = cur;
        install_ours(&managed_sigs[i]);
    }
    atomic_store(&signals_on, 1);
}

/* sigaction() of a managed signal, as the program should see it. */
static int managed_sigaction(struct managed *m, const struct sigaction *act,
                             struct sigaction *old)
{
    struct sigaction cur, before;
    if (ps_real_sigaction(m->sig, NULL, &cur) != 0)
        return -1;
    int ours = is_ours(&cur);
    before = ours ? m->view : cur;
    if (act != NULL) {
        if (is_default(act) && (ours || install_ours(m) == 0)) {
            m->view = *act;
        } else if (ps_real_sigaction(m->sig, act, NULL) != 0) {
            return -1;
        }
    }
    if (old != NULL)
        *old = before;
    return 0;
}

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
    struct managed *m = managed(sig);
    if (m == NULL || !atomic_load(&signals_on))
        return ps_real_sigaction(sig, act, old);
    return managed_sigaction(m, act, old);
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
    struct managed *m = fault ? NULL : managed(sig);
    if (!fault && (m == NULL || !atomic_load(&signals_on)))
        return ps_real_signal(sig, handler);
    struct sigaction act, old;
    bsd_action(sig, handler, &act);
    int rc = fault ? ps_mem_fault_sigaction(sig, &act, &old) : managed_sigaction(m, &act, &old);
    if (rc != 0)
        return SIG_ERR;
    /* sa_handler and sa_sigaction share storage: either way, the old one. */
    return old.sa_handler;
}

/* A managed signal sent to this process that would kill it as things stand
 * (our handler in, or the plain default). */
static int kills_us(int sig)
{
    struct managed *m = managed(sig);
    struct sigaction cur;
    if (m == NULL || !atomic_load(&signals_on) || ps_real_sigaction(sig, NULL, &cur) != 0)
        return 0;
    return is_ours(&cur) || is_default(&cur);
}

PS_EXPORT int kill(pid_t pid, int sig)
{
    if (pid > 0 && ps_lifecycle_owner() && pid == getpid() && kills_us(sig))
        ps_lifecycle_self_signal();
    return ps_real_kill(pid, sig);
}

PS_EXPORT int raise(int sig)
{
    if (ps_lifecycle_owner() && kills_us(sig))
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
