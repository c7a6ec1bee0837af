/*
 * render.c - the profile as the file's text (render.h, docs/format.md).
 *
 * Symbols are stored raw (symtab.c); here they are escaped, each distinct
 * frame and label once per render.  Nothing here is global: every sort
 * gets its context explicitly (see sort_indexes), so two renders may run
 * at once and none depends on the caller's lock beyond the tables'.
 *
 * No malloc: every buffer comes from an arena (util/arena.h), mapped from
 * the kernel.  The final profile may be written while a program thread was
 * interrupted inside malloc by a handler that calls _exit, holding the
 * lock a malloc here would wait for until the process is killed.  Two
 * arenas per render: scratch (the sort's tables, given back when
 * ps_render_prepare returns) and the one the result lives in.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile/escape.h"
#include "profile/render.h"
#include "util/arena.h"

/* ---- sorted lines ------------------------------------------------------ */

/*
 * The file is sorted (identical profiles give identical files, and diffs of
 * two runs line up), byte for byte as strcmp orders its lines.  Rendering
 * every line and sorting the text cost two copies of the whole output in
 * memory and a strcmp over the long shared prefixes of stacks (their
 * roots) per comparison: 1.9 s and 2 x 200 MB for 100 000 deep stacks.
 * So instead:
 *   1. every distinct frame value is rendered once ("name (file:line)") and
 *      the distinct strings are sorted, giving each a rank;
 *   2. stacks are sorted by label, then by the ranks of their frames: two
 *      lines first differ inside their first differing frame, so comparing
 *      those two frames' ranks is comparing the lines -- unless one frame's
 *      text is a proper prefix of the other's (a marker and a function of
 *      the same name), where the comparison falls back to the lines' text;
 *   3. the lines are made in that order, either into one buffer of exactly
 *      their size (ps_render) or a chunk at a time handed to a sink
 *      (ps_rendered_emit: the file is written from a 256 KiB buffer that
 *      stays in the cache, instead of from a 200 MB one that is written
 *      to memory and read back by the kernel's copy: 100 000 deep stacks
 *      wrote in half the time, and the peak memory of writing is the
 *      sorted index instead of the whole text).
 * Steps 1 and 2 read the tables (ps_render_prepare, under the caller's
 * lock); step 3 reads only what they copied out, so the lock is not held
 * while the file is written.
 */

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

/* One line to make: what step 3 needs of a stack, copied out of the table
 * in line order. */
struct line {
    uint64_t count;
    uint64_t off;        /* of its first frame in fidx */
    uint32_t label;
    uint32_t depth;
};

struct ps_rendered {
    struct ps_arena mem;   /* everything below, this included */
    struct texts lt, ft;
    uint32_t *fidx;
    struct line *lines;
    size_t n;
    size_t size;         /* the text's length can be no more */
    uint32_t *line_of;   /* stack id -> its line (the timeline's records) */
    size_t nids;
};

/*
 * Sorts the indexes v[0..n) by cmp, given the render context (qsort has
 * none, and a global one made rendering depend on the caller's lock).  A
 * bottom-up merge sort: O(n log n) always, stable.  0 or -1 (out of memory).
 */
typedef int (*index_cmp)(size_t a, size_t b, const struct render *r);

static int sort_indexes(size_t *v, size_t n, index_cmp cmp, const struct render *r)
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

static size_t fmt_u64(char *out, uint64_t v)
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
                o += fmt_u64(out + o, (uint64_t)(-(int64_t)line));
            } else {
                o += fmt_u64(out + o, (uint64_t)line);
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

/* Length of the line of label, frames fidx[0..depth) and count, its
 * newline excluded. */
static size_t line_len(const struct texts *lt, const struct texts *ft, const uint32_t *fidx,
                       uint32_t label, uint32_t depth)
{
    size_t len = lt->len[label] + 1 + 20;
    for (uint32_t k = 0; k < depth; k++)
        len += 1 + ft->len[fidx[k]];
    return len;
}

/* Writes that line -- label, ";frame"..., " count" -- at p, which has
 * line_len() bytes of room, and returns its length. */
static size_t put_line(const struct texts *lt, const struct texts *ft, const uint32_t *fidx,
                       uint32_t label, uint32_t depth, uint64_t count, char *p)
{
    size_t llen = lt->len[label], o;
    memcpy(p, lt->buf + lt->off[label], llen);
    o = llen;
    for (uint32_t k = 0; k < depth; k++) {
        uint32_t f = fidx[k];
        p[o++] = ';';
        memcpy(p + o, ft->buf + ft->off[f], ft->len[f]);
        o += ft->len[f];
    }
    p[o++] = ' ';
    o += fmt_u64(p + o, count);
    return o;
}

/* Renders the whole line of stack s (without newline) into the scratch
 * arena: the slow path of cmp_stacks, which gives it back. */
static char *line_text(const struct render *r, const struct ps_stack *s)
{
    const uint32_t *fidx = r->fidx + s->off;
    char *p = ps_arena_alloc(r->scratch, line_len(&r->lt, &r->ft, fidx, s->label, s->depth) + 1);
    if (p == NULL)
        return NULL;
    p[put_line(&r->lt, &r->ft, fidx, s->label, s->depth, s->count, p)] = '\0';
    return p;
}

static int cmp_stacks(size_t a, size_t b, const struct render *r)
{
    const struct ps_stack *x = &r->t->slots[a];
    const struct ps_stack *y = &r->t->slots[b];
    if (x->label != y->label) {
        size_t lx = r->lt.len[x->label], ly = r->lt.len[y->label];
        const char *sx = r->lt.buf + r->lt.off[x->label], *sy = r->lt.buf + r->lt.off[y->label];
        int c = memcmp(sx, sy, lx < ly ? lx : ly);
        if (c != 0 || lx == ly)
            return c;
        /* One label is a prefix of the other: the shorter line goes on
         * with ';' (or ' ' before the count of an empty stack). */
        unsigned char nx = lx < ly ? (x->depth ? ';' : ' ') : (unsigned char)sx[ly];
        unsigned char ny = ly < lx ? (y->depth ? ';' : ' ') : (unsigned char)sy[lx];
        return (nx > ny) - (nx < ny);
    }
    uint32_t n = x->depth < y->depth ? x->depth : y->depth;
    const uint32_t *fx = r->fidx + x->off, *fy = r->fidx + y->off;
    for (uint32_t k = 0; k < n; k++) {
        if (fx[k] == fy[k] || r->rank[fx[k]] == r->rank[fy[k]])
            continue;
        if (!r->prefix[fx[k]] && !r->prefix[fy[k]])
            return r->rank[fx[k]] < r->rank[fy[k]] ? -1 : 1;
        /* A frame's text is the start of another's: compare the text. */
        struct ps_arena_mark m = ps_arena_mark(r->scratch);
        char *lx = line_text(r, x), *ly = line_text(r, y);
        int c = (lx != NULL && ly != NULL) ? strcmp(lx, ly) : 0;
        ps_arena_release(r->scratch, m);
        return c;
    }
    if (x->depth != y->depth) /* the shorter line goes on with ' ', the longer with ';' */
        return x->depth < y->depth ? -1 : 1;
    /* Same text up to the counts (only frames whose line is not shown
     * differ): the counts compare as text. */
    char cx[24], cy[24];
    size_t nx = fmt_u64(cx, x->count), ny = fmt_u64(cy, y->count);
    cx[nx] = cy[ny] = '\0';
    return strcmp(cx, cy);
}

/* The escaped text of every label.  0 or -1. */
static int render_labels(struct render *r)
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
    if (sort_indexes(byrank, r->nf, cmp_ftext, r) != 0)
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

/* Step 1: every distinct frame, its text and the rank of its text. */
static int render_frames(struct render *r, struct fset *fs)
{
    size_t *byrank;
    if (index_frames(r, fs) != 0 || frame_arrays(r, fs, &byrank) != 0 ||
        frame_texts(r, byrank) != 0)
        return -1;
    return rank_frames(r, byrank);
}

/* Step 2: the stacks in line order, copied out into rd. */
static int render_lines(struct render *r, struct ps_rendered *rd)
{
    const struct ps_stacktab *t = r->t;
    size_t *order = ps_arena_array(r->scratch, t->used + 1, sizeof *order);
    if (order == NULL)
        return -1;
    size_t n = 0, total = 0;
    for (size_t i = 0; i < t->cap; i++) {
        const struct ps_stack *s = &t->slots[i];
        if (s->count == 0)
            continue;
        order[n++] = i;
        total += line_len(&r->lt, &r->ft, r->fidx + s->off, s->label, s->depth) + 1;
    }
    if (sort_indexes(order, n, cmp_stacks, r) != 0)
        return -1;
    rd->lines = ps_arena_array(r->keep, n + 1, sizeof *rd->lines);
    rd->line_of = ps_arena_array(r->keep, t->used + 1, sizeof *rd->line_of);
    if (rd->lines == NULL || rd->line_of == NULL)
        return -1;
    rd->nids = t->used;
    for (size_t i = 0; i < t->used; i++)
        rd->line_of[i] = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        const struct ps_stack *s = &t->slots[order[i]];
        rd->lines[i] = (struct line){ s->count, s->off, s->label, s->depth };
        if (s->id < t->used)
            rd->line_of[s->id] = (uint32_t)i;
    }
    rd->n = n;
    rd->size = total;
    return 0;
}

int ps_render_prepare(const struct ps_stacktab *t, const struct ps_symtab *syms,
                      struct ps_rendered **out)
{
    struct ps_arena scratch = { 0 }, keep = { 0 };
    struct fset fs = { .mem = &scratch };
    struct render r = { .t = t, .syms = syms, .scratch = &scratch, .keep = &keep };
    struct ps_rendered *rd = ps_arena_zalloc(&keep, sizeof *rd);
    int rc = rd != NULL && render_labels(&r) == 0 && render_frames(&r, &fs) == 0 &&
                     render_lines(&r, rd) == 0
                 ? 0
                 : -1;
    ps_arena_free(&scratch);
    if (rc != 0) {
        ps_arena_free(&keep);
        return -1;
    }
    rd->lt = r.lt;
    rd->ft = r.ft;
    rd->fidx = r.fidx;
    rd->mem = keep;
    *out = rd;
    return 0;
}

void ps_rendered_free(struct ps_rendered *rd)
{
    if (rd == NULL)
        return;
    struct ps_arena mem = rd->mem;   /* rd lives in it */
    ps_arena_free(&mem);
}

size_t ps_rendered_lines(const struct ps_rendered *rd)
{
    return rd->n;
}

uint32_t ps_rendered_line(const struct ps_rendered *rd, uint32_t stack_id)
{
    return stack_id < rd->nids ? rd->line_of[stack_id] : UINT32_MAX;
}

size_t ps_rendered_size(const struct ps_rendered *rd)
{
    return rd->size;
}

/* Step 3 into a buffer: lines are put straight into buf while it has room
 * for a whole line (the common case); a line longer than the room left
 * flushes first, and one longer than the whole buffer is made in memory
 * of its own. */
struct emit {
    char *buf;
    size_t cap, used;
    ps_render_sink sink;    /* NULL: buf holds everything (ps_render) */
    void *ctx;
    struct ps_arena mem;    /* the buffer (ps_rendered_emit) and long lines */
};

static int emit_flush(struct emit *e)
{
    if (e->used == 0 || e->sink == NULL)
        return 0;
    int rc = e->sink(e->ctx, e->buf, e->used);
    e->used = 0;
    return rc;
}

static int emit_lines(const struct ps_rendered *rd, struct emit *e)
{
    int rc;
    for (size_t i = 0; i < rd->n; i++) {
        const struct line *l = &rd->lines[i];
        const uint32_t *fidx = rd->fidx + l->off;
        size_t need = line_len(&rd->lt, &rd->ft, fidx, l->label, l->depth) + 1;
        if (need > e->cap - e->used && (rc = emit_flush(e)) != 0)
            return rc;
        if (need <= e->cap - e->used) {
            char *p = e->buf + e->used;
            size_t o = put_line(&rd->lt, &rd->ft, fidx, l->label, l->depth, l->count, p);
            p[o++] = '\n';
            e->used += o;
            continue;
        }
        struct ps_arena_mark m = ps_arena_mark(&e->mem);
        char *big = ps_arena_alloc(&e->mem, need);
        if (big == NULL)
            return -ENOMEM;
        size_t o = put_line(&rd->lt, &rd->ft, fidx, l->label, l->depth, l->count, big);
        big[o++] = '\n';
        rc = e->sink(e->ctx, big, o);
        ps_arena_release(&e->mem, m);
        if (rc != 0)
            return rc;
    }
    return emit_flush(e);
}

int ps_rendered_emit(const struct ps_rendered *rd, ps_render_sink sink, void *ctx)
{
    /* Small enough to stay in a core's cache while the kernel copies it
     * out, big enough that the write system calls do not count. */
    struct emit e = { .cap = 256 * 1024, .sink = sink, .ctx = ctx };
    e.buf = ps_arena_alloc(&e.mem, e.cap);
    if (e.buf == NULL)
        return -ENOMEM;
    int rc = emit_lines(rd, &e);
    ps_arena_free(&e.mem);
    return rc;
}

int ps_render(const struct ps_stacktab *t, const struct ps_symtab *syms, char **out,
              size_t *len)
{
    struct ps_rendered *rd;
    if (ps_render_prepare(t, syms, &rd) != 0)
        return -1;
    /* The size is an upper bound of the text: it all fits, nothing is
     * ever flushed.  The caller frees the text (pysample_render): malloc's. */
    struct emit e = { .cap = rd->size + 1 };
    e.buf = malloc(e.cap);
    if (e.buf == NULL || emit_lines(rd, &e) != 0) {
        free(e.buf);
        ps_rendered_free(rd);
        return -1;
    }
    ps_rendered_free(rd);
    e.buf[e.used] = '\0';
    *out = e.buf;
    *len = e.used;
    return 0;
}
