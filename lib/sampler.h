/*
 * sampler.h - the sampler thread: it fills the profile (profile.h) and,
 * while it is alive, is the one that writes it (writer.h).
 */
#ifndef PS_SAMPLER_H
#define PS_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "python.h"

struct ps_stats {
    uint64_t ticks;
    uint64_t samples;
    uint64_t errors;              /* every stack dropped, of which: */
    uint64_t errors_unreadable;   /* memory could not be read */
    uint64_t errors_inconsistent; /* what was read made no sense (torn) */
    uint64_t late_ticks;
    uint64_t distinct_stacks;
    int64_t sampler_cpu_ns;
};

/* Prepares the profile and the thread's buffers for py and cfg.  0 or -1
 * (out of memory). */
int ps_sampler_setup(const struct ps_python *py, const struct ps_config *cfg);

/* Starts or stops the thread; rate_hz 0 keeps the configured rate. */
int ps_sampler_start(int rate_hz);
void ps_sampler_stop(void);
int ps_sampler_running(void);

/* 1 if PYSAMPLE_STATS asked for a statistics file (written when the
 * sampler thread ends). */
int ps_sampler_stats_wanted(void);
int ps_sampler_rate(void);

/*
 * Asks the sampler thread to serve the writer's requests (writer.h) soon:
 * at once if wake (not from a signal handler: it takes a lock), else at
 * its next tick.  The atomic store alone is async-signal-safe.
 */
void ps_sampler_request_write(int wake);

/* 1 while the thread exists to serve those requests: sampling, or idle
 * after the runtime finalized (ps_sampler_running() is 0 then). */
int ps_sampler_alive(void);

/* One tick on the calling thread (used by the thread and by tests). */
void ps_sampler_tick(void);

void ps_sampler_stats(struct ps_stats *st);

/* fork(): prepare notes the forking thread (see sampler.c); in the child,
 * a sampler thread that ran in the parent runs
 * again, on counters of its own. */
void ps_sampler_prepare_fork(void);
void ps_sampler_child_after_fork(void);

#endif
