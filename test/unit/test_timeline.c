/* Unit test: the timeline (PYSAMPLE_TIMELINE) -- every sample the stack
 * table counts is recorded in time order with its stack's line and weight;
 * the bound on records and what is said of the samples past it; a restart;
 * the sidecar's text. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "profile/render.h"
#include "profile/stacktab.h"
#include "util/symtab.h"
#include "profile/timeline.h"
#include "util/arena.h"

#define FULL ps_frame(PS_SYM_STACKS_FULL, PS_LINE_NONE)

struct text {
    char buf[1 << 16];
    size_t len;
};

static int put(void *ctx, const char *data, size_t len)
{
    struct text *t = ctx;
    if (t->len + len >= sizeof t->buf)
        return -ENOSPC;
    memcpy(t->buf + t->len, data, len);
    t->len += len;
    t->buf[t->len] = '\0';
    return 0;
}

/* The sidecar of t's stacks and its timeline, as ps_profile_write makes it. */
static void emit(const struct ps_stacktab *t, const struct ps_symtab *s, struct text *out)
{
    struct ps_rendered *rd;
    out->len = 0;
    out->buf[0] = '\0';
    CHECK_EQ_INT(ps_render_prepare(t, s, &rd), 0);
    struct ps_arena mem = { 0 };
    struct ps_timeline *copy = ps_timeline_copy(t->tl, &mem);
    CHECK(copy != NULL);
    CHECK_EQ_INT(ps_timeline_emit(copy, rd, put, out, &mem), 0);
    ps_arena_free(&mem);
    ps_rendered_free(rd);
}

int main(void)
{
    struct ps_symtab s;
    struct ps_stacktab t;
    struct ps_timeline tl;
    static struct text out;
    CHECK_EQ_INT(ps_symtab_init(&s, 1000), 0);
    CHECK_EQ_INT(ps_stacktab_init(&t, 1000, FULL), 0);
    ps_timeline_init(&tl, 5, 100, 1000000000, 1700000000000000000ull);
    t.tl = &tl;
    uint32_t main_t = ps_sym_label(&s, 42, "MainThread");
    uint64_t a[] = { ps_frame(ps_sym_python(&s, "main", "p.py"), 3),
                     ps_frame(ps_sym_python(&s, "a", "p.py"), 10) };
    uint64_t b[] = { a[0], ps_frame(ps_sym_python(&s, "b", "p.py"), 20) };

    /* Ticks 10 ms apart: a, a (weight 2), b, and in one tick b twice
     * (asyncio tasks waiting at one place): one record of weight 2. */
    ps_timeline_tick(&tl, 1000000000 + 5000000);
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, a, 2, 1), 0);
    ps_timeline_tick(&tl, 1000000000 + 15000000);
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, a, 2, 2), 0);
    ps_timeline_tick(&tl, 1000000000 + 25000000);
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, b, 2, 1), 0);
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, b, 2, 1), 0);
    CHECK_EQ_INT(tl.n, 3);
    CHECK_EQ_INT(tl.rec[0].t_ns, 5000000);
    CHECK_EQ_INT(tl.rec[1].weight, 2);
    CHECK_EQ_INT(tl.rec[2].weight, 2);
    CHECK(tl.rec[0].stack == tl.rec[1].stack && tl.rec[1].stack != tl.rec[2].stack);

    /* The file: the header, the profile's lines (b's sorts after a's), the
     * records naming them by line, in microseconds. */
    emit(&t, &s, &out);
    CHECK_EQ_STR(out.buf,
                 "# pysample timeline 1\n"
                 "rate_hz 100\n"
                 "start_unix_ns 1700000000000000000\n"
                 "end_us 25000\n"
                 "samples 5\n"
                 "max_records 5\n"
                 "dropped_records 0\n"
                 "dropped_samples 0\n"
                 "stacks 2\n"
                 "thread 42 (MainThread);main (p.py:3);a (p.py:10) 3\n"
                 "thread 42 (MainThread);main (p.py:3);b (p.py:20) 2\n"
                 "records 3\n"
                 "5000 0 1\n"
                 "15000 0 2\n"
                 "25000 1 2\n");

    /* The bound: 5 records kept, the rest counted from the first dropped
     * on, even where a later sample could merge (no holes). */
    for (int i = 0; i < 4; i++) {
        ps_timeline_tick(&tl, 1000000000 + 35000000 + 10000000 * (uint64_t)i);
        CHECK_EQ_INT(ps_stacktab_add(&t, main_t, i % 2 ? b : a, 2, 1), 0);
    }
    CHECK_EQ_INT(tl.n, 5);
    CHECK_EQ_INT(tl.cap, 5);   /* the bound is the memory too */
    CHECK_EQ_INT(tl.dropped_records, 2);
    CHECK_EQ_INT(tl.dropped_samples, 2);
    CHECK_EQ_INT(tl.first_dropped_ns, 55000000);
    CHECK_EQ_INT(tl.last_ns, 65000000);
    ps_timeline_tick(&tl, 1000000000 + 75000000);
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, b, 2, 3), 0);
    CHECK_EQ_INT(tl.dropped_samples, 5);
    emit(&t, &s, &out);
    CHECK(strstr(out.buf, "samples 7\nmax_records 5\ndropped_records 3\ndropped_samples 5\n"
                          "first_dropped_us 55000\nstacks 2\n") != NULL);
    CHECK(strstr(out.buf, "end_us 75000\n") != NULL);
    /* Kept and dropped together are the profile's samples. */
    CHECK_EQ_INT(t.total, 12);

    /* A reset: the table is emptied, the timeline starts again (its ids
     * were the old table's). */
    CHECK_EQ_INT(ps_stacktab_clear(&t), 0);
    CHECK(t.tl == &tl);
    ps_timeline_restart(&tl, 2000000000, 1700000001000000000ull);
    CHECK_EQ_INT(tl.n, 0);
    CHECK_EQ_INT(tl.dropped_records, 0);
    ps_timeline_tick(&tl, 2000000000 + 1000);
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, b, 2, 1), 0);
    emit(&t, &s, &out);
    CHECK(strstr(out.buf, "start_unix_ns 1700000001000000000\n") != NULL);
    CHECK(strstr(out.buf, "stacks 1\nthread 42 (MainThread);main (p.py:3);b (p.py:20) 1\n"
                          "records 1\n1 0 1\n") != NULL);

    /* Off: nothing recorded, nothing copied. */
    struct ps_timeline off;
    ps_timeline_init(&off, 0, 100, 0, 0);
    ps_timeline_add(&off, 0, 1);
    CHECK_EQ_INT(off.n, 0);
    struct ps_arena mem = { 0 };
    CHECK(ps_timeline_copy(&off, &mem) == NULL);

    ps_timeline_free(&tl);
    ps_stacktab_free(&t);
    ps_symtab_free(&s);
    CHECK_DONE();
}
