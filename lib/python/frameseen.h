/*
 * frameseen.h - 3.9/3.10: the frame objects a walk has met, for frames.c.
 *
 * A chain never holds one object twice, but a stitched walk can, with
 * every reference count right: a thread's calls take its frame objects
 * back in turn (the zombie frame, then the free list), each one level
 * deeper than before, so a walk that read the innermost frames, then their
 * caller after the thread had returned and called again -- the caller
 * having a callee again at its new place, which frame_holds_callee()
 * cannot tell -- goes on down the new chain and meets the frames it began
 * with again (13 frames of a function that never recursed more than 12
 * deep: a stack deeper than the thread's frame objects must repeat one).
 * Only the first PS_SEEN_MAX frames are remembered.
 *
 * A short walk keeps its first PS_SEEN_LIST frames in a list, searched
 * only when a 512-bit filter of the addresses says it may hold the frame;
 * a walk that gets that deep moves them into an open-addressed table (at
 * most half full, cleared only then) and searches only that from there.  The filter alone was not enough: past ~300 frames it is
 * all ones, and every frame searched the list of 256 (a 1000-deep 3.9 walk
 * spent ~770 instructions a frame there, three quarters of its tick).
 */
#ifndef PS_FRAMESEEN_H
#define PS_FRAMESEEN_H

#include <stdint.h>
#include <string.h>

#define PS_SEEN_MAX 256
#define PS_SEEN_LIST 32
#define PS_SEEN_SLOTS 512              /* power of two, >= 2 * PS_SEEN_MAX */

struct seen {
    uint64_t bits[8];
    int n;
    uintptr_t at[PS_SEEN_LIST];
    uintptr_t slot[PS_SEEN_SLOTS];     /* 0: empty; in use once n >= PS_SEEN_LIST */
};

static inline void seen_begin(struct seen *s)
{
    memset(s->bits, 0, sizeof s->bits);
    s->n = 0;
}

static inline unsigned seen_hash(uintptr_t frame)
{
    return (unsigned)(((uint64_t)(frame >> 3) * 0x9E3779B97F4A7C15u) >> 55);  /* 9 bits */
}

/* The table's slot for frame: where it is, or the empty one it would go to. */
static inline uintptr_t *seen_slot(struct seen *s, uintptr_t frame, unsigned h)
{
    unsigned i = h & (PS_SEEN_SLOTS - 1);
    while (s->slot[i] != 0 && s->slot[i] != frame)
        i = (i + 1) & (PS_SEEN_SLOTS - 1);
    return &s->slot[i];
}

/* Moves the list into the table: from now on only the table is searched. */
static __attribute__((noinline)) void seen_spill(struct seen *s)
{
    memset(s->slot, 0, sizeof s->slot);
    for (int i = 0; i < PS_SEEN_LIST; i++)
        *seen_slot(s, s->at[i], seen_hash(s->at[i])) = s->at[i];
}

/* seen_twice() while the list is in use (a walk's first PS_SEEN_LIST
 * frames). */
static inline int seen_listed(struct seen *s, uintptr_t frame)
{
    unsigned h = seen_hash(frame);
    uint64_t bit = (uint64_t)1 << (h & 63);
    if (s->bits[h >> 6] & bit) {
        for (int i = 0; i < s->n; i++)
            if (s->at[i] == frame)
                return 1;
    }
    s->bits[h >> 6] |= bit;
    s->at[s->n++] = frame;
    if (s->n == PS_SEEN_LIST)
        seen_spill(s);
    return 0;
}

/* Records frame (never 0: the walk stops there): 1 if the walk met it
 * before (a torn walk).  Inlined: every 3.9/3.10 frame comes here. */
static inline int seen_twice(struct seen *s, uintptr_t frame)
{
    if (s->n < PS_SEEN_LIST)
        return seen_listed(s, frame);
    uintptr_t *slot = seen_slot(s, frame, seen_hash(frame));
    if (*slot == frame)
        return 1;
    if (s->n < PS_SEEN_MAX) {
        *slot = frame;
        s->n++;
    }
    return 0;
}

#endif
