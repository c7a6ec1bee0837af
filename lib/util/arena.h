/*
 * arena.h - memory for one piece of work (a render of the profile) that
 * comes straight from the kernel, never from malloc.
 *
 * Why: the profile's final write may be served while a program thread sits
 * in a signal handler that interrupted it inside malloc (a C SIGTERM
 * handler calling _exit, which POSIX allows), holding the allocator's lock
 * -- with MALLOC_ARENA_MAX=1 the lock every thread needs.  A write that
 * called malloc waited for it for ever.  mmap and munmap are system calls:
 * no lock of the program's, async-signal-safe.
 *
 * Allocation is a bump of a pointer in chunks of at least 1 MiB; nothing is
 * freed one by one: a mark taken before a temporary is released after it,
 * and ps_arena_free() returns every chunk.
 */
#ifndef PS_ARENA_H
#define PS_ARENA_H

#include <stddef.h>

struct ps_arena_chunk;

struct ps_arena {
    struct ps_arena_chunk *top;   /* the chunk allocations come from; NULL: none yet */
};

struct ps_arena_mark {
    struct ps_arena_chunk *top;
    size_t used;
};

/* n bytes aligned to 16, or NULL when the kernel refuses memory. */
void *ps_arena_alloc(struct ps_arena *a, size_t n);
/* The same, zeroed. */
void *ps_arena_zalloc(struct ps_arena *a, size_t n);
/* count elements of size bytes each (NULL on overflow, as calloc). */
void *ps_arena_array(struct ps_arena *a, size_t count, size_t size);

/* Everything allocated after mark is given back. */
struct ps_arena_mark ps_arena_mark(const struct ps_arena *a);
void ps_arena_release(struct ps_arena *a, struct ps_arena_mark m);

/* Every chunk back to the kernel; a is empty again. */
void ps_arena_free(struct ps_arena *a);

#endif
