/*
 * sampler.h - the sampler thread and the profile it fills.
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
    uint64_t errors;
    uint64_t late_ticks;
    uint64_t distinct_stacks;
    int64_t sampler_cpu_ns;
};

/* Called on the sampler thread when a periodic flush is due. */
typedef void (*ps_flush_fn)(void);

/* Prepares tables for py and cfg.  0 or -1 (out of memory). */
int ps_sampler_setup(const struct ps_python *py, const struct ps_config *cfg,
                     ps_flush_fn flush);

/* Starts or stops the thread; rate_hz 0 keeps the configured rate. */
int ps_sampler_start(int rate_hz);
void ps_sampler_stop(void);
int ps_sampler_running(void);

/* 1 if PYSAMPLE_STATS asked for a statistics file (written when the
 * sampler thread ends). */
int ps_sampler_stats_wanted(void);
int ps_sampler_rate(void);

/*
 * Asks the sampler thread to call the flush function soon: at once if wake
 * (not from a signal handler: it takes a lock), else at its next tick.
 * The atomic store alone is async-signal-safe.
 */
void ps_sampler_request_flush(int wake);

/* 1 while the thread exists to serve those requests: sampling, or idle
 * after the runtime finalized (ps_sampler_running() is 0 then). */
int ps_sampler_alive(void);

/* One tick on the calling thread (used by the thread and by tests). */
void ps_sampler_tick(void);

/* Renders the profile (collapsed lines) into a malloc'ed buffer. */
int ps_sampler_render(char **out, size_t *len);
void ps_sampler_reset(void);
void ps_sampler_stats(struct ps_stats *st);

/* fork(): hold the profile lock across it; the child starts afresh. */
void ps_sampler_prepare_fork(void);
void ps_sampler_parent_after_fork(void);
void ps_sampler_child_after_fork(void);

#endif
