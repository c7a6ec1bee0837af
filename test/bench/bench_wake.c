/*
 * bench_wake.c - the platform's floor under any sampler's per-tick cost.
 *
 *     bench_wake RATE TICKS [cond|nanosleep] [SLACK_NS]
 *
 * A bare loop that waits for absolute deadlines RATE times a second, the
 * way the sampler thread does between ticks (pthread_cond_timedwait on the
 * monotonic clock; or clock_nanosleep(TIMER_ABSTIME), to compare), and does
 * nothing else.  SLACK_NS sets the thread's timer slack first
 * (PR_SET_TIMERSLACK; a normal thread has 50 us, which the kernel may add
 * to every timed wait to batch wake-ups).  Prints the thread's CPU time
 * per wake-up and the p50/p99 lateness in JSON.  Whatever this costs, every
 * tick of the sampler costs at least as much: on a virtual machine a
 * timer wake-up and the two context switches around it are far from free,
 * and the suite reports this figure next to the sampler's own.
 *
 *     bench_wake busy RATE MILLIONS
 *
 * What such a waker costs a *busy program* (the floor of issue #14): the
 * main thread runs MILLIONS x 10^6 steps of a loop over a 256 KiB buffer
 * while a second thread wakes RATE times a second (none with RATE 0);
 * prints the process's CPU time (user+sys) and the wake-ups.  Pinned to
 * one core, the difference to a RATE 0 run, per wake-up, is what any
 * sampler's wake-up costs the program it shares the core with (its own
 * CPU plus the program's cache and TLB refills).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_ticker.h"

static int cmp(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static _Atomic int busy_done;
static long busy_rate;
static long busy_wakes;

static void *waker(void *unused)
{
    (void)unused;
    struct ticker t;
    ticker_init(&t, busy_rate, 0);
    while (!atomic_load(&busy_done)) {
        ticker_wait(&t);
        busy_wakes++;
    }
    return NULL;
}

static int busy_main(long rate, long millions)
{
    static unsigned char buf[256 * 1024];
    pthread_t t;
    busy_rate = rate;
    if (rate > 0 && pthread_create(&t, NULL, waker, NULL) != 0)
        return 3;
    unsigned long long x = 88172645463325252ull, sum = 0;
    for (long long i = 0; i < millions * 1000000LL; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[x % sizeof buf] += (unsigned char)i;
        sum += buf[(x >> 20) % sizeof buf];
    }
    atomic_store(&busy_done, 1);
    if (rate > 0)
        pthread_join(t, NULL);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long long cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
    printf("{\"rate\": %ld, \"process_cpu_ns\": %lld, \"wakes\": %ld, \"checksum\": %llu}\n",
           rate, cpu, busy_wakes, sum & 0xff);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "busy") == 0)
        return busy_main(atol(argv[2]), atol(argv[3]));
    if (argc < 3 || argc > 5)
        return 2;
    long rate = atol(argv[1]);
    int n = atoi(argv[2]);
    int nanosleep_mode = argc > 3 && strcmp(argv[3], "nanosleep") == 0;
    long slack = argc > 4 ? atol(argv[4]) : -1;
    if (rate <= 0 || n <= 0)
        return 2;
    if (slack > 0 && prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0) != 0)
        return 3;
    slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    long long *late = malloc((size_t)n * sizeof *late);
    if (late == NULL)
        return 1;
    struct ticker t;
    ticker_init(&t, rate, nanosleep_mode);
    long long c0 = now(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < n; i++)
        late[i] = ticker_wait(&t);
    double cpu = (double)(now(CLOCK_THREAD_CPUTIME_ID) - c0) / n;
    qsort(late, (size_t)n, sizeof *late, cmp);
    printf("{\"rate\": %ld, \"cpu_ns_per_wake\": %.0f, \"late_p50_ns\": %lld, \"late_p99_ns\": %lld, "
           "\"method\": \"%s\", \"slack_ns\": %ld}\n",
           rate, cpu, late[n / 2], late[(long)n * 99 / 100], nanosleep_mode ? "nanosleep" : "cond",
           slack);
    free(late);
    return 0;
}
