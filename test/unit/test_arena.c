/* Unit test: util/arena.c, the kernel-backed memory of a render --
 * alignment, zeroing, chunks, marks released across chunks, overflow. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "util/arena.h"

static void test_alignment_and_zeroing(void)
{
    struct ps_arena a = { 0 };
    for (size_t n = 1; n < 100; n += 7) {
        char *p = ps_arena_alloc(&a, n);
        CHECK(p != NULL && (uintptr_t)p % 16 == 0);
        memset(p, 0xAB, n);
    }
    /* Memory given back and taken again comes zeroed only from zalloc. */
    struct ps_arena_mark m = ps_arena_mark(&a);
    unsigned char *dirty = ps_arena_alloc(&a, 4096);
    memset(dirty, 0xCD, 4096);
    ps_arena_release(&a, m);
    unsigned char *z = ps_arena_zalloc(&a, 4096);
    CHECK(z == dirty);
    int zeroed = 1;
    for (size_t i = 0; i < 4096; i++)
        zeroed &= z[i] == 0;
    CHECK(zeroed);
    ps_arena_free(&a);
    CHECK(a.top == NULL);
}

static void test_chunks_and_marks(void)
{
    struct ps_arena a = { 0 };
    char *first = ps_arena_alloc(&a, 100);
    memset(first, 'x', 100);
    struct ps_arena_mark m = ps_arena_mark(&a);
    /* Past one chunk (1 MiB): new chunks, one of them bigger than the
     * minimum; all writable. */
    for (int i = 0; i < 5; i++) {
        char *p = ps_arena_alloc(&a, 700 * 1024);
        CHECK(p != NULL);
        if (p != NULL)
            memset(p, i, 700 * 1024);
    }
    char *big = ps_arena_alloc(&a, 3u << 20);
    CHECK(big != NULL);
    if (big != NULL)
        memset(big, 1, 3u << 20);
    /* Released to the mark: what came before it is intact, and the next
     * allocation comes right after it again. */
    ps_arena_release(&a, m);
    char *again = ps_arena_alloc(&a, 16);
    CHECK(again == first + 112);
    int intact = 1;
    for (int i = 0; i < 100; i++)
        intact &= first[i] == 'x';
    CHECK(intact);
    ps_arena_free(&a);
}

static void test_overflow(void)
{
    struct ps_arena a = { 0 };
    CHECK(ps_arena_alloc(&a, SIZE_MAX) == NULL);
    CHECK(ps_arena_alloc(&a, SIZE_MAX - 8) == NULL);
    CHECK(ps_arena_array(&a, SIZE_MAX / 2, 4) == NULL);
    CHECK(ps_arena_array(&a, 3, 5) != NULL);
    ps_arena_free(&a);
}

int main(void)
{
    test_alignment_and_zeroing();
    test_chunks_and_marks();
    test_overflow();
    CHECK_DONE();
}
