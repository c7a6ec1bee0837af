/*
 * threadnames.c - a threading.Thread's name, read from raw memory.
 *
 * Why this route.  Every thread that threading starts runs
 * Thread._bootstrap -> Thread._bootstrap_inner at the root of its stack,
 * and _bootstrap_inner's first local is `self`, the Thread object.  The
 * walker already resolves every frame's code object, so the code cache
 * marks _bootstrap_inner once (ps_is_thread_bootstrap) and the walk hands
 * back that frame's address at no extra cost per sample.  The other route,
 * threading._active found through sys.modules, needs a module dict walk and
 * a dict keyed by ints on top of everything here, and still has to tell
 * which entry is which OS thread.
 *
 * From the object to the name (each version's layout is data in
 * struct ps_layout; PS_INST_NONE means "not described, no names"):
 *   self      frame localsplus[0] (3.14+ would tag it: low bits masked)
 *   type      ob_type; it or a base must be a heap type named "Thread"
 *   attrs     3.9/3.10  dict at tp_dictoffset
 *             3.11      values pointer before the object (split table
 *                       keyed by the type's ht_cached_keys), else the
 *                       managed dict pointer
 *             3.12      one pointer before the object: low bit set means
 *                       values (pointer + 1), else the dict
 *             3.13      inline values right after the object while their
 *                       `valid` flag is set, else the managed dict
 *             a dict is split (ma_values) or combined (values in entries)
 *   "_name"   found by scanning the keys object's entries and comparing
 *             key strings (hashes are randomised per process); the address
 *             of the interned "_name" is remembered after the first find,
 *             so later lookups read one key string, not one per attribute
 *   value     must have the key's type (str) and decode as a str without
 *             NULs
 *
 * The thread runs on while we read, so every pointer, size and count is
 * checked before use, and any failure means "no name", never a guess.
 */
#include <string.h>

#include "memread.h"
#include "pystr.h"
#include "threadnames.h"

/* Type flag bits, the same in every version that has them. */
#define TPF_INLINE_VALUES (1ul << 2)  /* 3.13+ */
#define TPF_MANAGED_DICT  (1ul << 4)  /* 3.11+ */
#define TPF_HEAPTYPE      (1ul << 9)

#define MAX_ENTRIES 256   /* a Thread has about 13 attributes */
#define MAX_BASES 32
#define NAME_BUF 1024     /* names longer than this (UTF-8 bytes) are not shown */

/* Where an instance's attributes are: keys object, and the values array of
 * a split table (0 for a combined table, whose values sit in the entries). */
struct attrs {
    uintptr_t keys;
    uintptr_t values;
};

/* Address of the interned "_name" key, once seen (sampler thread only). */
static uintptr_t name_key;

int ps_is_thread_bootstrap(const char *name, const char *file)
{
    static const char tail[] = "threading.py";
    size_t n = strlen(file), t = sizeof tail - 1;
    if (n < t || strcmp(file + n - t, tail) != 0 || (n > t && file[n - t - 1] != '/'))
        return 0;
    return strcmp(name, "_bootstrap_inner") == 0 || strcmp(name, "Thread._bootstrap_inner") == 0;
}

static int obj_ptr(uintptr_t p)
{
    return p >= 4096 && (p & 7) == 0;
}

static int read_i64(uintptr_t addr, int64_t *v)
{
    return ps_read(v, addr, sizeof *v);
}

/* 1 if the C string at p is exactly s. */
static int cstr_is(uintptr_t p, const char *s)
{
    char buf[16];
    size_t n = strlen(s) + 1;
    return n <= sizeof buf && p != 0 && ps_read(buf, p, n) == 0 && memcmp(buf, s, n) == 0;
}

/* 1 if type is, or derives from, a heap type named "Thread". */
static int is_thread_type(const struct ps_layout *L, uintptr_t type)
{
    for (int depth = 0; depth < MAX_BASES && obj_ptr(type); depth++) {
        unsigned long flags;
        uintptr_t name, base;
        if (ps_read(&flags, type + L->tp_flags, sizeof flags) != 0 || !(flags & TPF_HEAPTYPE) ||
            ps_read_ptr(type + L->tp_name, &name) != 0)
            return 0;
        if (cstr_is(name, "Thread"))
            return 1;
        if (ps_read_ptr(type + L->tp_base, &base) != 0)
            return 0;
        type = base;
    }
    return 0;
}

/* Attributes held in the dict object at dict. */
static int from_dict(const struct ps_layout *L, uintptr_t dict, struct attrs *a)
{
    uintptr_t type, name, keys, values;
    if (!obj_ptr(dict) || ps_read_ptr(dict + L->ob_type, &type) != 0 || !obj_ptr(type) ||
        ps_read_ptr(type + L->tp_name, &name) != 0 || !cstr_is(name, "dict") ||
        ps_read_ptr(dict + L->dict_keys, &keys) != 0 ||
        ps_read_ptr(dict + L->dict_values, &values) != 0 || !obj_ptr(keys) ||
        (values != 0 && !obj_ptr(values)))
        return -1;
    a->keys = keys;
    a->values = values != 0 ? values + L->values_items : 0;
    return 0;
}

/* Attributes held as a split table with the type's shared keys. */
static int from_values(const struct ps_layout *L, uintptr_t type, uintptr_t values,
                       struct attrs *a)
{
    uintptr_t keys;
    if (!obj_ptr(values) || ps_read_ptr(type + L->ht_cached_keys, &keys) != 0 || !obj_ptr(keys))
        return -1;
    a->keys = keys;
    a->values = values + L->values_items;
    return 0;
}

static int find_attrs(const struct ps_layout *L, uintptr_t obj, uintptr_t type, struct attrs *a)
{
    unsigned long flags;
    uintptr_t p;
    if (ps_read(&flags, type + L->tp_flags, sizeof flags) != 0)
        return -1;
    if (L->inst_kind == PS_INST_DICTOFFSET) {
        int64_t off;
        if (read_i64(type + L->tp_dictoffset, &off) != 0 || off <= 0 || off > 4096 || (off & 7) ||
            ps_read_ptr(obj + (uintptr_t)off, &p) != 0)
            return -1;
        return from_dict(L, p, a);
    }
    if (!(flags & TPF_MANAGED_DICT))
        return -1;
    switch (L->inst_kind) {
    case PS_INST_VALUES_OR_DICT:
        if (ps_read_ptr(obj + (intptr_t)L->inst_values, &p) != 0)
            return -1;
        if (p != 0)
            return from_values(L, type, p, a);
        break;
    case PS_INST_TAGGED:
        if (ps_read_ptr(obj + (intptr_t)L->inst_dict, &p) != 0)
            return -1;
        if (p & 1)
            return from_values(L, type, p + 1, a);
        return from_dict(L, p, a);
    case PS_INST_INLINE:
        if (flags & TPF_INLINE_VALUES) {
            int64_t basic;
            uint8_t valid;
            if (read_i64(type + L->tp_basicsize, &basic) != 0 || basic < 16 || basic > 4096 ||
                (basic & 7) || ps_read(&valid, obj + (uintptr_t)basic + L->values_valid, 1) != 0)
                return -1;
            if (valid)
                return from_values(L, type, obj + (uintptr_t)basic, a);
        }
        break;
    default:
        return -1;
    }
    if (ps_read_ptr(obj + (intptr_t)L->inst_dict, &p) != 0)
        return -1;
    return from_dict(L, p, a);
}

/* 1 if the str object at key reads as s. */
static int key_is(const struct ps_layout *L, uintptr_t key, const char *s)
{
    char buf[64];
    return obj_ptr(key) && ps_str_read(L, key, buf, sizeof buf) >= 0 && strcmp(buf, s) == 0;
}

/*
 * Value of the attribute "_name" (key type in *ktype), 0 if absent.
 * Returns 0 or -1.
 */
static int lookup_name(const struct ps_layout *L, const struct attrs *a, uintptr_t *value,
                       uintptr_t *ktype)
{
    uint8_t hdr[48], ents[MAX_ENTRIES * 24];
    int64_t n;
    uintptr_t first;
    size_t esize, koff, voff;

    if (ps_read(hdr, a->keys, sizeof hdr) != 0)
        return -1;
    if (L->dk_indices_at + 8 > sizeof hdr || L->dk_nentries_at + 8 > sizeof hdr)
        return -1;
    memcpy(&n, hdr + L->dk_nentries_at, sizeof n);
    if (L->dk_kind == PS_DK_SIZE) {
        int64_t size;
        memcpy(&size, hdr + L->dk_size_at, sizeof size);
        if (size < 8 || size > (1 << 20) || (size & (size - 1)) != 0 || n > (2 * size) / 3)
            return -1;
        first = a->keys + L->dk_indices_at +
                (uintptr_t)size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : 4);
        esize = 24;  /* me_hash, me_key, me_value */
        koff = 8;
        voff = 16;
    } else {
        unsigned lsize = hdr[L->dk_log2_size_at], lbytes = hdr[L->dk_log2_index_bytes_at];
        unsigned kind = hdr[L->dk_kind_at];
        if (lsize < 3 || lsize > 30 || lbytes < lsize || lbytes > lsize + 3 || kind > 2 ||
            n > (int64_t)((2ull << lsize) / 3) || (a->values != 0 && kind != 2))
            return -1;
        first = a->keys + L->dk_indices_at + ((uintptr_t)1 << lbytes);
        esize = kind == 0 ? 24 : 16;  /* general: hash, key, value; unicode: key, value */
        koff = kind == 0 ? 8 : 0;
        voff = koff + 8;
    }
    if (n < 0 || n > MAX_ENTRIES || ps_read(ents, first, (size_t)n * esize) != 0)
        return -1;

    int64_t ix = -1;
    uintptr_t key = 0;
    for (int64_t i = 0; i < n && name_key != 0; i++) {
        memcpy(&key, ents + i * esize + koff, sizeof key);
        if (key == name_key) {
            ix = i;
            break;
        }
    }
    if (ix >= 0 && !key_is(L, key, "_name")) {
        name_key = 0;   /* the remembered address no longer holds "_name" */
        ix = -1;
    }
    for (int64_t i = 0; i < n && ix < 0; i++) {
        memcpy(&key, ents + i * esize + koff, sizeof key);
        if (key != 0 && key_is(L, key, "_name")) {
            ix = i;
            name_key = key;
        }
    }
    if (ix < 0 || ps_read_ptr(key + L->ob_type, ktype) != 0)
        return -1;
    if (a->values != 0)
        return ps_read_ptr(a->values + 8 * (uintptr_t)ix, value);
    memcpy(value, ents + ix * esize + voff, sizeof *value);
    return 0;
}

int ps_thread_py_name(const struct ps_python *py, uintptr_t frame, char *out, size_t outlen)
{
    const struct ps_layout *L = &py->L;
    uintptr_t self, type, value, vtype, ktype;
    struct attrs a;
    char buf[NAME_BUF];

    if (outlen == 0)
        return -1;
    out[0] = '\0';
    if (L->inst_kind == PS_INST_NONE || frame == 0 ||
        ps_read_ptr(frame + L->fr_localsplus, &self) != 0)
        return -1;
    self &= ~L->code_tag_mask;  /* 3.14+ tags stack references like f_executable */
    if (!obj_ptr(self) || ps_read_ptr(self + L->ob_type, &type) != 0 ||
        !is_thread_type(L, type) || find_attrs(L, self, type, &a) != 0 ||
        lookup_name(L, &a, &value, &ktype) != 0 || !obj_ptr(value) ||
        ps_read_ptr(value + L->ob_type, &vtype) != 0 || vtype != ktype)
        return -1;
    int n = ps_str_read(L, value, buf, sizeof buf);
    /* A NUL inside means a torn or misread str (a length read too long, a
     * shape bit flipped), not a name anyone gave a thread. */
    if (n <= 0 || memchr(buf, '\0', (size_t)n) != NULL)
        return -1;
    size_t len = (size_t)n;
    if (len >= outlen) {
        /* Cut at a character boundary: never half a UTF-8 sequence. */
        len = outlen - 1;
        while (len > 0 && ((unsigned char)buf[len] & 0xC0) == 0x80)
            len--;
    }
    memcpy(out, buf, len);
    out[len] = '\0';
    return (int)len;
}
