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

#define PS_FRAME_BATCH 256
#define PS_BATCH_FROM 16

struct frame_batch {
    int i, n;                          /* next frame to hand out, frames held */
    size_t stride;                     /* bytes between copies in buf */
    uint64_t read0;                    /* the walk's read that copied frame 0; frame k: + k */
    uintptr_t at[PS_FRAME_BATCH];
    uint8_t buf[PS_FRAME_BATCH * 112]; /* 3.9/3.10 frame objects: 112 bytes read */
};

/* Copies frame and up to cap - 1 frames down its chain into b, in one
 * chain read (memread.h: each frame the walk's scoped read, without a
 * call and its checks per frame): frame's bytes (*read_no: its read), or
 * NULL if frame itself is unreadable.  Each frame counts as a read of the
 * walk, in chain order, as when they were read one by one. */
static __attribute__((noinline)) const uint8_t *
batch_fill(const struct walk_plan *p, struct frame_batch *b, struct walk_codes *wc,
           uintptr_t frame, int cap, uint64_t *read_no)
{
    size_t len = p->fr_read, stride = (len + 7) & ~(size_t)7;
    b->i = b->n = 0;
    if (stride == 0 || stride > sizeof b->buf)
        return NULL;
    if ((size_t)cap > sizeof b->buf / stride)
        cap = (int)(sizeof b->buf / stride);
    if (cap > PS_FRAME_BATCH)
        cap = PS_FRAME_BATCH;
    int n = ps_read_chain_in_scope(&(struct ps_chain){ .dst = b->buf, .at = b->at, .len = len,
                                                       .stride = stride, .link = p->fr_back,
                                                       .max = cap },
                                   frame);
    if (n <= 0)
        return NULL;
    b->stride = stride;
    b->read0 = wc->reads + 1;
    wc->reads += (uint64_t)n;
    b->n = n;
    b->i = 1;
    *read_no = b->read0;
    return b->buf;
}

/* The bytes of frame if it is the batch's next copy (*read_no: its
 * read), else NULL: batch_fill starts a new batch from it. */
static inline const uint8_t *batch_next(struct frame_batch *b, uintptr_t frame,
                                        uint64_t *read_no)
{
    if (b->i < b->n && b->at[b->i] == frame) {
        *read_no = b->read0 + (uint64_t)b->i;
        return b->buf + b->stride * (size_t)b->i++;
    }
    return NULL;
}

#endif
