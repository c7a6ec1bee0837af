/*
 * wake.c - the sampler's wait that anyone can end (platform.h, ps_wake):
 * a condition variable on macOS.
 *
 * macOS has no public futex (its __ulock_wait is private API), so the
 * wait is a condition variable, relative to the monotonic clock (there is
 * no clock attribute), and the sequence number is read under its mutex.
 * A post only tries the mutex: it may come from a signal handler that
 * interrupted the mutex's holder, where waiting for it would deadlock.
 * So a post that finds the mutex busy (the waiter between its look at the
 * sequence and its wait, or another post) is seen at the wait's deadline
 * instead: the next tick, or at most 100 ms idle (loop.c).  Linux's futex
 * (linux/wake.c) loses none.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "platform/platform.h"

void ps_wake_init(struct ps_wake *w)
{
    atomic_store(&w->seq, 0);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
}

uint32_t ps_wake_seq(struct ps_wake *w)
{
    return atomic_load(&w->seq);
}

/* Waits for the time left, measured on the monotonic clock (a wall-clock
 * deadline would move with the clock). */
static int wait_relative(struct ps_wake *w, uint64_t deadline)
{
    if (deadline == UINT64_MAX)
        return pthread_cond_wait(&w->cond, &w->lock);
    uint64_t now = ps_now_ns();
    if (now >= deadline)
        return ETIMEDOUT;
    struct timespec rel = { (time_t)((deadline - now) / 1000000000u),
                            (long)((deadline - now) % 1000000000u) };
    return pthread_cond_timedwait_relative_np(&w->cond, &w->lock, &rel);
}

int ps_wake_wait_until(struct ps_wake *w, uint32_t seen, uint64_t deadline)
{
    int r = 0;
    pthread_mutex_lock(&w->lock);
    if (atomic_load(&w->seq) == seen)
        r = wait_relative(w, deadline);
    pthread_mutex_unlock(&w->lock);
    return r == ETIMEDOUT ? ETIMEDOUT : 0;
}

void ps_wake_post(struct ps_wake *w)
{
    int saved = errno;
    atomic_fetch_add(&w->seq, 1);
    if (pthread_mutex_trylock(&w->lock) == 0) {
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
    }
    errno = saved;
}
