/*
 * linux/regs.c - the registers of another thread of this process, for the
 * native unwinder, without ptrace and without the program seeing a
 * difference (docs/native.md has the measurements and the reasoning).
 *
 * Two ways, chosen per thread per sample:
 *
 *   blocked   /proc/self/task/TID/syscall names the system call a sleeping
 *             thread is in, with its user stack pointer and the address
 *             after its `syscall` instruction.  No signal: the thread is
 *             not disturbed at all.  Its stack does not change while it
 *             sleeps, but it may wake while we read it: every read is
 *             fault-safe, and ps_native_release() reads the file again and
 *             accepts the sample only if the thread is still in the same
 *             call at the same place.  Only sp and pc are known: frames
 *             whose CFA is computed from another register that no inner
 *             frame saved end the walk (truncated).
 *
 *   running   (the file says "running": on a CPU or runnable) a SIGURG sent
 *             with rt_tgsigqueueinfo and a cookie.  The handler copies the
 *             interrupted context's registers into the one request slot,
 *             then waits (futex, at most PS_HOLD_NS) until the sampler has
 *             walked the stack and releases it, so the walk sees a stack
 *             that is not moving.  The sampler waits for the handler at
 *             most PS_SENT_NS; a thread that does not answer (it blocks the
 *             signal, or is not scheduled) is sampled without native frames
 *             and, after three misses in a row, not signalled for 250 ms.
 *             A thread whose status says it blocks SIGURG is never sent
 *             it (sigmask.c: read, or remembered while no mask changed)
 *             and is sampled without native frames.
 *
 * Why SIGURG: its default action is to ignore it, so a request still in
 * flight when our handler is gone (exec, a program that replaced it behind
 * the interposer) does nothing; and almost no program handles it (it
 * reports out-of-band socket data to an owner set with F_SETOWN).  A
 * program that does gets its handler called from ours for every SIGURG
 * that is not one of our requests, as the kernel would have called it
 * (sigaction() and signal() of SIGURG go into a view, delivered through
 * platform/sigview.c, as for SIGSEGV in faultview.c).
 *
 * EINTR.  A running thread may enter a blocking system call just before
 * our signal arrives.  The kernel then runs our handler instead of
 * sleeping: calls it restarts itself under SA_RESTART are restarted
 * (read on a pipe, futex without timeout, wait4, ...), but select, poll,
 * epoll_wait, nanosleep, clock_nanosleep, futex with a timeout
 * (sem_timedwait, timed lock waits), pause and the like return -EINTR
 * whatever SA_RESTART says.  The handler sees that case in the context
 * (the architecture's part, regs_arch.h: regs_x86_64.c, regs_aarch64.c,
 * recognises the return of a system call with -EINTR and recovers what
 * the return overwrote: x86-64 the call's number, aarch64 its first
 * argument), checks that the number is a blocking call that is safe to
 * issue again with the same arguments, and rewinds the context to issue
 * it again.  If another signal the thread would take is pending, the
 * EINTR is left: that signal would have interrupted the call anyway.
 * What cannot be restarted this way (what the return overwrote cannot be
 * recovered) is counted (PYSAMPLE_STATS: native_eintr_left) and
 * documented as the residual risk.
 *
 * Async-signal safety: the handler calls only gettid, futex, clock_gettime
 * and rt_sigpending, takes no lock, allocates nothing, keeps errno.
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <time.h>
#include <unistd.h>

#include "util/counters.h"
#include "platform/stacks.h"
#include "platform/platform.h"
#include "platform/sigview.h"
#include "platform/linux/linux.h"
#include "platform/linux/regs_arch.h"

#define PS_NATIVE_SIG SIGURG
#define PS_SENT_NS 10000000ull    /* how long the sampler waits for the handler */
#define PS_HOLD_NS 5000000ull     /* how long the handler waits for the sampler */
#define PS_COOKIE 0x5a000000u
#define PS_QUIET 16               /* threads not signalled again for a while */

enum { ST_IDLE = 0, ST_SENT, ST_COPYING, ST_HELD, ST_RELEASED, ST_GONE };

static struct {
    _Atomic int installed;
    pid_t pid;
    _Atomic uint32_t state;   /* futex word */
    _Atomic uint32_t seq;
    _Atomic long tid;
    struct ps_regs regs;      /* written by the handler between COPYING and HELD */

    int blocked_file;         /* /proc/self/task/TID/syscall describes our threads */
    int how;                  /* the current capture: -1, blocked, held */
    long cur_tid;
    char blocked_line[256];

    struct { long tid; int misses; uint64_t until; } quiet[PS_QUIET];

    struct ps_sigview view;   /* the program's view of SIGURG */

    _Atomic uint64_t n[PS_NATIVE_COUNTS];   /* enum ps_native_count (counters.h) */
    _Atomic int replaced;     /* someone put another SIGURG handler in front of ours */
} N;

/* ---- the handler ----------------------------------------------------------- */

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

/* Our signal made a blocking call return -EINTR: issue it again
 * (regs_arch.h has how each architecture tells and does it). */
static void fix_eintr(ucontext_t *uc)
{
    long nr = -1;
    int rc = ps_arch_interrupted_call(uc, &nr);
    if (rc == 0)
        return;
    if (rc < 0 || !ps_arch_restartable(nr)) {
        atomic_fetch_add(&N.n[PS_NATIVE_EINTR_LEFT], 1);
        return;
    }
    /* A signal of the program's that is pending and not blocked where the
     * thread was would have interrupted the call too: leave its EINTR. */
    uint64_t pend = 0;
    if (syscall(SYS_rt_sigpending, &pend, sizeof pend) == 0) {
        uint64_t blocked;
        memcpy(&blocked, &uc->uc_sigmask, sizeof blocked);
        pend &= ~blocked;
        pend &= ~(1ull << (PS_NATIVE_SIG - 1));
        if (pend != 0)
            return;
    }
    if (ps_arch_restart(uc, nr) != 0) {
        atomic_fetch_add(&N.n[PS_NATIVE_EINTR_LEFT], 1);
        return;
    }
    atomic_fetch_add(&N.n[PS_NATIVE_RESTARTED], 1);
}

/* Holds the thread until the sampler releases it, or PS_HOLD_NS. */
static void hold(void)
{
    uint64_t deadline = ps_now_ns() + PS_HOLD_NS;
    while (atomic_load(&N.state) == ST_HELD) {
        uint64_t now = ps_now_ns();
        if (now >= deadline) {
            uint32_t h = ST_HELD;
            atomic_compare_exchange_strong(&N.state, &h, ST_GONE);
            return;
        }
        uint64_t left = deadline - now;
        struct timespec ts = { (time_t)(left / 1000000000ull), (long)(left % 1000000000ull) };
        futex(&N.state, FUTEX_WAIT_PRIVATE, ST_HELD, &ts);
    }
}

/* One of our requests reached this thread: its registers copied, it is
 * held while the sampler walks.  In the handler: gettid, atomics, futex
 * and clock_gettime only (async-signal-safe); the caller keeps errno. */
static void serve_request(ucontext_t *uc)
{
    /* Any of our signals serves the request pending for this thread:
     * one sent for an earlier request that timed out may still have
     * been pending when the current one was sent, and SIGURG does not
     * queue, so that earlier one is all this thread will get. */
    uint32_t sent = ST_SENT;
    long me = (long)syscall(SYS_gettid);
    if (atomic_load(&N.tid) == me &&
        atomic_compare_exchange_strong(&N.state, &sent, ST_COPYING)) {
        /* The sampler writes tid before it moves the state to SENT:
         * a late signal of an earlier request to this thread may have
         * read the old tid and met a new request for another thread.
         * Give that one back. */
        if (atomic_load(&N.tid) != me) {
            atomic_store(&N.state, ST_SENT);
            return;
        }
        ps_regs_from_context(uc, &N.regs);
        atomic_store(&N.state, ST_HELD);
        futex(&N.state, FUTEX_WAKE_PRIVATE, 1, NULL);
        hold();
    }
}

static void on_sig(int sig, siginfo_t *si, void *ucv)
{
    int saved = errno;
    ucontext_t *uc = ucv;
    int ours = si != NULL && si->si_code == SI_QUEUE && si->si_pid == N.pid &&
               ((uint32_t)si->si_value.sival_int & 0xff000000u) == PS_COOKIE;
    struct sigaction v;
    ps_sigview_get(&N.view, &v);
    int program_handles = !ours && ps_sigaction_has_function(&v) && v.sa_sigaction != on_sig;

    (void)sig;
    if (!program_handles)
        fix_eintr(uc);   /* without us, this signal would not have run a handler */
    if (ours) {
        serve_request(uc);
        errno = saved;
        return;
    }
    /* The program's handler, as the kernel would have run it (sigview.c).
     * Two things stay ours (docs/native.md): it runs on the alternate stack
     * when the thread has one, and calls the signal interrupts restart as
     * with SA_RESTART.  SIG_DFL and SIG_IGN both drop it: SIGURG's default
     * is to ignore it (ps_sigview_default does nothing for it). */
    if (ps_sigview_deliver(&N.view, si, uc, 0, saved, NULL) == PS_SIGVIEW_DEFAULT)
        ps_sigview_default(&N.view, 0);
}

/* ---- the sampler's side -------------------------------------------------- */

/*
 * Whether /proc/self/task/TID/syscall describes this program's threads:
 * read for the calling thread, it must name the call that reads it,
 * read(2) by this architecture's number.  Under an emulator (qemu-user
 * running an aarch64 program on an x86-64 kernel) it describes the
 * emulator's own host thread instead (x86-64's number, the emulator's sp
 * and pc): then running threads are captured through the signal as
 * everywhere, and blocked ones are sampled without native frames
 * (ps_native_capture; docs/native.md, arm64).
 */
static int blocked_file_ok(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%ld/syscall", (long)syscall(SYS_gettid));
    if (ps_linux_read_small(path, line, sizeof line) < 0)
        return 0;
    char *end;
    long nr = strtol(line, &end, 10);
    return end != line && *end == ' ' && nr == SYS_read;
}

/* NULL if the C library's blocking calls can be restarted after our
 * signal, else why not.  musl (the Linux C library that is not glibc; it
 * defines no macro of its own) issues them through __syscall_cp_asm, which
 * moves the call's number into rax from a register the call's arguments
 * then reuse: fix_eintr could not say which call to issue again, and the
 * program would see EINTR where it never did (docs/support.md). */
static const char *libc_native_refused(void)
{
#if defined(__GLIBC__)
    return NULL;
#else
    return "native stacks need glibc: musl's blocking calls cannot be restarted "
           "after the sampler's signal, which the program would see as EINTR";
#endif
}

int ps_native_platform_init(char *why, size_t whylen)
{
    const char *refused = ps_arch_native_refused();
    if (refused == NULL)
        refused = libc_native_refused();
    if (refused != NULL) {
        snprintf(why, whylen, "%s", refused);
        return -1;
    }
    if (atomic_load(&N.installed))
        return 0;
    N.pid = getpid();
    N.blocked_file = blocked_file_ok();
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sig;
    /* SA_RESTART: calls the kernel can restart itself are restarted;
     * the others are fix_eintr's.  Every signal blocked while we hold the
     * thread: the program's handlers run after ours, on the restarted
     * call's EINTR if it is theirs (fix_eintr checks what is pending). */
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigfillset(&sa.sa_mask);
    if (ps_real_sigaction(PS_NATIVE_SIG, NULL, &old) != 0) {
        snprintf(why, whylen, "cannot query SIGURG: %s", strerror(errno));
        return -1;
    }
    ps_sigview_init(&N.view, PS_NATIVE_SIG, on_sig, &old);
    if (ps_real_sigaction(PS_NATIVE_SIG, &sa, NULL) != 0) {
        snprintf(why, whylen, "cannot install the SIGURG handler: %s", strerror(errno));
        return -1;
    }
    atomic_store(&N.installed, 1);
    return 0;
}

int ps_native_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    /* Not ours (yet, or any more: still_ours): the kernel's. */
    if (sig != PS_NATIVE_SIG || !atomic_load(&N.installed) || atomic_load(&N.replaced))
        return ps_real_sigaction(sig, act, old);
    ps_sigview_set(&N.view, act, old);
    return 0;
}

/* Reads /proc/self/task/TID/syscall into buf.  0 or -1. */
static int read_syscall_file(long tid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/syscall", tid);
    return ps_linux_read_small(path, buf, len) < 0 ? -1 : 0;
}

/*
 * Whether the kernel still runs our handler for SIGURG.  sigaction() and
 * signal() go into the view, but a raw rt_sigaction (a Go runtime in a cgo
 * extension: SIGURG is its preemption signal) bypasses the interposer and
 * puts its handler in front of ours.  Asked of the kernel before every
 * signal (one system call, ~1 us beside the /proc reads): once another
 * handler is there, running threads are never signalled again (they are
 * sampled without native frames, counted as failed captures), and
 * sigaction() of SIGURG goes to the kernel from then on.  A request
 * already in flight reaches the new handler as one spurious SIGURG, which
 * Go's tolerates by design.
 */
static int still_ours(void)
{
    if (atomic_load(&N.replaced))
        return 0;
    struct sigaction cur;
    if (ps_real_sigaction(PS_NATIVE_SIG, NULL, &cur) != 0)
        return 1;   /* cannot tell: nothing changed that we know of */
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sig)
        return 1;
    atomic_store(&N.replaced, 1);
    return 0;
}

static int quiet(long tid, uint64_t now)
{
    for (int i = 0; i < PS_QUIET; i++)
        if (N.quiet[i].tid == tid && now < N.quiet[i].until)
            return 1;
    return 0;
}

/* A thread that did not answer: one that blocks the signal never will
 * (and one pending signal is all it can have: SIGURG does not queue), so
 * after PS_MISSES misses in a row it is left alone for 250 ms.  A
 * thread that was merely not scheduled in time answers the next one.
 * A hold that ran out before the sampler was done counts as a miss too:
 * the thread then sat in our handler for the whole PS_HOLD_NS for nothing
 * (the sampler was descheduled, or waited for a malloc arena the held
 * thread owns -- a program that allocates all the time, new code objects
 * in every sample), and at a high rate that would keep it there most of
 * the time.  So at most PS_MISSES wasted holds per 250 ms per thread. */
#define PS_MISSES 3
static void missed(long tid, uint64_t now)
{
    int slot = -1, oldest = 0;
    for (int i = 0; i < PS_QUIET; i++) {
        if (N.quiet[i].tid == tid)
            slot = i;
        if (N.quiet[i].until < N.quiet[oldest].until)
            oldest = i;
    }
    if (slot < 0) {
        slot = oldest;
        N.quiet[slot].tid = tid;
        N.quiet[slot].misses = 0;
        N.quiet[slot].until = 0;
    }
    if (++N.quiet[slot].misses >= PS_MISSES) {
        N.quiet[slot].misses = 0;
        N.quiet[slot].until = now + 250000000ull;
    }
}

static void answered(long tid)
{
    for (int i = 0; i < PS_QUIET; i++)
        if (N.quiet[i].tid == tid)
            N.quiet[i].misses = 0;
}

static int capture_blocked(long tid, const char *line, struct ps_regs *regs)
{
    /* "nr a1 a2 a3 a4 a5 a6 sp pc" or "-1 sp pc": the last two fields. */
    const char *end = line + strlen(line);
    while (end > line && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    const char *p = end;
    unsigned long long v[2];
    for (int k = 1; k >= 0; k--) {
        while (p > line && p[-1] != ' ')
            p--;
        char *e;
        v[k] = strtoull(p, &e, 16);
        if (e != end && *e != ' ' && *e != '\n')
            return PS_CAPTURE_FAILED;
        end = p;
        while (end > line && end[-1] == ' ')
            end--;
        p = end;
    }
    if (v[0] == 0 || v[1] == 0)
        return PS_CAPTURE_FAILED;
    regs->valid = 0;
    ps_regs_set(regs, PS_REG_SP, v[0]);
    ps_regs_set(regs, PS_REG_PC, v[1]);
    snprintf(N.blocked_line, sizeof N.blocked_line, "%s", line);
    N.cur_tid = tid;
    N.how = PS_CAPTURE_BLOCKED;
    atomic_fetch_add(&N.n[PS_NATIVE_BLOCKED], 1);
    return PS_CAPTURE_BLOCKED;
}

/* Waits until the handler holds tid: 0; or -1 (a miss, counted) when it
 * does not answer within PS_SENT_NS of now. */
static int await_held(long tid, uint64_t now)
{
    uint64_t deadline = now + PS_SENT_NS;
    for (;;) {
        uint32_t st = atomic_load(&N.state);
        if (st == ST_HELD)
            return 0;
        uint64_t t = ps_now_ns();
        if (st == ST_COPYING) {
            sched_yield();   /* the handler is between two stores */
            continue;
        }
        if (st != ST_SENT) {
            /* ST_GONE: the handler ran and gave up waiting before we saw
             * it (this thread was descheduled that long). */
            missed(tid, t);
            atomic_fetch_add(&N.n[PS_NATIVE_GONE], 1);
            return -1;
        }
        if (t >= deadline) {
            uint32_t s = ST_SENT;
            if (atomic_compare_exchange_strong(&N.state, &s, ST_IDLE)) {
                missed(tid, t);
                atomic_fetch_add(&N.n[PS_NATIVE_LOST], 1);
                return -1;
            }
            continue;   /* the handler took it just now */
        }
        uint64_t left = deadline - t;
        struct timespec ts = { (time_t)(left / 1000000000ull), (long)(left % 1000000000ull) };
        futex(&N.state, FUTEX_WAIT_PRIVATE, ST_SENT, &ts);
    }
}

/* A running thread: signalled, and held by its handler while the
 * sampler walks (ps_native_release lets it go). */
static int capture_running(long tid, struct ps_regs *regs)
{
    uint64_t now = ps_now_ns();
    if (quiet(tid, now) || !still_ours()) {
        atomic_fetch_add(&N.n[PS_NATIVE_FAILED], 1);
        return PS_CAPTURE_FAILED;
    }
    if (ps_thread_blocks_signal(tid, PS_NATIVE_SIG, now)) {
        atomic_fetch_add(&N.n[PS_NATIVE_MASKED], 1);
        return PS_CAPTURE_FAILED;
    }
    uint32_t seq = (atomic_fetch_add(&N.seq, 1) + 1) & 0x00ffffffu;
    atomic_store(&N.tid, tid);
    atomic_store(&N.state, ST_SENT);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = PS_NATIVE_SIG;
    si.si_code = SI_QUEUE;
    si.si_pid = N.pid;
    si.si_uid = getuid();
    si.si_value.sival_int = (int)(PS_COOKIE | seq);
    if (syscall(SYS_rt_tgsigqueueinfo, (long)N.pid, tid, PS_NATIVE_SIG, &si) != 0) {
        atomic_store(&N.state, ST_IDLE);
        atomic_fetch_add(&N.n[PS_NATIVE_FAILED], 1);
        return PS_CAPTURE_FAILED;
    }
    if (await_held(tid, now) != 0)
        return PS_CAPTURE_FAILED;
    *regs = N.regs;
    N.cur_tid = tid;
    N.how = PS_CAPTURE_HELD;
    atomic_fetch_add(&N.n[PS_NATIVE_HELD], 1);
    return PS_CAPTURE_HELD;
}

int ps_native_capture(long tid, struct ps_regs *regs)
{
    char line[256];
    N.how = PS_CAPTURE_FAILED;
    if (!atomic_load(&N.installed) || tid <= 0 || read_syscall_file(tid, line, sizeof line) != 0) {
        atomic_fetch_add(&N.n[PS_NATIVE_FAILED], 1);
        return PS_CAPTURE_FAILED;
    }
    if (strncmp(line, "running", 7) != 0) {
        if (N.blocked_file)
            return capture_blocked(tid, line, regs);
        /* Under an emulator: not signalled either.  The emulator would
         * restart the call after our handler with its arguments as they
         * were, a relative timeout whole again: a thread sampled often
         * enough would never time out. */
        atomic_fetch_add(&N.n[PS_NATIVE_FAILED], 1);
        return PS_CAPTURE_FAILED;
    }
    return capture_running(tid, regs);
}

int ps_native_release(void)
{
    int how = N.how;
    N.how = PS_CAPTURE_FAILED;
    if (how == PS_CAPTURE_HELD) {
        uint32_t h = ST_HELD;
        int ok = atomic_compare_exchange_strong(&N.state, &h, ST_RELEASED);
        futex(&N.state, FUTEX_WAKE_PRIVATE, 1, NULL);
        if (ok)
            answered(N.cur_tid);
        else
            missed(N.cur_tid, ps_now_ns());   /* the hold ran out first */
        return ok ? 0 : -1;
    }
    if (how == PS_CAPTURE_BLOCKED) {
        /* The file again, not the capture's copy of it: this read is the
         * check that the thread did not leave its call while its stack was
         * walked (same call, arguments, sp and pc), so the capture's line
         * cannot stand in for it.  A blocked sample thus costs two reads
         * (open, read, close each). */
        char line[256];
        if (read_syscall_file(N.cur_tid, line, sizeof line) != 0)
            return -1;
        return strcmp(line, N.blocked_line) == 0 ? 0 : -1;
    }
    return -1;
}

void ps_native_after_fork(void)
{
    /* Only the forking thread exists here, and it was not held. */
    N.pid = getpid();
    ps_sigmask_changed();
    atomic_store(&N.state, ST_IDLE);
    memset(N.quiet, 0, sizeof N.quiet);
    ps_counters_zero(N.n, PS_NATIVE_COUNTS);
}

void ps_native_counts(struct ps_native_counts *c)
{
    ps_counters_read(N.n, c->n, PS_NATIVE_COUNTS);
}
