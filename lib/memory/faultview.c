/*
 * faultview.c - the program's view of SIGSEGV and SIGBUS while our fault
 * handler stands in front of it (memread.h; the read path is memread.c).
 *
 * First in line, always.  A fault in a guarded read must reach *our*
 * handler first: had the program's handler (Python's faulthandler, which
 * pytest enables; CUDA; a crash reporter) seen it, it would at best print a
 * bogus "Fatal Python error", at worst abort.  Leaving the direct path
 * whenever the program installs a handler would put every pytest run on
 * the 100x dearer syscall path.  So ours stays in the kernel and the
 * program's handler lives in a *view*:
 *   - when the sampler goes direct (ps_mem_enable_direct, once the
 *     interpreter is up) ours goes in, and what was installed before becomes
 *     the program's view of the signal (struct fault_view);
 *   - from then on our sigaction()/signal() interposers
 *     (lib/platform/linux/interpose_sigaction.c -> ps_mem_fault_sigaction)
 *     record the program's handler in the view and answer its queries from
 *     the view: the program sees exactly what the kernel would have shown
 *     it (ps_sigaction_as_kernel(), platform.h), so a handler that saves "old" and chains
 *     to it chains to what it replaced, never to us;
 *   - every fault that is not one of our reads is delivered to the view as
 *     the kernel would have delivered it (deliver());
 *   - a change that bypasses the interposers (a raw rt_sigaction system
 *     call, glibc's sysv_signal/sigset, which call its internal sigaction)
 *     puts another handler in front of ours.  The sampler checks who is
 *     installed every few ticks (ps_mem_tick says when), and then leaves
 *     the direct path for good and hands that signal back to the kernel
 *     (the interposers pass through from then on).  That check is the only window left: a fault
 *     of ours in the ticks between such a change and the check would
 *     reach the program's handler.
 *
 * Delivering a fault that is not ours, exactly as the kernel would have.
 * Our handler only siglongjmp()s when the faulting thread is the one inside
 * a guarded read and the fault came from the hardware (si_code > 0: a
 * kill() or raise() of SIGSEGV is never swallowed, even on the sampler
 * thread).  Anything else goes to the view:
 *   - a handler gets the same siginfo and ucontext (a handler that rewrites
 *     the ucontext to resume elsewhere still works: we return to the
 *     kernel's sigreturn with it), with the mask, arguments, SA_RESETHAND
 *     and errno the kernel would have given it, and never in a loop of
 *     handlers that chain back to us: ps_sigview_deliver()
 *     (lib/platform/sigview.c has the rules, shared with the other signals
 *     whose handler stands in front of the program's);
 *   - SA_ONSTACK is decided by the kernel when it delivers to *our*
 *     handler, so ours is installed with the view's SA_ONSTACK (and
 *     SA_RESTART, which decides whether a sent SIGSEGV restarts an
 *     interrupted system call), updated on every change of the view
 *     (apply()): faulthandler's handler runs on the alternate stack it set
 *     up, and a handler that did not ask for one runs on the thread's stack,
 *     which may be larger than an alternate stack.  Our frames add ~0.5 KiB
 *     below the program's handler on that stack;
 *   - SIG_DFL (or SIG_IGN for a hardware fault, which the kernel does not
 *     let a program ignore): we leave the direct path, put SIG_DFL back
 *     and return, so the faulting instruction runs again and the process
 *     dies of the same signal at the same instruction, with the same core
 *     dump, as without us.  A SIGSEGV sent with kill() would not recur by
 *     itself, so it is re-sent to the same thread with pthread_kill()
 *     (raise() may take a lock in some C libraries; pthread_kill on oneself
 *     does not), and a SIG_IGN'd one is dropped as it would have been.
 * What still differs: a sent SIGSEGV/SIGBUS that the program ignores
 * interrupts a blocking system call on the thread it lands on (it reaches
 * our handler, which drops it; SA_RESTART restarts most calls, not all),
 * where the kernel would have discarded it; and a signal arriving between
 * the kernel's delivery and our pthread_sigmask is taken as if it had come
 * just before the fault.
 *
 * Signal- and fault-safety of the view: the view itself is published
 * without a lock (sigview.c says how).  Concurrent changes of the program
 * are ordered by its atomic index; apply() re-reads it after installing our
 * flags, so the kernel ends up with the flags of the last view whichever
 * thread applies last.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "config.h"
#include "memory/guard.h"
#include "memory/memread.h"
#include "platform/platform.h"
#include "platform/sigview.h"
#include "util/tickpath.h"

PS_TICK_DATA static _Atomic int handlers_installed;   /* we have put ours in, once */
PS_TICK_DATA static int direct_disabled_by_env;       /* PYSAMPLE_READ_MODE=syscall|pipe|file */

/*
 * The program's view of SIGSEGV or SIGBUS while ours is installed: the
 * action it set last (or the one installed before ours), in the form the
 * kernel would report it (platform/sigview.h).
 */
enum { VIEW_OFF, VIEW_ATTACHING, VIEW_ON };

struct fault_view {
    int sig;
    _Atomic int state;      /* VIEW_ON: ours installed, the view is what the program sees */
    _Atomic int passing;    /* program sigaction() calls going to the kernel now */
    struct ps_sigview view;
};

static struct fault_view view_segv = { .sig = SIGSEGV }, view_bus = { .sig = SIGBUS };


static void on_fault(int sig, siginfo_t *si, void *uc);

static struct fault_view *view_of(int sig)
{
    return sig == SIGSEGV ? &view_segv : sig == SIGBUS ? &view_bus : NULL;
}

static int is_ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fault;
}

/* Our flags for view v: the stack and restart behaviour it asked for. */
static int our_flags(const struct sigaction *v)
{
    int f = SA_SIGINFO | SA_NODEFER;
    if (ps_sigaction_has_function(v) && !is_ours(v))
        return f | (v->sa_flags & ps_sigaction_carried_flags());
    /* Default action: the alternate stack if the thread has one lets us
     * run (and put SIG_DFL back) even on a stack overflow. */
    return f | SA_ONSTACK | SA_RESTART;
}

static int put_ours(int sig, int flags, struct sigaction *prev)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    return ps_real_sigaction(sig, &sa, prev);
}

/* Makes our installation match the current view.  Whoever applies last
 * re-reads the index afterwards, so racing changes end with the flags of
 * the last view (a few rounds at most; each is one system call). */
static void apply(struct fault_view *fv)
{
    for (int round = 0; round < 8; round++) {
        unsigned idx = atomic_load(&fv->view.cur);
        put_ours(fv->sig, our_flags(&fv->view.slots[idx % PS_SIGVIEW_SLOTS]), NULL);
        if (atomic_load(&fv->view.cur) == idx)
            return;
    }
}

static int installed_is_ours(int sig)
{
    struct sigaction cur;
    return ps_real_sigaction(sig, NULL, &cur) == 0 && is_ours(&cur);
}

/* Someone bypassed the interposers: the kernel's action is theirs now.  The
 * signal is the kernel's business again, and the direct path is over. */
static void detach(struct fault_view *fv)
{
    atomic_store(&fv->state, VIEW_OFF);
    ps_mem_give_up_direct();
}

/* Spins a moment (sched_yield) until cond; gives up after PS_SPIN_NS. */
#define PS_SPIN_NS 100000000ull
#define SPIN_UNTIL(cond)                                                   \
    do {                                                                   \
        uint64_t spin_end_ = 0;                                            \
        while (!(cond)) {                                                  \
            uint64_t now_ = ps_now_ns();                                   \
            if (spin_end_ == 0)                                            \
                spin_end_ = now_ + PS_SPIN_NS;                             \
            else if (now_ > spin_end_)                                     \
                break;                                                     \
            sched_yield();                                                 \
        }                                                                  \
    } while (0)

/*
 * The program's sigaction() of SIGSEGV/SIGBUS (memread.h).
 *
 * A call that goes to the kernel (ours not in front yet) must not land
 * between attach()'s swap and the view taking over: the program would be
 * told that "old" is ours and save it as its previous handler, and its own
 * would sit in front of our reads.  So the two meet Dekker-style: this side
 * counts itself in `passing` and then looks at the state, attach() sets the
 * state and then waits for `passing` to drain; whichever order they run in,
 * either the call waits for the view (and becomes part of it) or attach
 * waits for the call (and finds its handler as the one installed before
 * ours).  Both waits are bounded: a signal handler that calls sigaction()
 * on a thread that was itself passing through cannot deadlock the two, it
 * only ends with the direct path off (ps_mem_enable_direct checks who is
 * in).
 */
int ps_mem_fault_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    struct fault_view *fv = view_of(sig);
    if (fv == NULL)
        return ps_real_sigaction(sig, act, old);
    for (int round = 0;; round++) {
        atomic_fetch_add(&fv->passing, 1);
        int st = atomic_load(&fv->state);
        if (st == VIEW_OFF || (st == VIEW_ATTACHING && round > 0)) {
            /* Counted in `passing` all through the call. */
            int rc = ps_real_sigaction(sig, act, old);
            atomic_fetch_sub(&fv->passing, 1);
            return rc;
        }
        atomic_fetch_sub(&fv->passing, 1);
        if (st == VIEW_ON)
            break;
        SPIN_UNTIL(atomic_load(&fv->state) != VIEW_ATTACHING);
    }
    if (!installed_is_ours(sig)) {
        detach(fv);   /* for good: attach() runs once */
        return ps_real_sigaction(sig, act, old);
    }
    ps_sigview_set(&fv->view, act, old);
    if (act != NULL)
        apply(fv);
    return 0;
}

/* ---- delivering a fault that is not ours ---------------------------------- */

/* SA_RESETHAND has reset the view to SIG_DFL: our flags follow it. */
static void reapply(struct ps_sigview *v)
{
    apply(view_of(v->sig));
}

/* Hands a fault that is not ours to the program's view, as the kernel
 * would have (the rules are at the top of this file and in sigview.c). */
static void deliver(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    struct fault_view *fv = view_of(sig);
    int hw = ps_signal_from_fault(si);
    if (ps_sigview_deliver(&fv->view, si, uc, hw, saved_errno, reapply) != PS_SIGVIEW_DEFAULT)
        return;   /* errno as the program's handler left it */

    /* Default action: put it back and let the fault happen again (or
     * re-send a signal that was sent).  The direct path ends first, so
     * that no read of ours starts while SIG_DFL is in; one already in
     * flight on the sampler thread could still fault in the moment
     * before this thread dies, which kills the process a moment earlier
     * by the same signal.  Our handler being gone also ends any loop
     * through a handler that chains back to us. */
    ps_mem_give_up_direct();
    atomic_store(&fv->state, VIEW_OFF);
    ps_sigview_default(&fv->view, hw);
    errno = saved_errno;
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    sigjmp_buf *env;
    if (ps_signal_from_fault(si) && (env = ps_mem_fault_recovery()) != NULL)
        siglongjmp(*env, 1);
    deliver(sig, si, uc);
}

int ps_mem_init(void)
{
    /* Test-only switch (docs/safety.md): pin the read path. */
    const char *m = ps_env_initial("PYSAMPLE_READ_MODE", NULL);
    if (m != NULL && (strcmp(m, "syscall") == 0 || strcmp(m, "process_vm_readv") == 0 ||
                      strcmp(m, "pipe") == 0 || strcmp(m, "file") == 0 ||
                      strcmp(m, "procmem") == 0)) {
        direct_disabled_by_env = 1;
        if (strcmp(m, "syscall") != 0)
            return ps_plat_read_force(m);
    }
    return ps_plat_read_init();
}

/* Puts ours in front; what was there becomes the program's view.  The
 * program's sigaction() calls wait meanwhile (ps_mem_fault_sigaction says why); a
 * raw rt_sigaction cannot be made to wait, and one landing in the moment
 * between our swap and the check in ps_mem_enable_direct keeps the direct
 * path off. */
static void attach(struct fault_view *fv)
{
    struct sigaction cur, prev, now;
    atomic_store(&fv->state, VIEW_ATTACHING);
    SPIN_UNTIL(atomic_load(&fv->passing) == 0);
    if (ps_real_sigaction(fv->sig, NULL, &cur) != 0) {
        atomic_store(&fv->state, VIEW_OFF);
        return;
    }
    int flags = our_flags(&cur);
    if (put_ours(fv->sig, flags, &prev) != 0) {
        atomic_store(&fv->state, VIEW_OFF);
        return;
    }
    if (ps_real_sigaction(fv->sig, NULL, &now) == 0 && is_ours(&now))
        ps_sigaction_learn(&now, flags);
    if (is_ours(&prev)) {
        /* Ours already (a second start): the program's view stays. */
        atomic_store(&fv->state, VIEW_ON);
        return;
    }
    /* prev is what the kernel swapped out, whatever happened since cur. */
    ps_sigview_init(&fv->view, fv->sig, on_fault, &prev);
    if (our_flags(&prev) != flags)
        apply(fv);
    atomic_store(&fv->state, VIEW_ON);
}

void ps_mem_enable_direct(void)
{
    if (!ps_plat_read_direct_ok())
        return;  /* never on this platform (lib/platform/darwin/read.c says why) */
    if (direct_disabled_by_env || ps_mem_direct_given_up())
        return;
    if (!atomic_exchange(&handlers_installed, 1)) {
        attach(&view_segv);
        attach(&view_bus);
    }
    if (installed_is_ours(SIGSEGV) && installed_is_ours(SIGBUS))
        ps_mem_go_direct();
    else
        ps_mem_give_up_direct();
}

int ps_mem_handlers_installed(void)
{
    return atomic_load(&handlers_installed) && installed_is_ours(SIGSEGV) &&
           installed_is_ours(SIGBUS);
}

/*
 * The ownership check: who is installed, asked of the kernel (two sigaction
 * queries: ~155 ns each when hot, but ~0.6 us of wall time at the top of
 * a tick under load, where the kernel's paths are cold after the sleep;
 * docs/performance.md, "#36 round 3 (tickcost)").  Every libc path into the kernel's action goes
 * through our interposers and is seen at once; the check only exists for
 * what bypasses them (a raw rt_sigaction, glibc's own sysv_signal/sigset).
 * Between such a change and the check, a fault of one of our reads would
 * reach the program's handler.
 *
 * What the window risks is counted in ticks, not time: only a tick's reads
 * can fault, so the exposure is the number of walks between a raw install
 * and the check.  Since #14 the check ran at most once a millisecond:
 * every 10th tick at 10 kHz (10 walks exposed), every tick at 100 Hz (a
 * 10 ms window).  It now runs on every PS_CHECK_TICKS-th tick or once
 * PS_CHECK_NS have passed, whichever comes first, so neither bound is wider
 * than the one already accepted at one of those rates: at most 9 walks go
 * unchecked, and the first tick 10 ms after a check checks (every tick at
 * 100 Hz and below, as before).  At 1 kHz the median tick no longer carries two system calls.
 *
 * Also tried and left out: checking at once after a dlopen (the installers
 * that bypass the interposers, Go's runtime in a c-shared library, arrive
 * that way).  The loader's count (dl_iterate_phdr's dlpi_adds, ~150
 * instructions) cost ~430 ns of wall time at the top of every tick, its
 * cache lines cold after the sleep: as much as the system calls it saved.
 */
#define PS_CHECK_TICKS 10u
#define PS_CHECK_NS 10000000ull

/* The sampler thread's own (ps_mem_tick runs there only, and in the unit
 * test's single thread). */
PS_TICK_DATA static struct {
    uint64_t last_ns;       /* 0: never checked */
    unsigned ticks;         /* since the last check */
} check_sched;

static int check_due(uint64_t now)
{
    if (check_sched.last_ns == 0 || now < check_sched.last_ns)
        return 1;
    return ++check_sched.ticks >= PS_CHECK_TICKS || now - check_sched.last_ns >= PS_CHECK_NS;
}

void ps_mem_tick(void)
{
    ps_mem_tick_at(ps_now_ns());
}

PS_TICK_PATH void ps_mem_tick_at(uint64_t now)
{
    if (ps_mem_mode() != PS_READ_DIRECT)
        return;
    if (!check_due(now))
        return;
    check_sched.last_ns = now;
    check_sched.ticks = 0;
    if (!installed_is_ours(SIGSEGV))
        detach(&view_segv);
    if (!installed_is_ours(SIGBUS))
        detach(&view_bus);
}

void ps_mem_yield_fault_handlers(void)
{
    if (!atomic_load(&handlers_installed))
        return;
    ps_mem_give_up_direct();
    ps_mem_wait_readers();
}

void ps_mem_after_fork(void)
{
    /* Only the forking thread exists in the child: a read the sampler had
     * in flight at fork time will never finish. */
    ps_mem_read_after_fork();
    ps_sigview_after_fork();
}

void ps_mem_force_mode(enum ps_read_mode m)
{
    if (m == PS_READ_DIRECT) {
        if (atomic_load(&handlers_installed) && installed_is_ours(SIGSEGV) &&
            installed_is_ours(SIGBUS))
            ps_mem_go_direct();
        return;
    }
    ps_mem_set_mode(m);
}

