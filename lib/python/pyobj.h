/*
 * pyobj.h - reading builtin containers out of interpreter memory: dicts
 * (by str key, or every item), sets, lists, ints and an instance's
 * attributes.  Used by the asyncio task walk (tasks_*.c) to get from the
 * modules dict to the set of tasks.
 *
 * Every read goes through ps_read; every object is recognised by its type
 * pointer before its fields mean anything; counts and sizes are bounded.
 * A failure means "not found", never a guess.
 */
#ifndef PS_PYOBJ_H
#define PS_PYOBJ_H

#include <stddef.h>
#include <stdint.h>

#include "python/runtime.h"

/* A plausible object address. */
static inline int ps_obj_ok(uintptr_t p)
{
    return p >= 4096 && (p & 7) == 0;
}

/* ob_type of obj, or 0. */
uintptr_t ps_obj_type(const struct ps_python *py, uintptr_t obj);

/* 1 if the type at type is named name (tp_name). */
int ps_type_named(const struct ps_python *py, uintptr_t type, const char *name);

/* 1 if type is base or derives from it (bounded walk of tp_base). */
int ps_type_derives(const struct ps_python *py, uintptr_t type, uintptr_t base);

/* Value stored under the str key in the dict object dict: 0 with *value,
 * or -1 (absent, or not readable). */
int ps_dict_get(const struct ps_python *py, uintptr_t dict, const char *key, uintptr_t *value);

/* How many entries the dict's keys object has used (deleted ones
 * included: it only grows until the table is rebuilt), or -1.  A cheap
 * "has anything been added" for a dict that is scanned rarely. */
int64_t ps_dict_entries(const struct ps_python *py, uintptr_t dict);

/* Calls each(key, value, ctx) for up to max items of the dict; stops early
 * when each returns nonzero.  0 or -1. */
int ps_dict_each(const struct ps_python *py, uintptr_t dict, int max,
                 int (*each)(uintptr_t key, uintptr_t value, void *ctx), void *ctx);

/* The attribute name of obj held in its instance dict or inline values
 * (not class attributes, not slots).  0 with *value, or -1. */
int ps_attr_get(const struct ps_python *py, uintptr_t obj, const char *name, uintptr_t *value);

/*
 * Up to max keys of the set object set, starting at table slot *cursor
 * (wrapping), into keys; *cursor moves past the last slot read and *used
 * receives the set's element count.  Returns the number of keys, or -1.
 */
int ps_set_keys(const struct ps_python *py, uintptr_t set, uintptr_t *keys, int max,
                uint64_t *cursor, int64_t *used);

/* Up to max items of the list object list.  Returns the count, or -1. */
int ps_list_items(const struct ps_python *py, uintptr_t list, uintptr_t *items, int max);

/* The value of the int object obj if it fits 64 bits unsigned.  0 or -1. */
int ps_long_value(const struct ps_python *py, uintptr_t obj, uint64_t *v);

#endif
