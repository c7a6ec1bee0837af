/*
 * stacktab.h - the aggregated profile: identical stacks are counted once.
 *
 * A stack is a thread label id plus its frames, root first; a frame is an
 * opaque 64-bit value (symtab.h makes them: a symbol id and a line).  The
 * table only counts: what the ids mean is symtab.c's business, and the
 * text of the file render.c's.  pysample_reset and a fork child clear this
 * table and nothing else.
 *
 * Memory is bounded: at most max_stacks distinct stacks.  Past the limit a
 * sample is counted on a one-frame stack of its thread holding full_frame
 * (the marker "[pysample: stack table full]"), so the total stays right
 * and the loss is visible.
 *
 * Not thread-safe by itself; the caller (profile.c's lock) serialises.
 */
#ifndef PS_STACKTAB_H
#define PS_STACKTAB_H

#include <stddef.h>
#include <stdint.h>

#include "profile/timeline.h"

#define PS_STACK_MEMO 16

struct ps_stack {
    uint32_t hash;    /* the low half of hash_stack's (the slot needs no more) */
    uint32_t id;      /* the stacks in the order they came: 0, 1, ... (timeline.h) */
    uint64_t count;   /* 0: empty slot */
    uint64_t off;     /* of its first frame in the frames arena */
    uint32_t label;
    uint32_t depth;
};

struct ps_stacktab {
    struct ps_stack *slots;
    size_t cap;          /* power of two */
    size_t used;
    size_t max_stacks;
    uint64_t *frames;    /* arena of all stacks' frames */
    size_t nframes, frames_cap;
    uint64_t total;      /* samples added */
    uint64_t overflowed; /* samples that went to the "table full" stack */
    uint64_t full_frame; /* the frame of that stack */
    struct ps_timeline *tl; /* each sample counted is recorded here too (NULL: not) */
    /* The slot (+ 1; 0: none) of the stack last counted on each label, by
     * label % PS_STACK_MEMO: a thread sampled where it was last time (an
     * idle one, every tick) is found by comparing its frames with that
     * stack's, without hashing them and probing (stacktab.c). */
    uint32_t memo[PS_STACK_MEMO];
};

int ps_stacktab_init(struct ps_stacktab *t, size_t max_stacks, uint64_t full_frame);
void ps_stacktab_free(struct ps_stacktab *t);
/* Empties t; its timeline stays attached (the caller restarts it: the
 * ids it holds are those of the old stacks).  0, or -1 (out of memory)
 * with t as it was. */
int ps_stacktab_clear(struct ps_stacktab *t);

/* Counts count samples of frames[0..depth) (root first) on thread label.
 * 0, or -1 if not even the overflow stack could take them. */
int ps_stacktab_add(struct ps_stacktab *t, uint32_t label, const uint64_t *frames,
                    uint32_t depth, uint64_t count);

#endif
