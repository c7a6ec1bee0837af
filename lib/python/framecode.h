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
 * frame whose bytes were copied before that read.  code[] is emptied (0)
 * for each walk, 512 bytes; a slot's other fields (slot[]) are only read
 * where code[] holds its code.  (code[] in that struct too would touch
 * fewer lines still, but emptying it would then write all 64 slots, and
 * it cost 2.5 instructions a frame: 163 against 160.)
 *
 * 64 slots, a code object in one of two chosen by different bits of its
 * hash (code_slot, code_slot2); a full pair makes room by moving one of
 * its occupants to that one's other slot (framecode.c, slot_for).  The
 * table had 32 slots, a code object in its slot or the next: code objects
 * of one size class sit at one stride, and at 0x120 bytes (3.16) six of
 * test/bench/workload.py's ten levels fell into two neighbouring slots
 * and three more into one, and evicted each other, so that 86 % of a 1000-deep walk's frames read
 * their code object (377 instructions a frame against 160); and any ten
 * code objects thrashed so in about one layout in four.  Now about one
 * in 500 (random addresses; strides 64-2048 bytes: 1 in 248).
 */
#define PS_WALK_CODES 64

/* What a slot keeps of its code object, read only where code[] holds
 * it: one struct, so that a walk's ten code objects write ten of them on
 * ~10 lines of the sampler's stack, not three arrays' ~22 (issue #36; the
 * walk starts on caches its sleep left cold). */
struct walk_code {
    uint64_t read_no;                           /* the read that checked it */
    struct ps_code_entry *ce;
    uint64_t words;
};

struct walk_codes {
    uint64_t reads;                             /* reads made by this walk so far */
    uintptr_t code[PS_WALK_CODES];              /* 0: an empty slot */
    struct walk_code slot[PS_WALK_CODES];
};

/* A code object's two slots: the top 6 bits of a multiplicative hash,
 * and that slot moved by the next 6 bits (made odd, so never 0: the two
 * always differ).  Multiplicative, not the address's low bits: code
 * objects of one size made one after the other (exec() of similar
 * source) sit a multiple of 16 bytes apart.  The second slot depends on
 * other bits of the product than the first, so two code objects whose
 * first slots are the same seldom share the second. */
static inline size_t code_slot(uint64_t h)
{
    return (size_t)(h >> 58);
}

static inline size_t code_slot2(uint64_t h)
{
    return (size_t)((h >> 58) ^ ((h >> 52) | 1)) & (PS_WALK_CODES - 1);
}

static inline uint64_t code_hash(uintptr_t code)
{
    return (uint64_t)code * 0x9E3779B97F4A7C15ull;
}
_Static_assert(PS_WALK_CODES == 64, "code_slot() yields 6 bits");

static inline struct ps_code_entry *checked_code(const struct walk_codes *wc, uintptr_t code,
                                                 uint64_t frame_read, uint64_t *words)
{
    if (wc == NULL)
        return NULL;
    uint64_t h = code_hash(code);
    size_t i = code_slot(h);
    if (wc->code[i] != code) {
        i = code_slot2(h);
        if (wc->code[i] != code)
            return NULL;
    }
    /* The entry may have been replaced since (another code object's miss
     * took its way) or emptied: its address says so (0 when empty). */
    const struct walk_code *k = &wc->slot[i];
    if (k->read_no <= frame_read || k->ce->id.addr != code)
        return NULL;
    *words = k->words;
    return k->ce;
}

/*
 * The code object at code, read now (after the frame that points to it
 * was copied): 1 with *cep and *words set, 0 for an entry frame's None
 * (3.13+), or a PS_WALK_ error.  wc may be NULL (a frame on its own, and
 * 3.9/3.10's first frames, read one at a time).  Out of line: in a deep
 * walk most frames are served by walk_codes (inlined into the walk, it
 * saved ~30 instructions a read but cost the deep walk's loop 2 a frame).
 *
 * What one read costs (issue #36 item 3: 11 a 10-frame walk, 56 in a
 * 1000-deep one on 3.13).  Only the object's words the walk uses are
 * read, in the walk's scope, straight into an array of them
 * (ps_read_words_in_scope), not co_read bytes into a 1 KiB buffer to be
 * picked apart after.  They are compared with an entry as read: where the
 * walk's table already holds this code object from an earlier read (read
 * too late for this frame), that read's entry is compared first, and a
 * match is the entry the cache's lookup would have found (the one of its
 * set with this address and identity) without the lookup; its recency is
 * then left as that earlier lookup of the walk set it.  Else the cache's
 * hit path, inlined (ps_code_hit); only a miss, or a code object whose
 * two slots are both taken, goes further out of line.  (Counting the
 * walk's hits in wc, to add them to the cache's count once a walk, cost
 * the 3.9/3.10 batch loop 5 instructions a frame: counted as before.)
 * The read itself is never skipped: every frame's identity is still
 * compared with bytes read after the frame was (codecache.c).
 */
int ps_framecode_read(const struct walk_plan *p, struct walk_codes *wc, uintptr_t code,
                      struct ps_code_entry **cep, uint64_t *words);

/* 3.14t: the thread may run its own copy of the bytecode.  Out of line:
 * only a frame whose pointer is not in the code's own bytecode gets here.
 * The instruction index of ip in the copy the frame (bytes fr) runs of
 * code's n code units, or INT64_MIN if ip is not in it. */
int64_t ps_framecode_tlbc_addr(const struct ps_layout *L, uintptr_t code, const uint8_t *fr,
                               uintptr_t ip, int64_t n);

#endif
