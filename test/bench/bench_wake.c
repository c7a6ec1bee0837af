/*
 * bench_wake.c - the platform's floor under any sampler's per-tick cost.
 *
 *     bench_wake RATE TICKS
 *
 * A bare loop that waits for absolute deadlines RATE times a second, the
 * way the sampler thread does between ticks (pthread_cond_timedwait on the
 * monotonic clock), and does nothing else.  Prints the thread's CPU time
 * per wake-up and the p50/p99 lateness in JSON.  Whatever this costs, every
 * tick of the sampler costs at least as much: on a virtual machine a
 * timer wake-up and the two context switches around it are far from free,
 * and the suite reports this figure next to the sampler's own.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long rate = atol(argv[1]);
    int n = atoi(argv[2]);
    if (rate <= 0 || n <= 0)
        return 2;
    long long *late = malloc((size_t)n * sizeof *late);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c, &ca);
    long long iv = 1000000000LL / rate, next = now(CLOCK_MONOTONIC) + iv;
    long long c0 = now(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < n; i++) {
        struct timespec ts = { (time_t)(next / 1000000000LL), (long)(next % 1000000000LL) };
        pthread_mutex_lock(&m);
        pthread_cond_timedwait(&c, &m, &ts);
        pthread_mutex_unlock(&m);
        long long w = now(CLOCK_MONOTONIC);
        late[i] = w - next;
        next += iv;
        if (w > next)
            next += ((w - next) / iv + 1) * iv;
    }
    double cpu = (double)(now(CLOCK_THREAD_CPUTIME_ID) - c0) / n;
    qsort(late, (size_t)n, sizeof *late, cmp);
    printf("{\"rate\": %ld, \"cpu_ns_per_wake\": %.0f, \"late_p50_ns\": %lld, \"late_p99_ns\": %lld}\n",
           rate, cpu, late[n / 2], late[(long)n * 99 / 100]);
    free(late);
    return 0;
}
