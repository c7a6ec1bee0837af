/*
 * fake_layout.h - the fake code objects and compact ASCII str objects that
 * test_frames.c and test_codecache.c build in their own memory, and the
 * part of a layout that describes them.  One copy, so that a field added to
 * the objects or to struct ps_layout is described once for both tests.
 *
 * A test's struct ps_layout takes FAKE_OBJECT_FIELDS among its designated
 * initializers and sets the rest (frames, co_nunits, ...) itself.
 */
#ifndef PS_TEST_FAKE_LAYOUT_H
#define PS_TEST_FAKE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The fake objects.  Offsets in FAKE_OBJECT_FIELDS are offsetof these. */
struct fake_str {
    int64_t refcnt;
    uintptr_t type;
    int64_t length;
    int64_t hash;
    uint32_t state;
    uint32_t pad;
    char data[64];
};

struct fake_code {
    int64_t refcnt;
    uintptr_t type;
    uintptr_t filename, name, linetable;
    int64_t nunits;                  /* only where the layout names it (test_codecache) */
    int32_t firstlineno;
    int32_t stacksize, nlocalsplus;  /* 3.11+ layout only (test_frames' test_data_stack) */
    int32_t pad;
};

static char code_type;  /* its address is PyCode_Type */

/* The code object and str fields of a layout of the objects above. */
#define FAKE_OBJECT_FIELDS \
    .ob_type = offsetof(struct fake_code, type), \
    .co_read = sizeof(struct fake_code), \
    .co_filename = offsetof(struct fake_code, filename), \
    .co_name = offsetof(struct fake_code, name), \
    .co_qualname = PS_NOFIELD, \
    .co_linetable = offsetof(struct fake_code, linetable), \
    .co_firstlineno = offsetof(struct fake_code, firstlineno), \
    .str_length = offsetof(struct fake_str, length), \
    .str_state = offsetof(struct fake_str, state), \
    .str_ascii_data = offsetof(struct fake_str, data), \
    .str_compact_data = offsetof(struct fake_str, data), \
    .st_kind_shift = 2, \
    .st_compact_bit = 5, \
    .st_ascii_bit = 6, \
    .st_ready_bit = 7

/* s as the str text (shorter than its data), returned as its address. */
static uintptr_t make_str(struct fake_str *s, const char *text)
{
    memset(s, 0, sizeof *s);
    s->refcnt = 1;
    s->length = (int64_t)strlen(text);
    s->state = (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7);  /* kind 1, compact, ascii, ready */
    memcpy(s->data, text, strlen(text));
    return (uintptr_t)s;
}

/* c as a code object named name in file, its other fields zero. */
static void make_code(struct fake_code *c, uintptr_t name, uintptr_t file, int firstline)
{
    memset(c, 0, sizeof *c);
    c->refcnt = 1;
    c->type = (uintptr_t)&code_type;
    c->name = name;
    c->filename = file;
    c->firstlineno = firstline;
}

#endif
