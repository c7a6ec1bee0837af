/*
 * wake.c - the sampler's wait that anyone can end (platform.h, ps_wake):
 * a futex word.
 *
 * The word is a sequence number.  A post bumps it and wakes the waiter;
 * the waiter read it before it looked at what it waits for, and the
 * kernel compares it with that reading before it sleeps, so a post in
 * between (a signal handler on the waiter's own thread included) ends the
 * wait at once.  No lock: a post is two atomic steps, safe in a signal
 * handler, and never lost.
 *
 * Why not the condition variable it replaces: after pthread_cond_timedwait
 * glibc takes the mutex back marked contended, so its unlock was a
 * FUTEX_WAKE system call every tick although nobody waited (2 system calls
 * a tick; docs/performance.md "#36 round 4").  Here a tick's wait is one
 * FUTEX_WAIT_BITSET with an absolute CLOCK_MONOTONIC deadline (the clock of
 * ps_now_ns(), and the thread's timer slack, ps_thread_precise_timers,
 * applies as before).  A post costs a FUTEX_WAKE; posts are rare (stop,
 * writes, sampling on or off).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"

/* linux/futex.h's values (the ABI), not its header: a musl tool chain may
 * lack the kernel's headers. */
#define WAKE_FUTEX_WAKE 1
#define WAKE_FUTEX_WAIT_BITSET 9
#define WAKE_FUTEX_PRIVATE 128
#define WAKE_FUTEX_ANY 0xffffffffu

void ps_wake_init(struct ps_wake *w)
{
    atomic_store(&w->seq, 0);
}

uint32_t ps_wake_seq(struct ps_wake *w)
{
    return atomic_load(&w->seq);
}

/* A futex that fails otherwise than by timing out, being woken or
 * interrupted (a sandbox that refuses it): a sleep until the deadline, at
 * most 100 ms, so that the caller's loop cannot spin. */
static int sleep_instead(uint64_t deadline)
{
    uint64_t cap = ps_now_ns() + 100000000ull;
    uint64_t until = deadline < cap ? deadline : cap;
    struct timespec ts = { (time_t)(until / 1000000000u), (long)(until % 1000000000u) };
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    return until == deadline ? ETIMEDOUT : 0;
}

int ps_wake_wait_until(struct ps_wake *w, uint32_t seen, uint64_t deadline)
{
    struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
    /* With FUTEX_WAIT_BITSET the timeout is absolute, on CLOCK_MONOTONIC. */
    long r = syscall(SYS_futex, &w->seq, WAKE_FUTEX_WAIT_BITSET | WAKE_FUTEX_PRIVATE, seen,
                     deadline == UINT64_MAX ? NULL : &ts, NULL, WAKE_FUTEX_ANY);
    if (r == 0 || errno == EAGAIN || errno == EINTR)
        return 0;  /* woken, posted before the wait, or a signal: the caller looks again */
    if (errno == ETIMEDOUT)
        return ETIMEDOUT;
    return sleep_instead(deadline);
}

/* Async-signal-safe: an atomic add and one system call; errno is the
 * interrupted code's and is given back. */
void ps_wake_post(struct ps_wake *w)
{
    int saved = errno;
    atomic_fetch_add(&w->seq, 1);
    syscall(SYS_futex, &w->seq, WAKE_FUTEX_WAKE | WAKE_FUTEX_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}
