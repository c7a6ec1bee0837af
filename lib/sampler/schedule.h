/*
 * schedule.h - when the sampler ticks: deadlines on a fixed grid, which
 * deadline a (possibly late) wake-up serves, and which ones are let go.
 *
 * Pure arithmetic on monotonic nanoseconds the sampler reads (loop.c):
 * no clock, no lock, so test/unit/test_schedule.c drives it with any
 * wake-up times.
 *
 * The rules:
 *   - deadlines are start + k * interval: no drift however late a tick is;
 *   - a wake-up serves the latest deadline that has passed.  Within an
 *     interval of it, the tick is merely late; later than that, the older
 *     deadlines are skipped (counted), never caught up with a burst, so a
 *     sample is never more than an interval from the deadline it stands
 *     for and there is at most one tick per deadline;
 *   - when the tick's own work took half the interval or more, the
 *     deadline that passed meanwhile is let go too and the thread sleeps
 *     to the next one: it never ticks back to back, and its CPU stays
 *     bounded by what one tick costs.
 *
 * Why not simply skip any deadline that a tick ended after: at 10 kHz a
 * wake-up 90 us late (a virtual machine's timer reaching an idle vCPU: p50
 * 30 us, p99 120 us on the idle benchmark machine) plus a 10 us tick would
 * lose the next sample, though it can be taken a few microseconds late.
 */
#ifndef PS_SCHEDULE_H
#define PS_SCHEDULE_H

#include <stdint.h>

struct ps_schedule {
    uint64_t next;       /* the deadline to wait for */
    uint64_t interval;
    uint64_t skipped;    /* deadlines let go, in all */
};

/* Starts the grid at start: the first deadline is start + interval.  The
 * skipped count goes on (a change of rate starts a new grid). */
void ps_schedule_start(struct ps_schedule *s, uint64_t interval, uint64_t start);

/* Woken at now (>= s->next): makes s->next the deadline this tick serves
 * and returns how late the tick is for it (< interval). */
uint64_t ps_schedule_woke(struct ps_schedule *s, uint64_t now);

/* The tick that woke at woke ended at now: s->next becomes the deadline to
 * wait for. */
void ps_schedule_ticked(struct ps_schedule *s, uint64_t woke, uint64_t now);

#endif
