/*
 * Unit test: thread names read from Thread objects (lib/python/threadnames.c).
 *
 * For every described layout (3.9-3.12 tables; 3.13 GIL, debug and
 * free-threaded from the real _Py_DebugOffsets fixtures) a small world is
 * built in memory the way that version lays it out: a heap type "Thread"
 * (and a subclass of it), an instance whose attributes live in each place
 * that version can keep them, a keys object holding "_name" among other
 * keys, str objects, and a frame whose first local is the instance.  The
 * name must be read back through every path; then each link is damaged in
 * turn (and, last, random bytes of the world are flipped thousands of
 * times), and the reader must answer "no name" or, when only characters of
 * the name itself changed, a valid UTF-8 string -- never crash, never read
 * out of bounds.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "debug_offsets_fixture.h"
#include "python/layout.h"
#include "memory/memread.h"
#include "python/runtime.h"
#include "python/threadnames.h"

#define HEAPTYPE (1ul << 9)
#define MANAGED_DICT (1ul << 4)
#define INLINE_VALUES (1ul << 2)

#define FAKE_ARENA_SIZE (1 << 22)
#include "fake_memory.h"

static uintptr_t cstr(const char *s)
{
    uintptr_t p = alloc(strlen(s) + 1);
    memcpy((void *)p, s, strlen(s) + 1);
    return p;
}

/* A compact str: ASCII if kind 1 and all bytes < 0x80. */
static uintptr_t new_str(const struct ps_layout *L, uintptr_t type, const void *data,
                         int64_t n, int kind)
{
    int ascii = kind == 1;
    for (int64_t i = 0; ascii && i < n; i++)
        ascii = ((const uint8_t *)data)[i] < 0x80;
    uint32_t off = ascii ? L->str_ascii_data : L->str_compact_data;
    uintptr_t o = alloc(off + (size_t)n * (size_t)kind + 4);
    put_ptr(o + L->ob_type, type);
    put_i64(o + L->str_length, n);
    uint32_t state = ((uint32_t)kind << L->st_kind_shift) | (1u << L->st_compact_bit) |
                     ((uint32_t)ascii << L->st_ascii_bit);
    if (L->st_ready_bit != 0xff)
        state |= 1u << L->st_ready_bit;
    memcpy((void *)(o + L->str_state), &state, sizeof state);
    memcpy((void *)(o + off), data, (size_t)n * (size_t)kind);
    return o;
}

static uintptr_t ascii(const struct ps_layout *L, uintptr_t type, const char *s)
{
    return new_str(L, type, s, (int64_t)strlen(s), 1);
}

static uintptr_t new_type(const struct ps_layout *L, const char *name, unsigned long flags,
                          uintptr_t base)
{
    uintptr_t t = alloc(1024);
    put_ptr(t + L->tp_name, cstr(name));
    memcpy((void *)(t + L->tp_flags), &flags, sizeof flags);
    put_ptr(t + L->tp_base, base);
    return t;
}

enum { NKEYS = 5, NAME_IX = 1 };

/* Keys object with NKEYS keys; vals != NULL stores them in the entries
 * (combined table).  general: 3.11+ DICT_KEYS_GENERAL entries. */
static uintptr_t new_keys(const struct ps_layout *L, const uintptr_t *keys, const uintptr_t *vals,
                          int general)
{
    uintptr_t k, ents;
    size_t esize;
    if (L->dk_kind == PS_DK_SIZE) {
        k = alloc(40 + 16 + 24 * 10);
        put_i64(k, 1);
        put_i64(k + 8, 16);   /* dk_size */
        put_i64(k + 24, 10 - NKEYS);
        put_i64(k + 32, NKEYS);
        ents = k + 40 + 16;
        esize = 24;
    } else {
        k = alloc(32 + 16 + 24 * 10);
        put_i64(k, 1);
        ((uint8_t *)k)[8] = 4;   /* 16 slots, 1-byte indices */
        ((uint8_t *)k)[9] = 4;
        ((uint8_t *)k)[10] = (uint8_t)(vals == NULL ? 2 : general ? 0 : 1);
        put_i64(k + 16, 10 - NKEYS);
        put_i64(k + 24, NKEYS);
        ents = k + 32 + 16;
        esize = general ? 24 : 16;
    }
    memset((void *)(ents - 16), 0xff, 16);  /* indices: not used by the reader */
    size_t koff = esize == 24 ? 8 : 0;
    for (int i = 0; i < NKEYS; i++) {
        put_ptr(ents + i * esize + koff, keys[i]);
        if (vals != NULL)
            put_ptr(ents + i * esize + koff + 8, vals[i]);
    }
    return k;
}

static uintptr_t new_values(const struct ps_layout *L, const uintptr_t *vals)
{
    uintptr_t v = alloc(L->values_items + 8 * NKEYS);
    for (int i = 0; i < NKEYS; i++)
        put_ptr(v + L->values_items + 8 * (uintptr_t)i, vals[i]);
    if (L->values_valid != PS_NOFIELD)
        ((uint8_t *)v)[L->values_valid] = 1;
    return v;
}

static uintptr_t new_dict(const struct ps_layout *L, uintptr_t dict_type, uintptr_t keys,
                          uintptr_t values)
{
    uintptr_t d = alloc(64 + L->ob_type);
    put_ptr(d + L->ob_type, dict_type);
    put_ptr(d + L->dict_keys, keys);
    put_ptr(d + L->dict_values, values);
    return d;
}

struct world {
    uintptr_t frame, self, type, str_type, dict_type, name_key, name_val, keys, dict, values;
    size_t start, end;   /* arena range it occupies */
};

/*
 * Builds a Thread (or subclass) instance named name.  use_dict: attributes
 * in a dict object (combined unless split_dict) rather than in the
 * version's values-without-dict form (3.9/3.10 have only dicts: there
 * use_dict selects combined vs split).
 */
static void build(const struct ps_layout *L, struct world *w, const char *name, int subclass,
                  int use_dict, int split_dict)
{
    memset(w, 0, sizeof *w);
    w->start = arena_used;
    uintptr_t object_type = new_type(L, "object", 0, 0);
    w->str_type = new_type(L, "str", 0, object_type);
    uintptr_t dict_type = w->dict_type = new_type(L, "dict", 0, object_type);
    uintptr_t int_type = new_type(L, "int", 0, object_type);

    static const char *names[NKEYS] = { "_target", "_name", "_args", "_kwargs", "_daemonic" };
    uintptr_t keys[NKEYS], vals[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        keys[i] = ascii(L, w->str_type, names[i]);
        vals[i] = alloc(32);
        put_ptr(vals[i] + L->ob_type, int_type);
    }
    w->name_key = keys[NAME_IX];
    w->name_val = vals[NAME_IX] = ascii(L, w->str_type, name);

    unsigned long flags = HEAPTYPE;
    if (L->minor >= 11)
        flags |= MANAGED_DICT;
    if (L->inst_kind == PS_INST_INLINE)
        flags |= INLINE_VALUES;
    uintptr_t thread = new_type(L, "Thread", flags, object_type);
    w->type = subclass ? new_type(L, "MyThread", flags, thread) : thread;
    uintptr_t shared = new_keys(L, keys, NULL, 0);
    put_ptr(w->type + L->ht_cached_keys, shared);
    int64_t header = (int64_t)L->ob_type + 8;
    put_i64(w->type + L->tp_basicsize, L->inst_kind == PS_INST_DICTOFFSET ? header + 16 : header);
    put_i64(w->type + L->tp_dictoffset, L->inst_kind == PS_INST_DICTOFFSET ? header : -1);

    /* Instance: 32 bytes of pre-header, the object, then room for inline
     * values (3.13). */
    uintptr_t base = alloc(32 + (size_t)header + 16 + L->values_items + 8 * NKEYS);
    w->self = base + 32;
    put_ptr(w->self + L->ob_type, w->type);

    int dict_mode = use_dict || L->inst_kind == PS_INST_DICTOFFSET;
    if (dict_mode) {
        int split = L->inst_kind == PS_INST_DICTOFFSET ? !use_dict : split_dict;
        if (split) {
            w->keys = shared;
            w->values = new_values(L, vals);
            w->dict = new_dict(L, dict_type, shared, w->values);
        } else {
            w->keys = new_keys(L, keys, vals, 0);
            w->dict = new_dict(L, dict_type, w->keys, 0);
        }
    } else {
        w->keys = shared;
    }
    switch (L->inst_kind) {
    case PS_INST_DICTOFFSET:
        put_ptr(w->self + (uintptr_t)header, w->dict);
        break;
    case PS_INST_VALUES_OR_DICT:
        if (dict_mode)
            put_ptr(w->self + (intptr_t)L->inst_dict, w->dict);
        else
            put_ptr(w->self + (intptr_t)L->inst_values, w->values = new_values(L, vals));
        break;
    case PS_INST_TAGGED:
        if (dict_mode)
            put_ptr(w->self + (intptr_t)L->inst_dict, w->dict);
        else
            put_ptr(w->self + (intptr_t)L->inst_dict, (w->values = new_values(L, vals)) - 1);
        break;
    case PS_INST_INLINE: {
        uintptr_t inl = w->self + (uintptr_t)header;
        for (int i = 0; i < NKEYS; i++)
            put_ptr(inl + L->values_items + 8 * (uintptr_t)i, vals[i]);
        if (dict_mode) {
            put_ptr(w->self + (intptr_t)L->inst_dict, w->dict);  /* valid stays 0 */
        } else {
            ((uint8_t *)inl)[L->values_valid] = 1;
            w->values = inl;
        }
        break;
    }
    default:
        abort();
    }

    /* The frame: localsplus[0] is self (3.14+ would tag it: low bit set). */
    w->frame = alloc(L->fr_localsplus + 64);
    put_ptr(w->frame + L->fr_localsplus, w->self | (L->code_tag_mask ? 1 : 0));
    w->end = arena_used;
}

/* The interpreter's str and dict types are this world's (the reader
 * recognises them by address, as it does PyUnicode_Type and PyDict_Type). */
static int read_name(const struct ps_python *py, const struct world *w, char *out, size_t len)
{
    struct ps_python p = *py;
    p.str_type = w->str_type;
    p.dict_type = w->dict_type;
    return ps_thread_py_name(&p, w->frame, out, len);
}

/* Returns -1 and leaves out empty. */
#define CHECK_NONE(py, w) do { \
    char o_[64] = "x"; \
    CHECK_EQ_INT(read_name(py, w, o_, sizeof o_), -1); \
    CHECK_EQ_STR(o_, ""); } while (0)

static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p & 0xE0) == 0xC0 ? 1 : (*p & 0xF0) == 0xE0 ? 2
                : (*p & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0)
            return 0;
        p++;
        for (int i = 0; i < n; i++, p++)
            if ((*p & 0xC0) != 0x80)
                return 0;
    }
    return 1;
}

static void check_paths(const struct ps_python *py)
{
    const struct ps_layout *L = &py->L;
    struct world w;
    char out[64];

    /* Every place the attributes can be, plain Thread and subclass. */
    for (int sub = 0; sub <= 1; sub++) {
        for (int mode = 0; mode < 3; mode++) {
            build(L, &w, "worker-7", sub, mode > 0, mode == 2);
            int n = read_name(py, &w, out, sizeof out);
            if (n != 8)
                fprintf(stderr, "3.%d%s: subclass %d mode %d failed\n", L->minor,
                        L->free_threaded ? "t" : "", sub, mode);
            CHECK_EQ_INT(n, 8);
            CHECK_EQ_STR(out, "worker-7");
        }
    }

    /* 3.11+ combined dicts with DICT_KEYS_GENERAL entries (non-str key seen). */
    if (L->dk_kind == PS_DK_LOG2) {
        build(L, &w, "general", 0, 1, 0);
        uintptr_t keys[NKEYS], vals[NKEYS];
        uintptr_t ents = w.keys + 32 + 16;
        for (int i = 0; i < NKEYS; i++) {
            memcpy(&keys[i], (void *)(ents + 16 * (uintptr_t)i), 8);
            memcpy(&vals[i], (void *)(ents + 16 * (uintptr_t)i + 8), 8);
        }
        put_ptr(w.dict + L->dict_keys, new_keys(L, keys, vals, 1));
        CHECK_EQ_INT(read_name(py, &w, out, sizeof out), 7);
        CHECK_EQ_STR(out, "general");
    }

    /* Non-ASCII names; a long one is cut at a character boundary. */
    build(L, &w, "x", 1, 0, 0);
    const uint16_t ucs2[] = { 'w', 0xF6, 'r', 'k', 0x3BB, ';', 0x540D };   /* wörkλ;名 */
    uintptr_t s = new_str(L, w.str_type, ucs2, 7, 2);
    if (w.values != 0)
        put_ptr(w.values + L->values_items + 8 * NAME_IX, s);
    else
        put_ptr(w.keys + (L->dk_kind == PS_DK_SIZE ? 56 + 24 * NAME_IX + 16 : 48 + 16 * NAME_IX + 8), s);
    CHECK(read_name(py, &w, out, sizeof out) > 0);
    CHECK_EQ_STR(out, "w\xC3\xB6rk\xCE\xBB;\xE5\x90\x8D");
    uint16_t lng[40];
    for (int i = 0; i < 40; i++)
        lng[i] = 0x540D;   /* 3 bytes each in UTF-8: 120 bytes */
    s = new_str(L, w.str_type, lng, 40, 2);
    if (w.values != 0)
        put_ptr(w.values + L->values_items + 8 * NAME_IX, s);
    else
        put_ptr(w.keys + (L->dk_kind == PS_DK_SIZE ? 56 + 24 * NAME_IX + 16 : 48 + 16 * NAME_IX + 8), s);
    CHECK_EQ_INT(read_name(py, &w, out, sizeof out), 63);   /* 21 whole characters */
    CHECK(valid_utf8(out));
    CHECK_EQ_INT(read_name(py, &w, out, 5), 3);
    CHECK_EQ_STR(out, "\xE5\x90\x8D");
}

/* Each damaged link means no name. */
static void check_damage(const struct ps_python *py)
{
    const struct ps_layout *L = &py->L;
    struct world w;
    unsigned long fl;

    build(L, &w, "worker-7", 1, 0, 0);
    CHECK_EQ_INT(ps_thread_py_name(py, 0, (char[8]){0}, 8), -1);

    put_ptr(w.frame + L->fr_localsplus, 0);
    CHECK_NONE(py, &w);
    put_ptr(w.frame + L->fr_localsplus, w.self + 4);   /* misaligned */
    CHECK_NONE(py, &w);

    /* Unreadable memory anywhere on the way. */
    uint8_t *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED);
    put_ptr(w.frame + L->fr_localsplus, (uintptr_t)none);
    CHECK_NONE(py, &w);
    build(L, &w, "worker-7", 0, 0, 0);
    put_ptr(w.type + L->ht_cached_keys, (uintptr_t)none);
    if (L->inst_kind != PS_INST_DICTOFFSET)
        CHECK_NONE(py, &w);

    /* Not a Thread: a static type, or a heap type of another name. */
    build(L, &w, "worker-7", 0, 0, 0);
    memcpy(&fl, (void *)(w.type + L->tp_flags), sizeof fl);
    fl &= ~HEAPTYPE;
    memcpy((void *)(w.type + L->tp_flags), &fl, sizeof fl);
    CHECK_NONE(py, &w);
    build(L, &w, "worker-7", 0, 0, 0);
    put_ptr(w.type + L->tp_name, cstr("Threads"));
    CHECK_NONE(py, &w);
    build(L, &w, "worker-7", 1, 0, 0);   /* subclass whose base is no Thread */
    uintptr_t base;
    memcpy(&base, (void *)(w.type + L->tp_base), sizeof base);
    put_ptr(base + L->tp_name, cstr("Thraed"));
    CHECK_NONE(py, &w);
    build(L, &w, "worker-7", 1, 0, 0);   /* a cycle of bases */
    put_ptr(w.type + L->tp_name, cstr("A"));
    memcpy(&base, (void *)(w.type + L->tp_base), sizeof base);
    put_ptr(base + L->tp_name, cstr("B"));
    put_ptr(base + L->tp_base, w.type);
    CHECK_NONE(py, &w);

    if (L->minor >= 11) {
        /* The flags say the instance has no managed dict. */
        build(L, &w, "worker-7", 0, 0, 0);
        memcpy(&fl, (void *)(w.type + L->tp_flags), sizeof fl);
        fl &= ~MANAGED_DICT;
        memcpy((void *)(w.type + L->tp_flags), &fl, sizeof fl);
        CHECK_NONE(py, &w);
    } else {
        build(L, &w, "worker-7", 0, 0, 0);
        put_i64(w.type + L->tp_dictoffset, -8);   /* var-sized objects: refused */
        CHECK_NONE(py, &w);
    }

    /* A dict that is not a dict (another type), or has no keys. */
    build(L, &w, "worker-7", 0, 1, 0);
    put_ptr(w.dict + L->ob_type, w.str_type);
    CHECK_NONE(py, &w);
    build(L, &w, "worker-7", 0, 1, 0);
    put_ptr(w.dict + L->dict_keys, 0);
    CHECK_NONE(py, &w);

    /* Implausible keys objects. */
    for (int c = 0; c < 4; c++) {
        build(L, &w, "worker-7", 0, 1, c >= 2);
        if (L->dk_kind == PS_DK_SIZE) {
            if (c == 0) put_i64(w.keys + 8, 24);           /* size not a power of two */
            if (c == 1) put_i64(w.keys + 32, 1000);        /* more entries than fit */
            if (c == 2) put_i64(w.keys + 32, -1);
            if (c == 3) put_i64(w.keys + 8, 1ll << 40);
        } else {
            if (c == 0) ((uint8_t *)w.keys)[9] = 2;        /* index bytes < slots */
            if (c == 1) put_i64(w.keys + 24, 1000);
            if (c == 2) ((uint8_t *)w.keys)[10] = 1;       /* values but not split keys */
            if (c == 3) ((uint8_t *)w.keys)[10] = 7;       /* no such kind */
        }
        CHECK_NONE(py, &w);
    }

    /* No "_name" key; a NULL value; a value that is not a str; a str that
     * does not decode. */
    char out[64];
    build(L, &w, "worker-7", 0, 0, 0);
    CHECK_EQ_INT(read_name(py, &w, out, sizeof out), 8);
    memcpy((void *)(w.name_key + L->str_ascii_data), "_nama", 5);
    CHECK_NONE(py, &w);   /* the key is compared as a string each time */
    memcpy((void *)(w.name_key + L->str_ascii_data), "_name", 5);
    CHECK_EQ_INT(read_name(py, &w, out, sizeof out), 8);
    for (int c = 0; c < 3; c++) {
        build(L, &w, "worker-7", 0, 0, 0);
        uintptr_t slot = w.values != 0 ? w.values + L->values_items + 8 * NAME_IX : 0;
        if (slot == 0) {   /* 3.9/3.10 split dict */
            uintptr_t v;
            memcpy(&v, (void *)(w.dict + L->dict_values), sizeof v);
            slot = v + L->values_items + 8 * NAME_IX;
        }
        if (c == 0)
            put_ptr(slot, 0);
        if (c == 1)
            put_ptr(w.name_val + L->ob_type, w.type);
        if (c == 2)
            put_i64(w.name_val + L->str_length, -5);
        CHECK_NONE(py, &w);
    }

    /* Layout not described: never read. */
    struct ps_python off = *py;
    off.L.inst_kind = PS_INST_NONE;
    build(L, &w, "worker-7", 0, 0, 0);
    CHECK_NONE(&off, &w);
    munmap(none, 4096);
}

/* Random damage: never a crash, only "no name" or valid UTF-8. */
static void check_fuzz(const struct ps_python *py, unsigned seed)
{
    const struct ps_layout *L = &py->L;
    struct world w;
    char out[64];
    int named = 0, none = 0;
    srand(seed);
    for (int round = 0; round < 3000; round++) {
        size_t mark = arena_used;
        build(L, &w, "worker-7", round & 1, (round >> 1) % 3 > 0, (round >> 1) % 3 == 2);
        size_t span = w.end - w.start;
        for (int k = 0; k < 1 + rand() % 4; k++) {
            size_t at = w.start + (size_t)rand() % span;
            arena[at] ^= (uint8_t)(1u << (rand() % 8));
        }
        int n = read_name(py, &w, out, sizeof out);
        if (n < 0) {
            CHECK_EQ_STR(out, "");
            none++;
        } else {
            CHECK((size_t)n == strlen(out) && n < 64 && valid_utf8(out));
            named++;
        }
        arena_used = mark;
    }
    CHECK(named > 0 && none > 0);
}


static void check_layout_313(struct ps_python *py)
{
    const struct ps_layout *L = &py->L;
    int d = L->free_threaded ? 16 : 0;
    CHECK_EQ_INT(L->inst_kind, PS_INST_INLINE);
    CHECK_EQ_INT(L->dk_kind, PS_DK_LOG2);
    CHECK_EQ_INT(L->fr_localsplus, 72);
    CHECK_EQ_INT(L->tp_name, 24 + d);
    CHECK_EQ_INT(L->tp_basicsize, 32 + d);
    CHECK_EQ_INT(L->tp_flags, 168 + d);
    CHECK_EQ_INT(L->tp_base, 256 + d);
    CHECK_EQ_INT(L->ht_cached_keys, 880 + d);
    CHECK_EQ_INT(L->inst_dict, L->free_threaded ? -8 : -24);
    CHECK_EQ_INT(L->dict_keys, 32 + d);
    CHECK_EQ_INT(L->dict_values, 40 + d);
    CHECK_EQ_INT(L->values_items, 8);
    CHECK_EQ_INT(L->values_valid, 3);
}

/* A 3.13 fixture: thread names read through its layout. */
static void check_fixture_313(struct fixture *f, void *ctx)
{
    struct ps_python *py = ctx;
    char why[256];
    CHECK_EQ_INT(ps_layout_from_debug_offsets(f->block, sizeof f->block, f->version, &py->L,
                                              why, sizeof why), PS_LAYOUT_OK);
    check_layout_313(py);
    arena_used = 0;
    check_paths(py);
    check_damage(py);
    check_fuzz(py, 13);
    /* A block whose type offsets are not the ones the constants were
     * taken with: names off, the layout itself still fine. */
    uint64_t bad = 32;
    memcpy(f->block + 376, &bad, sizeof bad);   /* type_object.tp_name */
    CHECK_EQ_INT(ps_layout_from_debug_offsets(f->block, sizeof f->block, f->version, &py->L,
                                              why, sizeof why), PS_LAYOUT_OK);
    CHECK_EQ_INT(py->L.inst_kind, PS_INST_NONE);
}

int main(void)
{
    struct ps_python py;
    char why[256];

    CHECK_EQ_INT(ps_mem_init(), 0);
    memset(&py, 0, sizeof py);

    CHECK(ps_is_thread_bootstrap("_bootstrap_inner", "/usr/lib/python3.9/threading.py"));
    CHECK(ps_is_thread_bootstrap("Thread._bootstrap_inner", "threading.py"));
    CHECK(!ps_is_thread_bootstrap("Thread._bootstrap", "/usr/lib/python3.12/threading.py"));
    CHECK(!ps_is_thread_bootstrap("_bootstrap_inner", "/srv/app/mythreading.py"));
    CHECK(!ps_is_thread_bootstrap("Worker._bootstrap_inner", "/usr/lib/python3.12/threading.py"));
    CHECK(!ps_is_thread_bootstrap("_bootstrap_inner", "threading.pyc"));

    for (int minor = 9; minor <= 12; minor++) {
        CHECK_EQ_INT(ps_layout_legacy(minor, 0x030000F0u | ((unsigned)minor << 16), &py.L, why,
                                      sizeof why), PS_LAYOUT_OK);
        CHECK_EQ_INT(py.L.inst_kind, minor <= 10 ? PS_INST_DICTOFFSET
                                     : minor == 11 ? PS_INST_VALUES_OR_DICT : PS_INST_TAGGED);
        arena_used = 0;
        check_paths(&py);
        check_damage(&py);
        check_fuzz(&py, (unsigned)minor);
    }

    int seen = each_fixture("debug_offsets-3.13", check_fixture_313, &py);
    CHECK(seen >= 2);   /* GIL and free-threaded */
    CHECK_DONE();
}
