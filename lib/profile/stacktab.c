/*
 * stacktab.c - stack aggregation (see stacktab.h).
 *
 * Open addressing with linear probing over a power-of-two array that never
 * deletes, which keeps a lookup to a hash, a compare and usually one cache
 * line.  Growth doubles and rehashes; it happens on the sampler thread
 * outside any fault-guarded read, so malloc is fine there.
 */
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "profile/stacktab.h"
#include "util/tickpath.h"

int ps_stacktab_init(struct ps_stacktab *t, size_t max_stacks, uint64_t full_frame)
{
    memset(t, 0, sizeof *t);
    t->cap = 4096;
    t->slots = calloc(t->cap, sizeof *t->slots);
    t->max_stacks = max_stacks;
    t->full_frame = full_frame;
    return t->slots != NULL ? 0 : -1;
}

void ps_stacktab_free(struct ps_stacktab *t)
{
    free(t->slots);
    free(t->frames);
    memset(t, 0, sizeof *t);
}

int ps_stacktab_clear(struct ps_stacktab *t)
{
    /* The empty table is made first: if that fails, the old one stays
     * whole (its samples keep counting) instead of a table of NULL
     * pointers that the next sample would crash on. */
    struct ps_stacktab fresh;
    if (ps_stacktab_init(&fresh, t->max_stacks, t->full_frame) != 0)
        return -1;
    fresh.tl = t->tl;
    ps_stacktab_free(t);
    *t = fresh;
    return 0;
}

PS_TICK_PATH static uint64_t hash_stack(uint32_t label, const uint64_t *frames, uint32_t depth)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ label;
    for (uint32_t i = 0; i < depth; i++) {
        h ^= frames[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h | 1;  /* never 0 */
}

static int stacks_grow(struct ps_stacktab *t)
{
    size_t ncap = t->cap * 2;
    struct ps_stack *ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i].count == 0)
            continue;
        size_t j = t->slots[i].hash & (ncap - 1);
        while (ns[j].count != 0)
            j = (j + 1) & (ncap - 1);
        ns[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = ns;
    t->cap = ncap;
    /* The stacks moved: no memo names their slots any more. */
    memset(t->memo, 0, sizeof t->memo);
    return 0;
}

static int frames_append(struct ps_stacktab *t, const uint64_t *frames, uint32_t depth)
{
    uint64_t *nf = ps_grow(t->frames, &t->frames_cap, t->nframes + depth, sizeof *nf, 16384);
    if (nf == NULL)
        return -1;
    t->frames = nf;
    memcpy(t->frames + t->nframes, frames, depth * sizeof *frames);
    t->nframes += depth;
    return 0;
}

/* Counts count more on the stack in slot j, and remembers it as label's
 * last. */
static inline void count_on(struct ps_stacktab *t, size_t j, uint32_t label, uint64_t count)
{
    struct ps_stack *s = &t->slots[j];
    s->count += count;
    t->total += count;
    t->memo[label % PS_STACK_MEMO] = (uint32_t)j + 1;
    ps_timeline_add(t->tl, s->id, count);
}

/* The slot of label's last stack if frames[0..depth) is that stack, else
 * -1.  The innermost frame first: a thread that moved on differs there
 * most often, and is turned away before the whole stack is compared.  A
 * match is the stack the hash would have found: every stack is in the
 * table once, and the compare is the probe's. */
static inline long memo_slot(const struct ps_stacktab *t, uint32_t label, const uint64_t *frames,
                             uint32_t depth)
{
    uint32_t m = t->memo[label % PS_STACK_MEMO];
    if (m == 0 || depth == 0)
        return -1;
    const struct ps_stack *s = &t->slots[m - 1];
    const uint64_t *had = t->frames + s->off;
    if (s->label != label || s->depth != depth || had[depth - 1] != frames[depth - 1] ||
        memcmp(had, frames, (depth - 1) * sizeof *frames) != 0)
        return -1;
    return (long)(m - 1);
}

/* overflow: frames is the thread's "table full" stack, which may go past
 * max_stacks (one per label, and labels are bounded: symtab.h). */
PS_TICK_PATH static int add(struct ps_stacktab *t, uint32_t label, const uint64_t *frames, uint32_t depth,
               uint64_t count, int overflow)
{
    long k = memo_slot(t, label, frames, depth);
    if (k >= 0) {
        count_on(t, (size_t)k, label, count);
        return 0;
    }
    uint64_t h = hash_stack(label, frames, depth);
    size_t j = h & (t->cap - 1);
    for (;;) {
        struct ps_stack *s = &t->slots[j];
        if (s->count == 0)
            break;
        if (s->hash == (uint32_t)h && s->label == label && s->depth == depth &&
            memcmp(t->frames + s->off, frames, depth * sizeof *frames) == 0) {
            count_on(t, j, label, count);
            return 0;
        }
        j = (j + 1) & (t->cap - 1);
    }
    /* A new stack.  Past the limit (or out of memory) count it on the
     * thread's "table full" marker instead, which is itself a stack. */
    int full = !overflow && t->used >= t->max_stacks;
    if (!full && (t->used + 1) * 2 > t->cap) {
        if (stacks_grow(t) != 0)
            full = 1;
        else
            return add(t, label, frames, depth, count, overflow);
    }
    if (!full && frames_append(t, frames, depth) != 0)
        full = 1;
    if (full) {
        if (overflow)
            return -1;  /* out of memory for even the marker: dropped */
        if (add(t, label, &t->full_frame, 1, count, 1) != 0)
            return -1;
        t->overflowed += count;
        return 0;
    }
    struct ps_stack *s = &t->slots[j];
    s->hash = (uint32_t)h;
    s->id = (uint32_t)t->used;
    s->count = count;
    s->label = label;
    s->depth = depth;
    s->off = t->nframes - depth;
    t->used++;
    t->total += count;
    t->memo[label % PS_STACK_MEMO] = (uint32_t)j + 1;
    ps_timeline_add(t->tl, s->id, count);
    return 0;
}

PS_TICK_PATH int ps_stacktab_add(struct ps_stacktab *t, uint32_t label, const uint64_t *frames,
                    uint32_t depth, uint64_t count)
{
    return add(t, label, frames, depth, count, 0);
}
