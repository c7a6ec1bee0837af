/*
 * render.c - the profile as the file's text (render.h, docs/format.md).
 *
 * Symbols are stored raw (symtab.c); here they are escaped, each distinct
 * frame and label once per render.  Nothing here is global: every sort
 * gets its context explicitly (see sort_indexes), so two renders may run
 * at once and none depends on the caller's lock beyond the tables'.
 */
#include <stdlib.h>
#include <string.h>

#include "render.h"

/* ---- escaping ---------------------------------------------------------- */

static int needs_escape(unsigned char c)
{
    return c == '%' || c == ';' || c < 0x20 || c == 0x7f;
}

size_t ps_escape(const char *s, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (needs_escape(c)) {
            if (o + 3 >= outlen)
                break;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            if (o + 1 >= outlen)
                break;
            out[o++] = (char)c;
        }
    }
    if (outlen)
        out[o] = '\0';
    return o;
}

/* Length of s escaped. */
static size_t escaped_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += needs_escape((unsigned char)*s) ? 3 : 1;
    return n;
}

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
 *   3. the output is written once, into a buffer of exactly its size.
 */

struct fset {           /* distinct frame values -> index */
    uint64_t *keys;     /* frame value + 1 (0 = empty); frame ~0 never occurs */
    uint32_t *vals;
    size_t cap, n;
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

static int fset_grow(struct fset *s)
{
    size_t ncap = s->cap ? s->cap * 2 : 4096;
    struct fset ns = { calloc(ncap, sizeof *ns.keys), malloc(ncap * sizeof *ns.vals), ncap, s->n };
    if (ns.keys == NULL || ns.vals == NULL) {
        free(ns.keys);
        free(ns.vals);
        return -1;
    }
    for (size_t i = 0; i < s->cap; i++) {
        if (s->keys[i] == 0)
            continue;
        size_t j = fset_slot(&ns, s->keys[i]);
        ns.keys[j] = s->keys[i];
        ns.vals[j] = s->vals[i];
    }
    free(s->keys);
    free(s->vals);
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

static void texts_free(struct texts *x)
{
    free(x->off);
    free(x->len);
    free(x->buf);
}

struct render {
    const struct ps_stacktab *t;
    const struct ps_symtab *syms;
    struct texts lt;     /* label id -> its text */
    struct texts ft;     /* distinct frame index -> its text */
    uint32_t *fidx;      /* per frame of the arena: its distinct index */
    uint64_t *fval;      /* distinct index -> frame value */
    uint32_t *rank;      /* distinct index -> rank of its text */
    uint8_t *prefix;     /* distinct index -> its text is a proper prefix of another's */
    size_t nf;
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
    size_t *tmp = malloc(n * sizeof *tmp);
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
    free(tmp);
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
    size_t n = escaped_len(sym.name);
    if (sym.file != NULL)
        n += 3 + escaped_len(sym.file) + 12;  /* " (", ")", ":-2147483648" */
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

/* Writes the line of stack s -- label, ";frame"..., " count" -- at p
 * (room is the caller's business) and returns its length. */
static size_t put_line(const struct render *r, char *p, const struct ps_stack *s)
{
    size_t llen = r->lt.len[s->label], o;
    memcpy(p, r->lt.buf + r->lt.off[s->label], llen);
    o = llen;
    for (uint32_t k = 0; k < s->depth; k++) {
        uint32_t f = r->fidx[s->off + k];
        p[o++] = ';';
        memcpy(p + o, r->ft.buf + r->ft.off[f], r->ft.len[f]);
        o += r->ft.len[f];
    }
    p[o++] = ' ';
    o += fmt_u64(p + o, s->count);
    return o;
}

/* Renders the whole line of stack s (without newline) into a malloc'ed
 * string: the slow path of cmp_stacks. */
static char *line_text(const struct render *r, const struct ps_stack *s)
{
    size_t len = r->lt.len[s->label] + 32;
    for (uint32_t k = 0; k < s->depth; k++)
        len += 1 + r->ft.len[r->fidx[s->off + k]];
    char *p = malloc(len);
    if (p == NULL)
        return NULL;
    p[put_line(r, p, s)] = '\0';
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
        char *lx = line_text(r, x), *ly = line_text(r, y);
        int c = (lx != NULL && ly != NULL) ? strcmp(lx, ly) : 0;
        free(lx);
        free(ly);
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

static void render_free(struct render *r, struct fset *fs, size_t *order, size_t *byrank)
{
    free(fs->keys);
    free(fs->vals);
    free(r->fidx);
    free(r->fval);
    free(r->rank);
    free(r->prefix);
    texts_free(&r->ft);
    texts_free(&r->lt);
    free(order);
    free(byrank);
    memset(r, 0, sizeof *r);
}

/* The escaped text of every label.  0 or -1. */
static int render_labels(struct render *r)
{
    size_t n = ps_sym_label_count(r->syms), size = 0;
    r->lt.off = malloc((n + 1) * sizeof *r->lt.off);
    r->lt.len = malloc((n + 1) * sizeof *r->lt.len);
    if (r->lt.off == NULL || r->lt.len == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        size += escaped_len(ps_sym_label_text(r->syms, (uint32_t)i));
    r->lt.buf = malloc(size + 1);
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

int ps_render(const struct ps_stacktab *t, const struct ps_symtab *syms, char **out,
              size_t *len)
{
    struct fset fs = { 0 };
    size_t *order = NULL;
    size_t *byrank = NULL;
    struct render rs = { .t = t, .syms = syms }, *r = &rs;

    if (render_labels(r) != 0)
        goto oom;

    /* 1. Distinct frames, their text and its rank. */
    r->fidx = malloc((t->nframes + 1) * sizeof *r->fidx);
    if (r->fidx == NULL)
        goto oom;
    for (size_t i = 0; i < t->nframes; i++) {
        uint32_t k = fset_index(&fs, t->frames[i]);
        if (k == UINT32_MAX)
            goto oom;
        r->fidx[i] = k;
    }
    r->nf = fs.n;
    size_t nf = r->nf ? r->nf : 1;
    r->fval = malloc(nf * sizeof *r->fval);
    r->ft.off = malloc(nf * sizeof *r->ft.off);
    r->ft.len = malloc(nf * sizeof *r->ft.len);
    r->rank = malloc(nf * sizeof *r->rank);
    r->prefix = calloc(nf, 1);
    byrank = malloc(nf * sizeof *byrank);
    if (r->fval == NULL || r->ft.off == NULL || r->ft.len == NULL || r->rank == NULL ||
        r->prefix == NULL || byrank == NULL)
        goto oom;
    for (size_t j = 0; j < fs.cap; j++)
        if (fs.keys[j] != 0)
            r->fval[fs.vals[j]] = fs.keys[j] - 1;
    size_t tsize = 0;
    for (size_t i = 0; i < r->nf; i++)
        tsize += frame_len(syms, r->fval[i]);
    r->ft.buf = malloc(tsize + 1);
    if (r->ft.buf == NULL)
        goto oom;
    size_t to = 0;
    for (size_t i = 0; i < r->nf; i++) {
        r->ft.off[i] = to;
        r->ft.len[i] = (uint32_t)frame_text(syms, r->fval[i], r->ft.buf + to);
        to += r->ft.len[i];
        byrank[i] = i;
    }
    if (sort_indexes(byrank, r->nf, cmp_ftext, r) != 0)
        goto oom;
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

    /* 2. Stacks in line order. */
    order = malloc((t->used + 1) * sizeof *order);
    if (order == NULL)
        goto oom;
    size_t n = 0, total = 0;
    for (size_t i = 0; i < t->cap; i++) {
        const struct ps_stack *s = &t->slots[i];
        if (s->count == 0)
            continue;
        order[n++] = i;
        total += r->lt.len[s->label] + 2 + 20;  /* label, ' ', count, '\n' */
        for (uint32_t k = 0; k < s->depth; k++)
            total += 1 + r->ft.len[r->fidx[s->off + k]];
    }
    if (sort_indexes(order, n, cmp_stacks, r) != 0)
        goto oom;

    /* 3. The text, once. */
    char *p = malloc(total + 1);
    if (p == NULL)
        goto oom;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        o += put_line(r, p + o, &t->slots[order[i]]);
        p[o++] = '\n';
    }
    p[o] = '\0';
    render_free(r, &fs, order, byrank);
    *out = p;
    *len = o;
    return 0;

oom:
    render_free(r, &fs, order, byrank);
    return -1;
}
