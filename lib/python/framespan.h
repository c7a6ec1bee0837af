/*
 * framespan.h - 3.11+: one read for many frames, for frames.c.
 *
 * A thread's frames sit next to each other on its data stack, callers
 * below callees, so instead of one read per frame the walk copies a frame
 * together with the bytes below it in its 4 KiB block (PS_FRAME_SPAN) and
 * takes the frames it reaches next from that copy.  The read never goes
 * below the frame's block: that block is mapped if the frame is readable,
 * so the wider read cannot fault where the frame's own read would not (a
 * chunk's start is page-aligned; the bytes below the frame may be a chunk
 * header or a dead frame, which are only ever parsed if a link points
 * there, and then validated like any frame).
 *
 * Copied ahead of the code objects (issue 36).  A read of a code object
 * serves only the frames of this walk copied before it (framecode.h,
 * walk_codes; the freed-and-reused guarantee of codecache.c rests on that
 * order).  With one block per read, every block's frames read their code
 * objects again: a recursion of ten functions, ~35 frames a block, read
 * a code object for one frame in three.  So after the read, the walk
 * follows the links inside the copy, and where one leads into the block
 * right below, copies that block too (up to PS_SPAN_BLOCKS in all), before
 * any code object is read: the code reads that follow serve every frame
 * of the copy.  Each block added is one a frame in it is linked to, so it
 * is mapped if that frame is readable, the same rule as above; a walk
 * copies no more frames ahead than it may still read or report (cap), as
 * framebatch.h's batches do, so a walk that ends whole or cut at max
 * reads no block it would not have read anyway.  A torn walk may: a block
 * that faults then ends it unreadable where it would have ended
 * inconsistent, dropped and tried again either way.  Nothing is checked
 * less: each frame still goes through every check when the walk reaches
 * it, from the same bytes.  The span's read number is its last block's,
 * later than or equal to every frame's own copy, so a code read is never
 * taken for one made after a frame it was made before.
 *
 * Not on macOS (ps_plat_walk_reads_copy): there the walk reads a copy of
 * the suspended thread made by framecopy.c (through darwin/suspend.c),
 * which batches its reads by a rule of its own; a span read of ours would
 * reach past that copy and read the running thread.
 *
 * Only frames near the last data-stack frame walked are taken this way:
 * generator frames (heap) and 3.12+'s entry shims (C stack) are read
 * alone, or each would cost a 4 KiB copy for one frame.
 *
 * The copy is also more consistent than frame-by-frame reads: the frames
 * in it are from one moment, where single reads see each frame a little
 * later than the one before (the caller's slot can be reused in between:
 * frames.c, data_stack_linked).  Code objects are still read one by one,
 * from their current bytes, never a frame copied after such a read.
 */
#ifndef PS_FRAMESPAN_H
#define PS_FRAMESPAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "python/framebatch.h"
#include "python/framecode.h"
#include "python/walkplan.h"
#include "memory/memread.h"
#include "util/tickpath.h"

#define PS_FRAME_SPAN 4096
/* Blocks a span holds: 32 KiB, ~250 frames of a small function, on the
 * sampler thread's stack (256 KiB, sampler.c). */
#define PS_SPAN_BLOCKS 8

struct span {
    /* The span holds [lo, lo + last + fr_read) at base: a frame at
     * lo + k, k <= last, is in it whole.  Empty: lo 0 and last 0, which
     * only a frame at address 0 would match, and the walk never reads
     * one. */
    uintptr_t lo, last;
    const uint8_t *base;
    uint64_t read_no;                      /* the read that filled it last */
    union {
        uint8_t buf[PS_SPAN_BLOCKS * PS_FRAME_SPAN + 512];
        struct frame_batch batch;          /* 3.9/3.10 instead (framebatch.h) */
    };
    uint8_t one[512];                      /* a frame read alone */
};

/* A frame to copy and where the walk is: frames reported so far (n), the
 * last data-stack frame walked (above), which decide a wide read, and the
 * frames the walk may still read (cap).  A local of walk_step. */
struct frame_at {
    uintptr_t frame;
    int n;
    uintptr_t above;
    int cap;
};

/* After a wide read of fa->frame: the blocks below it its links lead to,
 * as long as the chain's next frame is in the block right below the span
 * and fewer than fa->cap frames were passed.  A block that cannot be read
 * ends this (the walk reads that frame on its own when it gets there).
 * Not within a walk's first PS_BATCH_FROM frames: a short stack's code
 * objects are seldom shared, and a block read for them saves no code
 * read (framebatch.h; a 10-deep walk ~200 instructions dearer). */
PS_TICK_PATH static __attribute__((noinline)) void span_extend(const struct walk_plan *p, struct span *s,
                                                  struct walk_codes *wc,
                                                  const struct frame_at *fa)
{
    /* What the loop reads, in locals (stores through s could alias it):
     * the span's bounds, and where the link of a frame at address a is
     * in buf, rel + a. */
    uintptr_t lo = s->lo, last = s->last, at = fa->frame, back;
    uintptr_t rel = (uintptr_t)s->base + p->fr_back - lo;
    for (int k = 1, cap = fa->cap; k < cap; k++, at = back) {
        memcpy(&back, (const uint8_t *)(rel + at), sizeof back);
        if (back - lo <= last)
            continue;
        uint8_t *below = (uint8_t *)(uintptr_t)s->base - PS_FRAME_SPAN;
        if (fa->n + k < PS_BATCH_FROM || back >= lo || lo - back > PS_FRAME_SPAN ||
            (back & 7) != 0 || below < s->buf ||
            ps_read_in_scope(below, lo - PS_FRAME_SPAN, PS_FRAME_SPAN) != 0)
            return;
        s->base = below;
        lo = s->lo -= PS_FRAME_SPAN;
        last = s->last += PS_FRAME_SPAN;
        s->read_no = ++wc->reads;
        rel = (uintptr_t)below + p->fr_back - lo;
    }
}

/* The frame at frame read alone into s->one (3.9/3.10: every frame;
 * 3.11+: one off the data stack): its bytes, or NULL if unreadable.
 * *read_no: the read. */
static inline const uint8_t *frame_alone(const struct walk_plan *p, struct span *s,
                                         struct walk_codes *wc, uintptr_t frame,
                                         uint64_t *read_no)
{
    size_t len = p->fr_read;
    *read_no = ++wc->reads;
    return len <= sizeof s->one && ps_read_in_scope(s->one, frame, len) == 0 ? s->one : NULL;
}

/* The bytes of fa->frame when the span does not hold them: one read,
 * wide (then extended below) or alone (3.9/3.10: every frame); NULL if
 * unreadable.  *read_no: the read that copied them. */
PS_TICK_PATH static const uint8_t *
frame_read(const struct walk_plan *p, struct span *s, struct walk_codes *wc,
           const struct frame_at *fa, uint64_t *read_no)
{
    const uintptr_t frame = fa->frame, above = fa->above;
    size_t len = p->fr_read;
    int wide = p->wide_ok &&
               (fa->n == 0 && above == 0 ? 1 : frame < above && above - frame <= PS_FRAME_SPAN);
    if (!wide)
        return frame_alone(p, s, wc, frame, read_no);
    *read_no = ++wc->reads;
    uintptr_t lo = frame & ~(uintptr_t)(PS_FRAME_SPAN - 1);
    uint8_t *top = s->buf + (PS_SPAN_BLOCKS - 1) * PS_FRAME_SPAN;
    if (frame - lo + len > sizeof s->buf - (size_t)(top - s->buf) ||
        ps_read_in_scope(top, lo, (size_t)(frame - lo) + len) != 0) {
        s->lo = 0;
        s->last = 0;
        return NULL;
    }
    s->lo = lo;
    s->last = frame - lo;
    s->base = top;
    s->read_no = *read_no;
    span_extend(p, s, wc, fa);
    *read_no = s->read_no;
    return top + (frame - lo);
}

/* The bytes of frame if the span holds them (*read_no: the read that
 * copied them, or a later one of the same span), else NULL: then
 * frame_read() reads them, with the bytes below if wide (becoming the
 * span), alone if not (the span is kept).  wide: the top frame (fa->n ==
 * 0, no data-stack frame yet), or one just below the last data-stack
 * frame walked (fa->above); only decided, like fa->cap, on a miss. */
static inline const uint8_t *span_holds(const struct span *s, uintptr_t frame,
                                        uint64_t *read_no)
{
    if (frame - s->lo > s->last)
        return NULL;
    *read_no = s->read_no;
    return s->base + (frame - s->lo);
}

#endif
