/*
 * stacktab.c - interning and stack aggregation (see stacktab.h).
 *
 * Both tables use open addressing with linear probing over power-of-two
 * arrays and never delete, which keeps lookups to a hash, a compare and
 * usually one cache line.  Growth doubles and rehashes; it happens on the
 * sampler thread outside any fault-guarded read, so malloc is fine there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stacktab.h"

/* ---- interned strings -------------------------------------------------- */

struct ps_strtab {
    uint32_t *slots;   /* id + 1, 0 = empty */
    size_t cap;
    uint32_t *offs;    /* id -> offset in text */
    uint32_t *lens;
    size_t n, ncap;
    char *text;
    size_t tlen, tcap;
};

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h)
{
    /* FNV-1a: tiny, and plenty for keys that are short strings. */
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

static struct ps_strtab *strtab_new(void)
{
    struct ps_strtab *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->cap = 1024;
    s->slots = calloc(s->cap, sizeof *s->slots);
    if (s->slots == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

static void strtab_free(struct ps_strtab *s)
{
    if (s == NULL)
        return;
    free(s->slots);
    free(s->offs);
    free(s->lens);
    free(s->text);
    free(s);
}

static const char *strtab_get(const struct ps_strtab *s, uint32_t id, size_t *len)
{
    *len = s->lens[id];
    return s->text + s->offs[id];
}

static int strtab_grow(struct ps_strtab *s)
{
    size_t ncap = s->cap * 2;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        size_t j = hash_bytes(s->text + s->offs[i], s->lens[i], 0xcbf29ce484222325ull) & (ncap - 1);
        while (ns[j] != 0)
            j = (j + 1) & (ncap - 1);
        ns[j] = (uint32_t)i + 1;
    }
    free(s->slots);
    s->slots = ns;
    s->cap = ncap;
    return 0;
}

/* Interns key[0..len) (may contain NULs).  Returns id or PS_ID_NONE;
 * PS_STRTAB_FULL if the key is new and the table already holds limit. */
#define PS_STRTAB_FULL (PS_ID_NONE - 1)
static uint32_t strtab_intern(struct ps_strtab *s, const char *key, size_t len, size_t limit)
{
    uint64_t h = hash_bytes(key, len, 0xcbf29ce484222325ull);
    size_t j = h & (s->cap - 1);
    for (;;) {
        uint32_t v = s->slots[j];
        if (v == 0)
            break;
        if (s->lens[v - 1] == len && memcmp(s->text + s->offs[v - 1], key, len) == 0)
            return v - 1;
        j = (j + 1) & (s->cap - 1);
    }
    if (s->n >= limit)
        return PS_STRTAB_FULL;
    if (s->n >= 0x7fffffff)
        return PS_ID_NONE;
    if (s->n == s->ncap) {
        size_t nc = s->ncap ? s->ncap * 2 : 256;
        uint32_t *no = realloc(s->offs, nc * sizeof *no);
        if (no == NULL)
            return PS_ID_NONE;
        s->offs = no;
        uint32_t *nl = realloc(s->lens, nc * sizeof *nl);
        if (nl == NULL)
            return PS_ID_NONE;
        s->lens = nl;
        s->ncap = nc;
    }
    if (s->tlen + len + 1 > s->tcap) {
        size_t nc = s->tcap ? s->tcap : 4096;
        while (nc < s->tlen + len + 1)
            nc *= 2;
        if (nc > 0xffffffffu)
            return PS_ID_NONE;
        char *nt = realloc(s->text, nc);
        if (nt == NULL)
            return PS_ID_NONE;
        s->text = nt;
        s->tcap = nc;
    }
    memcpy(s->text + s->tlen, key, len);
    s->text[s->tlen + len] = '\0';
    uint32_t id = (uint32_t)s->n++;
    s->offs[id] = (uint32_t)s->tlen;
    s->lens[id] = (uint32_t)len;
    s->tlen += len + 1;
    s->slots[j] = id + 1;
    if (s->n * 2 > s->cap && strtab_grow(s) != 0) {
        /* The entry is stored; a failed grow only makes probing slower
         * until memory is available again. */
    }
    return id;
}

/* ---- escaping ---------------------------------------------------------- */

size_t ps_escape(const char *s, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '%' || c == ';' || c < 0x20 || c == 0x7f) {
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

uint32_t ps_func_intern(struct ps_stacktab *t, const char *name, const char *file)
{
    /* Key: escaped name, NUL, escaped file (empty for a marker, which is
     * also flagged by a leading NUL-free '[' name and no file). */
    char key[2 * 3 * 4096 + 4];
    size_t n = ps_escape(name, key, 3 * 4096);
    key[n++] = '\0';
    if (file != NULL) {
        key[n++] = '\1';  /* distinguishes "has a file" from a marker */
        n += ps_escape(file, key + n, 3 * 4096);
    }
    /* Names are bounded like stacks: a program that makes new functions
     * for ever (exec, code generators) must not grow them for ever.  Past
     * twice the stack limit, new functions all show as one marker. */
    size_t limit = 2 * t->max_stacks < 4096 ? 4096 : 2 * t->max_stacks;
    uint32_t id = strtab_intern(t->funcs, key, n, limit);
    if (id == PS_STRTAB_FULL) {
        n = ps_escape("[pysample: function table full]", key, 3 * 4096);
        key[n++] = '\0';
        id = strtab_intern(t->funcs, key, n, SIZE_MAX);
    }
    return id;
}

uint32_t ps_label_intern(struct ps_stacktab *t, long tid, const char *name)
{
    char key[256], esc[200];
    int n;
    if (tid < 0) {
        /* 3.9/3.10 thread made without pthread_create: no tid known. */
        n = snprintf(key, sizeof key, "thread ?");
    } else if (name != NULL && *name) {
        ps_escape(name, esc, sizeof esc);
        n = snprintf(key, sizeof key, "thread %ld (%s)", tid, esc);
    } else {
        n = snprintf(key, sizeof key, "thread %ld", tid);
    }
    if (n < 0 || (size_t)n >= sizeof key)
        return PS_ID_NONE;
    /* Bounded too (programs that start threads without end): past the
     * limit, new threads share one label. */
    size_t limit = t->max_stacks / 4 < 4096 ? 4096 : t->max_stacks / 4;
    uint32_t id = strtab_intern(t->labels, key, (size_t)n, limit);
    if (id == PS_STRTAB_FULL) {
        ps_escape("[pysample: too many threads]", esc, sizeof esc);
        n = snprintf(key, sizeof key, "thread ? (%s)", esc);
        id = strtab_intern(t->labels, key, (size_t)n, SIZE_MAX);
    }
    return id;
}

/* ---- stacks ------------------------------------------------------------ */

struct ps_stack {
    uint64_t hash;
    uint64_t count;
    uint64_t off;     /* into frames arena */
    uint32_t label;
    uint32_t depth;   /* 0 = empty slot is marked by count == 0 */
};

int ps_stacktab_init(struct ps_stacktab *t, size_t max_stacks)
{
    memset(t, 0, sizeof *t);
    t->funcs = strtab_new();
    t->labels = strtab_new();
    t->cap = 4096;
    t->slots = calloc(t->cap, sizeof *t->slots);
    t->max_stacks = max_stacks;
    t->full_func = PS_ID_NONE;
    if (t->funcs == NULL || t->labels == NULL || t->slots == NULL) {
        ps_stacktab_free(t);
        return -1;
    }
    return 0;
}

void ps_stacktab_free(struct ps_stacktab *t)
{
    strtab_free(t->funcs);
    strtab_free(t->labels);
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
    if (ps_stacktab_init(&fresh, t->max_stacks) != 0)
        return -1;
    ps_stacktab_free(t);
    *t = fresh;
    return 0;
}

static uint64_t hash_stack(uint32_t label, const uint64_t *frames, uint32_t depth)
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
    return 0;
}

static int frames_append(struct ps_stacktab *t, const uint64_t *frames, uint32_t depth)
{
    if (t->nframes + depth > t->frames_cap) {
        size_t nc = t->frames_cap ? t->frames_cap : 16384;
        while (nc < t->nframes + depth)
            nc *= 2;
        uint64_t *nf = realloc(t->frames, nc * sizeof *nf);
        if (nf == NULL)
            return -1;
        t->frames = nf;
        t->frames_cap = nc;
    }
    memcpy(t->frames + t->nframes, frames, depth * sizeof *frames);
    t->nframes += depth;
    return 0;
}

int ps_stacktab_add(struct ps_stacktab *t, uint32_t label, const uint64_t *frames,
                    uint32_t depth, uint64_t count)
{
    uint64_t h = hash_stack(label, frames, depth);
    size_t j = h & (t->cap - 1);
    for (;;) {
        struct ps_stack *s = &t->slots[j];
        if (s->count == 0)
            break;
        if (s->hash == h && s->label == label && s->depth == depth &&
            memcmp(t->frames + s->off, frames, depth * sizeof *frames) == 0) {
            s->count += count;
            t->total += count;
            return 0;
        }
        j = (j + 1) & (t->cap - 1);
    }
    /* A new stack.  Past the limit (or out of memory) count it on the
     * thread's "table full" marker instead, which is itself a stack. */
    int full = t->used >= t->max_stacks;
    if (!full && (t->used + 1) * 2 > t->cap) {
        if (stacks_grow(t) != 0)
            full = 1;
        else
            return ps_stacktab_add(t, label, frames, depth, count);
    }
    if (!full && frames_append(t, frames, depth) != 0)
        full = 1;
    if (full) {
        if (t->full_func == PS_ID_NONE)
            t->full_func = ps_func_intern(t, "[pysample: stack table full]", NULL);
        uint64_t marker = ps_frame(t->full_func, PS_LINE_NONE);
        if (depth == 1 && frames[0] == marker)
            return -1;  /* even the marker does not fit: drop */
        t->overflowed += count;
        t->max_stacks++;  /* room for this thread's marker stack */
        int rc = ps_stacktab_add(t, label, &marker, 1, count);
        t->max_stacks--;
        return rc;
    }
    struct ps_stack *s = &t->slots[j];
    s->hash = h;
    s->count = count;
    s->label = label;
    s->depth = depth;
    s->off = t->nframes - depth;
    t->used++;
    t->total += count;
    return 0;
}

/* ---- rendering --------------------------------------------------------- */

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

struct render {
    const struct ps_stacktab *t;
    uint32_t *fidx;      /* per frame of the arena: its distinct index */
    uint64_t *fval;      /* distinct index -> frame value */
    size_t *foff;        /* distinct index -> offset of its text in ftext */
    uint32_t *flen;
    uint32_t *rank;      /* distinct index -> rank of its text */
    uint8_t *prefix;     /* distinct index -> its text is a proper prefix of another's */
    char *ftext;
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

/* Text of frame f ("name (file:line)", or the bare name of a marker) into
 * out, which has room for it (frame_len).  Returns its length. */
static size_t frame_text(const struct ps_stacktab *t, uint64_t f, char *out)
{
    uint32_t func = (uint32_t)(f >> 32);
    int32_t line = (int32_t)(uint32_t)f;
    size_t klen;
    const char *key = strtab_get(t->funcs, func, &klen);
    size_t nlen = strlen(key), o = 0;
    memcpy(out, key, nlen);
    o = nlen;
    if (nlen + 1 < klen && key[nlen + 1] == '\1') {
        const char *file = key + nlen + 2;
        memcpy(out + o, " (", 2);
        o += 2;
        memcpy(out + o, file, klen - nlen - 2);
        o += klen - nlen - 2;
        if (line != PS_LINE_NONE) {
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

static size_t frame_len_max(const struct ps_stacktab *t, uint64_t f)
{
    size_t klen;
    strtab_get(t->funcs, (uint32_t)(f >> 32), &klen);
    return klen + 16;
}

static int cmp_ftext(size_t x, size_t y, const struct render *r)
{
    size_t lx = r->flen[x], ly = r->flen[y];
    int c = memcmp(r->ftext + r->foff[x], r->ftext + r->foff[y], lx < ly ? lx : ly);
    if (c != 0)
        return c;
    return (lx > ly) - (lx < ly);
}

/* Writes the line of stack s -- label, ";frame"..., " count" -- at p
 * (room is the caller's business) and returns its length. */
static size_t put_line(const struct render *r, char *p, const struct ps_stack *s)
{
    size_t llen, o;
    const char *label = strtab_get(r->t->labels, s->label, &llen);
    memcpy(p, label, llen);
    o = llen;
    for (uint32_t k = 0; k < s->depth; k++) {
        uint32_t f = r->fidx[s->off + k];
        p[o++] = ';';
        memcpy(p + o, r->ftext + r->foff[f], r->flen[f]);
        o += r->flen[f];
    }
    p[o++] = ' ';
    o += fmt_u64(p + o, s->count);
    return o;
}

/* Renders the whole line of stack s (without newline) into a malloc'ed
 * string: the slow path of cmp_stacks. */
static char *line_text(const struct render *r, const struct ps_stack *s)
{
    size_t llen, len;
    strtab_get(r->t->labels, s->label, &llen);
    len = llen + 32;
    for (uint32_t k = 0; k < s->depth; k++)
        len += 1 + r->flen[r->fidx[s->off + k]];
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
        size_t lx, ly;
        const char *sx = strtab_get(r->t->labels, x->label, &lx);
        const char *sy = strtab_get(r->t->labels, y->label, &ly);
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
    free(r->foff);
    free(r->flen);
    free(r->rank);
    free(r->prefix);
    free(r->ftext);
    free(order);
    free(byrank);
    memset(r, 0, sizeof *r);
}

int ps_stacktab_render(const struct ps_stacktab *t, char **out, size_t *len)
{
    struct fset fs = { 0 };
    size_t *order = NULL;
    size_t *byrank = NULL;
    struct render rs = { .t = t }, *r = &rs;

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
    r->foff = malloc(nf * sizeof *r->foff);
    r->flen = malloc(nf * sizeof *r->flen);
    r->rank = malloc(nf * sizeof *r->rank);
    r->prefix = calloc(nf, 1);
    byrank = malloc(nf * sizeof *byrank);
    if (r->fval == NULL || r->foff == NULL || r->flen == NULL || r->rank == NULL ||
        r->prefix == NULL || byrank == NULL)
        goto oom;
    for (size_t j = 0; j < fs.cap; j++)
        if (fs.keys[j] != 0)
            r->fval[fs.vals[j]] = fs.keys[j] - 1;
    size_t tsize = 0;
    for (size_t i = 0; i < r->nf; i++)
        tsize += frame_len_max(t, r->fval[i]);
    r->ftext = malloc(tsize + 1);
    if (r->ftext == NULL)
        goto oom;
    size_t to = 0;
    for (size_t i = 0; i < r->nf; i++) {
        r->foff[i] = to;
        r->flen[i] = (uint32_t)frame_text(t, r->fval[i], r->ftext + to);
        to += r->flen[i];
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
            else if (r->flen[nx] > r->flen[i] &&
                     memcmp(r->ftext + r->foff[nx], r->ftext + r->foff[i], r->flen[i]) == 0)
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
        size_t llen;
        strtab_get(t->labels, s->label, &llen);
        total += llen + 2 + 20;  /* label, ' ', count, '\n' */
        for (uint32_t k = 0; k < s->depth; k++)
            total += 1 + r->flen[r->fidx[s->off + k]];
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
