/*
 * timeline.h - the samples in time order (PYSAMPLE_TIMELINE): a log of
 * (time, stack, weight) records beside the aggregated profile, written as
 * the sidecar <profile>.timeline (docs/format.md).
 *
 * A record names a stack by its id in the stack table (stacktab.h), so a
 * sample costs one 16-byte record, whatever its depth: the frames are
 * stored once, in the table.  The table adds a record for every sample it
 * counts, at the time of the tick (ps_timeline_tick), so the timeline and
 * the profile count the same samples; a reset clears both, for the ids
 * of the old stacks mean nothing in the new table.
 *
 * Memory is bounded: at most max records.  The earliest are kept (the
 * start-up, the phases a run goes through from its beginning); past the
 * limit, samples are not recorded but counted (dropped_records,
 * dropped_samples, from first_dropped_ns on), and the file says so.
 * Consecutive samples of one stack in one tick (asyncio tasks waiting at
 * the same place) share a record.
 *
 * Not thread-safe by itself; the caller (profile.c's lock) serialises.
 */
#ifndef PS_TIMELINE_H
#define PS_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "profile/output.h"

struct ps_arena;
struct ps_rendered;

struct ps_tl_record {
    uint64_t t_ns;      /* since the timeline's start (monotonic clock) */
    uint32_t stack;     /* id in the stack table (struct ps_stack.id) */
    uint32_t weight;    /* samples it stands for */
};

struct ps_timeline {
    struct ps_tl_record *rec;
    size_t n, cap;
    size_t max;                 /* 0: no timeline */
    uint64_t start_mono;        /* time 0, monotonic ns */
    uint64_t start_real;        /* the same moment, ns since the epoch */
    uint64_t now;               /* the tick's time, monotonic ns */
    uint64_t last_ns;           /* the last sample offered, kept or not */
    uint64_t dropped_records, dropped_samples;
    uint64_t first_dropped_ns;
    int rate_hz;                /* the requested rate, for readers */
};

/* A timeline of at most max records (0: none), starting at the given
 * moment (both clocks).  Allocates nothing until a sample comes. */
void ps_timeline_init(struct ps_timeline *tl, size_t max, int rate_hz, uint64_t start_mono,
                      uint64_t start_real);
void ps_timeline_free(struct ps_timeline *tl);

/* Empties tl and starts it again at the given moment; its memory is
 * kept for the samples to come (it never exceeds the bound). */
void ps_timeline_restart(struct ps_timeline *tl, uint64_t start_mono, uint64_t start_real);

static inline int ps_timeline_on(const struct ps_timeline *tl)
{
    return tl != NULL && tl->max != 0;
}

/* The time of the samples that follow (the tick's). */
static inline void ps_timeline_tick(struct ps_timeline *tl, uint64_t now_mono)
{
    tl->now = now_mono;
}

/* weight samples of stack id, now.  Never fails: a sample that finds no
 * room (the bound, or no memory) is counted as dropped. */
void ps_timeline_add(struct ps_timeline *tl, uint32_t stack, uint64_t weight);

/*
 * A copy of tl to write from without its lock: ps_timeline_copy under the
 * lock (NULL if out of memory or tl is off), then ps_timeline_emit with the
 * rendered stacks of the same moment (their lines are the stacks of the
 * file, in order).  Both take their memory from mem, never from malloc,
 * as the render does (util/arena.h: the final write may be served while a
 * program thread holds the allocator's lock); freeing mem frees the copy.
 */
struct ps_timeline *ps_timeline_copy(const struct ps_timeline *tl, struct ps_arena *mem);

/* The sidecar's text (docs/format.md), through put: 0, -ENOMEM, or the
 * first non-zero value put returned.  A record names its stack by the
 * stack's line in rd (ps_rendered_line). */
int ps_timeline_emit(const struct ps_timeline *copy, const struct ps_rendered *rd,
                     ps_output_put_fn put, void *put_ctx, struct ps_arena *mem);

#endif
