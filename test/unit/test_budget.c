/*
 * Unit test: the CPU budget's arithmetic (budget.c) on made-up clocks: it
 * converges to the rate whose ticks use 90 % of the budget, climbs back at
 * most twice per window, never passes the requested rate or goes under
 * 1 Hz, and counts its changes; and PYSAMPLE_CPU_BUDGET's syntax.
 */
#include <string.h>

#include "sampler/budget.h"
#include "check.h"

#define MS 1000000ull

/* Runs windows of 200 ms at the budget's rate, each tick costing
 * tick_ns of CPU; returns the rate after n windows. */
static int run(struct ps_budget *b, uint64_t *now, int64_t *cpu, double tick_ns, int n)
{
    for (int w = 0; w < n; w++) {
        uint64_t ticks = (uint64_t)b->rate_hz / 5;  /* 200 ms worth */
        for (uint64_t t = 0; t < ticks; t++)
            ps_budget_tick(b);
        *now += 200 * MS;
        *cpu += (int64_t)(tick_ns * (double)ticks);
        CHECK(ps_budget_due(b, *now));
        ps_budget_update(b, *now, *cpu);
    }
    return b->rate_hz;
}

static void test_converges_under_budget(void)
{
    struct ps_budget b;
    memset(&b, 0, sizeof b);
    uint64_t now = 1000 * MS;
    int64_t cpu = 0;
    ps_budget_start(&b, 0.01, 10000, now, cpu);   /* 1 % of a core, 10 kHz asked */
    CHECK_EQ_INT(b.rate_hz, 10000);
    CHECK(!ps_budget_due(&b, now + 199 * MS));
    /* A tick costs 5 us: 10 kHz would be 5 %; 1 % allows 2 kHz, and the
     * budget aims at 90 % of it. */
    int r = run(&b, &now, &cpu, 5000, 1);
    CHECK_EQ_INT(r, 1800);
    CHECK_EQ_INT((long)b.adjustments, 1);
    /* Steady: no churn. */
    r = run(&b, &now, &cpu, 5000, 10);
    CHECK_EQ_INT(r, 1800);
    CHECK_EQ_INT((long)b.adjustments, 1);
    /* The stack got deeper (20 us a tick): down at once. */
    r = run(&b, &now, &cpu, 20000, 1);
    CHECK_EQ_INT(r, 450);
    /* Cheap again (1 us): up, at most doubling per window, to the cap. */
    r = run(&b, &now, &cpu, 1000, 1);
    CHECK_EQ_INT(r, 900);
    r = run(&b, &now, &cpu, 1000, 1);
    CHECK_EQ_INT(r, 1800);
    r = run(&b, &now, &cpu, 1000, 10);
    CHECK_EQ_INT(r, 9000);     /* 0.9 * 1% / 1 us */
    CHECK_EQ_INT((long)b.adjustments, 7);   /* 1800 450 900 1800 3600 7200 9000 */
}

/* A 1 s session at 1 kHz where a tick costs 20 us (2 % of a core) under a
 * 1 % budget, ticking at the budget's rate as the sampler does: its whole
 * CPU, the first window's included, stays within the budget (the first
 * window of 200 ticks at the full rate made it 11.2 ms of 10). */
static void test_first_window_within_budget(void)
{
    struct ps_budget b;
    memset(&b, 0, sizeof b);
    uint64_t start = 5000 * MS, now = start;
    int64_t cpu = 0;
    ps_budget_start(&b, 0.01, 1000, now, cpu);
    while (now < start + 1000 * MS) {
        cpu += 20000;
        ps_budget_tick(&b);
        if (ps_budget_due(&b, now))
            ps_budget_update(&b, now, cpu);
        now += 1000000000ull / (uint64_t)b.rate_hz;
    }
    CHECK(cpu <= 10 * (int64_t)MS);
    CHECK(cpu >= 8 * (int64_t)MS);    /* and not far under it */
    CHECK_EQ_INT(b.rate_hz, 450);
}

static void test_limits(void)
{
    struct ps_budget b;
    memset(&b, 0, sizeof b);
    uint64_t now = 0;
    int64_t cpu = 0;
    /* A generous budget keeps the requested rate. */
    ps_budget_start(&b, 0.5, 10000, now, cpu);
    CHECK_EQ_INT(run(&b, &now, &cpu, 5000, 5), 10000);
    CHECK_EQ_INT((long)b.adjustments, 0);
    /* A tick dearer than the whole budget: 1 Hz, not 0. */
    ps_budget_start(&b, 0.0001, 100, now, cpu);
    CHECK_EQ_INT(run(&b, &now, &cpu, 50000000, 3), 1);
    /* A clock too coarse to see the ticks: no reason to lower. */
    ps_budget_start(&b, 0.01, 1000, now, cpu);
    CHECK_EQ_INT(run(&b, &now, &cpu, 0, 3), 1000);
    /* No ticks in a window (descheduled): nothing learnt, nothing changed. */
    ps_budget_start(&b, 0.01, 1000, now, cpu);
    now += 200 * MS;
    CHECK_EQ_INT(ps_budget_update(&b, now, cpu + 1000000), 1000);
    /* No budget: never due. */
    ps_budget_start(&b, 0, 1000, now, cpu);
    CHECK(!ps_budget_due(&b, now + 10000 * MS));
}

int main(void)
{
    test_converges_under_budget();
    test_first_window_within_budget();
    test_limits();
    CHECK_DONE();
}
