/*
 * state.h - the sampler thread's state, and what it is asked.
 *
 * The states docs/design.md draws, and the moves between them: the table
 * ps_sampler_moves (state.c) is the whole of them, and every move is one
 * checked call, ps_sampler_move(from, to), refused when the table does not
 * have it or the state is no longer `from` (util/statem.h).
 *
 * The state is what the thread is doing; the thread alone moves itself
 * between WAITING, SAMPLING, IDLE, FINISHED, EXITING and ENDED.  Its
 * starter moves OFF (or PAUSED) -> WAITING before the thread exists, its
 * joiner ENDED -> OFF; the fork pause (forkpause.c, through sampler.c)
 * OFF -> PAUSED after joining it and PAUSED -> WAITING or OFF.  A fork
 * child, where the thread does not exist whatever the parent's state, is
 * OFF: the one store that is not a move.
 *
 * What it is asked, by any thread, are requests it takes up at its next
 * wake-up, which asking causes: to sample or idle (active), to stop, to
 * serve the writer, to tick at another rate.
 *
 * This module sits below both the thread's loop (loop.c, sampler.c) and
 * the control sessions (sessions.c), which read the state and make the
 * requests: neither calls the other's way up.
 */
#ifndef PS_SAMPLER_STATE_H
#define PS_SAMPLER_STATE_H

#include <stdint.h>

#include "python/runtime.h"
#include "util/statem.h"

struct ps_stats {
    uint64_t ticks;
    uint64_t samples;
    uint64_t errors;              /* every stack dropped, of which: */
    uint64_t errors_unreadable;   /* memory could not be read */
    uint64_t errors_inconsistent; /* what was read made no sense (torn) */
    uint64_t late_ticks;
    uint64_t distinct_stacks;
    int64_t sampler_cpu_ns;
    uint64_t truncated;           /* samples whose stack was cut at max_depth */
    uint64_t budget_adjustments;  /* rate changes made by PYSAMPLE_CPU_BUDGET */
    double budget_pct;            /* that budget, % of one core; 0: none */
    int rate_now_hz;              /* the rate the thread ticks at now */
    int requested_hz;             /* the rate asked for (PYSAMPLE_RATE, a session) */
    uint64_t sampled_ns;          /* wall time spent sampling so far */
    uint64_t native_masked;       /* PYSAMPLE_NATIVE: running threads that block SIGURG,
                                   * sampled without native frames (linux/regs.c) */
};

enum ps_sampler_state {
    PS_SAMPLER_OFF = 0,    /* no thread (not started, joined, a fork child) */
    PS_SAMPLER_WAITING,    /* started: waits for the interpreter to be initialised */
    PS_SAMPLER_SAMPLING,   /* a tick every 1/rate (tick.c) */
    PS_SAMPLER_IDLE,       /* not asked to sample (armed: serves the control socket) */
    PS_SAMPLER_FINISHED,   /* the runtime is finalizing: nothing more is read */
    PS_SAMPLER_ENDED,      /* returned from its main, not joined yet */
    PS_SAMPLER_PAUSED,     /* no thread: joined while CPython 3.12+ counts the
                            * process's threads after os.fork() (forkpause.c);
                            * started again when the count is done */
    PS_SAMPLER_EXITING,    /* the last thread of its process: writes the final
                            * profile and calls exit(0) (orphan.c) */
};
#define PS_SAMPLER_STATES (PS_SAMPLER_EXITING + 1)

/* Set-up (sampler.c): what the quality figures name of the interpreter
 * (its version, whether free-threaded) and the rate asked for at start. */
void ps_sampler_state_setup(const struct ps_python *py, int rate_hz);
/* Armed mode is on (PYSAMPLE_ARM, set up and kept: control.c holds it):
 * waits are control.c's poll. */
int ps_sampler_armed(void);

enum ps_sampler_state ps_sampler_state(void);
/* from -> to: 0 if ps_sampler_moves has it and the state was from, else
 * -1 and the state unchanged.  Lock-free, async-signal-safe. */
int ps_sampler_move(enum ps_sampler_state from, enum ps_sampler_state to);
/* The table (state.c) and the states' names, as docs/design.md spells them
 * (test/unit/test_statem.c holds the three together). */
extern const struct ps_move ps_sampler_moves[];
extern const size_t ps_sampler_nmoves;
const char *ps_sampler_state_name(enum ps_sampler_state s);

/* WAITING, SAMPLING or IDLE: the thread exists and may still read the
 * interpreter (forkpause.c steps it out around a fork then). */
int ps_sampler_may_read(void);
/* SAMPLING, IDLE or FINISHED: the interpreter was found initialised
 * (asked on the sampler thread: sessions.c). */
int ps_sampler_ready(void);
int ps_sampler_finished(void);

/* The thread exists (any state but OFF and PAUSED): it serves the
 * writer's requests (writer.h), sampling or not. */
int ps_sampler_alive(void);
/* Alive and asked to sample (pysample_is_running, sessions). */
int ps_sampler_sampling(void);

/* Requests.  active: sample (1) or idle (0); stop: leave the loop, write
 * PYSAMPLE_STATS, end (ENDED).  Each wakes the thread.  set_active and
 * set_rate take effect at the thread's next wake-up, which they cause. */
void ps_sampler_set_active(int on);
int ps_sampler_active(void);
void ps_sampler_set_rate(int rate_hz);
void ps_sampler_ask_stop(void);
int ps_sampler_stop_asked(void);
/* The stop request is cleared: the thread is about to start again. */
void ps_sampler_clear_stop(void);
/*
 * Asks the thread to serve the writer's requests (writer.h) soon: it
 * wakes at once (macOS: or at its next tick, platform.h's ps_wake).
 * Async-signal-safe (atomics, ps_wake_post, one write() armed).
 * take_write_request: 1 once if asked (then cleared).
 */
void ps_sampler_request_write(void);
int ps_sampler_take_write_request(void);
int ps_sampler_write_requested(void);

/* The rate ticks are at now (the CPU budget's, budget.h), and the one
 * asked for (PYSAMPLE_RATE, pysample_start, a session). */
int ps_sampler_rate(void);
int ps_sampler_requested_rate(void);
void ps_sampler_set_rate_now(int rate_hz);

/*
 * Wakes the thread from its wait; callable from a signal handler.  Waits
 * (ps_sampler_nap) end when asked to stop or to write, when sampling is
 * switched on while IDLE or off while SAMPLING, or at the deadline
 * (monotonic ns; UINT64_MAX: none); a wake for anything else only makes
 * the nap look again.  Not armed only:
 * armed, the wait is control.c's poll, which ps_sampler_wake() also ends.
 */
void ps_sampler_wake(void);
void ps_sampler_nap(uint64_t deadline);

struct ps_sampler_ctx;  /* context.h */

/* One tick (tick.c) of ctx's sampled threads, or all of them: the runtime
 * finalizing makes the thread FINISHED.  ctx->run counts the stretches
 * of SAMPLING (loop.c; weight.h needs to know when a new one begins).
 * now: the monotonic time the tick began (ps_tick). */
void ps_sampler_tick(struct ps_sampler_ctx *ctx, int all, uint64_t now);
/* One tick of every thread whatever PYSAMPLE_MODE says (`pysample dump`):
 * on the sampler thread only. */
void ps_sampler_tick_all(struct ps_sampler_ctx *ctx);

/* The sampler's counts (stats.c) with its rates and budget. */
void ps_sampler_stats(struct ps_stats *st);
/* 1 if PYSAMPLE_STATS asked for a statistics file; the file, with the
 * rate and settings of now and the timings of ctx (the thread writes it
 * when it ends). */
int ps_sampler_stats_wanted(void);
void ps_sampler_write_stats(const struct ps_sampler_ctx *ctx);

/* What a profile is worth (quality.h): how it was asked for, the counts
 * between base and now over duration_ns, at the rate asked, with this
 * interpreter and the mode ticks follow. */
struct ps_quality;
void ps_sampler_quality(struct ps_quality *q, const char *how, const struct ps_stats *base,
                        const struct ps_stats *now, uint64_t duration_ns, int rate);

/* A fork child: no thread (OFF, whatever the parent's state), no request
 * to write, idle if asked (else sampling as the parent was asked to); the
 * wake-up's lock and condition made anew. */
void ps_sampler_state_child_after_fork(int idle);

#endif
