/*
 * bench_ticker.h - the timed wait the sampler thread does between ticks,
 * for the benchmarks' floors: bench_wake.c (a bare waker in a program of
 * its own, or beside a C busy loop) and libwaker.c (a bare waker inside
 * the profiled program itself).  One copy, so that both floors wait the
 * same way.
 */
#ifndef BENCH_TICKER_H
#define BENCH_TICKER_H

#include <pthread.h>
#include <time.h>

static inline long long now(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Absolute deadlines RATE times a second, waited for the way the sampler
 * thread waited until #36 round 4 (a condition variable on the monotonic
 * clock: two system calls, the wait and its mutex's FUTEX_WAKE), or with
 * clock_nanosleep (one, as the sampler's futex wait now); deadlines missed
 * are skipped, never burst. */
struct ticker {
    pthread_mutex_t m;
    pthread_cond_t c;
    long long iv, next;
    int nanosleep_mode;
};

static inline void ticker_init(struct ticker *t, long rate, int nanosleep_mode)
{
    pthread_condattr_t ca;
    pthread_mutex_init(&t->m, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->c, &ca);
    pthread_condattr_destroy(&ca);
    t->iv = 1000000000LL / rate;
    t->next = now(CLOCK_MONOTONIC) + t->iv;
    t->nanosleep_mode = nanosleep_mode;
}

/* Waits for the next deadline; returns how late the wake-up was. */
static inline long long ticker_wait(struct ticker *t)
{
    struct timespec ts = { (time_t)(t->next / 1000000000LL), (long)(t->next % 1000000000LL) };
    if (t->nanosleep_mode) {
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
            ;
    } else {
        pthread_mutex_lock(&t->m);
        pthread_cond_timedwait(&t->c, &t->m, &ts);
        pthread_mutex_unlock(&t->m);
    }
    long long w = now(CLOCK_MONOTONIC), late = w - t->next;
    t->next += t->iv;
    if (w > t->next)
        t->next += ((w - t->next) / t->iv + 1) * t->iv;
    return late;
}

#endif
