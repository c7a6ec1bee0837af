/*
 * test_codecache.c - what a code cache lookup touches (codecache.c, issue
 * #36 round 4): a hit writes nothing unless something changed, the table's
 * pages are touched only where code objects fall, and a reused address
 * takes back its own way.  (The walk's use of the cache: test_frames.)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "memory/memread.h"
#include "python/codecache.h"
#include "util/symtab.h"

#include "fake_layout.h"

static const struct ps_layout layout = {
    .hexversion = 0x030B0000,
    .minor = 11,
    FAKE_OBJECT_FIELDS,
    .co_nunits = offsetof(struct fake_code, nunits),
};

static struct ps_python py;
static struct fake_str file_str, name_str;

enum { N = 4000 };
static struct fake_code codes[N];

/* c as f in app.py at firstline, 40 code units long (codes[] and a reuse). */
static void make_f(struct fake_code *c, int firstline)
{
    make_code(c, (uintptr_t)&name_str, (uintptr_t)&file_str, firstline);
    c->nunits = 40;
}

static struct ps_code_entry *resolve(struct ps_codecache *c, struct ps_symtab *syms,
                                     struct fake_code *code)
{
    return ps_code_resolve(c, &py, syms, 0, (uintptr_t)code, (const uint8_t *)code);
}

/* The whole table: the one thing here that knows its layout. */
static const void *table(const struct ps_codecache *c, size_t *len)
{
    *len = c->sets * sizeof *c->set;
    return c->set;
}

/* n code objects of codes[] that fall in one set, into same[]. */
static int one_set(const struct ps_codecache *c, struct fake_code **same, int n)
{
    int k = 0;
    size_t want = ps_code_set(c, (uintptr_t)&codes[0]);
    for (int i = 0; i < N && k < n; i++)
        if (ps_code_set(c, (uintptr_t)&codes[i]) == want)
            same[k++] = &codes[i];
    return k;
}

/* A hit of the set's most recent way, and a line found in the memo, write
 * nothing to the table; the old entries of two lines wrote a stamp on each. */
static void test_hit_writes_nothing(struct ps_symtab *syms)
{
    struct ps_codecache c;
    CHECK_EQ_INT(ps_codecache_init(&c, 256), 0);
    struct ps_code_entry *e = resolve(&c, syms, &codes[7]);
    CHECK(e != NULL);
    if (e == NULL)
        return;
    CHECK_EQ_INT(ps_code_line(e, 12), 7);
    size_t len;
    const void *t = table(&c, &len);
    void *before = malloc(len);
    CHECK(before != NULL);
    if (before == NULL)
        return;
    memcpy(before, t, len);
    for (int i = 0; i < 100; i++) {
        CHECK(resolve(&c, syms, &codes[7]) == e);
        CHECK_EQ_INT(ps_code_line(e, 12), 7);
    }
    CHECK_EQ_INT(c.hits, 100);
    CHECK(memcmp(before, t, len) == 0);
    free(before);
    ps_codecache_free(&c);
}

/* A table of 16384 entries costs no memory until code objects fall in it:
 * its pages are mapped, not cleared (it was 2 MB touched at start-up). */
static void test_pages_lazy(struct ps_symtab *syms)
{
    struct ps_codecache c;
    CHECK_EQ_INT(ps_codecache_init(&c, 16384), 0);
    size_t len;
    const void *t = table(&c, &len);
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)t & ~(uintptr_t)(page - 1);
    size_t n = ((uintptr_t)t + len - lo + (size_t)page - 1) / (size_t)page;
    unsigned char *vec = malloc(n);
    CHECK(vec != NULL && n >= 300);
    if (vec == NULL)
        return;
    for (int step = 0; step < 2; step++) {
        if (step == 1)
            CHECK(resolve(&c, syms, &codes[3]) != NULL);
        CHECK_EQ_INT(mincore((void *)lo, n * (size_t)page, vec), 0);
        size_t resident = 0;
        for (size_t i = 0; i < n; i++)
            resident += vec[i] & 1;
        /* none before the first code object, its set's one or two after */
        CHECK(resident <= (size_t)(2 * step));
    }
    free(vec);
    ps_codecache_free(&c);
}

/* Two code objects of one set taking turns: their hits write nothing but
 * the set's recency, in the first way's line, which every lookup of the
 * set reads anyway; not the entries, not the line tables. */
static void test_turns_write_recency(struct ps_symtab *syms)
{
    struct ps_codecache c;
    CHECK_EQ_INT(ps_codecache_init(&c, 256), 0);
    struct fake_code *same[2];
    CHECK_EQ_INT(one_set(&c, same, 2), 2);
    struct ps_code_entry *a = resolve(&c, syms, same[0]), *b = resolve(&c, syms, same[1]);
    CHECK(a != NULL && b != NULL && a != b);
    struct ps_code_set *st = &c.set[ps_code_set(&c, (uintptr_t)same[0])];
    static struct ps_code_set before;
    memcpy(&before, st, sizeof before);
    for (int i = 0; i < 10; i++) {
        CHECK(resolve(&c, syms, same[i % 2]) == (i % 2 ? b : a));
        before.way[0].ages = st->way[0].ages;
        CHECK(memcmp(&before, st, sizeof before) == 0);
    }
    CHECK_EQ_INT(c.hits, 10);
    ps_codecache_free(&c);
}

/* A code object freed and another made at its address: the new one takes
 * the old one's way (that entry can never hit again), not the least
 * recently used one, which the old cache evicted. */
static void test_reused_address(struct ps_symtab *syms)
{
    struct ps_codecache c;
    CHECK_EQ_INT(ps_codecache_init(&c, 256), 0);
    struct fake_code *same[4];
    CHECK_EQ_INT(one_set(&c, same, 4), 4);
    for (int i = 1; i <= 4; i++)
        CHECK(resolve(&c, syms, same[i % 4]) != NULL);  /* same[0] most recent */
    int old_line = same[0]->firstlineno;
    make_f(same[0], old_line + 1000);
    uint64_t m = c.misses;
    struct ps_code_entry *e = resolve(&c, syms, same[0]);
    CHECK(e != NULL);
    CHECK_EQ_INT(c.misses, m + 1);
    if (e != NULL)
        CHECK_EQ_INT(e->id.firstlineno, old_line + 1000);
    for (int i = 1; i < 4; i++)
        CHECK(resolve(&c, syms, same[i]) != NULL);
    CHECK_EQ_INT(c.misses, m + 1);  /* the other three all still there */
    make_f(same[0], old_line);
    ps_codecache_free(&c);
}

/* An entry keeps the code's length in 32 bits: a length that does not fit
 * is not cached, and one equal to a cached length in its low 32 bits does
 * not match it. */
static void test_nunits_exact(struct ps_symtab *syms)
{
    struct ps_codecache c;
    CHECK_EQ_INT(ps_codecache_init(&c, 256), 0);
    struct fake_code *code = &codes[11];
    CHECK(resolve(&c, syms, code) != NULL);
    code->nunits += (int64_t)1 << 32;
    CHECK(resolve(&c, syms, code) == NULL);
    CHECK_EQ_INT(c.hits, 0);
    code->nunits -= (int64_t)1 << 32;
    struct ps_code_entry *e = resolve(&c, syms, code);
    CHECK(e != NULL);
    if (e != NULL)
        CHECK_EQ_INT(e->id.nunits, 40);
    ps_codecache_free(&c);
}

int main(void)
{
    CHECK_EQ_INT(ps_mem_init(), 0);
    py.code_type = (uintptr_t)&code_type;
    py.L = layout;
    make_str(&file_str, "app.py");
    make_str(&name_str, "f");
    for (int i = 0; i < N; i++)
        make_f(&codes[i], i);
    struct ps_symtab syms;
    CHECK_EQ_INT(ps_symtab_init(&syms, 1000), 0);

    test_hit_writes_nothing(&syms);
    test_pages_lazy(&syms);
    test_turns_write_recency(&syms);
    test_reused_address(&syms);
    test_nunits_exact(&syms);

    ps_symtab_free(&syms);
    return check_failures != 0;
}
