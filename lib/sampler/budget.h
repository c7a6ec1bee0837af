/*
 * budget.h - PYSAMPLE_CPU_BUDGET: the sampler keeps its own CPU time under
 * a share of one core by lowering its rate, and raises it back (never above
 * the requested rate) when there is room again, as Datadog's profiler does.
 *
 * Pure arithmetic on (wall time, the sampler thread's CPU time) pairs the
 * sampler reads at most every PS_BUDGET_WINDOW_NS: no clock, no lock, no
 * state outside the struct, so test/unit/test_budget.c drives it with any
 * numbers.
 */
#ifndef PS_BUDGET_H
#define PS_BUDGET_H

#include <stdint.h>

/* How often the rate is reconsidered: long enough to hold many ticks at
 * the rates a budget matters for, short enough that a burst of expensive
 * ticks (a deep stack appeared) is over budget for a fifth of a second at
 * most. */
#define PS_BUDGET_WINDOW_NS 200000000ull
/* ... or this many ticks, whichever comes first: at a high requested rate
 * the first verdict comes after 20 ms (10 kHz), not after 200 ms of ticks
 * that may cost far more than the budget (that first window was most of
 * the overshoot measured at 10 kHz). */
#define PS_BUDGET_WINDOW_TICKS 200
/* A budget's first window, which runs at the requested rate before any
 * verdict, ends after this many ticks: at 1 kHz its 200 ticks were 200 ms
 * at the full rate, twice a 1 % budget where a tick costs 20 us, and a
 * 1 s session (a scrape) used 1.1-1.2 times its budget.  20 ticks still
 * measure what a tick costs (a clock too coarse to see them reads 0 and
 * keeps the rate for one ordinary window, as before). */
#define PS_BUDGET_FIRST_TICKS 20

struct ps_budget {
    double share;            /* of one core: 0.01 for "1%"; 0 = no budget */
    int max_hz;              /* the requested rate: the ceiling */
    int rate_hz;             /* the rate to tick at now */
    uint64_t adjustments;    /* times rate_hz changed */
    uint64_t window_ns;      /* start of the current window (wall, ns) */
    int64_t window_cpu;      /* the sampler's CPU time then */
    uint64_t window_ticks;   /* ticks since */
    uint64_t window_max;     /* ticks that end this window */
};

/* Starts a budget of share (0..1] with max_hz as ceiling and start rate,
 * at wall time now and sampler CPU time cpu; its first window is short
 * (PS_BUDGET_FIRST_TICKS). */
void ps_budget_start(struct ps_budget *b, double share, int max_hz, uint64_t now, int64_t cpu);

/* Counts a tick. */
static inline void ps_budget_tick(struct ps_budget *b)
{
    b->window_ticks++;
}

/* 1 once the window is over and ps_budget_update should be called. */
static inline int ps_budget_due(const struct ps_budget *b, uint64_t now)
{
    return b->share > 0 &&
           (now - b->window_ns >= PS_BUDGET_WINDOW_NS || b->window_ticks >= b->window_max);
}

/*
 * Ends the window at (now, cpu) and returns the rate for the next one:
 * the rate whose ticks, at what a tick cost in this window, use 90 % of
 * the budget (headroom for ticks that cost more than the average), at
 * least 1 Hz, at most max_hz, and at most twice the current rate (one
 * cheap window is no proof; the rate climbs back over a few).  A change
 * under 5 % is not made (no churn, no adjustment counted).
 */
int ps_budget_update(struct ps_budget *b, uint64_t now, int64_t cpu);

#endif
