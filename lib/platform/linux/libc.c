/*
 * linux/libc.c - the C library's own definitions of the functions that
 * linux/interpose.c and interpose_sigaction.c stand in front of, found
 * with dlsym(RTLD_NEXT).
 *
 * The lookups happen once, in ps_interpose_init(), called by the
 * constructor, so nothing calls dlsym from a signal handler later; a call
 * that comes before (another library's constructor) resolves lazily.  A
 * function the C library lacks (execvpe is a GNU extension) stays NULL and
 * its stand-in fails with ENOSYS, as a missing function would.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "platform/platform.h"
#include "platform/linux/linux.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef void (*exit_fn)(int);
typedef sighandler_t (*signal_fn)(int, sighandler_t);
typedef FILE *(*fopen_fn)(const char *, const char *);
typedef int (*fclose_fn)(FILE *);
typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*kill_fn)(pid_t, int);
typedef int (*raise_fn)(int);
typedef int (*sigmask_fn)(int, const sigset_t *, sigset_t *);

/* The C library's functions we call past our own stand-ins: an index and
 * the name, line for line in the same order. */
enum real {
    R_SIGACTION, R_SIGNAL, R_EXIT, R_FOPEN, R_FOPEN64, R_FCLOSE, R_EXECVE,
    R_EXECVPE, R_EXECV, R_EXECVP, R_FEXECVE, R_KILL, R_RAISE, R_PTHREAD_SIGMASK,
    R_SIGPROCMASK, R_SYSV_SIGNAL, R_SIGSET, R_SIGIGNORE, R_COUNT
};
static const char *const real_names[] = {
    "sigaction", "signal", "_exit", "fopen", "fopen64", "fclose", "execve",
    "execvpe", "execv", "execvp", "fexecve", "kill", "raise", "pthread_sigmask",
    "sigprocmask", "sysv_signal", "sigset", "sigignore",
};
_Static_assert(sizeof real_names / sizeof real_names[0] == R_COUNT, "a name per function");

static void *reals[R_COUNT];

/* The C library's definition of name, past ours.  RTLD_NEXT finds it
 * when we are preloaded.  musl's RTLD_NEXT searches only the objects
 * loaded after the caller, so in a library dlopen()ed later (ctypes, a
 * program using the C API without LD_PRELOAD) it finds nothing and the
 * stand-in would call address 0; the process's first definition is the C
 * library's then (the program and its libraries come before us), as long
 * as it is not our own. */
void *ps_libc_sym(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (p != NULL)
        return p;
    Dl_info self, found;
    p = dlsym(RTLD_DEFAULT, name);
    if (p == NULL || dladdr((void *)ps_libc_sym, &self) == 0 || dladdr(p, &found) == 0 ||
        found.dli_fbase == self.dli_fbase)
        return NULL;
    return p;
}

void ps_interpose_init(void)
{
    for (int i = 0; i < R_COUNT; i++)
        if (reals[i] == NULL)
            reals[i] = ps_libc_sym(real_names[i]);
}

/* The C library's function i (resolved now if the call comes before our
 * constructor), or NULL if it has none. */
static void *real(enum real i)
{
    if (reals[i] == NULL)
        ps_interpose_init();
    return reals[i];
}

/* ENOSYS, as a missing function would give. */
static int missing(void)
{
    errno = ENOSYS;
    return -1;
}

int ps_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return ((sigaction_fn)real(R_SIGACTION))(sig, act, old);
}

sighandler_t ps_real_signal(int sig, sighandler_t handler)
{
    return ((signal_fn)real(R_SIGNAL))(sig, handler);
}

/* sysv_signal, sigset and sigignore: SIG_ERR (-1) with ENOSYS where the C
 * library has none (musl has no sysv_signal). */
static sighandler_t real_signal_like(enum real i, int sig, sighandler_t handler)
{
    signal_fn f = (signal_fn)real(i);
    if (f != NULL)
        return f(sig, handler);
    errno = ENOSYS;
    return SIG_ERR;
}

sighandler_t ps_real_sysv_signal(int sig, sighandler_t handler)
{
    return real_signal_like(R_SYSV_SIGNAL, sig, handler);
}

sighandler_t ps_real_sigset(int sig, sighandler_t handler)
{
    return real_signal_like(R_SIGSET, sig, handler);
}

int ps_real_sigignore(int sig)
{
    int (*f)(int) = (int (*)(int))real(R_SIGIGNORE);
    return f != NULL ? f(sig) : missing();
}

_Noreturn void ps_real_exit(int status)
{
    exit_fn f = (exit_fn)real(R_EXIT);
    if (f != NULL)
        f(status);
    syscall(SYS_exit_group, status);
    for (;;)
        ;
}

FILE *ps_real_fopen(const char *path, const char *mode, int large)
{
    fopen_fn f = (fopen_fn)real(R_FOPEN);
    if (large && real(R_FOPEN64) != NULL)
        f = (fopen_fn)real(R_FOPEN64);
    if (f == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    return f(path, mode);
}

int ps_real_fclose(FILE *f)
{
    return ((fclose_fn)real(R_FCLOSE))(f);
}

int ps_real_execve(const char *path, char *const argv[], char *const envp[])
{
    return ((execve_fn)real(R_EXECVE))(path, argv, envp);
}

int ps_real_execvpe(const char *file, char *const argv[], char *const envp[])
{
    execve_fn f = (execve_fn)real(R_EXECVPE);  /* a GNU extension */
    return f != NULL ? f(file, argv, envp) : missing();
}

int ps_real_execv(const char *path, char *const argv[])
{
    return ((execv_fn)real(R_EXECV))(path, argv);
}

int ps_real_execvp(const char *file, char *const argv[])
{
    return ((execv_fn)real(R_EXECVP))(file, argv);
}

int ps_real_fexecve(int fd, char *const argv[], char *const envp[])
{
    fexecve_fn f = (fexecve_fn)real(R_FEXECVE);
    return f != NULL ? f(fd, argv, envp) : missing();
}

int ps_real_kill(pid_t pid, int sig)
{
    return ((kill_fn)real(R_KILL))(pid, sig);
}

int ps_real_raise(int sig)
{
    return ((raise_fn)real(R_RAISE))(sig);
}

/* A C library without them (none we know of) gets the system call, as
 * its own would make it. */
int ps_real_pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    sigmask_fn f = (sigmask_fn)real(R_PTHREAD_SIGMASK);
    if (f != NULL)
        return f(how, set, old);
    return syscall(SYS_rt_sigprocmask, how, set, old, 8) == 0 ? 0 : errno;
}

int ps_real_sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    sigmask_fn f = (sigmask_fn)real(R_SIGPROCMASK);
    if (f != NULL)
        return f(how, set, old);
    return (int)syscall(SYS_rt_sigprocmask, how, set, old, 8);
}

/* ---- actions as the kernel keeps them (platform.h) ----------------------
 *
 * Measured against the kernel's own answers by test/unit/test_memread.c:
 * the kernel keeps only the flags it knows (Linux 5.11+ clears the others;
 * older kernels keep them, which a program would see there and not in the
 * view), never masks SIGKILL or SIGSTOP, stores 64 signals of the mask
 * (the C library's sigset_t is 1024 bits and it copies back only those),
 * and glibc adds SA_RESTORER and its restorer to whatever it installs. */

#ifndef SA_EXPOSE_TAGBITS
#define SA_EXPOSE_TAGBITS 0x00000800
#endif
#define PS_SA_KERNEL (SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART | \
                      SA_NODEFER | SA_RESETHAND | SA_EXPOSE_TAGBITS)
#define PS_KSIGSET_BYTES 8

static int libc_flags;
static void (*libc_restorer)(void);

void ps_sigaction_learn(const struct sigaction *installed, int asked_flags)
{
    libc_flags = installed->sa_flags & ~asked_flags;
    libc_restorer = installed->sa_restorer;
}

void ps_sigaction_as_kernel(const struct sigaction *act, struct sigaction *out)
{
    memset(out, 0, sizeof *out);
    out->sa_handler = act->sa_handler;  /* shares storage with sa_sigaction */
    sigemptyset(&out->sa_mask);
    out->sa_flags = (act->sa_flags & PS_SA_KERNEL) | libc_flags;
    if (libc_flags != 0)
        out->sa_restorer = libc_restorer;
    memcpy(&out->sa_mask, &act->sa_mask, PS_KSIGSET_BYTES);
    sigdelset(&out->sa_mask, SIGKILL);
    sigdelset(&out->sa_mask, SIGSTOP);
}

/* SA_EXPOSE_TAGBITS: arm64 memory tags in si_addr, as the program asked. */
int ps_sigaction_carried_flags(void)
{
    return SA_ONSTACK | SA_RESTART | SA_EXPOSE_TAGBITS;
}
