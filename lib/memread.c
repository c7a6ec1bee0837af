/*
 * memread.c - fault-safe reads of interpreter memory.
 *
 * Why two paths.  The sampler reads frames that the owning thread may pop,
 * and on 3.11+ a popped data-stack chunk is munmap()ed, so a stale pointer
 * can fault.  A direct memcpy protected by a SIGSEGV/SIGBUS handler that
 * siglongjmp()s back costs about 10 ns; a checked system call costs 1-2 us
 * (docs/safety.md has the figures, test/bench/bench_read.c measures them).
 * A stack of 20 frames needs ~40 reads, so the direct path is what makes
 * high rates cheap.
 *
 * Why the direct path is only used while we own the handlers.  A fault in a
 * guarded read must reach *our* handler first.  If the program (Python's
 * faulthandler, which pytest enables; CUDA; a C extension) installed its
 * own handler after ours, their handler would see our fault first: at best
 * it prints a bogus "Fatal Python error", at worst it aborts.  So:
 *   - the sampler starts on the syscall path and switches to direct only
 *     once its handlers are in (ps_mem_enable_direct, from the sampler
 *     thread when the interpreter is up);
 *   - every tick it asks sigaction() who is installed and falls back to the
 *     syscall path for good if it is no longer us;
 *   - our sigaction()/signal() interposers (lib/linux/interpose.c) call
 *     ps_mem_yield_fault_handlers() *before* the program's handler goes in,
 *     which closes the window between two ticks.  A read in flight and the
 *     yield meet Dekker-style: the reader publishes guard_owner then looks at
 *     read_mode, the yielder stores read_mode then waits for guard_owner to
 *     clear, so either the reader sees the switch or the yielder waits.
 * Handlers installed *before* ours (faulthandler enabled at start-up, a
 * sanitizer, a crash reporter) stay in the chain: ours goes in front of
 * them and hands them every fault that is not one of our reads.
 *
 * How a fault that is not ours stays exactly what it was.  Our handler only
 * siglongjmp()s when the faulting thread is the one inside a guarded read
 * and the fault came from the hardware (si_code > 0: a kill() or raise() of
 * SIGSEGV is never swallowed, even on the sampler thread).  Anything else
 * is passed on as the kernel would have delivered it to the handler that
 * was installed before us: with that handler's sa_mask blocked (plus the
 * signal itself unless it asked for SA_NODEFER) and SA_RESETHAND honoured.
 * If there was none (SIG_DFL, or SIG_IGN for a hardware fault, which the
 * kernel does not let a program ignore), we put SIG_DFL back and return:
 * the faulting instruction runs again and the process dies of the same
 * signal at the same instruction, with the same core dump, as without us.
 * A SIGSEGV sent with kill() would not recur by itself, so it is re-sent to
 * the same thread with pthread_kill() (raise() may take a lock in some C
 * libraries; pthread_kill on oneself does not), and a SIG_IGN'd one is
 * dropped as it would have been.
 *
 * Handler-chain loops.  If the handler we chain to chains back to us (two
 * profilers, or a crash reporter, each saved the other as "previous"), the
 * two would call each other until the stack overflows.  Each thread inside
 * chain_fault() is recorded with its stack depth; a call that arrives
 * nested inside an earlier one on the same thread, more than
 * PS_CHAIN_MAX_NEST deep, is a loop and gets the default action instead.
 * A record left behind by a handler that siglongjmp()ed out is recognised
 * as stale because the new call is not below it on the stack.
 *
 * Signal mask.  sigsetjmp(env, 0) does not save the mask (saving costs a
 * system call per read).  That is only correct because the handler is
 * installed with SA_NODEFER and an empty sa_mask: nothing is blocked while
 * it runs, so jumping out of it leaves the sampler's mask as it was.
 *
 * SA_ONSTACK is copied from the handler we chain to, so that it runs on the
 * stack it asked for (faulthandler needs the alternate stack to report a
 * stack overflow; a handler that did not ask for it may need more than an
 * alternate stack holds).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "memread.h"
#include "platform.h"

extern char **environ;

/* No user mapping exists at or above 2^56 on any 64-bit platform we run on
 * (x86-64 with 5-level paging tops out there, arm64 at 2^52); refusing such
 * addresses early also keeps non-canonical pointers away from memcpy. */
#if UINTPTR_MAX > 0xffffffffu
#define PS_ADDR_LIMIT ((uintptr_t)1 << 56)
#else
#define PS_ADDR_LIMIT UINTPTR_MAX
#endif

#define PS_CHAIN_SLOTS 64
#define PS_CHAIN_MAX_NEST 2
#define PS_CHAIN_WINDOW (256u * 1024u)
#define PS_YIELD_WAIT_NS 2000000000ull

static _Atomic int read_mode = PS_READ_SYSCALL;
static _Atomic int handlers_installed;   /* we have put ours in, once */
static _Atomic int direct_forbidden;     /* given up the direct path for good */
static int direct_disabled_by_env;       /* PYSAMPLE_READ_MODE=syscall|pipe|file */

/* The read in flight: guard_owner is the reading thread's pthread_self()
 * (0: none), taken with a compare-and-swap so that two readers can never
 * share guard_env.  The handler reads both on the faulting thread. */
static _Atomic uintptr_t guard_owner;
static sigjmp_buf guard_env;
/* 1 only while the guard's owner is inside the copy itself: a fault
 * anywhere else on that thread (our own code between reads, malloc) is a
 * real crash and must not be jumped out of.  Written and read by the same
 * thread (the handler runs on the faulting thread), so compiler fences
 * are all the ordering it needs. */
static volatile sig_atomic_t in_copy;

static struct sigaction prev_segv, prev_bus;

/* Threads currently inside chain_fault (the loop guard). */
static struct {
    _Atomic long tid;
    uintptr_t sp;
    int depth;
} chain_slots[PS_CHAIN_SLOTS];

static void on_fault(int sig, siginfo_t *si, void *uc);

static uintptr_t self_id(void)
{
    return (uintptr_t)pthread_self();
}

static int is_ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fault;
}

/* 1 if sa names a function (rather than SIG_DFL or SIG_IGN). */
static int has_function(const struct sigaction *sa)
{
    if (sa->sa_flags & SA_SIGINFO)
        return sa->sa_sigaction != NULL;
    return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN && sa->sa_handler != NULL;
}

/* 1 if the signal was raised by the hardware for the instruction that was
 * running, 0 if it was sent (kill, raise, sigqueue, tgkill). */
static int from_hardware(const siginfo_t *si)
{
    if (si == NULL)
        return 0;
#ifdef __APPLE__
    return si->si_code > 0 && si->si_code < SI_USER;
#else
    return si->si_code > 0;
#endif
}

static void set_default(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ps_real_sigaction(sig, &dfl, NULL);
}

static void give_up_direct(void)
{
    atomic_store(&direct_forbidden, 1);
    atomic_store(&read_mode, PS_READ_SYSCALL);
}

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

/* Hands a fault that is not ours to whoever was installed before us, as
 * the kernel would have. */
static void chain_fault(int sig, siginfo_t *si, void *uc)
{
    const struct sigaction *prev = sig == SIGSEGV ? &prev_segv : &prev_bus;
    int hw = from_hardware(si);

    if (has_function(prev) && !is_ours(prev)) {
        int loop;
        uintptr_t saved_sp = 0;
        int saved_depth = -1;
        int slot = chain_enter((uintptr_t)__builtin_frame_address(0), &loop,
                               &saved_sp, &saved_depth);
        if (!loop) {
            sigset_t block, old;
            block = prev->sa_mask;
            if (!(prev->sa_flags & SA_NODEFER))
                sigaddset(&block, sig);
            if (prev->sa_flags & SA_RESETHAND)
                set_default(sig);
            pthread_sigmask(SIG_BLOCK, &block, &old);
            if (prev->sa_flags & SA_SIGINFO)
                prev->sa_sigaction(sig, si, uc);
            else
                prev->sa_handler(sig);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            chain_leave(slot, saved_sp, saved_depth);
            return;
        }
        /* A loop: fall through to the default action. */
    } else if (prev->sa_handler == SIG_IGN && !(prev->sa_flags & SA_SIGINFO) && !hw) {
        return;  /* a sent signal the program ignores stays ignored */
    }

    /* Default action: put it back and let the fault happen again (or
     * re-send a signal that was sent).  Our handler being gone also ends
     * any loop through a handler that chains back to us. */
    set_default(sig);
    give_up_direct();
    if (!hw)
        pthread_kill(pthread_self(), sig);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    if (from_hardware(si) && in_copy && atomic_load(&guard_owner) == self_id())
        siglongjmp(guard_env, 1);
    chain_fault(sig, si, uc);
    errno = saved_errno;
}

static const char *env_value(const char *name)
{
    size_t n = strlen(name);
    for (char **e = environ; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

int ps_mem_init(void)
{
    /* Test-only switch (docs/safety.md): pin the read path. */
    const char *m = env_value("PYSAMPLE_READ_MODE");
    if (m != NULL && (strcmp(m, "syscall") == 0 || strcmp(m, "process_vm_readv") == 0 ||
                      strcmp(m, "pipe") == 0 || strcmp(m, "file") == 0)) {
        direct_disabled_by_env = 1;
        if (strcmp(m, "syscall") != 0)
            return ps_plat_read_force(m);
    }
    return ps_plat_read_init();
}

/* Goes direct unless a yield has happened or happens meanwhile: the yield
 * stores direct_forbidden before read_mode, so whichever order the two
 * threads run in, read_mode ends up SYSCALL if a yield took place. */
static void try_go_direct(void)
{
    if (atomic_load(&direct_forbidden))
        return;
    atomic_store(&read_mode, PS_READ_DIRECT);
    if (atomic_load(&direct_forbidden))
        atomic_store(&read_mode, PS_READ_SYSCALL);
}

static int installed_is_ours(int sig)
{
    struct sigaction cur;
    return ps_real_sigaction(sig, NULL, &cur) == 0 && is_ours(&cur);
}

static void install(int sig, struct sigaction *prev)
{
    struct sigaction cur, sa;
    if (ps_real_sigaction(sig, NULL, &cur) != 0)
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER |
                  (has_function(&cur) ? (cur.sa_flags & SA_ONSTACK) : SA_ONSTACK);
    sigemptyset(&sa.sa_mask);
    /* prev is what the kernel swapped out, whatever happened since cur. */
    ps_real_sigaction(sig, &sa, prev);
}

void ps_mem_enable_direct(void)
{
    if (!ps_plat_read_direct_ok())
        return;  /* never on this platform (lib/darwin/read.c says why) */
    if (direct_disabled_by_env || atomic_load(&direct_forbidden))
        return;
    if (!atomic_exchange(&handlers_installed, 1)) {
        /* From here on a program sigaction() gives up the direct path, so
         * a handler slipped in between our two installs is never in front
         * of a direct read.  Before this point, a program's handler is
         * simply one more that ours chains to. */
        install(SIGSEGV, &prev_segv);
        install(SIGBUS, &prev_bus);
    }
    if (installed_is_ours(SIGSEGV) && installed_is_ours(SIGBUS))
        try_go_direct();
    else
        give_up_direct();
}

int ps_mem_handlers_installed(void)
{
    return atomic_load(&handlers_installed) && installed_is_ours(SIGSEGV) &&
           installed_is_ours(SIGBUS);
}

void ps_mem_tick(void)
{
    if (atomic_load(&read_mode) != PS_READ_DIRECT)
        return;
    if (!installed_is_ours(SIGSEGV) || !installed_is_ours(SIGBUS))
        give_up_direct();
}

void ps_mem_yield_fault_handlers(void)
{
    if (!atomic_load(&handlers_installed))
        return;
    give_up_direct();
    /* A read that started before the store finishes within nanoseconds
     * once its thread runs; wait for it so the program's handler never
     * sees our fault.  The bound only matters if the reader is descheduled
     * for seconds, and then the program goes on rather than hang. */
    uintptr_t self = self_id();
    uint64_t deadline = 0;
    for (;;) {
        uintptr_t owner = atomic_load(&guard_owner);
        if (owner == 0 || owner == self)
            break;
        uint64_t now = ps_now_ns();
        if (deadline == 0)
            deadline = now + PS_YIELD_WAIT_NS;
        else if (now > deadline)
            break;
        sched_yield();
    }
}

void ps_mem_after_fork(void)
{
    /* Only the forking thread exists in the child: a read the sampler had
     * in flight at fork time will never finish. */
    atomic_store(&guard_owner, 0);
    memset(chain_slots, 0, sizeof chain_slots);
    ps_plat_read_after_fork();
}

enum ps_read_mode ps_mem_mode(void)
{
    return atomic_load(&read_mode);
}

const char *ps_mem_mode_name(void)
{
    return ps_mem_mode() == PS_READ_DIRECT ? "direct" : ps_plat_read_name();
}

void ps_mem_force_mode(enum ps_read_mode m)
{
    if (m == PS_READ_DIRECT) {
        if (atomic_load(&handlers_installed) && installed_is_ours(SIGSEGV) &&
            installed_is_ours(SIGBUS))
            try_go_direct();
        return;
    }
    atomic_store(&read_mode, m);
}

/*
 * The copy itself.  Under AddressSanitizer memcpy is intercepted and checks
 * the source against its shadow memory, which is meaningless for memory
 * that is not ours; a plain loop with instrumentation off does the same
 * job (volatile keeps the compiler from turning it back into memcpy).
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PS_ASAN 1
#endif

#ifdef PS_ASAN
__attribute__((no_sanitize_address, noinline))
static void guarded_copy(void *dst, const void *src, size_t n)
{
    volatile const unsigned char *s = src;
    unsigned char *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}
#else
#define guarded_copy memcpy
#endif

/* The guarded copy, for a thread that holds guard_owner.  Kept out of line
 * so that the compiler cannot move loads of *src outside the region where
 * in_copy is set. */
static __attribute__((noinline)) int copy_guarded(void *dst, uintptr_t src, size_t n)
{
    if (sigsetjmp(guard_env, 0) != 0) {
        in_copy = 0;
        return -1;
    }
    in_copy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    guarded_copy(dst, (const void *)src, n);
    atomic_signal_fence(memory_order_seq_cst);
    in_copy = 0;
    return 0;
}

/* One direct read outside a batch: take the guard, copy, release. */
static int read_direct(void *dst, uintptr_t src, size_t n)
{
    uintptr_t expected = 0;
    /* Take the guard, then look at the mode again: either a yielding
     * thread sees guard_owner and waits for us, or we see its switch to
     * the syscall path and never touch the memory directly.  A second
     * concurrent reader (the exec-time check in a forked child can read
     * while the sampler holds the guard) goes the syscall way rather than
     * share guard_env. */
    if (!atomic_compare_exchange_strong(&guard_owner, &expected, self_id()))
        return ps_plat_read(dst, src, n);
    if (atomic_load(&read_mode) != PS_READ_DIRECT) {
        atomic_store(&guard_owner, 0);
        return ps_plat_read(dst, src, n);
    }
    int rc = copy_guarded(dst, src, n);
    atomic_store_explicit(&guard_owner, 0, memory_order_release);
    return rc;
}

/*
 * Batches.  Taking the guard costs a compare-and-swap and a sequentially
 * consistent load, about as much as the copy itself; a tick makes hundreds
 * of reads.  So the sampler takes the guard once per tick
 * (ps_mem_batch_begin, under its profile lock) and its reads inside the
 * batch only set in_copy around the copy.  The yield protocol is unchanged:
 * a yielding thread waits for guard_owner to clear, i.e. for the end of the
 * tick, before the program's handler goes in.  fork() cannot split a batch:
 * the prepare handler takes the same profile lock.
 */
int ps_mem_batch_begin(void)
{
    uintptr_t expected = 0;
    if (atomic_load(&read_mode) != PS_READ_DIRECT)
        return 0;
    if (!atomic_compare_exchange_strong(&guard_owner, &expected, self_id()))
        return 0;
    if (atomic_load(&read_mode) != PS_READ_DIRECT) {
        atomic_store(&guard_owner, 0);
        return 0;
    }
    return 1;
}

void ps_mem_batch_end(int held)
{
    if (held)
        atomic_store_explicit(&guard_owner, 0, memory_order_release);
}

int ps_read(void *dst, uintptr_t src, size_t n)
{
    /* The first page is never mapped, nothing lives above PS_ADDR_LIMIT,
     * and wrap-around is never valid. */
    if (src < 4096 || src + n < src || src + n > PS_ADDR_LIMIT)
        return -1;
    if (n == 0)
        return 0;
    /* Inside our own batch: the guard is already ours.  (Only this thread
     * ever stores its own id there, so a relaxed load is exact.) */
    if (atomic_load_explicit(&guard_owner, memory_order_relaxed) == self_id())
        return copy_guarded(dst, src, n);
    if (atomic_load_explicit(&read_mode, memory_order_relaxed) == PS_READ_DIRECT)
        return read_direct(dst, src, n);
    return ps_plat_read(dst, src, n);
}
