/* Unit test: the tick schedule (schedule.h) -- a fixed grid, one tick per
 * deadline at most, late wake-ups skip instead of bursting, lateness under
 * an interval, long ticks never back to back. */
#include <stdint.h>

#include "check.h"
#include "sampler/schedule.h"

#define I 100000ull   /* 10 kHz */

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int main(void)
{
    struct ps_schedule s = { 0 };

    /* On time: every deadline served, none skipped. */
    ps_schedule_start(&s, I, 1000);
    CHECK_EQ_INT(s.next, 1000 + I);
    for (int k = 1; k <= 10; k++) {
        uint64_t d = s.next;
        CHECK_EQ_INT(d, 1000 + (uint64_t)k * I);
        CHECK_EQ_INT(ps_schedule_woke(&s, d + 30000), 30000);
        ps_schedule_ticked(&s, d + 30000, d + 36000);
    }
    CHECK_EQ_INT(s.skipped, 0);

    /* 95 us late with a 10 us tick: the next deadline has passed when the
     * tick ends, and is served at once, 5 us late (it used to be skipped). */
    s = (struct ps_schedule){ 0 };
    ps_schedule_start(&s, I, 0);
    CHECK_EQ_INT(ps_schedule_woke(&s, I + 95000), 95000);
    ps_schedule_ticked(&s, I + 95000, I + 105000);
    CHECK_EQ_INT(s.next, 2 * I);
    CHECK_EQ_INT(ps_schedule_woke(&s, I + 105500), 5500);
    CHECK_EQ_INT(s.skipped, 0);

    /* Woken 3.5 intervals late: three deadlines skipped, the latest served;
     * no burst of catch-up ticks follows, and the grid is unchanged. */
    s = (struct ps_schedule){ 0 };
    ps_schedule_start(&s, I, 0);
    CHECK_EQ_INT(ps_schedule_woke(&s, I + 350000), 50000);
    CHECK_EQ_INT(s.next, 4 * I);
    CHECK_EQ_INT(s.skipped, 3);
    ps_schedule_ticked(&s, I + 350000, I + 360000);
    CHECK_EQ_INT(s.next, 5 * I);

    /* A tick that takes 60 % of the interval and ends after the next
     * deadline: that deadline is let go, the thread sleeps to the one
     * after (never back to back). */
    s = (struct ps_schedule){ 0 };
    ps_schedule_start(&s, I, 0);
    ps_schedule_woke(&s, I + 50000);
    ps_schedule_ticked(&s, I + 50000, I + 110000);
    CHECK_EQ_INT(s.next, 3 * I);
    CHECK_EQ_INT(s.skipped, 1);

    /* Random wake-ups and tick lengths: every served deadline is on the
     * grid, strictly later than the one before, at most an interval before
     * the wake-up; served + skipped deadlines account for the whole run. */
    uint64_t seed = 88172645463325252ull;
    s = (struct ps_schedule){ 0 };
    ps_schedule_start(&s, I, 777);
    uint64_t now = 777, last = 0, served = 0;
    int ok_grid = 1, ok_order = 1, ok_late = 1;
    for (int n = 0; n < 200000; n++) {
        if (now < s.next)
            now = s.next;
        uint64_t r = rng(&seed) % 1000;
        now += r < 900 ? rng(&seed) % 40000 : r < 990 ? rng(&seed) % 150000 : rng(&seed) % 2000000;
        uint64_t late = ps_schedule_woke(&s, now);
        ok_grid &= (s.next - 777) % I == 0;
        ok_order &= s.next > last;
        ok_late &= late < I && now - s.next == late;
        last = s.next;
        served++;
        uint64_t woke = now;
        now += 2000 + rng(&seed) % (r < 995 ? 20000 : 120000);
        ps_schedule_ticked(&s, woke, now);
    }
    CHECK(ok_grid);
    CHECK(ok_order);
    CHECK(ok_late);
    CHECK_EQ_INT(served + s.skipped, (last - 777) / I);
    CHECK_DONE();
}
