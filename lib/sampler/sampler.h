/*
 * sampler.h - the sampler thread: it fills the profile (profile.h) and,
 * while it is alive, is the one that writes it (writer.h).
 */
#ifndef PS_SAMPLER_H
#define PS_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "python/runtime.h"

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

/* Prepares the profile and the thread's buffers for py and the process's
 * settings (settings.h), which ticks follow from now on.  0 or -1 (out of
 * memory). */
int ps_sampler_setup(const struct ps_python *py);

/*
 * Starts sampling (and the thread, if it is not there); rate_hz 0 keeps
 * the current rate.  ps_sampler_start_thread starts the thread only, with
 * sampling as it was (armed: off).  ps_sampler_stop ends the thread.
 */
int ps_sampler_start(int rate_hz);
int ps_sampler_start_thread(void);
void ps_sampler_stop(void);
/* 1 while the thread exists and the runtime has not finalized. */
int ps_sampler_running(void);

/*
 * Armed processes (control.h): the thread stays and idles, and ticks only
 * while active.  set_active and set_rate take effect at the thread's next
 * wake-up, which they cause.  sampling: running and active.  ready: the
 * interpreter was found initialised.  finished: the runtime finalized.
 */
void ps_sampler_set_active(int on);
void ps_sampler_set_rate(int rate_hz);
int ps_sampler_sampling(void);
int ps_sampler_ready(void);
int ps_sampler_finished(void);

/* One tick of every thread whatever PYSAMPLE_MODE says (`pysample dump`):
 * on the sampler thread only. */
void ps_sampler_tick_all(void);

/* 1 if PYSAMPLE_STATS asked for a statistics file (written when the
 * sampler thread ends). */
int ps_sampler_stats_wanted(void);
int ps_sampler_rate(void);

/*
 * Asks the sampler thread to serve the writer's requests (writer.h) soon:
 * it wakes at once, or at its next tick when the wake lock is busy.
 * Async-signal-safe (atomics, a trylock, one write() armed).
 */
void ps_sampler_request_write(void);

/*
 * For exit paths, which may run in a signal handler: asks the thread to end
 * (it writes PYSAMPLE_STATS on its way out) and waits for it ms at most,
 * never joining it -- it may be stuck on a lock the caller's interrupted
 * code holds, and the process is ending anyway.  1 if it ended in time.
 */
int ps_sampler_end_bounded(long ms);

/* 1 while the thread exists to serve those requests: sampling, or idle
 * after the runtime finalized (ps_sampler_running() is 0 then). */
int ps_sampler_alive(void);

void ps_sampler_stats(struct ps_stats *st);

/* fork(): prepare notes the forking thread (see threadinfo.c); in the child,
 * a sampler thread that ran in the parent runs again, on counters of its
 * own, sampling unless stop_sampling (the parent sampled for a control
 * session, which was the parent's). */
void ps_sampler_prepare_fork(void);
void ps_sampler_child_after_fork(int stop_sampling);

#endif
