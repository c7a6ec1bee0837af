/*
 * Unit test: builtin containers read from raw memory (lib/python/pyobj.c), which
 * the asyncio task walk uses to get from the modules dict to the tasks.
 *
 * For the 3.9 (Py_ssize_t dk_size, 24-byte entries), 3.11 and 3.12 (log2
 * sizes, unicode or general entries) layouts a small world is built the
 * way that version lays it out: str keys, a combined and a split dict, a
 * set with deleted slots, a list, ints of one to three digits in both int
 * encodings, and an instance whose dict sits where the version keeps it.
 * Every value must be read back; then wrong types, NULL and unmapped
 * pointers must be refused; last, random bytes of the world are flipped
 * thousands of times and the readers must answer or refuse, never crash.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "python/layout.h"
#include "memory/memread.h"
#include "python/pyobj.h"
#include "python/runtime.h"

#include "fake_memory.h"

static uintptr_t new_type(const struct ps_layout *L, const char *name, unsigned long flags)
{
    uintptr_t t = alloc(1024), s = alloc(strlen(name) + 1);
    memcpy((void *)s, name, strlen(name) + 1);
    put_ptr(t + L->tp_name, s);
    memcpy((void *)(t + L->tp_flags), &flags, sizeof flags);
    return t;
}

static uintptr_t new_str(const struct ps_python *py, const char *s)
{
    const struct ps_layout *L = &py->L;
    size_t n = strlen(s);
    uintptr_t o = alloc(L->str_ascii_data + n + 1);
    put_ptr(o + L->ob_type, py->str_type);
    fill_ascii_str(L, o, s);
    return o;
}

/* A keys object of 16 slots holding n entries (a NULL key: a deleted one);
 * vals NULL: a split table's shared keys.  general: 3.11+ general entries. */
static uintptr_t new_keys(const struct ps_layout *L, int n, const uintptr_t *keys,
                          const uintptr_t *vals, int general)
{
    uintptr_t k, ents;
    size_t esize, koff;
    if (L->dk_kind == PS_DK_SIZE) {
        k = alloc(40 + 16 + 24 * 10);
        put_i64(k + L->dk_size_at, 16);
        ents = k + L->dk_indices_at + 16;
        esize = 24;
        koff = 8;
    } else {
        k = alloc(32 + 16 + 24 * 10);
        ((uint8_t *)k)[L->dk_log2_size_at] = 4;
        ((uint8_t *)k)[L->dk_log2_index_bytes_at] = 4;
        ((uint8_t *)k)[L->dk_kind_at] = (uint8_t)(vals == NULL ? 2 : general ? 0 : 1);
        ents = k + L->dk_indices_at + 16;
        esize = general ? 24 : 16;
        koff = general ? 8 : 0;
    }
    put_i64(k + L->dk_nentries_at, n);
    for (int i = 0; i < n; i++) {
        put_ptr(ents + (uintptr_t)i * esize + koff, keys[i]);
        if (vals != NULL)
            put_ptr(ents + (uintptr_t)i * esize + koff + 8, vals[i]);
    }
    return k;
}

static uintptr_t new_dict(const struct ps_python *py, uintptr_t keys, uintptr_t values)
{
    uintptr_t d = alloc(64);
    put_ptr(d + py->L.ob_type, py->dict_type);
    put_ptr(d + py->L.dict_keys, keys);
    put_ptr(d + py->L.dict_values, values);
    return d;
}

/* An int of value v (up to 3 digits of 30 bits) in the version's encoding. */
static uintptr_t new_long(const struct ps_python *py, uint64_t v)
{
    uintptr_t o = alloc(48);
    uint32_t d[3] = { (uint32_t)(v & 0x3fffffff), (uint32_t)((v >> 30) & 0x3fffffff),
                      (uint32_t)(v >> 60) };
    int64_t nd = v == 0 ? 0 : d[2] ? 3 : d[1] ? 2 : 1;
    put_ptr(o + py->L.ob_type, py->long_type);
    put_i64(o + 16, py->L.minor >= 12 ? (v == 0 ? 1 : nd << 3) : nd);
    memcpy((void *)(o + 24), d, sizeof d);
    return o;
}

struct each_ctx {
    uintptr_t keys[8], vals[8];
    int n;
};

static int collect(uintptr_t k, uintptr_t v, void *ctx)
{
    struct each_ctx *c = ctx;
    if (c->n < 8) {
        c->keys[c->n] = k;
        c->vals[c->n] = v;
        c->n++;
    }
    return 0;
}

/* Reads everything once; returns how many answers were right. */
struct world {
    uintptr_t dict, gdict, split_inst, set, list, longs[4], strs[4];
    uint64_t lv[4];
    uintptr_t obj_a, obj_b;
};

static void build(struct ps_python *py, struct world *w)
{
    const struct ps_layout *L = &py->L;
    const char *names[4] = { "_asyncio", "asyncio.tasks", "sys", "_thread_id" };
    for (int i = 0; i < 4; i++)
        w->strs[i] = new_str(py, names[i]);
    w->obj_a = alloc(64);
    w->obj_b = alloc(64);
    /* combined unicode dict: "_asyncio" -> a, (deleted), "sys" -> b */
    uintptr_t k3[3] = { w->strs[0], 0, w->strs[2] }, v3[3] = { w->obj_a, 0, w->obj_b };
    w->dict = new_dict(py, new_keys(L, 3, k3, v3, 0), 0);
    /* general-keys dict (3.11+; the same entries on 3.9) */
    uintptr_t gk[2] = { w->strs[1], w->strs[3] }, gv[2] = { w->obj_b, w->obj_a };
    w->gdict = new_dict(py, new_keys(L, 2, gk, gv, 1), 0);
    /* an instance with a split dict: "_thread_id" -> an int */
    w->lv[0] = 140245023483456ull;   /* a pthread_t-like value: 2 digits */
    w->lv[1] = 7;
    w->lv[2] = 0;
    w->lv[3] = 0xfedcba9876543210ull;
    for (int i = 0; i < 4; i++)
        w->longs[i] = new_long(py, w->lv[i]);
    uintptr_t type = new_type(L, "Loop", (1ul << 9) | (L->minor >= 11 ? 1ul << 4 : 0));
    uintptr_t sk[1] = { w->strs[3] };
    uintptr_t shared = new_keys(L, 1, sk, NULL, 0);
    uintptr_t values = alloc(16 + L->values_items);
    put_ptr(values + L->values_items, w->longs[0]);
    uintptr_t inst_mem = alloc(128), inst = inst_mem + 64;
    put_ptr(inst + L->ob_type, type);
    if (L->inst_kind == PS_INST_DICTOFFSET) {
        put_i64(type + L->tp_dictoffset, 16);
        put_ptr(inst + 16, new_dict(py, shared, values));
    } else if (L->inst_kind == PS_INST_VALUES_OR_DICT) {
        put_ptr(type + L->ht_cached_keys, shared);
        put_ptr(inst + (intptr_t)L->inst_values, values);
    } else {
        put_ptr(type + L->ht_cached_keys, shared);
        put_ptr(inst + (intptr_t)L->inst_dict, values - 1);  /* tagged: values */
    }
    w->split_inst = inst;
    /* a set of 8 slots: two elements, a dummy-like deleted slot */
    uintptr_t table = alloc(16 * 8);
    put_ptr(table + 16 * 1, w->obj_a);
    put_ptr(table + 16 * 6, w->obj_b);
    w->set = alloc(200);
    put_ptr(w->set + L->ob_type, py->set_type);
    put_i64(w->set + 24, 2);
    put_i64(w->set + 32, 7);
    put_ptr(w->set + 40, table);
    /* a list of three */
    uintptr_t items = alloc(24);
    put_ptr(items, w->obj_a);
    put_ptr(items + 8, w->obj_b);
    put_ptr(items + 16, w->obj_a);
    w->list = alloc(48);
    put_ptr(w->list + L->ob_type, py->list_type);
    put_i64(w->list + 16, 3);
    put_ptr(w->list + 24, items);
}

static void check_world(struct ps_python *py, struct world *w)
{
    uintptr_t v = 0;
    CHECK_EQ_INT(ps_dict_get(py, w->dict, "_asyncio", &v), 0);
    CHECK(v == w->obj_a);
    CHECK_EQ_INT(ps_dict_get(py, w->dict, "sys", &v), 0);
    CHECK(v == w->obj_b);
    CHECK_EQ_INT(ps_dict_get(py, w->dict, "asyncio.tasks", &v), -1);  /* absent */
    CHECK_EQ_INT(ps_dict_get(py, w->dict, "sy", &v), -1);             /* a prefix */
    CHECK_EQ_INT(ps_dict_get(py, w->gdict, "asyncio.tasks", &v), 0);
    CHECK(v == w->obj_b);
    struct each_ctx c = { .n = 0 };
    CHECK_EQ_INT(ps_dict_each(py, w->dict, 64, collect, &c), 0);
    CHECK_EQ_INT(c.n, 2);   /* the deleted entry is skipped */
    CHECK(c.keys[0] == w->strs[0] && c.vals[1] == w->obj_b);

    CHECK_EQ_INT(ps_attr_get(py, w->split_inst, "_thread_id", &v), 0);
    CHECK(v == w->longs[0]);
    CHECK_EQ_INT(ps_attr_get(py, w->split_inst, "_name", &v), -1);
    for (int i = 0; i < 4; i++) {
        uint64_t x = 1;
        CHECK_EQ_INT(ps_long_value(py, w->longs[i], &x), 0);
        CHECK(x == w->lv[i]);
    }

    uintptr_t keys[8];
    uint64_t cursor = 0;
    int64_t used = 0;
    CHECK_EQ_INT(ps_set_keys(py, w->set, keys, 8, &cursor, &used), 2);
    CHECK_EQ_INT(used, 2);
    CHECK(keys[0] == w->obj_a && keys[1] == w->obj_b);
    /* a bound of one: the cursor moves on, the next call finds the other */
    cursor = 0;
    CHECK_EQ_INT(ps_set_keys(py, w->set, keys, 1, &cursor, &used), 1);
    CHECK(keys[0] == w->obj_a);
    CHECK_EQ_INT(ps_set_keys(py, w->set, keys, 1, &cursor, &used), 1);
    CHECK(keys[0] == w->obj_b);
    CHECK_EQ_INT(ps_set_keys(py, w->set, keys, 1, &cursor, &used), 1);
    CHECK(keys[0] == w->obj_a);   /* wrapped around */

    uintptr_t items[8];
    CHECK_EQ_INT(ps_list_items(py, w->list, items, 8), 3);
    CHECK(items[2] == w->obj_a);
    CHECK_EQ_INT(ps_list_items(py, w->list, items, 2), 2);

    /* wrong types, NULL, unmapped */
    CHECK_EQ_INT(ps_dict_get(py, w->set, "sys", &v), -1);
    CHECK_EQ_INT(ps_set_keys(py, w->dict, keys, 8, &cursor, &used), -1);
    CHECK_EQ_INT(ps_list_items(py, w->set, items, 8), -1);
    CHECK_EQ_INT(ps_long_value(py, w->list, &cursor), -1);
    CHECK_EQ_INT(ps_dict_get(py, 0, "sys", &v), -1);
    CHECK_EQ_INT(ps_attr_get(py, 0, "sys", &v), -1);
}

static uintptr_t unmapped;

/* Flip random bytes of the world; every reader must return, whatever it
 * answers.  Pointers are also aimed at an unmapped page. */
static void fuzz(struct ps_python *py, struct world *w, size_t used, unsigned seed)
{
    uint8_t *copy = malloc(used);
    memcpy(copy, arena, used);
    srand(seed);
    for (int round = 0; round < 3000; round++) {
        for (int k = 0; k < 4; k++) {
            size_t at = (size_t)rand() % used;
            if (rand() % 8 == 0 && at + 8 <= used) {
                uintptr_t bad = unmapped + (uintptr_t)(rand() % 4096);
                memcpy(arena + (at & ~(size_t)7), &bad, sizeof bad);
            } else {
                arena[at] ^= (uint8_t)(1u << (rand() % 8));
            }
        }
        uintptr_t v, keys[8], items[8];
        uint64_t x, cursor = (uint64_t)rand();
        int64_t u;
        struct each_ctx c = { .n = 0 };
        (void)ps_dict_get(py, w->dict, "sys", &v);
        (void)ps_dict_get(py, w->gdict, "asyncio.tasks", &v);
        (void)ps_dict_each(py, w->dict, 64, collect, &c);
        (void)ps_attr_get(py, w->split_inst, "_thread_id", &v);
        (void)ps_set_keys(py, w->set, keys, 8, &cursor, &u);
        (void)ps_list_items(py, w->list, items, 8);
        for (int i = 0; i < 4; i++)
            (void)ps_long_value(py, w->longs[i], &x);
        if (round % 50 == 49)
            memcpy(arena, copy, used);
    }
    memcpy(arena, copy, used);
    free(copy);
}

int main(void)
{
    CHECK_EQ_INT(ps_mem_init(), 0);
    void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    unmapped = (uintptr_t)page;
    static const int minors[] = { 9, 10, 11, 12 };
    for (size_t m = 0; m < sizeof minors / sizeof minors[0]; m++) {
        struct ps_python py;
        char why[128];
        memset(&py, 0, sizeof py);
        CHECK_EQ_INT(ps_layout_legacy(minors[m], 0x03000000u | ((uint32_t)minors[m] << 16) | 0xf0,
                                      &py.L, why, sizeof why), PS_LAYOUT_OK);
        arena_used = 0;
        memset(arena, 0, sizeof arena);
        py.dict_type = new_type(&py.L, "dict", 0);
        py.set_type = new_type(&py.L, "set", 0);
        py.list_type = new_type(&py.L, "list", 0);
        py.long_type = new_type(&py.L, "int", 0);
        py.str_type = new_type(&py.L, "str", 0);
        struct world w;
        build(&py, &w);
        int before = check_failures;
        check_world(&py, &w);
        if (check_failures != before)
            fprintf(stderr, "  (layout of 3.%d)\n", minors[m]);
        fuzz(&py, &w, arena_used, (unsigned)minors[m]);
        check_world(&py, &w);   /* the world restored reads as before */
    }
    munmap(page, 4096);
    CHECK_DONE();
}
