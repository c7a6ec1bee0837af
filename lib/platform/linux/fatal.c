/*
 * linux/fatal.c - our handler of fatal signals at default disposition
 * (platform.h: ps_fatal_signals_take_over), and what the program's
 * sigaction(), signal() (linux/interpose_sigaction.c), kill() and raise()
 * (linux/interpose.c) are told of them.
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
 *     the same signal, with the same status, as without us (the view and
 *     the default action are platform/sigview.c's, as for SIGSEGV and
 *     SIGURG; which signals are managed is its table's PS_SIGKEEP_FATAL rows).
 * Not seen: changes made through raw system calls, bsd_signal()/sysv_signal()
 * /sigset(), or by a library bound to the C library's internal names.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "platform/platform.h"
#include "platform/sigview.h"
#include "platform/linux/linux.h"

/* The signals are the PS_SIGKEEP_FATAL rows of sigview.c's table.  SIGQUIT:
 * gunicorn's master sends it to its workers; one that is already exiting
 * (Python has put the default back) dies of it. */
#define PS_FATAL_MAX 8

struct managed {
    int sig;
    /* the default action as the program set it: only SIG_DFL goes in (a
     * handler or SIG_IGN goes to the kernel in place of ours) */
    struct ps_sigview view;
};

static struct managed managed_sigs[PS_FATAL_MAX];
static size_t n_managed;
static _Atomic int signals_on;
static void (*write_first)(int sig);   /* set before signals_on */

static struct managed *managed(int sig)
{
    for (size_t i = 0; i < n_managed; i++)
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
    for (size_t i = 0; i < n_managed; i++)
        sigaddset(&sa.sa_mask, managed_sigs[i].sig);
    return ps_real_sigaction(m->sig, &sa, NULL);
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    struct managed *m = managed(sig);
    if (m == NULL)
        return;
    if (write_first != NULL)
        write_first(sig);
    /* Die as we would have without us: the view is the default action
     * (managed_sigaction puts nothing else in), which the delivery rules
     * of sigview.c turn into the program's default action back, the
     * signal again, unblocked so that it is delivered now. */
    if (ps_sigview_deliver(&m->view, si, uc, 0, saved, NULL) == PS_SIGVIEW_DEFAULT)
        ps_sigview_default(&m->view, 0);
    /* Still alive: something else holds the signal back.  Carry on as the
     * program would have, with our handler in place for the next one. */
    install_ours(m);
    errno = saved;
}

/* The signals of the table's PS_SIGKEEP_FATAL rows, each viewed at SIG_DFL
 * until we know better. */
static void collect_managed(void)
{
    int n;
    const struct ps_sig_role *roles = ps_sig_roles(&n);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    n_managed = 0;
    for (int i = 0; i < n && n_managed < PS_FATAL_MAX; i++) {
        if (roles[i].keeper != PS_SIGKEEP_FATAL)
            continue;
        struct managed *m = &managed_sigs[n_managed++];
        m->sig = roles[i].sig;
        ps_sigview_init(&m->view, m->sig, on_fatal, &dfl);
    }
}

void ps_fatal_signals_take_over(void (*write)(int sig))
{
    write_first = write;
    if (n_managed == 0)
        collect_managed();
    for (size_t i = 0; i < n_managed; i++) {
        struct sigaction cur;
        if (ps_real_sigaction(managed_sigs[i].sig, NULL, &cur) != 0 || !is_default(&cur))
            continue;
        ps_sigview_init(&managed_sigs[i].view, managed_sigs[i].sig, on_fatal, &cur);
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
    if (ours)
        ps_sigview_get(&m->view, &before);
    else
        before = cur;
    if (act != NULL) {
        if (is_default(act) && (ours || install_ours(m) == 0)) {
            ps_sigview_set(&m->view, act, NULL);
        } else if (ps_real_sigaction(m->sig, act, NULL) != 0) {
            return -1;
        }
    }
    if (old != NULL)
        *old = before;
    return 0;
}

int ps_fatal_signal_managed(int sig)
{
    return managed(sig) != NULL && atomic_load(&signals_on);
}

int ps_fatal_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!ps_fatal_signal_managed(sig))
        return ps_real_sigaction(sig, act, old);   /* not taken over: the kernel's */
    return managed_sigaction(managed(sig), act, old);
}

/* A managed signal sent to this process that would kill it as things stand
 * (our handler in, or the plain default). */
int ps_fatal_signal_kills_us(int sig)
{
    struct managed *m = managed(sig);
    struct sigaction cur;
    if (m == NULL || !atomic_load(&signals_on) || ps_real_sigaction(sig, NULL, &cur) != 0)
        return 0;
    return is_ours(&cur) || is_default(&cur);
}
