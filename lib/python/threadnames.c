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
 *             key strings (hashes are randomised per process)
 *   value     must be a str (the interpreter's str type) and decode
 *             without NULs
 * The attribute lookup is pyobj.c's ps_attr_get, which the asyncio task
 * walk uses too; dicts and strs are recognised by their type pointers.
 *
 * The thread runs on while we read, so every pointer, size and count is
 * checked before use, and any failure means "no name", never a guess.
 */
#include <string.h>

#include "memory/memread.h"
#include "python/pyobj.h"
#include "python/pystr.h"
#include "python/threadnames.h"

/* Type flag bits, the same in every version that has them. */
#define TPF_HEAPTYPE      (1ul << 9)

#define MAX_BASES 32
#define NAME_BUF 1024     /* names longer than this (UTF-8 bytes) are not shown */

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

int ps_thread_py_name(const struct ps_python *py, uintptr_t frame, char *out, size_t outlen)
{
    const struct ps_layout *L = &py->L;
    uintptr_t self, type, value;
    char buf[NAME_BUF];

    if (outlen == 0)
        return -1;
    out[0] = '\0';
    if (L->inst_kind == PS_INST_NONE || frame == 0 ||
        ps_read_ptr(frame + L->fr_localsplus, &self) != 0)
        return -1;
    self &= ~L->code_tag_mask;  /* 3.14+ tags stack references like f_executable */
    /* The attribute lookup (where the version keeps instance attributes,
     * split or combined tables, keys compared as strings) is pyobj.c's. */
    if (!obj_ptr(self) || ps_read_ptr(self + L->ob_type, &type) != 0 ||
        !is_thread_type(L, type) || ps_attr_get(py, self, "_name", &value) != 0 ||
        !obj_ptr(value) || ps_obj_type(py, value) != py->str_type || py->str_type == 0)
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
