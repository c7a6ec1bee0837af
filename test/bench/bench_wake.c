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
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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
        if (nanosleep_mode) {
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
                ;
        } else {
            pthread_mutex_lock(&m);
            pthread_cond_timedwait(&c, &m, &ts);
            pthread_mutex_unlock(&m);
        }
        long long w = now(CLOCK_MONOTONIC);
        late[i] = w - next;
        next += iv;
        if (w > next)
            next += ((w - next) / iv + 1) * iv;
    }
    double cpu = (double)(now(CLOCK_THREAD_CPUTIME_ID) - c0) / n;
    qsort(late, (size_t)n, sizeof *late, cmp);
    printf("{\"rate\": %ld, \"cpu_ns_per_wake\": %.0f, \"late_p50_ns\": %lld, \"late_p99_ns\": %lld, "
           "\"method\": \"%s\", \"slack_ns\": %ld}\n",
           rate, cpu, late[n / 2], late[(long)n * 99 / 100], nanosleep_mode ? "nanosleep" : "cond",
           slack);
    free(late);
    return 0;
}
