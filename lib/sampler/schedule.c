/*
 * schedule.c - when the sampler ticks (schedule.h has the rules and why).
 */
#include "sampler/schedule.h"
#include "util/tickpath.h"

void ps_schedule_start(struct ps_schedule *s, uint64_t interval, uint64_t start)
{
    s->interval = interval ? interval : 1;
    s->next = start + s->interval;
}

PS_TICK_PATH uint64_t ps_schedule_woke(struct ps_schedule *s, uint64_t now)
{
    if (now < s->next)
        return 0;   /* woken early (never by the waits we use): on time */
    uint64_t behind = (now - s->next) / s->interval;
    s->skipped += behind;
    s->next += behind * s->interval;
    return now - s->next;
}

PS_TICK_PATH void ps_schedule_ticked(struct ps_schedule *s, uint64_t woke, uint64_t now)
{
    s->next += s->interval;
    if (now > s->next && now - woke >= s->interval / 2) {
        uint64_t missed = (now - s->next) / s->interval + 1;
        s->skipped += missed;
        s->next += missed * s->interval;
    }
}
