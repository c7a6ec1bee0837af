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
 *     the same signal, with the same status, as without us.
 * Not seen: changes made through raw system calls, bsd_signal()/sysv_signal()
 * /sigset(), or by a library bound to the C library's internal names.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "platform/platform.h"
#include "platform/linux/linux.h"

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

int ps_fatal_signal_managed(int sig)
{
    return managed(sig) != NULL && atomic_load(&signals_on);
}

int ps_fatal_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!ps_fatal_signal_managed(sig))
        return -2;
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
