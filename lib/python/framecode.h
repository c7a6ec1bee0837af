/*
 * framecode.h - the code object behind a frame, for frames.c's walk: read
 * and checked (framecode.c), and kept for the walk's later frames in a
 * small table (struct walk_codes) whose lookup the walk inlines.  Internal
 * to the walk: frames.h is its public face.
 */
#ifndef PS_FRAMECODE_H
#define PS_FRAMECODE_H

#include <stddef.h>
#include <stdint.h>

#include "python/walkplan.h"

/*
 * Code objects already checked in this walk (framespan.h, one read for
 * many frames): code address -> entry and frame size, and when its bytes
 * were read (a count of this walk's reads).  Direct-mapped; a slot is only
 * trusted for a frame whose bytes were copied before that read.  32 slots,
 * so that a stack's dozen or two distinct code objects rarely evict each
 * other; emptied with one store (used), not one per slot.
 */
#define PS_WALK_CODES 32
_Static_assert(PS_WALK_CODES <= 32, "walk_codes.used has a bit per slot");

struct walk_codes {
    uint64_t reads;                 /* reads made by this walk so far */
    uint32_t used;                  /* bit i: slot[i] was filled in this walk */
    struct {
        uintptr_t code;
        struct ps_code_entry *ce;
        uint64_t words;
        uint64_t read_no;           /* the read that checked it */
    } slot[PS_WALK_CODES];
};

/* A code object's slot.  Multiplicative, not the address's low bits: code
 * objects of one size made one after the other (exec() of similar source,
 * as test/bench/workload.py's levels on 3.12) sit a multiple of 256 bytes
 * apart, so bits 4-7 were the same for all ten and every frame evicted its
 * caller's slot: no frame was ever served on 3.12. */
static inline size_t code_slot(uintptr_t code)
{
    return (size_t)(((uint64_t)code * 0x9E3779B97F4A7C15ull) >> 56) & (PS_WALK_CODES - 1);
}

static inline struct ps_code_entry *checked_code(const struct walk_codes *wc, uintptr_t code,
                                                 uint64_t frame_read, uint64_t *words)
{
    if (wc == NULL)
        return NULL;
    size_t i = code_slot(code);
    /* The entry may have been replaced since (another code object's miss
     * took its way): its address says so. */
    if (!(wc->used >> i & 1u) || wc->slot[i].code != code || wc->slot[i].read_no <= frame_read ||
        !wc->slot[i].ce->valid || wc->slot[i].ce->id.addr != code)
        return NULL;
    *words = wc->slot[i].words;
    return wc->slot[i].ce;
}

/* The code object at code, read now (after the frame that points to it
 * was copied): 1 with *cep and *words set, 0 for an entry frame's None
 * (3.13+), or a PS_WALK_ error.  Out of line: in a deep walk most frames
 * are served by walk_codes, and its 1 KiB buffer stays off the walk's
 * stack. */
int ps_framecode_read(const struct walk_plan *p, struct walk_codes *wc, uintptr_t code,
                      struct ps_code_entry **cep, uint64_t *words);

/* 3.14t: the thread may run its own copy of the bytecode.  Out of line:
 * only a frame whose pointer is not in the code's own bytecode gets here.
 * The instruction index of ip in the copy the frame (bytes fr) runs of
 * code's n code units, or INT64_MIN if ip is not in it. */
int64_t ps_framecode_tlbc_addr(const struct ps_layout *L, uintptr_t code, const uint8_t *fr,
                               uintptr_t ip, int64_t n);

#endif
