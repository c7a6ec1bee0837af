/*
 * arena.c - memory from the kernel for one piece of work (arena.h).
 *
 * Each chunk is its own mapping, its header first; chunks are stacked, the
 * newest on top, so a release unmaps the chunks above the mark's and rewinds
 * the mark's own.  Async-signal-safe: mmap, munmap and arithmetic only.
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "util/arena.h"

#define CHUNK_MIN (1u << 20)
#define ALIGN 16u

struct ps_arena_chunk {
    struct ps_arena_chunk *below;
    size_t size;                  /* of the mapping, header included */
    size_t used;                  /* from the start of the mapping */
};

static size_t header_size(void)
{
    return (sizeof(struct ps_arena_chunk) + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

static struct ps_arena_chunk *chunk_new(struct ps_arena_chunk *below, size_t need)
{
    if (need > SIZE_MAX - header_size() - CHUNK_MIN)
        return NULL;
    size_t size = need + header_size();
    size = size < CHUNK_MIN ? CHUNK_MIN : (size + CHUNK_MIN - 1) & ~(size_t)(CHUNK_MIN - 1);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct ps_arena_chunk *c = p;
    c->below = below;
    c->size = size;
    c->used = header_size();
    return c;
}

void *ps_arena_alloc(struct ps_arena *a, size_t n)
{
    if (n > SIZE_MAX - ALIGN)
        return NULL;
    n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    struct ps_arena_chunk *c = a->top;
    if (c == NULL || c->size - c->used < n) {
        c = chunk_new(c, n);
        if (c == NULL)
            return NULL;
        a->top = c;
    }
    void *p = (char *)c + c->used;
    c->used += n;
    return p;
}

void *ps_arena_zalloc(struct ps_arena *a, size_t n)
{
    void *p = ps_arena_alloc(a, n);
    if (p != NULL)
        memset(p, 0, n);
    return p;
}

void *ps_arena_array(struct ps_arena *a, size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    return ps_arena_alloc(a, count * size);
}

struct ps_arena_mark ps_arena_mark(const struct ps_arena *a)
{
    struct ps_arena_mark m = { a->top, a->top != NULL ? a->top->used : 0 };
    return m;
}

void ps_arena_release(struct ps_arena *a, struct ps_arena_mark m)
{
    while (a->top != NULL && a->top != m.top) {
        struct ps_arena_chunk *below = a->top->below;
        munmap(a->top, a->top->size);
        a->top = below;
    }
    if (a->top != NULL)
        a->top->used = m.used;
}

void ps_arena_free(struct ps_arena *a)
{
    struct ps_arena_mark none = { NULL, 0 };
    ps_arena_release(a, none);
}
