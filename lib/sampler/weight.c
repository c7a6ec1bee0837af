/*
 * weight.c - the weight of a walked stack (weight.h).  Pure arithmetic on
 * the caller's state: no reads, no clocks, no locks.
 */
#include "sampler/weight.h"

uint64_t ps_subset_weight(struct ps_subset *s, unsigned k, unsigned idx, int all)
{
    unsigned t = s->threads_seen;
    if (k == 0 || t <= k || all)
        return 1;
    if ((idx % t + t - s->rotate % t) % t >= k)
        return 0;
    uint64_t whole = t / k, rest = t % k;
    uint64_t x = s->rng ? s->rng : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s->rng = x;
    return whole + ((x % k) < rest ? 1 : 0);
}

void ps_subset_next(struct ps_subset *s, unsigned k, unsigned n, int all)
{
    if (k == 0 || all)
        return;
    s->rotate = n ? (s->rotate + k) % n : 0;
    s->threads_seen = n;
}

uint64_t ps_cpu_clock_weight(struct ps_cpu_clock *c, int64_t cpu, uint64_t period_ns,
                             unsigned run)
{
    int64_t last = c->last_cpu;
    c->last_cpu = cpu;
    if (c->run != run) {
        c->run = run;
        c->carry_ns = 0;
        return 0;
    }
    if (cpu < 0 || last < 0 || cpu < last || period_ns == 0)
        return 0;
    uint64_t ns = (uint64_t)(cpu - last) + c->carry_ns;
    c->carry_ns = ns % period_ns;
    return ns / period_ns;
}
