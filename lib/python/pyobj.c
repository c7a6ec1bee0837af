/*
 * pyobj.c - builtin containers read from raw memory (see pyobj.h).
 *
 * Dicts.  A dict object points to its keys object and, for a split table,
 * to a separate values array; a combined table keeps the values in its
 * entries.  The keys object's header and entry sizes change in 3.11
 * (struct ps_layout dk_kind, the same data threadnames.c reads instance
 * attributes with).  Keys are compared as strings: hashes are randomised
 * per process.
 *
 * Instance attributes.  Where a Python object keeps its __dict__ changed
 * in every version 3.9-3.13 (layout.h, enum ps_inst_kind): a dict at
 * tp_dictoffset, a values array or dict pointer before the object, or
 * values inline after it.
 *
 * Sets: mask and table pointer; a slot's key is NULL (empty), the dummy
 * (deleted: not an object of any type we accept) or the element.
 */
#include <string.h>

#include "python/layout.h"
#include "memory/memread.h"
#include "python/pyobj.h"
#include "python/pystr.h"

#define TPF_INLINE_VALUES (1ul << 2)  /* 3.13+ */
#define TPF_MANAGED_DICT  (1ul << 4)  /* 3.11+ */
#define TPF_HEAPTYPE      (1ul << 9)

#define MAX_DICT 65536      /* entries of a dict we read (sys.modules has ~1000) */
#define CHUNK 128           /* entries copied per read */
#define MAX_SET (1 << 22)   /* table slots */

uintptr_t ps_obj_type(const struct ps_python *py, uintptr_t obj)
{
    uintptr_t t;
    if (!ps_obj_ok(obj) || ps_read_ptr(obj + py->L.ob_type, &t) != 0 || !ps_obj_ok(t))
        return 0;
    return t;
}

int ps_type_named(const struct ps_python *py, uintptr_t type, const char *name)
{
    char buf[64];
    uintptr_t p;
    size_t n = strlen(name) + 1;
    if (n > sizeof buf || !ps_obj_ok(type) || ps_read_ptr(type + py->L.tp_name, &p) != 0 ||
        p == 0 || ps_read(buf, p, n) != 0)
        return 0;
    return memcmp(buf, name, n) == 0;
}

int ps_type_derives(const struct ps_python *py, uintptr_t type, uintptr_t base)
{
    for (int depth = 0; depth < 16 && ps_obj_ok(type); depth++) {
        if (type == base)
            return 1;
        if (ps_read_ptr(type + py->L.tp_base, &type) != 0)
            return 0;
    }
    return 0;
}

/* Keys object and values array (0 for a combined table) of a table. */
struct table {
    uintptr_t keys;
    uintptr_t values;
};

static int dict_table(const struct ps_python *py, uintptr_t dict, struct table *tb)
{
    const struct ps_layout *L = &py->L;
    uintptr_t keys, values;
    if (ps_obj_type(py, dict) != py->dict_type || py->dict_type == 0 ||
        ps_read_ptr(dict + L->dict_keys, &keys) != 0 ||
        ps_read_ptr(dict + L->dict_values, &values) != 0 || !ps_obj_ok(keys) ||
        (values != 0 && !ps_obj_ok(values)))
        return -1;
    tb->keys = keys;
    tb->values = values != 0 ? values + L->values_items : 0;
    return 0;
}

/* Where a keys object's entries are, how big each is and how many. */
struct entries {
    uintptr_t first;
    size_t esize, koff, voff;
    int64_t n;
};

static int keys_entries(const struct ps_layout *L, const struct table *tb, struct entries *e)
{
    uint8_t hdr[48];
    if (ps_read(hdr, tb->keys, sizeof hdr) != 0)
        return -1;
    memcpy(&e->n, hdr + L->dk_nentries_at, sizeof e->n);
    if (L->dk_kind == PS_DK_SIZE) {
        int64_t size;
        memcpy(&size, hdr + L->dk_size_at, sizeof size);
        if (size < 8 || size > (1 << 24) || (size & (size - 1)) != 0 || e->n > (2 * size) / 3)
            return -1;
        uintptr_t index_size = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffff ? 4 : 8;
        e->first = tb->keys + L->dk_indices_at + (uintptr_t)size * index_size;
        e->esize = 24;
        e->koff = 8;
        e->voff = 16;
    } else {
        unsigned lsize = hdr[L->dk_log2_size_at], lbytes = hdr[L->dk_log2_index_bytes_at];
        unsigned kind = hdr[L->dk_kind_at];
        if (lsize < 3 || lsize > 30 || lbytes < lsize || lbytes > lsize + 3 || kind > 2 ||
            e->n > (int64_t)((2ull << lsize) / 3) || (tb->values != 0 && kind != 2))
            return -1;
        e->first = tb->keys + L->dk_indices_at + ((uintptr_t)1 << lbytes);
        e->esize = kind == 0 ? 24 : 16;
        e->koff = kind == 0 ? 8 : 0;
        e->voff = e->koff + 8;
    }
    if (e->n < 0 || e->n > MAX_DICT)
        return -1;
    return 0;
}

/* Visits the table's items; each returns nonzero to stop.  0 or -1. */
static int table_each(const struct ps_python *py, const struct table *tb, int64_t max,
                      int (*each)(uintptr_t k, uintptr_t v, int64_t ix, void *ctx), void *ctx)
{
    struct entries e;
    uint8_t buf[CHUNK * 24];
    if (keys_entries(&py->L, tb, &e) != 0)
        return -1;
    int64_t n = e.n < max ? e.n : max;
    for (int64_t at = 0; at < n; at += CHUNK) {
        int64_t m = n - at < CHUNK ? n - at : CHUNK;
        if (ps_read(buf, e.first + (uintptr_t)at * e.esize, (size_t)m * e.esize) != 0)
            return -1;
        for (int64_t i = 0; i < m; i++) {
            uintptr_t k, v = 0;
            memcpy(&k, buf + i * e.esize + e.koff, sizeof k);
            if (k == 0)
                continue;  /* deleted entry */
            if (tb->values != 0) {
                if (ps_read_ptr(tb->values + 8 * (uintptr_t)(at + i), &v) != 0)
                    return -1;
            } else {
                memcpy(&v, buf + i * e.esize + e.voff, sizeof v);
            }
            if (v != 0 && each(k, v, at + i, ctx))
                return 0;
        }
    }
    return 0;
}

/* Looking up a str key: the key's bytes, and the value found. */
struct find {
    const struct ps_python *py;
    const char *key;
    size_t len;
    uintptr_t value;
    int found;
};

static int find_each(uintptr_t k, uintptr_t v, int64_t ix, void *ctx)
{
    struct find *f = ctx;
    const struct ps_layout *L = &f->py->L;
    int64_t len;
    char buf[128];
    (void)ix;
    /* The length first: one read rules out nearly every key. */
    if (ps_obj_type(f->py, k) != f->py->str_type ||
        ps_read(&len, k + L->str_length, sizeof len) != 0 || len != (int64_t)f->len)
        return 0;
    if (ps_str_read(L, k, buf, sizeof buf) != (int)f->len || memcmp(buf, f->key, f->len) != 0)
        return 0;
    f->value = v;
    f->found = 1;
    return 1;
}

static int table_get(const struct ps_python *py, const struct table *tb, const char *key,
                     uintptr_t *value)
{
    struct find f = { py, key, strlen(key), 0, 0 };
    if (f.len >= 128 || py->str_type == 0 || table_each(py, tb, MAX_DICT, find_each, &f) != 0 ||
        !f.found)
        return -1;
    *value = f.value;
    return 0;
}

int64_t ps_dict_entries(const struct ps_python *py, uintptr_t dict)
{
    struct table tb;
    struct entries e;
    if (dict_table(py, dict, &tb) != 0 || keys_entries(&py->L, &tb, &e) != 0)
        return -1;
    return e.n;
}

int ps_dict_get(const struct ps_python *py, uintptr_t dict, const char *key, uintptr_t *value)
{
    struct table tb;
    if (dict_table(py, dict, &tb) != 0)
        return -1;
    return table_get(py, &tb, key, value);
}

struct each_adapter {
    int (*each)(uintptr_t key, uintptr_t value, void *ctx);
    void *ctx;
};

static int adapt(uintptr_t k, uintptr_t v, int64_t ix, void *ctx)
{
    struct each_adapter *a = ctx;
    (void)ix;
    return a->each(k, v, a->ctx);
}

int ps_dict_each(const struct ps_python *py, uintptr_t dict, int max,
                 int (*each)(uintptr_t key, uintptr_t value, void *ctx), void *ctx)
{
    struct table tb;
    struct each_adapter a = { each, ctx };
    if (dict_table(py, dict, &tb) != 0)
        return -1;
    return table_each(py, &tb, max, adapt, &a);
}

/* The split table of an instance whose values use the type's shared keys. */
static int shared_table(const struct ps_layout *L, uintptr_t type, uintptr_t values,
                        struct table *tb)
{
    uintptr_t keys;
    if (!ps_obj_ok(values) || ps_read_ptr(type + L->ht_cached_keys, &keys) != 0 ||
        !ps_obj_ok(keys))
        return -1;
    tb->keys = keys;
    tb->values = values + L->values_items;
    return 0;
}

/* Where obj's attributes are (see the file comment). */
static int inst_table(const struct ps_python *py, uintptr_t obj, struct table *tb)
{
    const struct ps_layout *L = &py->L;
    uintptr_t type = ps_obj_type(py, obj), p;
    unsigned long flags;
    if (type == 0 || ps_read(&flags, type + L->tp_flags, sizeof flags) != 0)
        return -1;
    /* 3.9/3.10 instances, and on 3.11/3.12 those of Python subclasses of
     * C types with a dict slot (asyncio's Future): a dict pointer at
     * tp_dictoffset. */
    if (L->inst_kind == PS_INST_DICTOFFSET || !(flags & TPF_MANAGED_DICT)) {
        int64_t off;
        if (ps_read(&off, type + L->tp_dictoffset, sizeof off) != 0 || off <= 0 || off > 4096 ||
            (off & 7) || ps_read_ptr(obj + (uintptr_t)off, &p) != 0)
            return -1;
        return dict_table(py, p, tb);
    }
    switch (L->inst_kind) {
    case PS_INST_VALUES_OR_DICT:
        if (ps_read_ptr(obj + (intptr_t)L->inst_values, &p) != 0)
            return -1;
        if (p != 0)
            return shared_table(L, type, p, tb);
        break;
    case PS_INST_TAGGED:
        if (ps_read_ptr(obj + (intptr_t)L->inst_dict, &p) != 0)
            return -1;
        if (p & 1)
            return shared_table(L, type, p + 1, tb);
        return dict_table(py, p, tb);
    case PS_INST_INLINE:
        if (flags & TPF_INLINE_VALUES) {
            int64_t basic;
            uint8_t valid;
            if (ps_read(&basic, type + L->tp_basicsize, sizeof basic) != 0 || basic < 16 ||
                basic > 4096 || (basic & 7) ||
                ps_read(&valid, obj + (uintptr_t)basic + L->values_valid, 1) != 0)
                return -1;
            if (valid)
                return shared_table(L, type, obj + (uintptr_t)basic, tb);
        }
        break;
    default:
        return -1;
    }
    if (ps_read_ptr(obj + (intptr_t)L->inst_dict, &p) != 0)
        return -1;
    return dict_table(py, p, tb);
}

int ps_attr_get(const struct ps_python *py, uintptr_t obj, const char *name, uintptr_t *value)
{
    struct table tb;
    if (py->L.inst_kind == PS_INST_NONE || inst_table(py, obj, &tb) != 0)
        return -1;
    return table_get(py, &tb, name, value);
}

int ps_set_keys(const struct ps_python *py, uintptr_t set, uintptr_t *keys, int max,
                uint64_t *cursor, int64_t *used)
{
    /* PySetObject: fill, used, mask, table after the header (the same
     * 3.9-3.15); a slot is { key, hash }. */
    uint8_t hdr[64];
    uint32_t h = ps_ob_head(&py->L);
    uintptr_t table;
    int64_t mask;
    uintptr_t buf[2 * CHUNK];
    if (h + 32 > sizeof hdr || ps_obj_type(py, set) != py->set_type || py->set_type == 0 ||
        ps_read(hdr, set, h + 32) != 0)
        return -1;
    memcpy(used, hdr + h + 8, sizeof *used);
    memcpy(&mask, hdr + h + 16, sizeof mask);
    memcpy(&table, hdr + h + 24, sizeof table);
    if (mask < 7 || mask >= MAX_SET || ((mask + 1) & mask) != 0 || !ps_obj_ok(table) ||
        *used < 0 || *used > mask + 1)
        return -1;
    uint64_t slots = (uint64_t)mask + 1, at = *cursor % slots, seen = 0;
    int n = 0;
    while (seen < slots && n < max) {
        uint64_t m = slots - at < CHUNK ? slots - at : CHUNK;
        if (ps_read(buf, table + 16 * at, 16 * m) != 0)
            return -1;
        uint64_t i;
        for (i = 0; i < m && n < max; i++)
            if (buf[2 * i] != 0)
                keys[n++] = buf[2 * i];
        seen += i;
        at = (at + i) % slots;
    }
    *cursor = at;
    return n;
}

int ps_list_items(const struct ps_python *py, uintptr_t list, uintptr_t *items, int max)
{
    int64_t size;
    uintptr_t arr;
    uint32_t h = ps_ob_head(&py->L);   /* ob_size, then ob_item */
    if (ps_obj_type(py, list) != py->list_type || py->list_type == 0 ||
        ps_read(&size, list + h, sizeof size) != 0 || ps_read_ptr(list + h + 8, &arr) != 0 ||
        size < 0 || (size > 0 && !ps_obj_ok(arr)))
        return -1;
    int n = size < max ? (int)size : max;
    if (n > 0 && ps_read(items, arr, (size_t)n * sizeof *items) != 0)
        return -1;
    return n;
}

int ps_long_value(const struct ps_python *py, uintptr_t obj, uint64_t *v)
{
    int64_t tag;
    uint32_t digit[3] = { 0, 0, 0 };
    int64_t nd;
    uint32_t h = ps_ob_head(&py->L);   /* ob_size or lv_tag, then the digits */
    if (ps_obj_type(py, obj) != py->long_type || py->long_type == 0 ||
        ps_read(&tag, obj + h, sizeof tag) != 0)
        return -1;
    if (py->L.minor >= 12) {
        /* lv_tag: digit count << 3, sign in the low bits (1 zero, 2 negative) */
        if ((tag & 3) == 2)
            return -1;
        nd = (tag & 3) == 1 ? 0 : (int64_t)((uint64_t)tag >> 3);
    } else {
        nd = tag;  /* ob_size: negative for a negative number */
    }
    if (nd < 0 || nd > 3 || (nd > 0 && ps_read(digit, obj + h + 8, (size_t)nd * 4) != 0))
        return -1;
    uint64_t x = (uint64_t)digit[0] | ((uint64_t)digit[1] << 30) | ((uint64_t)digit[2] << 60);
    if (nd == 3 && digit[2] > 15)
        return -1;
    *v = x;
    return 0;
}
