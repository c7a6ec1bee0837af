/*
 * tick.h - one tick of the sampler: every thread state of every
 * interpreter, each sampled (threadsample.h) or, under
 * PYSAMPLE_MAX_THREADS_PER_TICK, left for a later tick.
 */
#ifndef PS_TICK_H
#define PS_TICK_H

#include "config.h"
#include "sampler/context.h"

/* The tick's part of ctx (context.h), for the interpreter ctx->py: with
 * PYSAMPLE_ASYNC, the asyncio tasks' state (a note says why when this
 * interpreter's tasks cannot be attributed); PYSAMPLE_GIL.  0, or -1. */
int ps_tick_setup(struct ps_sampler_ctx *ctx);

/* One tick of ctx, on the calling thread (the sampler thread).  all: every
 * thread, whatever PYSAMPLE_MODE and PYSAMPLE_MAX_THREADS_PER_TICK say
 * (`pysample dump`).  cpu_period_ns: in cpu mode, the CPU time one sample
 * stands for (the requested rate's period); run: changes whenever sampling
 * starts again, so that CPU used meanwhile is not counted.  now: the
 * monotonic time the tick began (the caller's clock read when it woke:
 * a vDSO read touches the clock's page and costs as much as a frame).
 * Returns 1 if the runtime is finalizing (nothing was read, and nothing
 * more will be), else 0. */
int ps_tick(struct ps_sampler_ctx *ctx, int all, uint64_t cpu_period_ns, unsigned run,
            uint64_t now);

#endif
