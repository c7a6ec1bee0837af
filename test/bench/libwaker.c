/*
 * libwaker.c - the floor of issue #36 item 3 as the issue states it: "a
 * no-op thread waking at the same rate in the same process".
 *
 *     LD_PRELOAD=libwaker.so BENCH_WAKER_RATE=HZ BENCH_WAKER_OUT=FILE \
 *         [BENCH_WAKER_WAIT=cond|nanosleep] prog
 *
 * Preloaded into the profiled program in place of libpysample, its
 * constructor starts one thread that waits for absolute deadlines HZ times
 * a second exactly as the sampler thread does (bench_ticker.h: a condition
 * variable on the monotonic clock, timer slack 1 ns as
 * ps_thread_precise_timers() sets) and does nothing else.  At exit it
 * writes the number of wake-ups to FILE, and on a second line the
 * thread's own CPU time in ns.  The process's CPU beside an
 * unpreloaded run, per wake-up, is what waking costs *this* program --
 * the thread's own CPU, the context switches, and the caches and TLB the
 * program refills after it -- so that the sampler's added CPU per sample
 * can be set beside it with the walk as the only difference.
 * BENCH_WAKER_WAIT=nanosleep waits with clock_nanosleep instead: one
 * system call a wake-up, what a no-op thread would do, and what the
 * sampler's futex wait costs since #36 round 4 (the condition variable,
 * the default, is two: its mutex's unlock after a timed wait is a
 * FUTEX_WAKE).  (bench_wake
 * busy measures the same beside a C loop over 256 KiB, whose working set
 * is not the interpreter's.)
 *
 * Benchmark only: nothing of the library, no checks beyond what a
 * benchmark needs; without BENCH_WAKER_RATE it does nothing.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "bench_ticker.h"

static _Atomic long wakes;
static long rate;
static pthread_t thread;
static int nanosleep_mode;

static void *waker(void *unused)
{
    (void)unused;
    struct ticker t;
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    ticker_init(&t, rate, nanosleep_mode);
    for (;;) {
        ticker_wait(&t);
        atomic_fetch_add_explicit(&wakes, 1, memory_order_relaxed);
    }
    return NULL;
}

__attribute__((constructor)) static void waker_start(void)
{
    const char *r = getenv("BENCH_WAKER_RATE");
    rate = r ? atol(r) : 0;
    if (rate <= 0)
        return;
    const char *w = getenv("BENCH_WAKER_WAIT");
    nanosleep_mode = w != NULL && strcmp(w, "nanosleep") == 0;
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, waker, NULL) != 0)
        rate = 0;
    thread = t;
    pthread_attr_destroy(&a);
}

__attribute__((destructor)) static void waker_report(void)
{
    const char *out = getenv("BENCH_WAKER_OUT");
    if (rate <= 0 || out == NULL)
        return;
    FILE *f = fopen(out, "w");
    if (f == NULL)
        return;
    /* Then the thread's own CPU time (ns), the figure to set beside the
     * sampler's PYSAMPLE_STATS sampler_cpu_ns: per thread, it is far less
     * noisy than the process's, though it leaves out the program's refills. */
    clockid_t c;
    struct timespec ts = { 0, 0 };
    if (pthread_getcpuclockid(thread, &c) == 0)
        clock_gettime(c, &ts);
    fprintf(f, "%ld\n%lld\n", atomic_load(&wakes), (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    fclose(f);
}
