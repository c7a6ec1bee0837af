/*
 * threadsample.h - where one thread's sample is taken: its thread state
 * walked (with its native frames, PYSAMPLE_NATIVE), its running asyncio
 * task spliced in (PYSAMPLE_ASYNC), the stack counted under its label.
 */
#ifndef PS_THREADSAMPLE_H
#define PS_THREADSAMPLE_H

#include <stdint.h>

#include "config.h"
#include "profile/profile.h"
#include "python/runtime.h"
#include "asyncio/tasks.h"
#include "sampler/context.h"

/* When the tick's asyncio task snapshot is read (tick.c decides when it is
 * due; the first thread that is sampled takes it, so a CPU-mode tick where
 * nothing ran reads no tasks). */
enum ps_tasks_snapshot { PS_TASKS_NOT_TAKEN, PS_TASKS_DUE, PS_TASKS_TAKEN };

/* What a tick (tick.c) shares with each thread it samples. */
struct ps_tick_ctx {
    struct ps_sampler_ctx *sampler;  /* the sampler's context (context.h) */
    struct ps_profile *p;       /* held for the whole tick */
    uint64_t now;
    int all;                    /* every thread, whatever PYSAMPLE_MODE (dump) */
    uint64_t cpu_period_ns;     /* cpu mode: the CPU time one sample stands for */
    unsigned run;               /* which sampling run this tick belongs to */
    uint32_t interp_func;       /* root frame of this interpreter's stacks, or PS_ID_NONE */
    uintptr_t interp;           /* the interpreter whose threads are being sampled */
    uintptr_t gil_holder;       /* PYSAMPLE_GIL: this interpreter's holder, or 0 */
    uintptr_t gc_collector;     /* the thread collecting its garbage when the tick
                                 * reached it, or 0 (interpstate.h) */
    struct ps_tasks *tasks;     /* PYSAMPLE_ASYNC, else NULL (tasks.h) */
    enum ps_tasks_snapshot tasks_state;
    uintptr_t tasks_interp;     /* the main interpreter: whose tasks are read */
};

/* ctx's buffers (context.h) for walks as the settings say (settings.h).
 * 0, or -1 (out of memory). */
int ps_threadsample_setup(struct ps_sampler_ctx *ctx);

/* Samples the thread state at tsp, whose snapshot is ts (PS_TS_MAX bytes,
 * read again as the walk needs), counting its stack weight times. */
void ps_sample_thread(struct ps_tick_ctx *t, uintptr_t tsp, uint8_t *ts, uint64_t weight);

#endif
