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
 * were read (a count of this walk's reads).  A slot is only trusted for a
 * frame whose bytes were copied before that read.  32 slots, a code
 * object in one of two (its hash's, or the next): so that a stack's dozen
 * or two distinct code objects rarely evict each other, and two that hash
 * alike do not take turns (3.15's ten benchmark levels had such a pair:
 * one frame in four read its code object).  code[] is emptied (0) for
 * each walk, 256 bytes; a slot's other fields are only read where code[]
 * holds its code.
 */
#define PS_WALK_CODES 32

struct walk_codes {
    uint64_t reads;                             /* reads made by this walk so far */
    uintptr_t code[PS_WALK_CODES];              /* 0: an empty slot */
    uint64_t read_no[PS_WALK_CODES];            /* the read that checked it */
    struct ps_code_entry *ce[PS_WALK_CODES];
    uint64_t words[PS_WALK_CODES];
};

/* A code object's first slot.  Multiplicative, not the address's low
 * bits: code objects of one size made one after the other (exec() of
 * similar source, as test/bench/workload.py's levels on 3.12) sit a
 * multiple of 256 bytes apart, so bits 4-7 were the same for all ten and
 * every frame evicted its caller's slot: no frame was ever served on
 * 3.12.  Its second slot is the next one. */
static inline size_t code_slot(uintptr_t code)
{
    return (size_t)(((uint64_t)code * 0x9E3779B97F4A7C15ull) >> 59);
}
_Static_assert(PS_WALK_CODES == 32, "code_slot() yields 5 bits");

static inline struct ps_code_entry *checked_code(const struct walk_codes *wc, uintptr_t code,
                                                 uint64_t frame_read, uint64_t *words)
{
    if (wc == NULL)
        return NULL;
    size_t i = code_slot(code);
    if (wc->code[i] != code) {
        i = (i + 1) % PS_WALK_CODES;
        if (wc->code[i] != code)
            return NULL;
    }
    /* The entry may have been replaced since (another code object's miss
     * took its way): its address says so. */
    if (wc->read_no[i] <= frame_read || !wc->ce[i]->valid || wc->ce[i]->id.addr != code)
        return NULL;
    *words = wc->words[i];
    return wc->ce[i];
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
