/*
 * symtab.c - interned symbols (symtab.h).
 *
 * Both tables use open addressing with linear probing over power-of-two
 * arrays and never delete, which keeps a lookup to a hash, a compare and
 * usually one cache line.  Growth doubles and rehashes; it happens on the
 * sampler thread outside any fault-guarded read, so malloc is fine there.
 *
 * A key is made of parts (kind, name, NUL, file) hashed and compared in
 * place, so interning builds no copy of a name on the sampler thread's
 * small stack.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/symtab.h"
#include "util/tickpath.h"

struct strkey {
    uint32_t off, len;
};

struct ps_strtab {
    uint32_t *slots;   /* id + 1, 0 = empty */
    size_t cap;
    struct strkey *keys;  /* id -> where its text is */
    size_t n, ncap;
    char *text;        /* every key, each followed by a NUL */
    size_t tlen, tcap;
};

struct part {
    const void *p;
    size_t n;
};

#define FNV_BASIS 0xcbf29ce484222325ull

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
    free(s->keys);
    free(s->text);
    free(s);
}

/* Forgets every key, keeping the memory: cannot fail. */
static void strtab_empty(struct ps_strtab *s)
{
    memset(s->slots, 0, s->cap * sizeof *s->slots);
    s->n = 0;
    s->tlen = 0;
}

static int strtab_grow(struct ps_strtab *s)
{
    size_t ncap = s->cap * 2;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        size_t j = hash_bytes(s->text + s->keys[i].off, s->keys[i].len, FNV_BASIS) & (ncap - 1);
        while (ns[j] != 0)
            j = (j + 1) & (ncap - 1);
        ns[j] = (uint32_t)i + 1;
    }
    free(s->slots);
    s->slots = ns;
    s->cap = ncap;
    return 0;
}

static int key_equal(const char *stored, const struct part *k, size_t nk)
{
    for (size_t i = 0; i < nk; i++) {
        if (memcmp(stored, k[i].p, k[i].n) != 0)
            return 0;
        stored += k[i].n;
    }
    return 1;
}

/* Room for one more key of len bytes.  0 or -1.  Offsets are 32-bit:
 * the text stays under 4 GiB (the limits keep it far smaller). */
static int strtab_reserve(struct ps_strtab *s, size_t len)
{
    if (s->n >= 0x7fffffff || s->tlen + len + 1 > 0xffffffffu)
        return -1;
    struct strkey *k = ps_grow(s->keys, &s->ncap, s->n + 1, sizeof *k, 256);
    if (k == NULL)
        return -1;
    s->keys = k;
    char *t = ps_grow(s->text, &s->tcap, s->tlen + len + 1, 1, 4096);
    if (t == NULL)
        return -1;
    s->text = t;
    return 0;
}

/* Interns the key made of k[0..nk).  Returns its id, PS_ID_NONE (out of
 * memory), or STRTAB_FULL if the key is new and the table holds limit. */
#define STRTAB_FULL (PS_ID_NONE - 1)
static uint32_t strtab_intern(struct ps_strtab *s, const struct part *k, size_t nk,
                              size_t limit)
{
    uint64_t h = FNV_BASIS;
    size_t len = 0;
    for (size_t i = 0; i < nk; i++) {
        h = hash_bytes(k[i].p, k[i].n, h);
        len += k[i].n;
    }
    size_t j = h & (s->cap - 1);
    for (;;) {
        uint32_t v = s->slots[j];
        if (v == 0)
            break;
        if (s->keys[v - 1].len == len && key_equal(s->text + s->keys[v - 1].off, k, nk))
            return v - 1;
        j = (j + 1) & (s->cap - 1);
    }
    if (s->n >= limit)
        return STRTAB_FULL;
    if (strtab_reserve(s, len) != 0)
        return PS_ID_NONE;
    uint32_t id = (uint32_t)s->n++;
    s->keys[id].off = (uint32_t)s->tlen;
    s->keys[id].len = (uint32_t)len;
    for (size_t i = 0; i < nk; i++) {
        memcpy(s->text + s->tlen, k[i].p, k[i].n);
        s->tlen += k[i].n;
    }
    s->text[s->tlen++] = '\0';
    s->slots[j] = id + 1;
    if (s->n * 2 > s->cap && strtab_grow(s) != 0) {
        /* The entry is stored; a failed grow only makes probing slower
         * until memory is available again. */
    }
    return id;
}

/* ---- functions and markers --------------------------------------------- */

/* Key: the kind as one byte, the name, and for a function a NUL and its
 * file.  A marker's key has no NUL, so no function can equal it. */
static uint32_t func_key_intern(struct ps_strtab *t, char kind, const char *name,
                                const char *file, size_t limit)
{
    struct part k[4] = {
        { &kind, 1 },
        { name, strlen(name) },
        { "", 1 },
        { file, file ? strlen(file) : 0 },
    };
    return strtab_intern(t, k, file != NULL ? 4 : 2, limit);
}

static uint32_t func_intern(struct ps_symtab *s, char kind, const char *name, const char *file)
{
    uint32_t id = func_key_intern(s->funcs, kind, name, file, s->max_funcs);
    if (id == STRTAB_FULL) {
        /* A program that makes new functions for ever (exec, code
         * generators) must not grow the table for ever. */
        s->refused = 1;
        return PS_SYM_FUNCS_FULL;
    }
    return id;
}

uint32_t ps_sym_python(struct ps_symtab *s, const char *qualname, const char *file)
{
    return func_intern(s, PS_SYM_PYTHON, qualname, file);
}

uint32_t ps_sym_native(struct ps_symtab *s, const char *function, const char *library,
                       uint64_t offset)
{
    if (function != NULL)
        return func_intern(s, PS_SYM_NATIVE, function, library);
    char text[4200];
    int n = snprintf(text, sizeof text, "%s+0x%llx", library, (unsigned long long)offset);
    if (n < 0 || (size_t)n >= sizeof text)
        return PS_ID_NONE;
    return func_intern(s, PS_SYM_MARKER, text, NULL);
}

uint32_t ps_sym_marker(struct ps_symtab *s, const char *text)
{
    return func_intern(s, PS_SYM_MARKER, text, NULL);
}

void ps_sym_get(const struct ps_symtab *s, uint32_t id, struct ps_sym *out)
{
    const char *key = s->funcs->text + s->funcs->keys[id].off;
    out->kind = (enum ps_sym_kind)key[0];
    out->name = key + 1;
    out->file = out->kind == PS_SYM_MARKER ? NULL : out->name + strlen(out->name) + 1;
}

/* ---- thread labels ----------------------------------------------------- */

static uint32_t label_intern(struct ps_symtab *s, const char *text, size_t limit)
{
    struct part k[1] = { { text, strlen(text) } };
    return strtab_intern(s->labels, k, 1, limit);
}

static void memo_empty(struct ps_symtab *s)
{
    for (size_t i = 0; i < PS_LABEL_MEMO; i++)
        s->memo[i].id = PS_ID_NONE;
}

PS_TICK_PATH uint32_t ps_sym_label(struct ps_symtab *s, long tid, const char *name)
{
    char text[256];
    int n;
    if (name == NULL)
        name = "";
    /* The same thread with the same name as last time: its id (the memo is
     * emptied whenever the labels are, so the id is still the label's). */
    struct ps_label_memo *m = &s->memo[(unsigned long)tid % PS_LABEL_MEMO];
    if (m->id != PS_ID_NONE && m->tid == tid && strcmp(m->name, name) == 0)
        return m->id;
    if (tid < 0)
        n = snprintf(text, sizeof text, "thread ?");  /* 3.9/3.10: no pthread_create */
    else if (*name)
        n = snprintf(text, sizeof text, "thread %ld (%s)", tid, name);
    else
        n = snprintf(text, sizeof text, "thread %ld", tid);
    if (n < 0 || (size_t)n >= sizeof text)
        return PS_ID_NONE;
    /* Bounded too (programs that start threads without end): past the
     * limit, new threads share one label. */
    uint32_t id = label_intern(s, text, s->max_labels);
    if (id == STRTAB_FULL) {
        s->refused = 1;
        return PS_LABEL_TOO_MANY;
    }
    size_t len = strlen(name);
    if (id != PS_ID_NONE && len < sizeof m->name) {
        m->tid = tid;
        m->id = id;
        memcpy(m->name, name, len + 1);
    }
    return id;
}

const char *ps_sym_label_text(const struct ps_symtab *s, uint32_t id)
{
    return s->labels->text + s->labels->keys[id].off;
}

size_t ps_sym_label_count(const struct ps_symtab *s)
{
    return s->labels->n;
}

/* ---- the table --------------------------------------------------------- */

/* Interns the reserved symbols at their fixed ids (symtab.h) into empty
 * tables; they do not count against the limits.  0 or -1. */
static int add_reserved(struct ps_symtab *s)
{
    static const char *const markers[PS_SYM_RESERVED] = {
        [PS_SYM_STACKS_FULL] = "[pysample: stack table full]",
        [PS_SYM_TRUNCATED] = "[pysample: truncated]",
        [PS_SYM_FUNCS_FULL] = "[pysample: function table full]",
        [PS_SYM_GC] = "[gc]",
    };
    for (uint32_t id = 0; id < PS_SYM_RESERVED; id++)
        if (func_key_intern(s->funcs, PS_SYM_MARKER, markers[id], NULL, SIZE_MAX) != id)
            return -1;
    if (label_intern(s, "thread ? ([pysample: too many threads])", SIZE_MAX) != PS_LABEL_TOO_MANY)
        return -1;
    s->refused = 0;
    return 0;
}

/* Generations are counted for the process, not per table: a table made
 * where another was (the same address) must not look like it. */
static uint32_t new_generation(void)
{
    static _Atomic uint32_t last;
    return atomic_fetch_add(&last, 1) + 1;
}

int ps_symtab_init(struct ps_symtab *s, size_t max_stacks)
{
    memset(s, 0, sizeof *s);
    s->funcs = strtab_new();
    s->labels = strtab_new();
    s->max_funcs = PS_SYM_RESERVED + (2 * max_stacks < 4096 ? 4096 : 2 * max_stacks);
    s->max_labels = PS_LABEL_RESERVED + (max_stacks / 4 < 4096 ? 4096 : max_stacks / 4);
    memo_empty(s);
    s->generation = new_generation();
    if (s->funcs == NULL || s->labels == NULL || add_reserved(s) != 0) {
        ps_symtab_free(s);
        return -1;
    }
    return 0;
}

void ps_symtab_free(struct ps_symtab *s)
{
    strtab_free(s->funcs);
    strtab_free(s->labels);
    memset(s, 0, sizeof *s);
}

void ps_symtab_clear(struct ps_symtab *s)
{
    /* In place, keeping the memory (bounded by the limits, and about to
     * fill again): the reserved symbols fit in it, so this cannot fail. */
    strtab_empty(s->funcs);
    strtab_empty(s->labels);
    memo_empty(s);
    s->generation = new_generation();
    add_reserved(s);
}
