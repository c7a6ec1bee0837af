/*
 * context.h - the sampler's context: what the sampler thread's functions
 * share from one tick to the next, in one struct passed down as their
 * first argument (the way CPython's Modules/_remote_debugging passes its
 * unwinder object), rather than a pointer to the interpreter and a state
 * of its own kept in each file.
 *
 * sampler.c holds the one instance of the process (pysample-attach makes
 * its own).  It is filled before the thread starts (ps_tick_setup,
 * ps_threadsample_setup) and used by that thread only from then on:
 * nothing in it is atomic or locked (a fork child's thread is the
 * forking one: sampler.c's fork steps reset what is the parent's).  Down
 * the sampler thread's calls:
 * loop.c and sessions.c pass it to state.c's tick, which passes it to
 * tick.c, whose tick context (threadsample.h) carries it to each thread's
 * sample.
 */
#ifndef PS_SAMPLER_CONTEXT_H
#define PS_SAMPLER_CONTEXT_H

#include <stdint.h>

#include "asyncio/tasks.h"
#include "native/native.h"
#include "python/runtime.h"
#include "python/walkplan.h"
#include "sampler/budget.h"
#include "sampler/sessions.h"
#include "sampler/stats.h"
#include "sampler/threadinfo.h"
#include "sampler/weight.h"

/* One thread's sample: the buffers threadsample.c walks and counts in,
 * sized at set-up by the settings. */
struct ps_sample_bufs {
    uint64_t *scratch;          /* the walk's frames, innermost first */
    uint64_t *rooted;           /* the stack counted: root frames, and [gc] */
    int room;                   /* how deep a stack in rooted may be (stack_room) */
    uintptr_t *addrs;           /* the frames' addresses (asyncio tasks) */
    uint8_t *entry;             /* native stacks: per scratch frame, first of
                                 * its eval call */
    /* The walk's plan for the context's py, made at set-up (walkplan.h):
     * every walk copies it instead of deciding it from the layout.  Here,
     * between the fields every walk reads and those only native stacks
     * do: after those it took a line more a tick (lackey, 3.13.0). */
    struct walk_plan plan;
    /* native stacks (PYSAMPLE_NATIVE, native.h) */
    struct ps_pyframe *pyframes;
    uintptr_t *pcs;             /* PS_NATIVE_MAX: allocated, not here, so that
                                 * its 4 KiB do not split the context's hot
                                 * fields over two pages (issue #36) */
    struct ps_unwind_rules *rules;  /* the unwinder's rule cache (unwind.c) */
    struct ps_native_names *names;  /* native frames' names (merge.c) */
};

/*
 * In the order a tick reads them: what every tick reads first and
 * together (a tick starts on caches and TLB entries its sleep left cold:
 * issue #36), the thread memory next (its own fields first, then its
 * 1024 slots, of which a tick reads one per thread), and what only some
 * ticks or none read (the PYSAMPLE_STATS histograms, 15 KiB, one line
 * each a tick; the armed session) after those, where they no longer sit
 * between the hot fields and spread them over five pages.
 */
struct ps_sampler_ctx {
    struct ps_python py;        /* the interpreter read: the sampler's one copy */
    /* tick.c's, from one tick to the next */
    struct ps_tasks *tasks;     /* PYSAMPLE_ASYNC, else NULL (tasks.h) */
    int gil_only;               /* PYSAMPLE_GIL, where this build has a GIL to read */
    unsigned run;               /* loop.c's: runs of SAMPLING begun (weight.h: cpu mode) */
    struct ps_subset subset;    /* PYSAMPLE_MAX_THREADS_PER_TICK's window (weight.h) */
    struct ps_sample_bufs buf;  /* threadsample.c's */
    /* loop.c's */
    struct ps_budget budget;    /* PYSAMPLE_CPU_BUDGET, during SAMPLING */
    uint64_t next_flush;        /* PYSAMPLE_FLUSH_INTERVAL; 0: none */
    struct ps_threads threads;  /* what it remembers of each thread (threadinfo.h);
                                 * forking_tid is the forking thread's to write */
    struct ps_tick_times times; /* PYSAMPLE_STATS: lateness, tick work (stats.h) */
    struct ps_session session;  /* armed mode's session under way (sessions.h) */
};

#endif
