/*
 * memread.c - fault-safe reads of interpreter memory.
 *
 * Why two paths.  The sampler reads frames that the owning thread may pop,
 * and on 3.11+ a popped data-stack chunk is munmap()ed, so a stale pointer
 * can fault.  A direct memcpy protected by a SIGSEGV/SIGBUS handler that
 * siglongjmp()s back costs about 10 ns; a checked system call costs 1-2 us
 * (docs/performance.md has the figures).  A stack of 20 frames needs ~40
 * reads, so the direct path is what makes high rates cheap.
 *
 * Why the direct path is only used while we own the handlers.  A fault in a
 * guarded read must reach *our* handler first.  If the program (Python's
 * faulthandler, which pytest enables; CUDA; a C extension) installed its
 * own handler after ours, their handler would see our fault first: at best
 * it prints a bogus "Fatal Python error", at worst it aborts.  So:
 *   - the sampler starts on the syscall path and switches to direct only
 *     after installing its handlers;
 *   - every tick it asks sigaction() who is installed and falls back to the
 *     syscall path for good if it is no longer us;
 *   - our sigaction() interposer (lib/linux/interpose.c) calls
 *     ps_mem_yield_fault_handlers() *before* the program's handler goes in,
 *     which closes the window between two ticks.
 *
 * How a fault that is not ours stays exactly what it was.  Our handler only
 * siglongjmp()s when the faulting thread is the reader and a read is in
 * flight.  Anything else is passed to the handler that was installed before
 * us; if that was SIG_DFL/SIG_IGN we restore SIG_DFL and return, so the
 * faulting instruction runs again and the process dies of the same signal,
 * with the same core dump, as without us.  A SIGSEGV sent with kill() would
 * not recur by itself, so it is re-sent to the same thread with
 * pthread_kill() (raise() would be the same on Linux, but pthread_kill
 * states the intent and is right on every platform).
 *
 * Signal mask.  sigsetjmp(env, 0) does not save the mask (saving costs a
 * system call per read).  That is only correct because the handler is
 * installed with SA_NODEFER: SIGSEGV is not blocked while it runs, so
 * jumping out of it leaves the sampler's mask as it was.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sched.h>
#include <string.h>

#include "memread.h"
#include "platform.h"

static _Atomic int read_mode = PS_READ_SYSCALL;
static int handlers_installed;
static int direct_forbidden;

/* State of the read in flight.  Written only by the reading thread; the
 * handler reads it on that same thread, and the interposer polls active. */
static sigjmp_buf guard_env;
static _Atomic int guard_active;   /* lock-free, so usable from the handler */
static pthread_t guard_thread;

static struct sigaction prev_segv, prev_bus;

static void on_fault(int sig, siginfo_t *si, void *uc);

static int is_ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fault;
}

/* Hands a fault that is not ours to whoever was installed before us. */
static void chain_fault(int sig, siginfo_t *si, void *uc)
{
    const struct sigaction *prev = sig == SIGSEGV ? &prev_segv : &prev_bus;

    if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction != NULL && !is_ours(prev)) {
        prev->sa_sigaction(sig, si, uc);
        return;
    }
    if (!(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL &&
        prev->sa_handler != SIG_IGN && prev->sa_handler != NULL) {
        prev->sa_handler(sig);
        return;
    }
    /* Default action: put it back and let the fault happen again.  Our
     * handler being gone also protects against a loop through a handler
     * that chains back to us. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ps_real_sigaction(sig, &dfl, NULL);
    atomic_store(&read_mode, PS_READ_SYSCALL);
    direct_forbidden = 1;
    if (si == NULL || si->si_code <= 0)
        pthread_kill(pthread_self(), sig);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    if (atomic_load(&guard_active) && pthread_equal(pthread_self(), guard_thread))
        siglongjmp(guard_env, 1);
    chain_fault(sig, si, uc);
}

int ps_mem_init(void)
{
    return ps_plat_read_init();
}

void ps_mem_enable_direct(void)
{
    if (handlers_installed || direct_forbidden)
        return;
    struct sigaction sa, cur_segv, cur_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);

    /* Only take over signals nobody has claimed: if the program already
     * handles SIGSEGV/SIGBUS (faulthandler enabled from the command line,
     * a library's crash reporter), we stay on the syscall path rather than
     * put ourselves in front of it. */
    if (ps_real_sigaction(SIGSEGV, NULL, &cur_segv) != 0 ||
        ps_real_sigaction(SIGBUS, NULL, &cur_bus) != 0 ||
        (cur_segv.sa_flags & SA_SIGINFO) || cur_segv.sa_handler != SIG_DFL ||
        (cur_bus.sa_flags & SA_SIGINFO) || cur_bus.sa_handler != SIG_DFL) {
        direct_forbidden = 1;
        return;
    }
    if (ps_real_sigaction(SIGSEGV, &sa, &prev_segv) != 0)
        return;
    if (ps_real_sigaction(SIGBUS, &sa, &prev_bus) != 0) {
        ps_real_sigaction(SIGSEGV, &prev_segv, NULL);
        return;
    }
    handlers_installed = 1;
    atomic_store(&read_mode, PS_READ_DIRECT);
}

void ps_mem_tick(void)
{
    if (atomic_load(&read_mode) != PS_READ_DIRECT)
        return;
    struct sigaction cur;
    if (ps_real_sigaction(SIGSEGV, NULL, &cur) != 0 || !is_ours(&cur) ||
        ps_real_sigaction(SIGBUS, NULL, &cur) != 0 || !is_ours(&cur)) {
        direct_forbidden = 1;
        atomic_store(&read_mode, PS_READ_SYSCALL);
    }
}

void ps_mem_yield_fault_handlers(void)
{
    if (!handlers_installed)
        return;
    direct_forbidden = 1;
    atomic_store(&read_mode, PS_READ_SYSCALL);
    /* A read that started before the store finishes within nanoseconds;
     * wait for it so the program's handler never sees our fault. */
    for (int i = 0; atomic_load(&guard_active) && i < 1000000; i++)
        sched_yield();
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
    if (m == PS_READ_DIRECT && (!handlers_installed || direct_forbidden))
        return;
    atomic_store(&read_mode, m);
}

/* Kept out of line so that the compiler cannot move loads of *src outside
 * the region between sigsetjmp and clearing guard_active. */
static __attribute__((noinline)) int read_direct(void *dst, uintptr_t src, size_t n)
{
    guard_thread = pthread_self();
    if (sigsetjmp(guard_env, 0) != 0) {
        atomic_store(&guard_active, 0);
        return -1;
    }
    /* Announce the read, then look at the mode again: either the yielding
     * thread sees guard_active and waits for us, or we see its switch to
     * the syscall path and never touch the memory directly. */
    atomic_store(&guard_active, 1);
    if (atomic_load(&read_mode) != PS_READ_DIRECT) {
        atomic_store(&guard_active, 0);
        return ps_plat_read(dst, src, n);
    }
    memcpy(dst, (const void *)src, n);
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store(&guard_active, 0);
    return 0;
}

int ps_read(void *dst, uintptr_t src, size_t n)
{
    /* The first page is never mapped, and wrap-around is never valid. */
    if (src < 4096 || src + n < src)
        return -1;
    if (n == 0)
        return 0;
    if (atomic_load_explicit(&read_mode, memory_order_relaxed) == PS_READ_DIRECT)
        return read_direct(dst, src, n);
    return ps_plat_read(dst, src, n);
}
