/*
 * lock.h - taking a mutex without waiting for ever, for the paths a
 * signal handler may be on (the profile's writes: _exit, kill and raise
 * may be called from one).
 *
 * A handler that interrupted the very thread holding a lock it then takes
 * would wait for ever, and so would one that waits for a thread stuck on a
 * lock the interrupted thread holds.  So those paths try the lock, nap
 * and try again, and give up after a bound.  pthread_mutex_trylock on a
 * default mutex is one compare-and-swap (glibc, macOS's libc) and
 * nanosleep is async-signal-safe.
 */
#ifndef PS_LOCK_H
#define PS_LOCK_H

#include <errno.h>
#include <pthread.h>
#include <time.h>

/* 0 with m held, or ETIMEDOUT when it stayed held for about ms. */
static inline int ps_lock_bounded(pthread_mutex_t *m, long ms)
{
    /* Naps from 20 us up to 1 ms: a lock held for one tick is free again
     * within tens of microseconds. */
    long nap_ns = 20000, waited_ns = 0;
    while (pthread_mutex_trylock(m) != 0) {
        if (waited_ns >= ms * 1000000)
            return ETIMEDOUT;
        struct timespec nap = { 0, nap_ns };
        nanosleep(&nap, NULL);
        waited_ns += nap_ns;
        if (nap_ns < 1000000)
            nap_ns *= 2;
    }
    return 0;
}

#endif
