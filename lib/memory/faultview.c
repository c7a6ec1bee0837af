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
 *     it (normalise() says how), so a handler that saves "old" and chains
 *     to it chains to what it replaced, never to us;
 *   - every fault that is not one of our reads is delivered to the view as
 *     the kernel would have delivered it (deliver());
 *   - a change that bypasses the interposers (a raw rt_sigaction system
 *     call, glibc's sysv_signal/sigset, which call its internal sigaction)
 *     puts another handler in front of ours.  The sampler checks who is
 *     installed once per tick (ps_mem_tick) and then leaves the direct path
 *     for good and hands that signal back to the kernel (the interposers
 *     pass through from then on).  That check is the only window left: a
 *     fault of ours in the tick after such a change would reach the
 *     program's handler.
 *
 * Delivering a fault that is not ours, exactly as the kernel would have.
 * Our handler only siglongjmp()s when the faulting thread is the one inside
 * a guarded read and the fault came from the hardware (si_code > 0: a
 * kill() or raise() of SIGSEGV is never swallowed, even on the sampler
 * thread).  Anything else goes to the view:
 *   - a handler gets the same siginfo and ucontext (a handler that rewrites
 *     the ucontext to resume elsewhere still works: we return to the
 *     kernel's sigreturn with it), is called with its sa_mask blocked plus
 *     the signal unless SA_NODEFER, with the kernel's three arguments, and
 *     with SA_RESETHAND resetting the view to SIG_DFL first (the
 *     kernel keeps the flags and resets only the handler, and so do we).
 *     We do not restore the mask when it returns: the kernel's sigreturn
 *     restores the interrupted context's mask from the ucontext, as it
 *     would have, and a handler that siglongjmp()s out leaves the mask as
 *     the kernel's delivery would have left it;
 *   - SA_ONSTACK is decided by the kernel when it delivers to *our*
 *     handler, so ours is installed with the view's SA_ONSTACK (and
 *     SA_RESTART, which decides whether a sent SIGSEGV restarts an
 *     interrupted system call), updated on every change of the view
 *     (apply()): faulthandler's handler runs on the alternate stack it set
 *     up, and a handler that did not ask for one runs on the thread's stack,
 *     which may be larger than an alternate stack.  Our frames add ~0.5 KiB
 *     below the program's handler on that stack;
 *   - the program's errno: restored before its handler runs; whatever its
 *     handler leaves in errno is what the interrupted code sees, as
 *     without us;
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
 * Signal- and fault-safety of the view.  The interposers may run in a
 * signal handler (faulthandler puts its previous handler back from inside
 * its own handler, then raises the signal again), on any thread, and a
 * fault may be delivered on one thread while another changes the view.  So
 * nothing here takes a lock: a view is a slot of a small array, written
 * completely before an atomic index publishes it (atomic_exchange, which
 * also yields the previous one for "old" in one step), and readers copy the
 * published slot.  A slot is rewritten only PS_VIEW_SLOTS publications
 * later, so a reader would have to be stalled across 15 further sigaction()
 * calls of the program on the same signal to see a torn copy.  Concurrent
 * changes of the program are ordered by the exchange; apply() re-reads the
 * index after installing our flags, so the kernel ends up with the flags of
 * the last view whichever thread applies last.
 *
 * Handler-chain loops.  If the handler we chain to chains back to us (two
 * profilers, or a crash reporter, each saved the other as "previous"), the
 * two would call each other until the stack overflows.  Each thread inside
 * deliver() is recorded with its stack depth; a call that arrives nested
 * inside an earlier one on the same thread, more than PS_CHAIN_MAX_NEST
 * deep, is a loop and gets the default action instead.  A record left
 * behind by a handler that siglongjmp()ed out is recognised as stale
 * because the new call is not below it on the stack.
 *
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

#define PS_CHAIN_SLOTS 64
#define PS_CHAIN_MAX_NEST 2
#define PS_CHAIN_WINDOW (256u * 1024u)
#define PS_VIEW_SLOTS 16u

static _Atomic int handlers_installed;   /* we have put ours in, once */
static int direct_disabled_by_env;       /* PYSAMPLE_READ_MODE=syscall|pipe|file */

/*
 * The program's view of SIGSEGV or SIGBUS while ours is installed: the
 * action it set last (or the one installed before ours), in the form the
 * kernel would report it.  views[cur] is current; see "Signal- and
 * fault-safety of the view" above.
 */
enum { VIEW_OFF, VIEW_ATTACHING, VIEW_ON };

struct fault_view {
    int sig;
    _Atomic int state;      /* VIEW_ON: ours installed, the view is what the program sees */
    _Atomic int passing;    /* program sigaction() calls going to the kernel now */
    _Atomic unsigned cur;
    _Atomic unsigned next;  /* slot allocator */
    struct sigaction views[PS_VIEW_SLOTS];
};

static struct fault_view view_segv = { .sig = SIGSEGV }, view_bus = { .sig = SIGBUS };


/* Threads currently inside deliver() (the loop guard). */
static struct {
    _Atomic long tid;
    uintptr_t sp;
    int depth;
} chain_slots[PS_CHAIN_SLOTS];

static void on_fault(int sig, siginfo_t *si, void *uc);

static struct fault_view *view_of(int sig)
{
    return sig == SIGSEGV ? &view_segv : sig == SIGBUS ? &view_bus : NULL;
}

static int is_ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fault;
}

/* 1 if sa names a function rather than SIG_DFL or SIG_IGN.  The kernel
 * looks at the pointer alone (sa_handler and sa_sigaction share storage),
 * whatever SA_SIGINFO says, and so do we. */
static int has_function(const struct sigaction *sa)
{
    return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

static void set_default(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ps_real_sigaction(sig, &dfl, NULL);
}

/* ---- the program's view ------------------------------------------------ */

/* act as the kernel would store and report it (platform.h). */
static void normalise(const struct sigaction *act, struct sigaction *out)
{
    ps_sigaction_as_kernel(act, out);
}

/* Our flags for view v: the stack and restart behaviour it asked for. */
static int our_flags(const struct sigaction *v)
{
    int f = SA_SIGINFO | SA_NODEFER;
    if (has_function(v) && !is_ours(v))
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
        unsigned idx = atomic_load(&fv->cur);
        put_ours(fv->sig, our_flags(&fv->views[idx]), NULL);
        if (atomic_load(&fv->cur) == idx)
            return;
    }
}

/* Publishes v (already normalised) as the program's action and returns the
 * one it replaces. */
static void publish(struct fault_view *fv, const struct sigaction *v, struct sigaction *old)
{
    unsigned slot = atomic_fetch_add(&fv->next, 1) % PS_VIEW_SLOTS;
    fv->views[slot] = *v;
    unsigned prev = atomic_exchange(&fv->cur, slot);
    if (old != NULL)
        *old = fv->views[prev];
}

/* SA_RESETHAND, on delivery: the handler becomes SIG_DFL, flags and mask
 * stay (what the kernel does).  Only if the view is still the one being
 * delivered: a change the program made meanwhile wins. */
static void reset_view(struct fault_view *fv, unsigned idx, const struct sigaction *v)
{
    unsigned slot = atomic_fetch_add(&fv->next, 1) % PS_VIEW_SLOTS;
    fv->views[slot] = *v;
    fv->views[slot].sa_handler = SIG_DFL;
    if (atomic_compare_exchange_strong(&fv->cur, &idx, slot))
        apply(fv);
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
    struct sigaction nv, ov;
    if (act != NULL) {
        normalise(act, &nv);   /* before *old is written: act may be old */
        publish(fv, &nv, &ov);
        apply(fv);
    } else {
        ov = fv->views[atomic_load(&fv->cur) % PS_VIEW_SLOTS];
    }
    if (old != NULL)
        *old = ov;
    return 0;
}

/* ---- delivering a fault that is not ours ---------------------------------- */

/*
 * Loop guard.  Returns the slot to release afterwards (or -1 when every
 * slot is busy: no guard, the call goes ahead), and sets *loop when this
 * call is nested too deep inside earlier ones on the same thread.
 */
static int chain_enter(uintptr_t sp, int *loop, uintptr_t *saved_sp, int *saved_depth)
{
    long tid = ps_gettid();
    int free_slot = -1;
    *loop = 0;
    for (int i = 0; i < PS_CHAIN_SLOTS; i++) {
        long t = atomic_load(&chain_slots[i].tid);
        if (t == tid) {
            *saved_sp = chain_slots[i].sp;
            *saved_depth = chain_slots[i].depth;
            int nested = sp < *saved_sp && *saved_sp - sp < PS_CHAIN_WINDOW;
            int depth = nested ? *saved_depth + 1 : 0;
            if (depth > PS_CHAIN_MAX_NEST) {
                *loop = 1;
                return -1;
            }
            chain_slots[i].sp = sp;
            chain_slots[i].depth = depth;
            if (!nested)
                *saved_depth = -1;  /* stale record: release it on the way out */
            return i;
        }
        if (t == 0 && free_slot < 0)
            free_slot = i;
    }
    for (int i = free_slot; i >= 0 && i < PS_CHAIN_SLOTS; i++) {
        long expected = 0;
        if (atomic_compare_exchange_strong(&chain_slots[i].tid, &expected, tid)) {
            chain_slots[i].sp = sp;
            chain_slots[i].depth = 0;
            *saved_depth = -1;
            return i;
        }
    }
    return -1;
}

static void chain_leave(int slot, uintptr_t saved_sp, int saved_depth)
{
    if (slot < 0)
        return;
    if (saved_depth < 0) {
        atomic_store(&chain_slots[slot].tid, 0);
    } else {
        chain_slots[slot].sp = saved_sp;
        chain_slots[slot].depth = saved_depth;
    }
}

/*
 * Calls the program's handler v (view slot idx of fv) as the kernel would
 * have, errno back to the fault's (saved_errno) first.  1 if it ran, 0 if
 * this call is a loop through handlers that chain back to us.
 */
static int call_view(struct fault_view *fv, unsigned idx, const struct sigaction *v, int sig,
                     siginfo_t *si, void *uc, int saved_errno)
{
    int loop;
    uintptr_t saved_sp = 0;
    int saved_depth = -1;
    int slot = chain_enter((uintptr_t)__builtin_frame_address(0), &loop,
                           &saved_sp, &saved_depth);
    if (loop)
        return 0;
    if (v->sa_flags & SA_RESETHAND)
        reset_view(fv, idx, v);
    /* The kernel blocked nothing for us (SA_NODEFER, empty
     * sa_mask): block what it would have blocked for the
     * program's handler.  No restore afterwards: sigreturn puts
     * the interrupted context's mask back. */
    sigset_t block = v->sa_mask;
    if (!(v->sa_flags & SA_NODEFER))
        sigaddset(&block, sig);
    pthread_sigmask(SIG_BLOCK, &block, NULL);
    errno = saved_errno;
    /* Three arguments whatever SA_SIGINFO says, as the kernel
     * passes them on x86-64 (the siginfo and ucontext pointers
     * are in the argument registers for every handler, and
     * handlers declared with one parameter that read the context
     * exist); a one-parameter handler ignores the other two under
     * every calling convention we run on.  sa_handler and
     * sa_sigaction are one pointer in a union. */
    v->sa_sigaction(sig, si, uc);
    chain_leave(slot, saved_sp, saved_depth);
    return 1;
}

/* Hands a fault that is not ours to the program's view, as the kernel
 * would have (the rules are at the top of this file). */
static void deliver(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    struct fault_view *fv = view_of(sig);
    unsigned idx = atomic_load(&fv->cur) % PS_VIEW_SLOTS;
    struct sigaction v = fv->views[idx];
    int hw = ps_signal_from_fault(si);

    if (has_function(&v) && !is_ours(&v)) {
        if (call_view(fv, idx, &v, sig, si, uc, saved_errno))
            return;   /* errno as the program's handler left it */
        /* A loop: fall through to the default action. */
    } else if (v.sa_handler == SIG_IGN && !hw) {
        errno = saved_errno;
        return;  /* a sent signal the program ignores stays ignored */
    }

    /* Default action: put it back and let the fault happen again (or
     * re-send a signal that was sent).  The direct path ends first, so
     * that no read of ours starts while SIG_DFL is in; one already in
     * flight on the sampler thread could still fault in the moment
     * before this thread dies, which kills the process a moment earlier
     * by the same signal.  Our handler being gone also ends any loop
     * through a handler that chains back to us. */
    ps_mem_give_up_direct();
    atomic_store(&fv->state, VIEW_OFF);
    set_default(sig);
    if (!hw)
        pthread_kill(pthread_self(), sig);
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
    fv->views[0] = prev;
    atomic_store(&fv->next, 1);
    atomic_store(&fv->cur, 0);
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
 * queries, 0.4 us on an idle machine here, 2 us under load).  Every libc
 * path into the kernel's action goes through our interposers and is seen at
 * once; the check only exists for what bypasses them (a raw rt_sigaction,
 * glibc's own sysv_signal/sigset).  Between such a change and the check,
 * a fault of one of our reads would reach the program's handler.  That
 * window was one tick; at 10 kHz the check was ~5 % of an idle sampler's
 * CPU.  So it runs on a tick at most every PS_OWNERSHIP_CHECK_NS: every
 * tick up to 1 kHz as before, every 10th at 10 kHz, and the window is never
 * wider than one tick at the default 100 Hz (10 ms).  For a fault of ours
 * to land in it, a raw install must meet a torn walk (a read of memory
 * freed under us) within that millisecond: reads fail on a small fraction
 * of samples, and such installs are rare in themselves.
 */
#define PS_OWNERSHIP_CHECK_NS 1000000ull

void ps_mem_tick(void)
{
    static uint64_t next_check;   /* the sampler thread's own */
    if (ps_mem_mode() != PS_READ_DIRECT)
        return;
    uint64_t now = ps_now_ns();
    if (now < next_check)
        return;
    next_check = now + PS_OWNERSHIP_CHECK_NS;
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
    memset(chain_slots, 0, sizeof chain_slots);
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

