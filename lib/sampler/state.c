/*
 * state.c - the sampler thread's state and what it is asked (state.h).
 *
 * One atomic holds the state, moved only along ps_sampler_moves (below:
 * the whole of the design's drawing) by a compare-and-swap; the requests
 * are atomics of their own, because they come from any thread (a signal
 * handler among them) and the thread takes them up at its next wake-up.
 * Whether armed mode is on is control.c's to hold (one flag, which a fork
 * child may lose); nothing here keeps a copy.
 *
 * Waking.  The thread waits with an absolute deadline on the platform's
 * wake (platform.h: Linux, a futex word, one system call a tick) instead
 * of sleeping, so that pysample_stop() and the exit path wake it at once:
 * a plain sleep made every exit wait for the rest of the current interval
 * (10 ms at the default 100 Hz), which was most of what profiling added
 * to a short program's run time.  Armed, the wait is control.c's poll,
 * woken through its pipe.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "control/control.h"
#include "platform/platform.h"
#include "sampler/quality.h"
#include "sampler/state.h"
#include "sampler/stats.h"
#include "sampler/tick.h"
#include "settings.h"
#include "util/statem.h"
#include "util/tickpath.h"

static struct {
    unsigned hexversion;        /* the interpreter's, for the quality figures */
    int free_threaded;          /* (the interpreter itself: context.h) */
    _Atomic int state;          /* enum ps_sampler_state, moved by ps_sampler_move */

    _Atomic int active;         /* asked to sample (armed: only in a session) */
    _Atomic int stop;           /* asked to leave */
    _Atomic int write_request;  /* asked to serve the writer */
    _Atomic int rate_hz;        /* the rate ticks are at now ... */
    _Atomic int requested_hz;   /* ... and the one asked for (budget.h) */

    struct ps_wake wake;        /* the interruptible wait */
} st;

static void wake_init(void)
{
    ps_wake_init(&st.wake);
}

void ps_sampler_state_setup(const struct ps_python *py, int rate_hz)
{
    st.hexversion = py->L.hexversion;
    st.free_threaded = py->L.free_threaded;
    atomic_store(&st.rate_hz, rate_hz);
    atomic_store(&st.requested_hz, rate_hz);
    wake_init();
}

int ps_sampler_armed(void)
{
    return ps_control_enabled();
}

/* ---- the state -------------------------------------------------------------- */

#define M(a, b) { PS_SAMPLER_##a, PS_SAMPLER_##b }
/* Every move the sampler's state may make; docs/design.md lists the same
 * (test/unit/test_statem.c compares them). */
const struct ps_move ps_sampler_moves[] = {
    M(OFF, WAITING),        /* started (sampler.c) */
    M(WAITING, OFF),        /* ... but the thread could not be made */
    M(WAITING, IDLE),       /* the interpreter is initialised (loop.c) */
    M(IDLE, SAMPLING),      /* asked to sample */
    M(SAMPLING, IDLE),      /* no longer asked */
    M(SAMPLING, FINISHED),  /* a tick found the runtime finalizing */
    M(IDLE, FINISHED),      /* ... a session's tick (`pysample dump`) */
    M(WAITING, ENDED),      /* asked to stop: PYSAMPLE_STATS written, main returns */
    M(SAMPLING, ENDED),
    M(IDLE, ENDED),
    M(FINISHED, ENDED),
    M(ENDED, OFF),          /* joined (sampler.c) */
    M(OFF, PAUSED),         /* joined and released for CPython's thread count (forkpause.c) */
    M(PAUSED, WAITING),     /* the count is done: started again */
    M(PAUSED, OFF),         /* stopped meanwhile, or the profile was closed */
    M(WAITING, EXITING),    /* the program's threads are all gone (orphan.c) */
    M(SAMPLING, EXITING),
    M(IDLE, EXITING),
    M(FINISHED, EXITING),
};
#undef M
const size_t ps_sampler_nmoves = sizeof ps_sampler_moves / sizeof ps_sampler_moves[0];

const char *ps_sampler_state_name(enum ps_sampler_state s)
{
    static const char *const names[PS_SAMPLER_STATES] = {
        "OFF", "WAITING", "SAMPLING", "IDLE", "FINISHED", "ENDED", "PAUSED", "EXITING",
    };
    return (unsigned)s < PS_SAMPLER_STATES ? names[s] : "?";
}

enum ps_sampler_state ps_sampler_state(void)
{
    return (enum ps_sampler_state)atomic_load(&st.state);
}

int ps_sampler_move(enum ps_sampler_state from, enum ps_sampler_state to)
{
    return ps_move(&st.state, ps_sampler_moves, ps_sampler_nmoves, (int)from, (int)to);
}

int ps_sampler_may_read(void)
{
    enum ps_sampler_state s = ps_sampler_state();
    return s == PS_SAMPLER_WAITING || s == PS_SAMPLER_SAMPLING || s == PS_SAMPLER_IDLE;
}

int ps_sampler_ready(void)
{
    enum ps_sampler_state s = ps_sampler_state();
    return s == PS_SAMPLER_SAMPLING || s == PS_SAMPLER_IDLE || s == PS_SAMPLER_FINISHED;
}

int ps_sampler_finished(void)
{
    return ps_sampler_state() == PS_SAMPLER_FINISHED;
}

int ps_sampler_alive(void)
{
    enum ps_sampler_state s = ps_sampler_state();
    return s != PS_SAMPLER_OFF && s != PS_SAMPLER_PAUSED;
}

int ps_sampler_sampling(void)
{
    return ps_sampler_alive() && atomic_load(&st.active);
}

/* ---- requests ---------------------------------------------------------------- */

/* The flags the nap looks at are set before this is called (a post
 * orders them before its bump of the wake's sequence). */
void ps_sampler_wake(void)
{
    if (ps_sampler_armed())
        ps_control_wake();  /* one write(): async-signal-safe */
    ps_wake_post(&st.wake);
}

/* Whether the nap should end before its deadline: asked to stop or to
 * write, or sampling switched on while IDLE or off while SAMPLING (other
 * states do not act on it: a nap there would end at once, again and
 * again). */
static int nap_over(void)
{
    if (atomic_load(&st.stop) || atomic_load(&st.write_request))
        return 1;
    int s = atomic_load(&st.state), on = atomic_load(&st.active);
    return (s == PS_SAMPLER_IDLE && on) || (s == PS_SAMPLER_SAMPLING && !on);
}

/* The sequence is read before the flags: a wake in between (from a signal
 * handler on this very thread too) makes the wait return at once. */
void ps_sampler_nap(uint64_t deadline)
{
    for (;;) {
        uint32_t seen = ps_wake_seq(&st.wake);
        if (nap_over() || ps_wake_wait_until(&st.wake, seen, deadline) == ETIMEDOUT)
            return;
    }
}

void ps_sampler_set_active(int on)
{
    atomic_store(&st.active, on);
    ps_sampler_wake();
}

int ps_sampler_active(void)
{
    return atomic_load(&st.active);
}

void ps_sampler_ask_stop(void)
{
    atomic_store(&st.stop, 1);
    ps_sampler_wake();
}

int ps_sampler_stop_asked(void)
{
    return atomic_load(&st.stop);
}

void ps_sampler_clear_stop(void)
{
    atomic_store(&st.stop, 0);
}

void ps_sampler_request_write(void)
{
    atomic_store(&st.write_request, 1);
    ps_sampler_wake();
}

int ps_sampler_take_write_request(void)
{
    return atomic_exchange(&st.write_request, 0);
}

int ps_sampler_write_requested(void)
{
    return atomic_load(&st.write_request);
}

void ps_sampler_set_rate(int rate_hz)
{
    if (rate_hz >= 1 && rate_hz <= PS_MAX_RATE) {
        atomic_store(&st.requested_hz, rate_hz);
        atomic_store(&st.rate_hz, rate_hz);
    }
}

int ps_sampler_rate(void)
{
    return atomic_load(&st.rate_hz);
}

int ps_sampler_requested_rate(void)
{
    return atomic_load(&st.requested_hz);
}

void ps_sampler_set_rate_now(int rate_hz)
{
    atomic_store(&st.rate_hz, rate_hz);
}

/* ---- ticks ------------------------------------------------------------------- */

/* In cpu mode a sample stands for one period of the requested rate,
 * whatever the rate ticks are at now (the CPU budget's), so that counts
 * are CPU time / the period the profile's readers assume
 * (docs/format.md). */
PS_TICK_PATH void ps_sampler_tick(struct ps_sampler_ctx *ctx, int all, uint64_t now)
{
    int hz = atomic_load(&st.requested_hz);
    uint64_t period = 1000000000ull / (uint64_t)(hz > 0 ? hz : PS_DEFAULT_RATE);
    if (ps_tick(ctx, all, period, ctx->run, now) != 0)
        ps_sampler_move(ps_sampler_state(), PS_SAMPLER_FINISHED);  /* from SAMPLING or IDLE */
}

void ps_sampler_tick_all(struct ps_sampler_ctx *ctx)
{
    ps_sampler_tick(ctx, 1, ps_now_ns());
}

/* ---- counts ------------------------------------------------------------------- */

void ps_sampler_stats(struct ps_stats *out)
{
    ps_stats_read(out);
    out->rate_now_hz = atomic_load(&st.rate_hz);
    out->requested_hz = atomic_load(&st.requested_hz);
    out->budget_pct = ps_settings()->cpu_budget * 100.0;
}

PS_TICK_PATH int ps_sampler_stats_wanted(void)
{
    return ps_settings_process()->stats_path[0] != '\0';
}

void ps_sampler_write_stats(const struct ps_sampler_ctx *ctx)
{
    const struct ps_config *cfg = ps_settings();
    const char *path = ps_settings_process()->stats_path;
    if (path[0])
        ps_stats_write(ctx, path, atomic_load(&st.rate_hz), cfg->native,
                       cfg->file_mode);
}

void ps_sampler_quality(struct ps_quality *q, const char *how, const struct ps_stats *base,
                        const struct ps_stats *now, uint64_t duration_ns, int rate)
{
    memset(q, 0, sizeof *q);
    q->how = how;
    q->mode = ps_settings()->mode == PS_MODE_CPU ? "cpu" : "wall";
    q->hexversion = st.hexversion;
    q->free_threaded = st.free_threaded;
    q->requested_hz = rate;
    ps_quality_between(q, base, now, duration_ns);
}

void ps_sampler_state_child_after_fork(int idle)
{
    wake_init();
    /* Not a move: the parent's thread was never this process's. */
    atomic_store(&st.state, PS_SAMPLER_OFF);
    atomic_store(&st.write_request, 0);
    if (idle)
        atomic_store(&st.active, 0);
}
