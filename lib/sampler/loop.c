/*
 * loop.c - what the sampler thread does from its start to its end
 * (loop.h): the states of state.h, lived.
 *
 * WAITING: naps until the interpreter is initialised.  Then, as asked,
 * SAMPLING (ticks on a fixed grid at the rate, with the CPU budget
 * applied, writes served, the periodic flush) or IDLE (armed: serves the
 * control socket; else naps 100 ms at a time, to serve writes), until
 * the runtime finalizes (FINISHED: idles for good) or the thread is asked
 * to stop.  It calls down only: tick.c and below for the ticks, writer.c
 * for writes, sessions.c and control.c for the armed wait.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "control/control.h"
#include "memory/memread.h"
#include "platform/platform.h"
#include "sampler/writer.h"
#include "sampler/budget.h"
#include "sampler/loop.h"
#include "sampler/orphan.h"
#include "sampler/schedule.h"
#include "sampler/sessions.h"
#include "sampler/state.h"
#include "sampler/stats.h"
#include "settings.h"
#include "util/tickpath.h"

/* ---- waiting ----------------------------------------------------------------- */

/*
 * Armed, the control socket is a source of the wait (control.c does its
 * I/O and queues the requests) and the commands it queued are served after
 * each wake-up (sessions.c).  A wait while not sampling also ends when a
 * program thread ends: it may have been the last one, and a fork child
 * waited out the rest of a 100 ms wait before it looked (orphan.c).  A
 * tick's wait does not: a tick before its time would be an extra sample.
 */
static void wait_armed(struct ps_sampler_ctx *ctx, uint64_t deadline)
{
    int was = ps_sampler_active();
    while (!ps_sampler_stop_asked() && !ps_sampler_write_requested() &&
           ps_sampler_active() == was && ps_now_ns() < deadline && ps_sampler_armed() &&
           !((deadline == UINT64_MAX || !was) && ps_orphan_news())) {
        uint64_t moment = ps_sessions_deadline(&ctx->session);
        ps_control_wait(moment < deadline ? moment : deadline);
        ps_sessions_serve(ctx);
    }
}

/* Sleeps until deadline (monotonic ns; UINT64_MAX: none) or until asked
 * to stop or to write, or (armed) until sampling is switched on or off. */
static void wait_until(struct ps_sampler_ctx *ctx, uint64_t deadline)
{
    if (ps_sampler_armed())
        wait_armed(ctx, deadline);
    else
        ps_sampler_nap(deadline);
}

/* Serves the writer (writer.h) if asked; a final write ends this thread's
 * work: the loop only learns here that it must end. */
static void serve_writes(void)
{
    if (ps_sampler_take_write_request() && ps_writer_serve())
        ps_sampler_ask_stop();
}

/* PYSAMPLE_FLUSH_INTERVAL: the profile written every so often. */
static void flush_if_due(struct ps_sampler_ctx *ctx, uint64_t now)
{
    if (ctx->next_flush == 0 || now < ctx->next_flush)
        return;
    if (ps_writer_serve())
        ps_sampler_ask_stop();
    ctx->next_flush = now + (uint64_t)ps_settings()->flush_interval_s * 1000000000ull;
}

/* Only the first start sets the schedule: the thread is stopped and
 * started again around every os.fork() on 3.12+ (lifecycle.c), and a
 * server forking more often than the interval must still flush. */
static void schedule_flushes(struct ps_sampler_ctx *ctx)
{
    const struct ps_config *cfg = ps_settings();
    if (cfg->flush_interval_s > 0 && ps_settings_process()->output[0] && ctx->next_flush == 0)
        ctx->next_flush = ps_now_ns() + (uint64_t)cfg->flush_interval_s * 1000000000ull;
}

/* ---- SAMPLING ---------------------------------------------------------------- */

/*
 * PYSAMPLE_CPU_BUDGET, after a tick: a new requested rate restarts the
 * budget from it; at the end of a window the rate follows what the ticks
 * cost (budget.h).  The CPU clock is read once a window.
 */
static void apply_budget(struct ps_sampler_ctx *ctx, uint64_t now)
{
    struct ps_budget *b = &ctx->budget;
    ps_budget_tick(b);
    int want = ps_sampler_requested_rate();
    if (want != b->max_hz) {
        ps_budget_start(b, b->share, want, now, ps_self_cpu_ns());
        ps_sampler_set_rate_now(want);
        return;
    }
    if (!ps_budget_due(b, now))
        return;
    uint64_t before = b->adjustments;
    int r = ps_budget_update(b, now, ps_self_cpu_ns());
    if (b->adjustments != before)
        ps_count(PS_COUNT_BUDGET_ADJUSTMENTS, b->adjustments - before);
    ps_sampler_set_rate_now(r);
}

/* The ticks' schedule at the current rate: deadlines on a fixed grid, late
 * wake-ups skip deadlines rather than burst (schedule.h). */
struct schedule {
    int rate;
    struct ps_schedule grid;
};

static void schedule_start(struct schedule *sc, uint64_t now)
{
    sc->rate = ps_sampler_rate();
    ps_schedule_start(&sc->grid, 1000000000ull / (uint64_t)sc->rate, now);
}

/* Counts the deadlines the grid let go since skipped was read. */
static void count_skipped(const struct schedule *sc, uint64_t skipped)
{
    if (sc->grid.skipped != skipped)
        ps_count(PS_COUNT_LATE_TICKS, sc->grid.skipped - skipped);
}

/* After a tick that woke at woke and ended at now: the next deadline.  A
 * new rate (a control session, the CPU budget) starts a grid from now. */
static void schedule_next(struct schedule *sc, uint64_t woke, uint64_t now)
{
    uint64_t skipped = sc->grid.skipped;
    if (ps_sampler_rate() != sc->rate)
        schedule_start(sc, now);
    else
        ps_schedule_ticked(&sc->grid, woke, now);
    count_skipped(sc, skipped);
}

/* One tick for the latest deadline that has passed, timed for
 * PYSAMPLE_STATS: how late it is for that deadline, how long its work
 * took.  Sets *woke; returns when it ended. */
static uint64_t timed_tick(struct ps_sampler_ctx *ctx, struct schedule *sc, uint64_t *woke)
{
    int timed = ps_sampler_stats_wanted();
    uint64_t skipped = sc->grid.skipped;
    *woke = ps_now_ns();
    uint64_t late = ps_schedule_woke(&sc->grid, *woke);
    count_skipped(sc, skipped);
    if (timed)
        ps_stats_late(&ctx->times, late);
    ps_sampler_tick(ctx, 0, *woke);
    uint64_t now = ps_now_ns();
    if (timed)
        ps_stats_tick_took(&ctx->times, now - *woke);
    return now;
}

/* A run of SAMPLING begins at began: counted, and the CPU budget (if
 * any) starts from the requested rate.  The budget's share, or 0. */
static double run_begin(struct ps_sampler_ctx *ctx, uint64_t began)
{
    ps_stats_run_begin(began);
    ctx->run++;
    double share = ps_settings()->cpu_budget;
    if (share > 0) {
        int want = ps_sampler_requested_rate();
        ps_budget_start(&ctx->budget, share, want, began, ps_self_cpu_ns());
        ps_sampler_set_rate_now(want);
    }
    return share;
}

static int keep_sampling(void)
{
    return !ps_sampler_stop_asked() && ps_sampler_state() == PS_SAMPLER_SAMPLING &&
           ps_sampler_active();
}

/*
 * Ticks at the current rate until sampling is switched off, the runtime
 * finalizes or the thread is asked to stop.  The rate is read each tick,
 * so a change (a control session, the CPU budget) takes effect at once.
 */
static void sample_for_a_while(struct ps_sampler_ctx *ctx)
{
    uint64_t began = ps_now_ns();
    double share = run_begin(ctx, began);
    struct schedule sc;
    schedule_start(&sc, began);
    uint64_t cpu_at = began;

    while (keep_sampling()) {
        wait_until(ctx, sc.grid.next);
        if (ps_sampler_stop_asked() || !ps_sampler_active())
            break;
        uint64_t woke;
        uint64_t now = timed_tick(ctx, &sc, &woke);
        if (share > 0)
            apply_budget(ctx, now);
        schedule_next(&sc, woke, now);
        serve_writes();
        flush_if_due(ctx, now);
        ps_orphan_check(ctx, now);
        /* The thread's CPU clock is a system call (0.4-0.9 us here, as
         * much as walking a 10-frame stack): read it 10 times a second,
         * not every tick.  It is read once more on the way out. */
        if (now >= cpu_at) {
            ps_stats_cpu(ps_self_cpu_ns());
            cpu_at = now + 100000000ull;
        }
    }
    ps_stats_cpu(ps_self_cpu_ns());
    ps_stats_run_end(ps_now_ns());
}

/* ---- WAITING, IDLE, FINISHED -------------------------------------------------- */

/* Waits for the interpreter to exist before the first tick: every
 * millisecond at first (a Python executable initialises within tens of
 * them), then less and less often, up to 10 times a second, for a
 * libpython that was loaded long before its Py_Initialize (uWSGI) or is
 * never initialised at all.  Writes are served meanwhile. */
static void wait_for_interpreter(struct ps_sampler_ctx *ctx)
{
    uint64_t nap = 1000000, waiting_since = ps_now_ns();
    while (!ps_sampler_stop_asked() && !ps_python_ready(&ctx->py) &&
           !ps_python_finalizing(&ctx->py)) {
        wait_until(ctx, ps_now_ns() + nap);
        if (ps_now_ns() - waiting_since > 200000000ull && nap < 100000000ull)
            nap *= 2;
        serve_writes();
        ps_orphan_check(ctx, ps_now_ns());
    }
}

/*
 * Not sampling: armed and idle, or the runtime finalized.  The thread
 * stays, to write when asked: a fatal signal that lands during Python's
 * exit must still find someone to write the profile (lifecycle.c never
 * writes from a signal handler), and an armed process must still answer.
 * Armed without an output file, nothing can ask for a write without
 * waking us: no timeout here (control.c's wait checks its descriptors
 * every 2 s, and that is all an idle armed process wakes for).
 */
static void idle_a_while(struct ps_sampler_ctx *ctx)
{
    uint64_t now = ps_now_ns();
    int forever = ps_sampler_armed() && ps_settings_process()->output[0] == '\0' &&
                  !ps_orphan_watching(now);
    uint64_t until = now + 100000000ull;
    if (ps_orphan_next_check() > now && ps_orphan_next_check() < until)
        until = ps_orphan_next_check();
    wait_until(ctx, forever ? UINT64_MAX : until);
    serve_writes();
    ps_orphan_check(ctx, ps_now_ns());
}

/* ---- the whole ---------------------------------------------------------------- */

/* The thread's move to `to` (SAMPLING or IDLE) unless it is there: 0 if
 * it is there now. */
static int become(enum ps_sampler_state to)
{
    enum ps_sampler_state s = ps_sampler_state();
    return s == to ? 0 : ps_sampler_move(s, to);
}

PS_TICK_PATH void ps_sampler_loop(struct ps_sampler_ctx *ctx)
{
    wait_for_interpreter(ctx);
    ps_mem_enable_direct();
    ps_sampler_move(PS_SAMPLER_WAITING, PS_SAMPLER_IDLE);
    schedule_flushes(ctx);
    while (!ps_sampler_stop_asked()) {
        int finished = ps_sampler_state() == PS_SAMPLER_FINISHED;
        if (!finished && ps_sampler_active() && become(PS_SAMPLER_SAMPLING) == 0) {
            sample_for_a_while(ctx);
            continue;
        }
        /* Not asked to sample, finished, or (none is expected) a refused
         * move: idles rather than spins. */
        if (!finished)
            become(PS_SAMPLER_IDLE);
        idle_a_while(ctx);
    }
    ps_sampler_write_stats(ctx);
}
