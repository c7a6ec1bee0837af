/*
 * linux/libc.c - the C library's own definitions of the functions that
 * linux/interpose.c stands in front of, found with dlsym(RTLD_NEXT).
 *
 * The lookups happen once, in ps_interpose_init(), called by the
 * constructor, so nothing calls dlsym from a signal handler later; a call
 * that comes before (another library's constructor) resolves lazily.
 */
#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../lifecycle.h"
#include "../platform.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef void (*exit_fn)(int);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

static sigaction_fn real_sigaction_p;
static exit_fn real_exit_p, real_Exit_p;
static signal_fn real_signal_p;

void ps_interpose_init(void)
{
    if (real_sigaction_p == NULL)
        real_sigaction_p = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (real_signal_p == NULL)
        real_signal_p = (signal_fn)dlsym(RTLD_NEXT, "signal");
    if (real_exit_p == NULL)
        real_exit_p = (exit_fn)dlsym(RTLD_NEXT, "_exit");
    if (real_Exit_p == NULL)
        real_Exit_p = (exit_fn)dlsym(RTLD_NEXT, "_Exit");
}

int ps_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (real_sigaction_p == NULL)
        ps_interpose_init();
    return real_sigaction_p(sig, act, old);
}

sighandler_t ps_real_signal(int sig, sighandler_t handler)
{
    if (real_signal_p == NULL)
        ps_interpose_init();
    return real_signal_p(sig, handler);
}

_Noreturn void ps_real_exit(int status)
{
    if (real_exit_p == NULL)
        ps_interpose_init();
    if (real_exit_p != NULL)
        real_exit_p(status);
    syscall(SYS_exit_group, status);
    for (;;)
        ;
}

