/*
 * tick.h - one tick of the sampler: every thread state of every
 * interpreter, each sampled (threadsample.h) or, under
 * PYSAMPLE_MAX_THREADS_PER_TICK, left for a later tick.
 */
#ifndef PS_TICK_H
#define PS_TICK_H

#include "config.h"
#include "python/runtime.h"

/* Keeps py (sampler.c's, which outlives the sampler) and, with
 * PYSAMPLE_ASYNC, sets up the asyncio tasks' state (a note says why when
 * this interpreter's tasks cannot be attributed).  0, or -1. */
int ps_tick_setup(const struct ps_python *py);

/* One tick, on the calling thread (the sampler thread).  all: every
 * thread, whatever PYSAMPLE_MODE and PYSAMPLE_MAX_THREADS_PER_TICK say
 * (`pysample dump`).  cpu_period_ns: in cpu mode, the CPU time one sample
 * stands for (the requested rate's period); run: changes whenever sampling
 * starts again, so that CPU used meanwhile is not counted.  Returns 1 if
 * the runtime is finalizing (nothing was read, and nothing more will be),
 * else 0. */
int ps_tick(int all, uint64_t cpu_period_ns, unsigned run);

#endif
