/*
 * linux/interpose_sigaction.c - the stand-ins for sigaction and signal:
 * what the program sees of signal actions while ours stand first.
 *
 *   SIGSEGV, SIGBUS   the program's own handler goes into its view behind
 *                     ours (lib/memory/faultview.c), which delivers it every
 *                     fault that is not one of our guarded reads;
 *   the native-stack signal (regs.c), while ours is installed: the
 *                     program's action goes into its view;
 *   SIGTERM, SIGHUP, SIGINT, SIGQUIT at default disposition: our handler
 *                     stays hidden (fatal.c).
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
#include "platform/stacks.h"
#include "platform/linux/linux.h"
#include "util/owner.h"

#define PS_EXPORT __attribute__((visibility("default")))

PS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!ps_owner_here())
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
    if (!ps_owner_here())
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
