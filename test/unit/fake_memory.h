/*
 * fake_memory.h - an arena the unit tests build fake interpreter objects in
 * (test_pyobj.c, test_threadnames.c).  The library reads it through
 * ps_read() like real process memory; the tests lay objects out with
 * put_ptr()/put_i64() at the offsets a layout names.
 *
 * Define FAKE_ARENA_SIZE before including it for a bigger arena.
 */
#ifndef PS_TEST_FAKE_MEMORY_H
#define PS_TEST_FAKE_MEMORY_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef FAKE_ARENA_SIZE
#define FAKE_ARENA_SIZE (1 << 20)
#endif

static _Alignas(64) uint8_t arena[FAKE_ARENA_SIZE];
static size_t arena_used;

/* n zeroed bytes, 16-aligned; aborts when the arena is full (a test bug). */
static uintptr_t alloc(size_t n)
{
    arena_used = (arena_used + 15) & ~(size_t)15;
    if (arena_used + n > sizeof arena)
        abort();
    uint8_t *p = arena + arena_used;
    arena_used += n;
    memset(p, 0, n);
    return (uintptr_t)p;
}

static void put_ptr(uintptr_t at, uintptr_t v) { memcpy((void *)at, &v, sizeof v); }
static void put_i64(uintptr_t at, int64_t v) { memcpy((void *)at, &v, sizeof v); }

#ifdef PS_LAYOUT_H
/* The fields of a compact ASCII str at o, an object of at least
 * L->str_ascii_data + strlen(s) + 1 bytes whose type the caller sets. */
static inline void fill_ascii_str(const struct ps_layout *L, uintptr_t o, const char *s)
{
    size_t n = strlen(s);
    put_i64(o + L->str_length, (int64_t)n);
    uint32_t state = (1u << L->st_kind_shift) | (1u << L->st_compact_bit) | (1u << L->st_ascii_bit);
    if (L->st_ready_bit != 0xff)
        state |= 1u << L->st_ready_bit;
    memcpy((void *)(o + L->str_state), &state, sizeof state);
    memcpy((void *)(o + L->str_ascii_data), s, n + 1);
}
#endif

#endif
