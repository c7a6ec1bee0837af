/*
 * render_texts.h - the render under way, shared by its two files
 * (render.c: the lines, sorted and made; render_texts.c: the texts of
 * labels and distinct frames, the frames' ranks, and the render's sort).
 * Internal to the render: render.h is its public face.
 */
#ifndef PS_RENDER_TEXTS_H
#define PS_RENDER_TEXTS_H

#include <stddef.h>
#include <stdint.h>

#include "profile/render.h"
#include "util/arena.h"

/* Escaped texts, one per index, side by side in one buffer. */
struct texts {
    size_t *off;
    uint32_t *len;
    char *buf;
};

struct render {
    const struct ps_stacktab *t;
    const struct ps_symtab *syms;
    struct ps_arena *scratch;  /* the render's own tables */
    struct ps_arena *keep;     /* what the lines need: texts, fidx, the lines */
    struct texts lt;     /* label id -> its text */
    struct texts ft;     /* distinct frame index -> its text */
    uint32_t *fidx;      /* per frame of the arena: its distinct index */
    uint64_t *fval;      /* distinct index -> frame value */
    uint32_t *rank;      /* distinct index -> rank of its text */
    uint8_t *prefix;     /* distinct index -> its text is a proper prefix of another's */
    size_t nf;
};

/* Step 1 (render.c, "sorted lines"): the escaped text of every label, and
 * of every distinct frame with the rank of its text.  0 or -1 (out of
 * memory). */
int ps_render_labels(struct render *r);
int ps_render_frames(struct render *r);

/* The render's one sort (render_texts.c): the indexes v[0..n) by cmp,
 * given the render context; stable.  0 or -1 (out of memory). */
typedef int (*index_cmp)(size_t a, size_t b, const struct render *r);
int ps_render_sort_indexes(size_t *v, size_t n, index_cmp cmp, const struct render *r);

/* The decimal digits of v at out (room for 20); returns how many. */
static inline size_t ps_fmt_u64(char *out, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

#endif
