/*
 * render_texts.c - step 1 of the render (render.c, "sorted lines"): every
 * label and every distinct frame value rendered once, escaped, and the
 * frames' texts ranked, so that comparing two lines is comparing the
 * ranks of their first differing frames.  And the render's one sort,
 * which both steps use.
 *
 * No malloc, as in render.c: the texts go into the arena the result
 * lives in (keep), the tables that only serve the ranking into scratch.
 */
#include <stdlib.h>
#include <string.h>

#include "profile/escape.h"
#include "profile/render_texts.h"

struct fset {           /* distinct frame values -> index */
    uint64_t *keys;     /* frame value + 1 (0 = empty); frame ~0 never occurs */
    uint32_t *vals;
    size_t cap, n;
    struct ps_arena *mem;
};

static size_t fset_slot(const struct fset *s, uint64_t key)
{
    /* Both halves of a frame (function id, line) must reach the low bits. */
    uint64_t h = (key ^ (key >> 29)) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    size_t j = (size_t)h & (s->cap - 1);
    while (s->keys[j] != 0 && s->keys[j] != key)
        j = (j + 1) & (s->cap - 1);
    return j;
}

/* The old arrays stay in the scratch arena until the render ends: at
 * most as much again as the last ones. */
static int fset_grow(struct fset *s)
{
    size_t ncap = s->cap ? s->cap * 2 : 4096;
    struct fset ns = { ps_arena_zalloc(s->mem, ncap * sizeof *ns.keys),
                       ps_arena_array(s->mem, ncap, sizeof *ns.vals), ncap, s->n, s->mem };
    if (ns.keys == NULL || ns.vals == NULL)
        return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (s->keys[i] == 0)
            continue;
        size_t j = fset_slot(&ns, s->keys[i]);
        ns.keys[j] = s->keys[i];
        ns.vals[j] = s->vals[i];
    }
    *s = ns;
    return 0;
}

/* Index of frame f, added if new; UINT32_MAX if out of memory. */
static uint32_t fset_index(struct fset *s, uint64_t f)
{
    if ((s->n + 1) * 2 > s->cap && fset_grow(s) != 0)
        return UINT32_MAX;
    uint64_t key = f + 1;
    size_t j = fset_slot(s, key);
    if (s->keys[j] == 0) {
        s->keys[j] = key;
        s->vals[j] = (uint32_t)s->n++;
    }
    return s->vals[j];
}

/*
 * Sorts the indexes v[0..n) by cmp, given the render context (qsort has
 * none, and a global one made rendering depend on the caller's lock).  A
 * bottom-up merge sort: O(n log n) always, stable.  0 or -1 (out of memory).
 */
int ps_render_sort_indexes(size_t *v, size_t n, index_cmp cmp, const struct render *r)
{
    if (n < 2)
        return 0;
    struct ps_arena_mark m = ps_arena_mark(r->scratch);
    size_t *tmp = ps_arena_array(r->scratch, n, sizeof *tmp);
    if (tmp == NULL)
        return -1;
    size_t *from = v, *to = tmp;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                to[k++] = cmp(from[j], from[i], r) < 0 ? from[j++] : from[i++];
            while (i < mid)
                to[k++] = from[i++];
            while (j < hi)
                to[k++] = from[j++];
        }
        size_t *t = from;
        from = to;
        to = t;
    }
    if (from != v)
        memcpy(v, from, n * sizeof *v);
    ps_arena_release(r->scratch, m);
    return 0;
}

/* Length of frame f's text: "name (file:line)", "name (file)" when no
 * line is shown or for a native function, the bare name of a marker. */
static size_t frame_len(const struct ps_symtab *syms, uint64_t f)
{
    struct ps_sym sym;
    ps_sym_get(syms, ps_frame_sym(f), &sym);
    size_t n = ps_escaped_len(sym.name);
    if (sym.file != NULL)
        n += 3 + ps_escaped_len(sym.file) + 12;  /* " (", ")", ":-2147483648" */
    return n;
}

/* Writes frame f's text into out, which has frame_len(f) bytes of room
 * and one more; returns its length. */
static size_t frame_text(const struct ps_symtab *syms, uint64_t f, char *out)
{
    struct ps_sym sym;
    ps_sym_get(syms, ps_frame_sym(f), &sym);
    int32_t line = ps_frame_line(f);
    size_t o = ps_escape(sym.name, out, SIZE_MAX);
    if (sym.file != NULL) {
        memcpy(out + o, " (", 2);
        o += 2;
        o += ps_escape(sym.file, out + o, SIZE_MAX);
        if (sym.kind == PS_SYM_PYTHON && line != PS_LINE_NONE) {
            out[o++] = ':';
            if (line < 0) {
                out[o++] = '-';
                o += ps_fmt_u64(out + o, (uint64_t)(-(int64_t)line));
            } else {
                o += ps_fmt_u64(out + o, (uint64_t)line);
            }
        }
        out[o++] = ')';
    }
    return o;
}

static int cmp_ftext(size_t x, size_t y, const struct render *r)
{
    size_t lx = r->ft.len[x], ly = r->ft.len[y];
    int c = memcmp(r->ft.buf + r->ft.off[x], r->ft.buf + r->ft.off[y], lx < ly ? lx : ly);
    if (c != 0)
        return c;
    return (lx > ly) - (lx < ly);
}

/* The escaped text of every label.  0 or -1. */
int ps_render_labels(struct render *r)
{
    size_t n = ps_sym_label_count(r->syms), size = 0;
    r->lt.off = ps_arena_array(r->keep, n + 1, sizeof *r->lt.off);
    r->lt.len = ps_arena_array(r->keep, n + 1, sizeof *r->lt.len);
    if (r->lt.off == NULL || r->lt.len == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        size += ps_escaped_len(ps_sym_label_text(r->syms, (uint32_t)i));
    r->lt.buf = ps_arena_alloc(r->keep, size + 1);
    if (r->lt.buf == NULL)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        r->lt.off[i] = o;
        r->lt.len[i] = (uint32_t)ps_escape(ps_sym_label_text(r->syms, (uint32_t)i), r->lt.buf + o,
                                         SIZE_MAX);
        o += r->lt.len[i];
    }
    return 0;
}

/* Each frame slot of the table, by the index of its distinct frame. */
static int index_frames(struct render *r, struct fset *fs)
{
    const struct ps_stacktab *t = r->t;
    r->fidx = ps_arena_array(r->keep, t->nframes + 1, sizeof *r->fidx);
    if (r->fidx == NULL)
        return -1;
    for (size_t i = 0; i < t->nframes; i++) {
        uint32_t k = fset_index(fs, t->frames[i]);
        if (k == UINT32_MAX)
            return -1;
        r->fidx[i] = k;
    }
    r->nf = fs->n;
    return 0;
}

/* The per-frame arrays, and each distinct frame's value from the set.
 * *byrank: room for the frames' order. */
static int frame_arrays(struct render *r, const struct fset *fs, size_t **byrank)
{
    size_t nf = r->nf ? r->nf : 1;
    r->fval = ps_arena_array(r->scratch, nf, sizeof *r->fval);
    r->ft.off = ps_arena_array(r->keep, nf, sizeof *r->ft.off);
    r->ft.len = ps_arena_array(r->keep, nf, sizeof *r->ft.len);
    r->rank = ps_arena_array(r->scratch, nf, sizeof *r->rank);
    r->prefix = ps_arena_zalloc(r->scratch, nf);
    *byrank = ps_arena_array(r->scratch, nf, sizeof **byrank);
    if (r->fval == NULL || r->ft.off == NULL || r->ft.len == NULL || r->rank == NULL ||
        r->prefix == NULL || *byrank == NULL)
        return -1;
    for (size_t j = 0; j < fs->cap; j++)
        if (fs->keys[j] != 0)
            r->fval[fs->vals[j]] = fs->keys[j] - 1;
    return 0;
}

/* Every frame's text, one after the other in r->ft; byrank in frame
 * order, to be sorted. */
static int frame_texts(struct render *r, size_t *byrank)
{
    size_t tsize = 0, to = 0;
    for (size_t i = 0; i < r->nf; i++)
        tsize += frame_len(r->syms, r->fval[i]);
    r->ft.buf = ps_arena_alloc(r->keep, tsize + 1);
    if (r->ft.buf == NULL)
        return -1;
    for (size_t i = 0; i < r->nf; i++) {
        r->ft.off[i] = to;
        r->ft.len[i] = (uint32_t)frame_text(r->syms, r->fval[i], r->ft.buf + to);
        to += r->ft.len[i];
        byrank[i] = i;
    }
    return 0;
}

/* The rank of each frame's text, and whether it starts a longer one. */
static int rank_frames(struct render *r, size_t *byrank)
{
    if (ps_render_sort_indexes(byrank, r->nf, cmp_ftext, r) != 0)
        return -1;
    for (size_t k = 0; k < r->nf; k++) {
        /* Equal texts (a marker's line is not shown) share a rank... */
        size_t i = byrank[k];
        r->rank[i] = (k > 0 && cmp_ftext(byrank[k - 1], i, r) == 0) ? r->rank[byrank[k - 1]]
                                                                     : (uint32_t)k;
    }
    for (size_t k = r->nf; k-- > 0;) {
        /* ... and whether they start a longer text: the next one in order
         * does if any does. */
        size_t i = byrank[k];
        if (k + 1 < r->nf) {
            size_t nx = byrank[k + 1];
            if (r->rank[nx] == r->rank[i])
                r->prefix[i] = r->prefix[nx];
            else if (r->ft.len[nx] > r->ft.len[i] &&
                     memcmp(r->ft.buf + r->ft.off[nx], r->ft.buf + r->ft.off[i], r->ft.len[i]) == 0)
                r->prefix[i] = 1;
        }
    }
    return 0;
}

/* Step 1: every distinct frame, its text and the rank of its text.  The
 * set of distinct frames is scratch: only the render's arrays outlive it. */
int ps_render_frames(struct render *r)
{
    struct fset fs = { .mem = r->scratch };
    size_t *byrank;
    if (index_frames(r, &fs) != 0 || frame_arrays(r, &fs, &byrank) != 0 ||
        frame_texts(r, byrank) != 0)
        return -1;
    return rank_frames(r, byrank);
}
