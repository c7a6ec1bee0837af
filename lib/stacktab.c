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

/* Interns key[0..len) (may contain NULs).  Returns id or PS_ID_NONE. */
static uint32_t strtab_intern(struct ps_strtab *s, const char *key, size_t len)
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
    return strtab_intern(t->funcs, key, n);
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
    return strtab_intern(t->labels, key, (size_t)n);
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

void ps_stacktab_clear(struct ps_stacktab *t)
{
    size_t max = t->max_stacks;
    ps_stacktab_free(t);
    ps_stacktab_init(t, max);
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

struct buf {
    char *p;
    size_t len, cap;
    int oom;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 65536;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (np == NULL) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put_frame(struct buf *b, const struct ps_stacktab *t, uint64_t f)
{
    uint32_t func = (uint32_t)(f >> 32);
    int32_t line = (int32_t)(uint32_t)f;
    size_t klen;
    const char *key = strtab_get(t->funcs, func, &klen);
    size_t nlen = strlen(key);
    put(b, key, nlen);
    if (nlen + 1 < klen && key[nlen + 1] == '\1') {
        const char *file = key + nlen + 2;
        put(b, " (", 2);
        put(b, file, klen - nlen - 2);
        if (line != PS_LINE_NONE) {
            char num[16];
            int n = snprintf(num, sizeof num, ":%d", line);
            put(b, num, (size_t)n);
        }
        put(b, ")", 1);
    }
}

static const char *sort_base;
static int cmp_lines(const void *a, const void *b)
{
    return strcmp(sort_base + *(const size_t *)a, sort_base + *(const size_t *)b);
}

int ps_stacktab_render(const struct ps_stacktab *t, char **out, size_t *len)
{
    struct buf lines = { 0 }, res = { 0 };
    size_t *starts = malloc((t->used + 1) * sizeof *starts);
    size_t n = 0;
    if (starts == NULL)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        const struct ps_stack *s = &t->slots[i];
        if (s->count == 0)
            continue;
        size_t llen;
        const char *label = strtab_get(t->labels, s->label, &llen);
        starts[n++] = lines.len;
        put(&lines, label, llen);
        for (uint32_t k = 0; k < s->depth; k++) {
            put(&lines, ";", 1);
            put_frame(&lines, t, t->frames[s->off + k]);
        }
        char num[32];
        int m = snprintf(num, sizeof num, " %llu", (unsigned long long)s->count);
        put(&lines, num, (size_t)m);
        put(&lines, "", 1);  /* NUL: lines are C strings while sorting */
    }
    if (lines.oom) {
        free(lines.p);
        free(starts);
        return -1;
    }
    /* Sorted output: identical profiles give identical files, and diffs of
     * two runs line up. */
    sort_base = lines.p;
    qsort(starts, n, sizeof *starts, cmp_lines);
    for (size_t i = 0; i < n; i++) {
        const char *l = lines.p + starts[i];
        put(&res, l, strlen(l));
        put(&res, "\n", 1);
    }
    free(lines.p);
    free(starts);
    if (res.oom) {
        free(res.p);
        return -1;
    }
    if (res.p == NULL) {
        res.p = malloc(1);
        if (res.p == NULL)
            return -1;
    }
    res.p[res.len] = '\0';  /* put() always leaves room for it */
    *out = res.p;
    *len = res.len;
    return 0;
}
