/*
 * weight.c - the weight of a walked stack (weight.h).  Pure arithmetic on
 * the caller's state: no reads, no clocks, no locks.
 */
#include "sampler/weight.h"
#include "util/tickpath.h"

PS_TICK_PATH uint64_t ps_subset_weight(struct ps_subset *s, unsigned k, unsigned idx, int all)
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

PS_TICK_PATH void ps_subset_next(struct ps_subset *s, unsigned k, unsigned n, int all)
{
    if (k == 0 || all)
        return;
    s->rotate = n ? (s->rotate + k) % n : 0;
    s->threads_seen = n;
}

/* The look at r: how long since the previous one (0 without one), and
 * whether the thread ran throughout (weight.h). */
static uint64_t since_last_look(struct ps_cpu_clock *c, const struct ps_cpu_reading *r)
{
    uint64_t last = c->last_look;
    c->last_look = r->before;
    c->busy = 0;
    if (last == 0 || r->before <= last)
        return 0;
    uint64_t most = r->after - last, slack = most / 256;
    if (slack < PS_CPU_BUSY_SLACK_NS)
        slack = PS_CPU_BUSY_SLACK_NS;
    if (c->last_cpu >= 0 && r->cpu >= c->last_cpu)
        c->busy = (uint64_t)(r->cpu - c->last_cpu) + slack >= most;
    return r->before - last;
}

uint64_t ps_cpu_clock_due(struct ps_cpu_clock *c, const struct ps_cpu_reading *r,
                          uint64_t period_ns, unsigned run)
{
    int64_t last = c->last_cpu, cpu = r->cpu;
    uint64_t dt = since_last_look(c, r);
    c->last_cpu = cpu;
    c->allow_ns = 0;
    if (c->run != run) {
        c->run = run;
        c->credit_ns = c->time_ns = 0;
        c->waiting = 0;
        return 0;
    }
    if (cpu < 0 || last < 0 || cpu < last || period_ns == 0 || dt == 0)
        return 0;
    if (cpu == last && c->waiting)
        return 0;   /* still in the wait it was found in */
    c->waiting = 0;
    uint64_t most = PS_CPU_CREDIT_PERIODS * period_ns;
    if (c->credit_ns > most)
        c->credit_ns = most;
    c->credit_ns += (uint64_t)(cpu - last);
    uint64_t allow = dt + c->time_ns;
    if (allow < period_ns) {
        /* Less than a period since the last charge (an early look): it
         * goes with the next one. */
        c->time_ns = allow;
        return 0;
    }
    uint64_t by_time = allow / period_ns, by_cpu = c->credit_ns / period_ns;
    c->allow_ns = allow;
    return by_time < by_cpu ? by_time : by_cpu;
}

uint64_t ps_cpu_clock_settle(struct ps_cpu_clock *c, uint64_t n, int on_cpu, uint64_t period_ns)
{
    if (n == 0 || period_ns == 0)
        return 0;
    if (!on_cpu) {
        c->waiting = 1;
        return 0;
    }
    c->credit_ns -= n * period_ns;
    c->time_ns = c->allow_ns % period_ns;
    return n;
}
