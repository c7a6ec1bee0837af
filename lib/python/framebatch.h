/*
 * framebatch.h - 3.9/3.10: a walk's frame objects copied ahead of their
 * code objects, for frames.c.
 *
 * Frame objects live on the heap, one here and one there, so no read can
 * take several (3.11+'s span, frames.c).  What a batch saves is the code
 * objects' reads: a read of a code object serves exactly the frames of
 * this walk whose bytes were copied before it (framecode.h, walk_codes;
 * the freed-and-reused guarantee of codecache.c rests on that order).
 * Read one frame, then its code object, then the next frame, and no code
 * read ever serves a later frame: every frame read its code object (a
 * 100-deep recursion of ten functions, 100 code reads).  So the walk
 * copies up to PS_FRAME_BATCH frames down the chain first, one read each,
 * and then resolves them in order: the code reads that follow come after
 * every frame of the batch was copied, and one per distinct code object
 * serves them all (10 per batch above).
 *
 * Only past a walk's first PS_BATCH_FROM frames: a batch pays off when its
 * frames share code objects, which a short stack's seldom do (ten distinct
 * levels cost ~50 instructions a frame more batched), and a deep one's do
 * (recursion, a framework's layers).
 *
 * Nothing is checked less: each frame copied ahead goes through the same
 * checks as before (link_torn, the refcounts, seen_twice, resolve), when
 * the walk reaches it, from the same bytes; every read is the walk's
 * scoped read (frames.c, "One recovery point per walk": the batch is the
 * walk's own, nothing shared is changed here).  What differs is only
 * when a link is followed: before its frame was checked.  A batch copies
 * no more frames than the walk could still report (cap), so a walk that
 * ends whole or cut at max reads no link it would not have followed; a
 * torn walk may, whose bad link then faults and ends it unreadable where
 * it would have ended inconsistent: dropped and tried again either way
 * (threadsample.c, walk_try), only counted under the other error.  Not on
 * a suspended copy (macOS), like the span.
 *
 * Of each frame only the four words the walk looks at are copied (its
 * reference count, f_back, f_code, and the word holding f_lasti), 32
 * bytes in place of 112: a batch of 256 is 8 KiB, which stays in the
 * first-level cache while the walk resolves it (a 28 KiB batch of whole
 * frames did not: ~1 600 more D1 misses in a 1000-deep tick).  The walk
 * reads the copies through a plan of its own (batch_plan) whose offsets
 * are those of the four words; every check reads the same bytes of the
 * frame as before, from one read of the frame.
 */
#ifndef PS_FRAMEBATCH_H
#define PS_FRAMEBATCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "python/framecode.h"
#include "python/frames.h"
#include "python/walkplan.h"
#include "memory/memread.h"
#include "util/tickpath.h"

#define PS_FRAME_BATCH 256
#define PS_BATCH_FROM 16

struct frame_batch {
    int i, n;                          /* next frame to hand out, frames held */
    uint64_t read0;                    /* the walk's read that copied frame 0; frame k: + k */
    struct ps_chain chain;             /* what a fill reads (batch_plan) */
    uintptr_t at[PS_FRAME_BATCH];
    uintptr_t buf[PS_FRAME_BATCH * PS_CHAIN_WORDS];   /* frame k's words at 4k */
};

/* Sets b up for the walk planned by p (3.9/3.10), and *cp to the plan the
 * walk reads b's copies by: p's, with the offsets of the words copied.
 * The word holding f_lasti is the 8 bytes from it, or from 4 bytes
 * before it where the frame's bytes end sooner (plan_init: fr_pos + 4 <=
 * fr_read), so that no word reaches past what a frame read copied. */
static inline void batch_plan(const struct walk_plan *p, struct walk_plan *cp,
                              struct frame_batch *b)
{
    uint32_t pos = p->fr_pos + 8 <= p->fr_read ? p->fr_pos : p->fr_pos - 4;
    b->i = b->n = 0;
    b->chain = (struct ps_chain){ .dst = b->buf, .at = b->at,
                                  .word = { 0, p->fr_back, p->fr_code, pos },
                                  .len = p->fr_read, .link = 1 };
    *cp = *p;
    cp->fr_back = 8;
    cp->fr_code = 16;
    cp->fr_pos = 24 + (p->fr_pos - pos);
    cp->fr_read = 8 * PS_CHAIN_WORDS;
    cp->fr_owner = 0;
}

/* Copies frame and up to cap - 1 frames down its chain into b, in one
 * chain read (memread.h: each frame the walk's scoped read, without a
 * call and its checks per frame): frame's words (*read_no: its read), or
 * NULL if frame itself is unreadable.  Each frame counts as a read of the
 * walk, in chain order, as when they were read one by one. */
PS_TICK_PATH static __attribute__((noinline, unused)) const uint8_t *
batch_fill(struct frame_batch *b, struct walk_codes *wc, uintptr_t frame, int cap,
           uint64_t *read_no)
{
    b->i = b->n = 0;
    b->chain.max = cap < PS_FRAME_BATCH ? cap : PS_FRAME_BATCH;
    int n = ps_read_chain_in_scope(&b->chain, frame);
    if (n <= 0)
        return NULL;
    b->read0 = wc->reads + 1;
    wc->reads += (uint64_t)n;
    b->n = n;
    b->i = 1;
    *read_no = b->read0;
    return (const uint8_t *)b->buf;
}

/* The words of frame if it is the batch's next copy (*read_no: its
 * read), else NULL: batch_fill starts a new batch from it. */
static inline const uint8_t *batch_next(struct frame_batch *b, uintptr_t frame,
                                        uint64_t *read_no)
{
    if (b->i < b->n && b->at[b->i] == frame) {
        *read_no = b->read0 + (uint64_t)b->i;
        return (const uint8_t *)(b->buf + PS_CHAIN_WORDS * (size_t)b->i++);
    }
    return NULL;
}

#endif
