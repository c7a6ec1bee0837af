/*
 * linux/interpose_sigaction.c - the stand-ins for sigaction and signal:
 * what the program sees of signal actions while ours stand first.
 *
 * Which signal is whose is one table (platform/sigview.c: ps_sig_role); its
 * row names the file that keeps the program's view of that signal, and
 * that file answers (and passes to the kernel while ours is not in):
 *   SIGSEGV, SIGBUS   lib/memory/faultview.c: the program's handler goes
 *                     into its view behind ours, which delivers it every
 *                     fault that is not one of our guarded reads;
 *   SIGURG            regs.c (native stacks), while ours is installed: the
 *                     program's action goes into its view;
 *   SIGTERM, SIGHUP, SIGINT, SIGQUIT at default disposition: our handler
 *                     stays hidden (fatal.c).
 * Every other signal is the program's alone: straight to the C library.
 *
 * And the stand-ins for pthread_sigmask and sigprocmask, which change
 * nothing the program sees: once the mask is changed they say so to
 * sigmask.c, which then reads a thread's mask again before the native
 * path signals it.
 *
 * glibc's signal() calls its internal sigaction, not ours, so it needs a
 * stand-in of its own.  Each forwards to libc's definition (libc.c); in a
 * vfork() child (posix_spawn, subprocess), which runs in our memory until
 * it execs or _exits, they only forward (util/owner.h).
 *
 * A file of its own, apart from the lifecycle's stand-ins (interpose.c):
 * it asks only the services below it, so test/unit/test_memread.c links
 * this very code and plays the program against it.
 */
#include <signal.h>
#include <string.h>

#include "memory/memread.h"
#include "platform/platform.h"
#include "platform/sigview.h"
#include "platform/stacks.h"
#include "platform/linux/linux.h"
#include "util/owner.h"

#define PS_EXPORT __attribute__((visibility("default")))

/* sigaction() of sig as the program is to see it: the keeper its row of
 * the table names answers. */
static int program_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    switch (ps_sig_role(sig)->keeper) {
    case PS_SIGKEEP_FAULT:
        return ps_mem_fault_sigaction(sig, act, old);
    case PS_SIGKEEP_NATIVE:
        return ps_native_sigaction(sig, act, old);
    case PS_SIGKEEP_FATAL:
        return ps_fatal_sigaction(sig, act, old);
    case PS_SIGKEEP_NONE:
        break;
    }
    return ps_real_sigaction(sig, act, old);
}

PS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!ps_owner_here())
        return ps_real_sigaction(sig, act, old);
    return program_sigaction(sig, act, old);
}

/* What the C library's signal() asks of sigaction, so that the program
 * reads back what it would without us: glibc's BSD semantics put the
 * signal in the handler's mask, musl's ask SA_RESTART alone (the kernel
 * blocks the signal during its handler either way, without SA_NODEFER). */
static void bsd_action(int sig, sighandler_t handler, struct sigaction *act)
{
    memset(act, 0, sizeof *act);
    act->sa_handler = handler;
    act->sa_flags = SA_RESTART;
    sigemptyset(&act->sa_mask);
#ifdef __GLIBC__
    sigaddset(&act->sa_mask, sig);
#else
    (void)sig;
#endif
}

PS_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    /* A signal nobody keeps a view of, and SIG_ERR (which the C library
     * refuses with its own errno), are the C library's. */
    if (!ps_owner_here() || handler == SIG_ERR || ps_sig_role(sig)->keeper == PS_SIGKEEP_NONE)
        return ps_real_signal(sig, handler);
    struct sigaction act, old;
    bsd_action(sig, handler, &act);
    if (program_sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    /* sa_handler and sa_sigaction share storage: either way, the old one. */
    return old.sa_handler;
}

/* A word before the change and one after: a sampler that read the
 * generation after the first reads the thread's status again rather than
 * trust what it remembered (sigmask.c), and one that read it before the
 * second does not remember what it then read.  What is left is what a
 * status read always left: a signal sent right after a read that came
 * just before the change.  Async-signal-safe, as the functions they
 * stand for. */
PS_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    if (set != NULL)
        ps_sigmask_changed();
    int rc = ps_real_pthread_sigmask(how, set, old);
    if (set != NULL)
        ps_sigmask_changed();
    return rc;
}

PS_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    if (set != NULL)
        ps_sigmask_changed();
    int rc = ps_real_sigprocmask(how, set, old);
    if (set != NULL)
        ps_sigmask_changed();
    return rc;
}
