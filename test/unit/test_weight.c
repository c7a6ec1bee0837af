/*
 * Unit test: the weight of a walked stack (lib/sampler/weight.c).
 *
 * PYSAMPLE_MAX_THREADS_PER_TICK: with T threads and k a tick, each tick
 * walks k of them in a window that rotates by k, every thread is walked
 * once every ceil(T/k) ticks, and its weights (floor(T/k) or one more)
 * average T/k, so the total over many ticks is what sampling every thread
 * every tick gives.  PYSAMPLE_MODE=cpu: CPU time counted in whole periods,
 * the rest carried to the next look, so the counts add up to the CPU time
 * whatever the spacing of the looks; a new run, a missing reading or a
 * clock that went back counts nothing.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "sampler/weight.h"

/* T threads, k per tick, over ticks: each thread's walks and total weight. */
static void run_subset(unsigned T, unsigned k, unsigned ticks, unsigned *walks, uint64_t *weight)
{
    struct ps_subset s;
    memset(&s, 0, sizeof s);
    memset(walks, 0, T * sizeof *walks);
    memset(weight, 0, T * sizeof *weight);
    ps_subset_next(&s, k, T, 0);   /* a first tick that saw T thread states */
    for (unsigned t = 0; t < ticks; t++) {
        unsigned walked = 0;
        for (unsigned i = 0; i < T; i++) {
            uint64_t w = ps_subset_weight(&s, k, i, 0);
            if (w != 0) {
                walks[i]++;
                walked++;
                weight[i] += w;
                CHECK(w == T / k || w == T / k + 1);
            }
        }
        CHECK_EQ_INT(walked, k);
        ps_subset_next(&s, k, T, 0);
    }
}

static void test_subset(void)
{
    unsigned walks[10];
    uint64_t weight[10];

    /* 10 threads, 4 a tick: the window rotates 0-3, 4-7, 8,9,0,1, 2-5 ...;
     * over 10 ticks (40 walks) each thread is walked 4 times. */
    run_subset(10, 4, 10, walks, weight);
    for (unsigned i = 0; i < 10; i++)
        CHECK_EQ_INT(walks[i], 4);

    /* Weights 2 or 3 (10/4 = 2.5) that average 2.5: over 4000 ticks each
     * thread is walked 1600 times and weighs about 4000 (one tick each). */
    run_subset(10, 4, 4000, walks, weight);
    uint64_t total = 0;
    for (unsigned i = 0; i < 10; i++) {
        CHECK_EQ_INT(walks[i], 1600);
        CHECK(weight[i] > 3700 && weight[i] < 4300);
        total += weight[i];
    }
    CHECK(total > 39000 && total < 41000);

    /* T a multiple of k: no rounding, every walk weighs T/k exactly. */
    run_subset(9, 3, 30, walks, weight);
    for (unsigned i = 0; i < 9; i++) {
        CHECK_EQ_INT(walks[i], 10);
        CHECK_EQ_INT(weight[i], 30);
    }

    /* Off (k 0), no more threads than k, a tick that samples all: 1 each. */
    struct ps_subset s;
    memset(&s, 0, sizeof s);
    ps_subset_next(&s, 0, 10, 0);
    CHECK_EQ_INT(ps_subset_weight(&s, 0, 7, 0), 1);
    ps_subset_next(&s, 4, 3, 0);
    CHECK_EQ_INT(ps_subset_weight(&s, 4, 2, 0), 1);
    ps_subset_next(&s, 4, 10, 0);
    for (unsigned i = 0; i < 10; i++)
        CHECK_EQ_INT(ps_subset_weight(&s, 4, i, 1), 1);
    /* ... and that tick did not move the window. */
    unsigned rotate = s.rotate;
    ps_subset_next(&s, 4, 10, 1);
    CHECK_EQ_INT(s.rotate, rotate);

    /* The tick after the count changed is weighted by the old count: 10
     * seen, 20 now listed; positions past the old count wrap into it. */
    memset(&s, 0, sizeof s);
    ps_subset_next(&s, 5, 10, 0);   /* rotate 5 */
    unsigned picked = 0;
    for (unsigned i = 0; i < 20; i++) {
        uint64_t w = ps_subset_weight(&s, 5, i, 0);
        if (w != 0) {
            CHECK_EQ_INT(w, 2);
            CHECK_EQ_INT(i % 10 >= 5, 1);
            picked++;
        }
    }
    CHECK_EQ_INT(picked, 10);
}

static void test_cpu(void)
{
    const uint64_t period = 10000000;   /* 10 ms: 100 Hz */
    struct ps_cpu_clock c = { .last_cpu = -1 };

    /* The first look in run 1 counts nothing, whatever the CPU so far. */
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 5 * (int64_t)period, period, 1), 0);
    /* 2.5 periods: 2, and half a period carried ... */
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 75 * (int64_t)period / 10, period, 1), 2);
    CHECK_EQ_INT(c.carry_ns, period / 2);
    /* ... which with 0.6 more makes one more, 0.1 carried. */
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 81 * (int64_t)period / 10, period, 1), 1);
    CHECK_EQ_INT(c.carry_ns, period / 10);
    /* Many looks a third of a period apart add up to the CPU time: 30
     * looks of 1/3 period each are 10 periods (the carry makes them). */
    int64_t cpu = 81 * (int64_t)period / 10;
    uint64_t sum = 0;
    for (int i = 0; i < 30; i++) {
        cpu += (int64_t)period / 3 + (i % 3 == 0);   /* 1/3 rounded up over 3 */
        sum += ps_cpu_clock_weight(&c, cpu, period, 1);
    }
    CHECK_EQ_INT(sum, 10);

    /* Idle: nothing. */
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, cpu, period, 1), 0);
    /* A clock that went back (the tid taken over): nothing, and the next
     * look counts from there. */
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 1000, period, 1), 0);
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 1000 + 3 * (int64_t)period, period, 1), 3);
    /* A clock that cannot be read: nothing, and nothing from it next. */
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, -1, period, 1), 0);
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 50 * (int64_t)period, period, 1), 0);
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 52 * (int64_t)period, period, 1), 2);

    /* (The tenth of a period carried since the loop stays carried.)  A new
     * run: its first look counts nothing and drops the carry. */
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 52 * (int64_t)period + (int64_t)period / 2, period, 1), 0);
    CHECK_EQ_INT(c.carry_ns, 6 * period / 10);
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 90 * (int64_t)period, period, 2), 0);
    CHECK_EQ_INT(c.carry_ns, 0);
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 91 * (int64_t)period - 1, period, 2), 0);
    CHECK_EQ_INT(ps_cpu_clock_weight(&c, 91 * (int64_t)period, period, 2), 1);
}

int main(void)
{
    test_subset();
    test_cpu();
    CHECK_DONE();
}
