/*
 * stats.h - the sampler's own counts: what pysample_status() and
 * `pysample top` report, and the PYSAMPLE_STATS file the benchmarks read.
 *
 * The sampler thread counts; any thread reads.  Counters are atomics
 * indexed by enum ps_count, so that a reset (a fork child) and a read are
 * one loop each, and a new counter is one enum entry and one name.  They
 * are the process's (stats.c's), not the sampler context's: the program's
 * threads read them (pysample_status, the exit write, the sessions'
 * quality record), and pysample_status must answer whether or not a
 * sampler was ever set up.  The tick timings (struct ps_tick_times), which
 * only the sampler thread fills and writes, are its context's.
 */
#ifndef PS_STATS_H
#define PS_STATS_H

#include <stdint.h>

#include "sampler/state.h"

/* Log-linear buckets: exact below 16, then 16 per power of two. */
#define PS_LATE_BUCKETS (16 + 60 * 16)

/* PYSAMPLE_STATS: how late each tick woke, how long its work took.  A
 * member of the sampler context (context.h): its thread alone fills and
 * writes them; all zero in a new context (a fork child's is reset). */
struct ps_tick_times {
    uint64_t late_hist[PS_LATE_BUCKETS];
    uint64_t tick_hist[PS_LATE_BUCKETS];  /* duration of the tick's work */
};

enum ps_count {
    PS_COUNT_TICKS,
    PS_COUNT_SAMPLES,
    PS_COUNT_ERRORS,              /* every stack dropped, of which: */
    PS_COUNT_ERRORS_UNREADABLE,   /* memory could not be read */
    PS_COUNT_ERRORS_INCONSISTENT, /* what was read made no sense (torn) */
    PS_COUNT_LATE_TICKS,          /* ticks skipped: the thread fell behind */
    PS_COUNT_TRUNCATED,           /* samples cut at max_depth */
    PS_COUNT_BUDGET_ADJUSTMENTS,  /* rate changes made by PYSAMPLE_CPU_BUDGET */
    PS_COUNT_N
};

/* Adds n to counter c. */
void ps_count(enum ps_count c, uint64_t n);

/* n stacks dropped for cause (PS_COUNT_ERRORS_UNREADABLE or
 * _INCONSISTENT): counted under errors and under their cause. */
void ps_count_dropped(enum ps_count cause, uint64_t n);

/* A run of ticks (sampling switched on until it is switched off) begins
 * or ends at monotonic time now: the wall time spent sampling. */
void ps_stats_run_begin(uint64_t now);
void ps_stats_run_end(uint64_t now);

/* The sampler thread's CPU time, as last read (a system call: the thread
 * reads it now and then, not every tick). */
void ps_stats_cpu(int64_t ns);

/* Into the histograms of t: how late a tick woke, how long its work took. */
void ps_stats_late(struct ps_tick_times *t, uint64_t ns);
void ps_stats_tick_took(struct ps_tick_times *t, uint64_t ns);

/* The counts into st (the rates are the sampler's: state.c adds them). */
void ps_stats_read(struct ps_stats *st);

/* Writes the PYSAMPLE_STATS file, the counts and the timings of the
 * sampler context ctx (context.h): path_pattern with %p as the pid, in
 * file_mode (PYSAMPLE_FILE_MODE), as output.c writes side files; rate_hz
 * the current rate; native: add the native capture counts (and ctx's
 * unwinds and merges). */
struct ps_sampler_ctx;
void ps_stats_write(const struct ps_sampler_ctx *ctx, const char *path_pattern, int rate_hz,
                    int native, int file_mode);

/* fork() child: every count starts again from zero (the timings are
 * the context's: sampler.c resets them). */
void ps_stats_child_after_fork(void);

#endif
