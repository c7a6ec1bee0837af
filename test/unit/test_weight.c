/*
 * Unit test: the weight of a walked stack (lib/sampler/weight.c).
 *
 * PYSAMPLE_MAX_THREADS_PER_TICK: with T threads and k a tick, each tick
 * walks k of them in a window that rotates by k, every thread is walked
 * once every ceil(T/k) ticks, and its weights (floor(T/k) or one more)
 * average T/k, so the total over many ticks is what sampling every thread
 * every tick gives.  PYSAMPLE_MODE=cpu: a look at a thread on a CPU counts
 * the time since its previous look, in whole periods with the rest carried,
 * within the CPU time it used and was not charged yet; a thread waiting is
 * charged nothing, so a burn's CPU never goes to the wait after it; a new
 * run, a missing reading or a clock that went back counts nothing.
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

/* A look at time now (ns; the reading takes 1 us) at a thread whose
 * clock reads cpu and which the OS says is on a CPU or not, as
 * threadinfo.c makes it: the periods charged. */
static uint64_t look(struct ps_cpu_clock *c, int64_t cpu, uint64_t now, int on_cpu,
                     uint64_t period, unsigned run)
{
    struct ps_cpu_reading r = { .cpu = cpu, .before = now, .after = now + 1000 };
    uint64_t n = ps_cpu_clock_due(c, &r, period, run);
    return ps_cpu_clock_settle(c, n, c->busy || on_cpu, period);
}

static void test_cpu(void)
{
    const uint64_t period = 10000000;   /* 10 ms: 100 Hz */
    const int64_t P = (int64_t)period;
    struct ps_cpu_clock c = { .last_cpu = -1 };
    uint64_t t = 1000;

    /* The first look in run 1 counts nothing, whatever the CPU so far. */
    CHECK_EQ_INT(look(&c, 5 * P, t, 1, period, 1), 0);
    /* Running through 2.5 periods, looked at after them: 2 (the time
     * and the CPU both allow 2), half a period of each kept ... */
    CHECK_EQ_INT(look(&c, 75 * P / 10, t += 25 * period / 10, 1, period, 1), 2);
    CHECK_EQ_INT(c.credit_ns, period / 2);
    CHECK_EQ_INT(c.time_ns, period / 2);
    /* ... which with 0.6 more makes one more. */
    CHECK_EQ_INT(look(&c, 81 * P / 10, t += 6 * period / 10, 1, period, 1), 1);
    CHECK_EQ_INT(c.credit_ns, period / 10);

    /* A spinner looked at every period, a little early or late: its
     * counts are its CPU time. */
    int64_t cpu = 81 * P / 10;
    uint64_t sum = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t step = period + (i % 2 ? period / 5 : 0) - (i % 2 ? 0 : period / 5);
        cpu += (int64_t)step;
        sum += look(&c, cpu, t += step, 1, period, 1);
    }
    CHECK_EQ_INT(sum, 100);

    /* Burns 2.5 periods, then waits 2.5 with looks every period: the
     * looks in the wait charge nothing (not on a CPU), and the burn's CPU
     * is charged where it burns, never more than it used. */
    sum = 0;
    for (int i = 0; i < 50; i++) {
        int burning = i % 5 < 3;       /* 3 looks of 5 land in the burn */
        cpu += burning ? (i % 5 == 0 ? P / 2 : P) : (i % 5 == 3 ? P / 2 : 0);
        sum += look(&c, cpu, t += period, burning, period, 1);
    }
    CHECK(sum <= 25 + PS_CPU_CREDIT_PERIODS && sum >= 20);

    /* Runnable but given half a CPU (a loaded machine): on a CPU at
     * every look, charged its CPU time, not the wall time. */
    sum = 0;
    for (int i = 0; i < 100; i++) {
        cpu += P / 2;
        sum += look(&c, cpu, t += period, 1, period, 1);
    }
    CHECK(sum >= 49 && sum <= 51);

    /* A poller using 1 % of a CPU, found on one look in 100: charged the
     * period that look stands for, its credit covering it. */
    sum = 0;
    for (int i = 0; i < 1000; i++) {
        cpu += P / 100;
        sum += look(&c, cpu, t += period, i % 100 == 99, period, 1);
    }
    CHECK_EQ_INT(sum, 10);
    /* Idle: nothing, on a CPU or not. */
    CHECK_EQ_INT(look(&c, cpu, t += period, 1, period, 1), 0);
    /* Found waiting with CPU to charge, then runnable with no CPU used
     * since (woken, waiting for a CPU): still in its wait, not charged;
     * once it has run, it is. */
    cpu += P / 2;
    CHECK_EQ_INT(look(&c, cpu, t += period, 0, period, 1), 0);
    cpu += P / 2;
    CHECK_EQ_INT(look(&c, cpu, t += period, 0, period, 1), 0);
    CHECK_EQ_INT(c.waiting, 1);
    CHECK_EQ_INT(look(&c, cpu, t += period, 1, period, 1), 0);
    cpu += P / 10;
    CHECK_EQ_INT(look(&c, cpu, t += period, 1, period, 1), 1);

    /* The clock alone says a thread ran throughout: all but the slack of
     * the time between the readings (from the previous one's start to
     * this one's end; 1/256 of 10 ms is above the 20 us floor) ... */
    cpu += P - P / 300;
    CHECK_EQ_INT(look(&c, cpu, t += period, 0, period, 1), 1);
    CHECK_EQ_INT(c.busy, 1);
    /* ... never a thread off the CPU for more than that. */
    cpu += P - P / 200;
    CHECK_EQ_INT(look(&c, cpu, t += period, 0, period, 1), 0);
    CHECK_EQ_INT(c.busy, 0);
    /* At 10 kHz the floor: 20 us off the CPU in 100 us (the sampler's
     * tick on the thread's one core) is still running throughout (a run
     * of its own, run 3). */
    const uint64_t fast = 100000;
    CHECK_EQ_INT(look(&c, cpu, t += period, 1, fast, 3), 0);
    cpu += (int64_t)fast - 18000;
    CHECK_EQ_INT(look(&c, cpu, t += fast, 0, fast, 3), 0);   /* under a period of CPU */
    cpu += (int64_t)fast - 18000;
    CHECK_EQ_INT(look(&c, cpu, t += fast, 0, fast, 3), 1);
    cpu += (int64_t)fast - 25000;
    CHECK_EQ_INT(look(&c, cpu, t += fast, 0, fast, 3), 0);

    /* A clock that went back (the tid taken over): nothing, and the next
     * look counts from there. */
    CHECK_EQ_INT(look(&c, 1000, t += period, 1, period, 1), 0);
    CHECK_EQ_INT(look(&c, 1000 + 3 * P, t += 3 * period, 1, period, 1), 3);
    /* A clock that cannot be read: nothing, and nothing from it next. */
    CHECK_EQ_INT(look(&c, -1, t += period, 1, period, 1), 0);
    CHECK_EQ_INT(look(&c, 50 * P, t += period, 1, period, 1), 0);
    CHECK_EQ_INT(look(&c, 52 * P, t += 2 * period, 1, period, 1), 2);
    /* An early look (less than a period since the last charge) goes with
     * the next one. */
    CHECK_EQ_INT(look(&c, 52 * P + P / 2, t += period / 2, 1, period, 1), 0);
    CHECK_EQ_INT(look(&c, 53 * P, t += period / 2, 1, period, 1), 1);

    /* A new run: its first look counts nothing and drops what was kept. */
    CHECK_EQ_INT(look(&c, 53 * P + P / 2, t += period / 2, 0, period, 1), 0);
    CHECK(c.credit_ns > 0);
    CHECK_EQ_INT(look(&c, 90 * P, t += period, 1, period, 2), 0);
    CHECK_EQ_INT(c.credit_ns, 0);
    CHECK_EQ_INT(c.time_ns, 0);
    CHECK_EQ_INT(look(&c, 91 * P - 1, t += period, 1, period, 2), 0);
    CHECK_EQ_INT(look(&c, 91 * P, t += period, 1, period, 2), 1);
}

int main(void)
{
    test_subset();
    test_cpu();
    CHECK_DONE();
}
