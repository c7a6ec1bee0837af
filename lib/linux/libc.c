/*
 * linux/libc.c - the C library's own definitions of the functions that
 * linux/interpose.c stands in front of, found with dlsym(RTLD_NEXT).
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

#include "../platform.h"
#include "linux.h"

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

static sigaction_fn real_sigaction_p;
static exit_fn real_exit_p;
static signal_fn real_signal_p;
static fopen_fn real_fopen_p, real_fopen64_p;
static fclose_fn real_fclose_p;
static execve_fn real_execve_p, real_execvpe_p;
static execv_fn real_execv_p, real_execvp_p;
static fexecve_fn real_fexecve_p;
static kill_fn real_kill_p;
static raise_fn real_raise_p;

#define LOOKUP(var, type, name)                          \
    do {                                                 \
        if ((var) == NULL)                               \
            (var) = (type)dlsym(RTLD_NEXT, (name));      \
    } while (0)

void ps_interpose_init(void)
{
    LOOKUP(real_sigaction_p, sigaction_fn, "sigaction");
    LOOKUP(real_signal_p, signal_fn, "signal");
    LOOKUP(real_exit_p, exit_fn, "_exit");
    LOOKUP(real_fopen_p, fopen_fn, "fopen");
    LOOKUP(real_fopen64_p, fopen_fn, "fopen64");
    LOOKUP(real_fclose_p, fclose_fn, "fclose");
    LOOKUP(real_execve_p, execve_fn, "execve");
    LOOKUP(real_execvpe_p, execve_fn, "execvpe");
    LOOKUP(real_execv_p, execv_fn, "execv");
    LOOKUP(real_execvp_p, execv_fn, "execvp");
    LOOKUP(real_fexecve_p, fexecve_fn, "fexecve");
    LOOKUP(real_kill_p, kill_fn, "kill");
    LOOKUP(real_raise_p, raise_fn, "raise");
}

/* Resolves lazily for a call that comes before our constructor. */
#define REAL(var)                    \
    do {                             \
        if ((var) == NULL)           \
            ps_interpose_init();     \
    } while (0)

int ps_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    REAL(real_sigaction_p);
    return real_sigaction_p(sig, act, old);
}

sighandler_t ps_real_signal(int sig, sighandler_t handler)
{
    REAL(real_signal_p);
    return real_signal_p(sig, handler);
}

_Noreturn void ps_real_exit(int status)
{
    REAL(real_exit_p);
    if (real_exit_p != NULL)
        real_exit_p(status);
    syscall(SYS_exit_group, status);
    for (;;)
        ;
}

FILE *ps_real_fopen(const char *path, const char *mode, int large)
{
    REAL(real_fopen_p);
    fopen_fn f = large && real_fopen64_p != NULL ? real_fopen64_p : real_fopen_p;
    if (f == NULL) {
        errno = ENOSYS;
        return NULL;
    }
    return f(path, mode);
}

int ps_real_fclose(FILE *f)
{
    REAL(real_fclose_p);
    return real_fclose_p(f);
}

int ps_real_execve(const char *path, char *const argv[], char *const envp[])
{
    REAL(real_execve_p);
    return real_execve_p(path, argv, envp);
}

int ps_real_execvpe(const char *file, char *const argv[], char *const envp[])
{
    REAL(real_execvpe_p);
    if (real_execvpe_p == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real_execvpe_p(file, argv, envp);
}

int ps_real_execv(const char *path, char *const argv[])
{
    REAL(real_execv_p);
    return real_execv_p(path, argv);
}

int ps_real_execvp(const char *file, char *const argv[])
{
    REAL(real_execvp_p);
    return real_execvp_p(file, argv);
}

int ps_real_fexecve(int fd, char *const argv[], char *const envp[])
{
    REAL(real_fexecve_p);
    if (real_fexecve_p == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real_fexecve_p(fd, argv, envp);
}

int ps_real_kill(pid_t pid, int sig)
{
    REAL(real_kill_p);
    return real_kill_p(pid, sig);
}

int ps_real_raise(int sig)
{
    REAL(real_raise_p);
    return real_raise_p(sig);
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
