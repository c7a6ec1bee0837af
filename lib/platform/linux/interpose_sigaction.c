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
 * And the stand-ins for pthread_sigmask and sigprocmask (and sighold and
 * sigrelse, which call the C library's own), which change nothing the
 * program sees: once the mask is changed they say so to
 * sigmask.c, which then reads a thread's mask again before the native
 * path signals it.
 *
 * glibc's calls that set a plain handler (signal and its aliases
 * bsd_signal and ssignal, sysv_signal and __sysv_signal, sigset,
 * sigignore) call its internal sigaction, not ours, so each needs a
 * stand-in of its own, which asks the same keeper through
 * program_sigaction; else only the sampler's periodic check of the
 * handlers would catch such a change.  Each forwards to libc's definition (libc.c); in a
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

/* Not declared by every C library's headers, or only under some
 * feature macros. */
sighandler_t sysv_signal(int sig, sighandler_t handler);
sighandler_t __sysv_signal(int sig, sighandler_t handler);
sighandler_t bsd_signal(int sig, sighandler_t handler);
sighandler_t ssignal(int sig, sighandler_t handler);

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

/* Whether a stand-in that sets a plain handler leaves sig to the C
 * library: a signal nobody keeps a view of, SIG_ERR (which the C library
 * refuses with its own errno), and a vfork() child's call. */
static int libc_alone(int sig, sighandler_t handler)
{
    return !ps_owner_here() || handler == SIG_ERR || ps_sig_role(sig)->keeper == PS_SIGKEEP_NONE;
}

/* handler for sig, with flags and the signal itself blocked in it or not,
 * as the C library's calls ask of its sigaction; the old one as the
 * program sees it (sa_handler and sa_sigaction share storage: either
 * way), or SIG_ERR. */
static sighandler_t program_handler(int sig, sighandler_t handler, int flags, int mask_self)
{
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = flags;
    sigemptyset(&act.sa_mask);
    if (mask_self)
        sigaddset(&act.sa_mask, sig);
    if (program_sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

/* What the C library's signal() asks of sigaction, so that the program
 * reads back what it would without us: glibc's BSD semantics put the
 * signal in the handler's mask, musl's ask SA_RESTART alone (the kernel
 * blocks the signal during its handler either way, without SA_NODEFER). */
#ifdef __GLIBC__
#define PS_SIGNAL_MASKS_SELF 1
#else
#define PS_SIGNAL_MASKS_SELF 0
#endif

/* signal(), and bsd_signal() of glibc and musl, ssignal() of glibc: one
 * function in each.  Called by each stand-in directly, never through its
 * exported name, which in a library dlopen()ed late would be the C
 * library's. */
static sighandler_t bsd_semantics(int sig, sighandler_t handler)
{
    if (libc_alone(sig, handler))
        return ps_real_signal(sig, handler);
    return program_handler(sig, handler, SA_RESTART, PS_SIGNAL_MASKS_SELF);
}

PS_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    return bsd_semantics(sig, handler);
}

PS_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
    return bsd_semantics(sig, handler);
}

#if defined(__GLIBC__)
PS_EXPORT sighandler_t ssignal(int sig, sighandler_t handler)
{
    return bsd_semantics(sig, handler);
}

/* glibc's System V semantics: reset to default on delivery, not blocked
 * while it runs.  __sysv_signal is what glibc's headers make of signal()
 * in a program built for strict ISO C or X/Open (no _DEFAULT_SOURCE);
 * musl has no sysv_signal, and its __sysv_signal is its signal(). */
static sighandler_t sysv_semantics(int sig, sighandler_t handler)
{
    if (libc_alone(sig, handler))
        return ps_real_sysv_signal(sig, handler);
    return program_handler(sig, handler, SA_RESETHAND | SA_NODEFER, 0);
}

PS_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
    return sysv_semantics(sig, handler);
}

PS_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
    return sysv_semantics(sig, handler);
}
#endif

/* SIG_IGN, as sigset(sig, SIG_IGN) would set it: 0 or -1. */
PS_EXPORT int sigignore(int sig)
{
    if (libc_alone(sig, SIG_IGN))
        return ps_real_sigignore(sig);
    return program_handler(sig, SIG_IGN, 0, 0) == SIG_ERR ? -1 : 0;
}

/* A mask change by the C library's function real, said to sigmask.c a
 * word before the change and one after: a sampler that read the
 * generation after the first reads the thread's status again rather than
 * trust what it remembered, and one that read it before the second does
 * not remember what it then read.  What is left is what a status read
 * always left: a signal sent right after a read that came just before the
 * change.  Async-signal-safe, as the functions it stands for. */
typedef int (*mask_fn)(int, const sigset_t *, sigset_t *);

static int mask_change_by(mask_fn real, int how, const sigset_t *set, sigset_t *old)
{
    if (set != NULL)
        ps_sigmask_changed();
    int rc = real(how, set, old);
    if (set != NULL)
        ps_sigmask_changed();
    return rc;
}

static int mask_change(int how, const sigset_t *set, sigset_t *old)
{
    return mask_change_by(ps_real_sigprocmask, how, set, old);
}

/* sig alone blocked or unblocked through mask_change (the mask before in
 * *before, if not NULL): 0, or -1 (EINVAL from sigaddset) for a bad
 * signal, as the C library's sighold() and sigrelse() give. */
static int one_signal_mask(int how, int sig, sigset_t *before)
{
    sigset_t one;
    sigemptyset(&one);
    if (sigaddset(&one, sig) != 0)
        return -1;
    return mask_change(how, &one, before);
}

/* System V's sigset(): SIG_HOLD blocks sig and leaves its handler; any
 * other sets it (no flags) and unblocks sig.  SIG_HOLD is returned if sig
 * was blocked before, else the old handler as the program sees it. */
PS_EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
    if (libc_alone(sig, disp))
        return ps_real_sigset(sig, disp);
    sigset_t before;
    if (disp == SIG_HOLD) {
        if (one_signal_mask(SIG_BLOCK, sig, &before) != 0)
            return SIG_ERR;
        struct sigaction old;
        if (sigismember(&before, sig))
            return SIG_HOLD;
        return program_sigaction(sig, NULL, &old) == 0 ? old.sa_handler : SIG_ERR;
    }
    sighandler_t old = program_handler(sig, disp, 0, 0);
    if (old == SIG_ERR || one_signal_mask(SIG_UNBLOCK, sig, &before) != 0)
        return SIG_ERR;
    return sigismember(&before, sig) ? SIG_HOLD : old;
}

PS_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    return mask_change_by(ps_real_pthread_sigmask, how, set, old);
}

PS_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    return mask_change(how, set, old);
}

/* sighold() and sigrelse() (System V; glibc and musl have both) change
 * the mask through the C library's own sigprocmask, which ours never
 * sees: a thread that blocked SIGURG so would still be remembered as
 * taking it, and sent one that stays pending.  Through mask_change, then,
 * with the C library's checks: -1 (EINVAL) for a bad signal. */
PS_EXPORT int sighold(int sig)
{
    return one_signal_mask(SIG_BLOCK, sig, NULL);
}

PS_EXPORT int sigrelse(int sig)
{
    return one_signal_mask(SIG_UNBLOCK, sig, NULL);
}
