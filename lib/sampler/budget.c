/*
 * budget.c - the CPU budget's arithmetic (budget.h).
 */
#include <string.h>

#include "sampler/budget.h"

void ps_budget_start(struct ps_budget *b, double share, int max_hz, uint64_t now, int64_t cpu)
{
    int adjustments = (int)b->adjustments;
    memset(b, 0, sizeof *b);
    b->adjustments = (uint64_t)adjustments;
    b->share = share;
    b->max_hz = max_hz;
    b->rate_hz = max_hz;
    b->window_ns = now;
    b->window_cpu = cpu;
    b->window_max = PS_BUDGET_FIRST_TICKS;
}

int ps_budget_update(struct ps_budget *b, uint64_t now, int64_t cpu)
{
    uint64_t wall = now - b->window_ns;
    int64_t used = cpu - b->window_cpu;
    uint64_t ticks = b->window_ticks;
    b->window_ns = now;
    b->window_cpu = cpu;
    b->window_ticks = 0;
    b->window_max = PS_BUDGET_WINDOW_TICKS;
    if (b->share <= 0 || wall == 0 || ticks == 0 || used < 0)
        return b->rate_hz;
    /* The CPU clock counts in the kernel's units (1 ns here, up to a
     * scheduler tick elsewhere): a window that shows no CPU at all says
     * only that a tick costs less than the clock can see. */
    double per_tick = (double)used / (double)ticks;                /* ns */
    double want = per_tick > 0 ? 0.9 * b->share * 1e9 / per_tick : (double)b->max_hz;
    double cur = (double)b->rate_hz;
    if (want > 2 * cur)
        want = 2 * cur;
    if (want > b->max_hz)
        want = b->max_hz;
    if (want < 1)
        want = 1;
    int next = (int)want;
    double change = want > cur ? want - cur : cur - want;
    if (next != b->rate_hz && change >= 0.05 * cur) {
        b->rate_hz = next;
        b->adjustments++;
    }
    return b->rate_hz;
}

