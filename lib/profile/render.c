/*
 * render.c - the profile as the file's text (render.h, docs/format.md).
 *
 * Symbols are stored raw (symtab.c); here they are escaped, each distinct
 * frame and label once per render (render_texts.c).  Nothing here is
 * global: every sort gets its context explicitly (ps_render_sort_indexes),
 * so two renders may run at once and none depends on the caller's lock
 * beyond the tables'.
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

#include "profile/render_texts.h"
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

/* Writes line l -- label, ";frame"..., " count", its frames fidx (l's
 * off already applied) -- at p, which has line_len() bytes of room, and
 * returns its length. */
static size_t put_line(const struct texts *lt, const struct texts *ft, const uint32_t *fidx,
                       const struct line *l, char *p)
{
    uint32_t label = l->label, depth = l->depth;
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
    o += ps_fmt_u64(p + o, l->count);
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
    const struct line l = {s->count, s->off, s->label, s->depth};
    p[put_line(&r->lt, &r->ft, fidx, &l, p)] = '\0';
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
    size_t nx = ps_fmt_u64(cx, x->count), ny = ps_fmt_u64(cy, y->count);
    cx[nx] = cy[ny] = '\0';
    return strcmp(cx, cy);
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
    if (ps_render_sort_indexes(order, n, cmp_stacks, r) != 0)
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
    struct render r = { .t = t, .syms = syms, .scratch = &scratch, .keep = &keep };
    struct ps_rendered *rd = ps_arena_zalloc(&keep, sizeof *rd);
    int rc = rd != NULL && ps_render_labels(&r) == 0 && ps_render_frames(&r) == 0 &&
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
            size_t o = put_line(&rd->lt, &rd->ft, fidx, l, p);
            p[o++] = '\n';
            e->used += o;
            continue;
        }
        struct ps_arena_mark m = ps_arena_mark(&e->mem);
        char *big = ps_arena_alloc(&e->mem, need);
        if (big == NULL)
            return -ENOMEM;
        size_t o = put_line(&rd->lt, &rd->ft, fidx, l, big);
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
