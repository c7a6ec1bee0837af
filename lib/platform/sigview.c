/*
 * platform/sigview.c - which signal is whose (the table), the program's
 * view of one signal, and delivery to that view as the kernel would have
 * delivered (sigview.h).
 *
 * Delivery rules, each what the kernel does when it runs a handler:
 *   - SIG_IGN: the signal is dropped, unless the hardware raised it (a
 *     fault cannot be ignored: the kernel kills with it), then default;
 *   - SIG_DFL: the default action (ps_sigview_default): nothing for the
 *     signals the kernel ignores by default, else death by the signal;
 *   - a handler runs with the interrupted code's mask plus its sa_mask plus
 *     the signal itself unless SA_NODEFER.  Set here, not restored: our
 *     handler returns to the kernel's sigreturn, which puts the interrupted
 *     mask back from the context, as after the program's own delivery, and a
 *     handler that siglongjmp()s out leaves the mask as the kernel's
 *     delivery would have left it;
 *   - SA_RESETHAND resets the handler to SIG_DFL before it runs; the flags
 *     and mask stay (so does the kernel: only the handler is reset), and only
 *     if the view is still the one delivered (a change the program made
 *     meanwhile wins);
 *   - the handler gets the kernel's three arguments whatever SA_SIGINFO
 *     says: on x86-64 the siginfo and ucontext pointers are in the argument
 *     registers for every handler, and handlers declared with one parameter
 *     that read the context exist; a one-parameter handler ignores the
 *     other two under every calling convention we run on;
 *   - errno: the interrupted code's before the handler runs; what the
 *     handler leaves is what the interrupted code sees, as without us.
 * And one rule the kernel does not need: if the program's handler chains
 * back to ours (two profilers or crash reporters, each saved the other as
 * "previous"), the two would call each other until the stack overflows.
 * Each thread inside a delivery is recorded with its stack depth; a call
 * nested inside an earlier one on the same thread more than
 * PS_CHAIN_MAX_NEST deep is a loop and gets the default action.  A record
 * left by a handler that siglongjmp()ed out is stale: the new call is not
 * below it on the stack.
 *
 * The view: a slot of a small array, written completely before an atomic
 * index publishes it (atomic_exchange, which also yields the previous one
 * for "old" in one step); readers copy the published slot.  A slot is
 * rewritten only PS_SIGVIEW_SLOTS publications later, so a reader would have
 * to stall across 15 further sigaction() calls of the program on the same
 * signal to see a torn copy.  No lock: sigaction() may run in a signal
 * handler (faulthandler puts its previous handler back from inside its own),
 * on any thread, while another thread's signal is being delivered.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/ucontext.h>

#include "platform/platform.h"
#include "platform/sigview.h"

#define PS_CHAIN_SLOTS 64
#define PS_CHAIN_MAX_NEST 2
#define PS_CHAIN_WINDOW (256u * 1024u)

/* ---- the table ------------------------------------------------------------ */

static const struct ps_sig_role roles[] = {
    { SIGSEGV, PS_SIG_SHARED, PS_SIGKEEP_FAULT,
      "fault-safe reads: ours stays first; a fault of one of our reads is ours, "
      "every other goes to the program's view" },
    { SIGBUS, PS_SIG_SHARED, PS_SIGKEEP_FAULT,
      "fault-safe reads, as SIGSEGV" },
    { SIGURG, PS_SIG_LIBRARY, PS_SIGKEEP_NATIVE,
      "native stacks: a running thread's registers on request; the requests are "
      "ours, every other SIGURG goes to the program's view" },
    { SIGTERM, PS_SIG_WATCHED, PS_SIGKEEP_FATAL,
      "at default: the profile written first, then death by the signal" },
    { SIGHUP, PS_SIG_WATCHED, PS_SIGKEEP_FATAL, "as SIGTERM" },
    { SIGQUIT, PS_SIG_WATCHED, PS_SIGKEEP_FATAL, "as SIGTERM" },
    { SIGINT, PS_SIG_WATCHED, PS_SIGKEEP_FATAL, "as SIGTERM" },
};

static const struct ps_sig_role program_role = { 0, PS_SIG_PROGRAM, PS_SIGKEEP_NONE,
                                                 "nothing: the program's alone" };

const struct ps_sig_role *ps_sig_role(int sig)
{
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (roles[i].sig == sig)
            return &roles[i];
    return &program_role;
}

const struct ps_sig_role *ps_sig_roles(int *n)
{
    *n = (int)(sizeof roles / sizeof roles[0]);
    return roles;
}

void ps_sig_fatal_add(sigset_t *set)
{
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (roles[i].keeper == PS_SIGKEEP_FATAL)
            sigaddset(set, roles[i].sig);
}

int ps_sig_default_ignores(int sig)
{
    /* POSIX's "ignore" defaults (SIGCONT continues, which is no death). */
    return sig == SIGURG || sig == SIGCHLD || sig == SIGWINCH || sig == SIGCONT;
}

/* ---- the view ------------------------------------------------------------- */

int ps_sigaction_has_function(const struct sigaction *sa)
{
    return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

void ps_sigview_init(struct ps_sigview *v, int sig, void (*ours)(int, siginfo_t *, void *),
                     const struct sigaction *installed)
{
    v->sig = sig;
    v->ours = ours;
    v->slots[0] = *installed;
    atomic_store(&v->next, 1);
    atomic_store(&v->cur, 0);
}

void ps_sigview_get(struct ps_sigview *v, struct sigaction *out)
{
    *out = v->slots[atomic_load(&v->cur) % PS_SIGVIEW_SLOTS];
}

/* Publishes a (in the kernel's form) and returns the slot it replaced. */
static unsigned publish(struct ps_sigview *v, const struct sigaction *a)
{
    unsigned slot = atomic_fetch_add(&v->next, 1) % PS_SIGVIEW_SLOTS;
    v->slots[slot] = *a;
    return atomic_exchange(&v->cur, slot) % PS_SIGVIEW_SLOTS;
}

void ps_sigview_set(struct ps_sigview *v, const struct sigaction *act, struct sigaction *old)
{
    struct sigaction nv, ov;
    if (act == NULL) {
        ps_sigview_get(v, &ov);
    } else {
        ps_sigaction_as_kernel(act, &nv);   /* before *old is written: act may be old */
        ov = v->slots[publish(v, &nv)];
    }
    if (old != NULL)
        *old = ov;
}

/* SA_RESETHAND: the handler becomes SIG_DFL unless the view changed since
 * slot idx was read.  1 if it was reset. */
static int reset_handler(struct ps_sigview *v, unsigned idx, const struct sigaction *a)
{
    unsigned slot = atomic_fetch_add(&v->next, 1) % PS_SIGVIEW_SLOTS;
    v->slots[slot] = *a;
    v->slots[slot].sa_handler = SIG_DFL;
    return atomic_compare_exchange_strong(&v->cur, &idx, slot);
}

/* ---- the loop guard --------------------------------------------------------- */

/* Threads currently inside a delivery. */
static struct {
    _Atomic long tid;
    uintptr_t sp;
    int depth;
} chain_slots[PS_CHAIN_SLOTS];

struct chain_mark {
    int slot;            /* to release afterwards; -1: no guard (all busy) */
    uintptr_t saved_sp;
    int saved_depth;     /* -1: the slot is released on the way out */
};

/* The record of this thread, moved to sp; 1 if this call is a loop. */
static int chain_nest(int i, uintptr_t sp, struct chain_mark *m)
{
    m->saved_sp = chain_slots[i].sp;
    m->saved_depth = chain_slots[i].depth;
    int nested = sp < m->saved_sp && m->saved_sp - sp < PS_CHAIN_WINDOW;
    int depth = nested ? m->saved_depth + 1 : 0;
    if (depth > PS_CHAIN_MAX_NEST)
        return 1;
    m->slot = i;
    chain_slots[i].sp = sp;
    chain_slots[i].depth = depth;
    if (!nested)
        m->saved_depth = -1;   /* stale record: release it on the way out */
    return 0;
}

/* 1 if this call is nested too deep inside earlier ones on this thread. */
static int chain_enter(uintptr_t sp, struct chain_mark *m)
{
    long tid = ps_gettid();
    int free_slot = -1;
    m->slot = -1;
    m->saved_sp = 0;
    m->saved_depth = -1;
    for (int i = 0; i < PS_CHAIN_SLOTS; i++) {
        long t = atomic_load(&chain_slots[i].tid);
        if (t == tid)
            return chain_nest(i, sp, m);
        if (t == 0 && free_slot < 0)
            free_slot = i;
    }
    for (int i = free_slot; i >= 0 && i < PS_CHAIN_SLOTS; i++) {
        long expected = 0;
        if (atomic_compare_exchange_strong(&chain_slots[i].tid, &expected, tid)) {
            chain_slots[i].sp = sp;
            chain_slots[i].depth = 0;
            m->slot = i;
            return 0;
        }
    }
    return 0;
}

static void chain_leave(const struct chain_mark *m)
{
    if (m->slot < 0)
        return;
    if (m->saved_depth < 0) {
        atomic_store(&chain_slots[m->slot].tid, 0);
    } else {
        chain_slots[m->slot].sp = m->saved_sp;
        chain_slots[m->slot].depth = m->saved_depth;
    }
}

void ps_sigview_after_fork(void)
{
    memset(chain_slots, 0, sizeof chain_slots);
}

/* ---- delivery ----------------------------------------------------------------- */

/* The mask the kernel would have set for handler a: the interrupted code's
 * (uc's; the calling thread's own if there is no context), plus sa_mask,
 * plus the signal unless SA_NODEFER. */
static void handler_mask(const struct sigaction *a, int sig, const void *uc, sigset_t *mask)
{
    if (uc != NULL)
        memcpy(mask, &((const ucontext_t *)uc)->uc_sigmask, sizeof *mask);
    else
        pthread_sigmask(SIG_BLOCK, NULL, mask);
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&a->sa_mask, s) == 1)
            sigaddset(mask, s);
    if (!(a->sa_flags & SA_NODEFER))
        sigaddset(mask, sig);
}

static void run_handler(const struct sigaction *a, int sig, siginfo_t *si, void *uc,
                        int saved_errno)
{
    sigset_t mask;
    handler_mask(a, sig, uc, &mask);
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    errno = saved_errno;
    /* sa_handler and sa_sigaction are one pointer in a union. */
    a->sa_sigaction(sig, si, uc);
}

enum ps_sigview_outcome ps_sigview_deliver(struct ps_sigview *v, siginfo_t *si, void *uc,
                                           int from_fault, int saved_errno,
                                           void (*after_reset)(struct ps_sigview *v))
{
    unsigned idx = atomic_load(&v->cur) % PS_SIGVIEW_SLOTS;
    struct sigaction a = v->slots[idx];
    if (!ps_sigaction_has_function(&a) || a.sa_sigaction == v->ours) {
        errno = saved_errno;
        if (a.sa_handler == SIG_IGN && !from_fault)
            return PS_SIGVIEW_IGNORED;
        return PS_SIGVIEW_DEFAULT;
    }
    struct chain_mark m;
    if (chain_enter((uintptr_t)__builtin_frame_address(0), &m)) {
        errno = saved_errno;
        return PS_SIGVIEW_DEFAULT;   /* a loop through handlers that chain back */
    }
    if ((a.sa_flags & SA_RESETHAND) && reset_handler(v, idx, &a) && after_reset != NULL)
        after_reset(v);
    run_handler(&a, v->sig, si, uc, saved_errno);
    chain_leave(&m);
    return PS_SIGVIEW_RAN;
}

void ps_sigview_default(struct ps_sigview *v, int from_fault)
{
    int saved = errno;
    if (ps_sig_default_ignores(v->sig))
        return;
    struct sigaction dfl;
    ps_sigview_get(v, &dfl);
    dfl.sa_handler = SIG_DFL;
    dfl.sa_flags &= ~(SA_SIGINFO | SA_RESETHAND);
    ps_real_sigaction(v->sig, &dfl, NULL);
    if (!from_fault) {
        /* pthread_kill on oneself takes no lock (raise() may, in some C
         * libraries); unblocked so that it is delivered now. */
        pthread_kill(pthread_self(), v->sig);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, v->sig);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    }
    errno = saved;
}
