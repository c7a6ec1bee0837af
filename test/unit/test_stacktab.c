/* Unit test: stack aggregation -- identical stacks counted once, per
 * thread; clearing; the stack limit and its marker; growth; each
 * thread's last stack found again. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "profile/stacktab.h"
#include "util/symtab.h"

#define FULL ps_frame(PS_SYM_STACKS_FULL, PS_LINE_NONE)

/* Count of the stack (label, frames) in t, 0 if absent. */
static uint64_t count_of(const struct ps_stacktab *t, uint32_t label, const uint64_t *frames,
                         uint32_t depth)
{
    for (size_t i = 0; i < t->cap; i++) {
        const struct ps_stack *s = &t->slots[i];
        if (s->count != 0 && s->label == label && s->depth == depth &&
            memcmp(t->frames + s->off, frames, depth * sizeof *frames) == 0)
            return s->count;
    }
    return 0;
}

int main(void)
{
    /* Frames are opaque here: any values will do. */
    struct ps_stacktab t;
    CHECK_EQ_INT(ps_stacktab_init(&t, 1000, FULL), 0);
    uint64_t s1[] = { ps_frame(10, 10), ps_frame(11, 3) };
    uint64_t s2[] = { ps_frame(10, 10), ps_frame(11, 4) };          /* other line */
    uint64_t s3[] = { ps_frame(10, 12), ps_frame(12, PS_LINE_NONE) };
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(ps_stacktab_add(&t, 1, s1, 2, 1), 0);
    CHECK_EQ_INT(ps_stacktab_add(&t, 1, s2, 2, 2), 0);
    CHECK_EQ_INT(ps_stacktab_add(&t, 2, s1, 2, 1), 0);        /* same frames, other thread */
    CHECK_EQ_INT(ps_stacktab_add(&t, 2, s3, 2, 7), 0);
    CHECK_EQ_INT(ps_stacktab_add(&t, 2, s1, 1, 1), 0);        /* a prefix is another stack */
    CHECK_EQ_INT(t.used, 5);
    CHECK_EQ_INT(t.total, 16);
    CHECK_EQ_INT(count_of(&t, 1, s1, 2), 5);
    CHECK_EQ_INT(count_of(&t, 1, s2, 2), 2);
    CHECK_EQ_INT(count_of(&t, 2, s1, 2), 1);
    CHECK_EQ_INT(count_of(&t, 2, s3, 2), 7);
    CHECK_EQ_INT(count_of(&t, 2, s1, 1), 1);
    CHECK_EQ_INT(count_of(&t, 1, s3, 2), 0);

    /* Clearing empties the samples (fork child, pysample_reset) and the
     * table counts afresh. */
    CHECK_EQ_INT(ps_stacktab_clear(&t), 0);
    CHECK_EQ_INT(t.used, 0);
    CHECK_EQ_INT(t.total, 0);
    CHECK_EQ_INT(count_of(&t, 1, s1, 2), 0);
    CHECK_EQ_INT(ps_stacktab_add(&t, 1, s1, 2, 3), 0);
    CHECK_EQ_INT(count_of(&t, 1, s1, 2), 3);
    CHECK_EQ_INT(t.full_frame, FULL);
    ps_stacktab_free(&t);

    /* The limit: past max_stacks, samples land on one marker stack per
     * thread (test_render.c: how it prints) and the total stays exact. */
    CHECK_EQ_INT(ps_stacktab_init(&t, 100, FULL), 0);
    uint32_t th = 1, th2 = 2, fn = 9;
    for (int i = 0; i < 1000; i++) {
        uint64_t s[] = { ps_frame(fn, i) };
        CHECK_EQ_INT(ps_stacktab_add(&t, th, s, 1, 1), 0);
    }
    uint64_t s_other[] = { ps_frame(fn, 5000) };
    CHECK_EQ_INT(ps_stacktab_add(&t, th2, s_other, 1, 4), 0);
    CHECK_EQ_INT(t.total, 1004);
    CHECK_EQ_INT(t.overflowed, 904);
    CHECK(t.used <= 102);
    uint64_t full[] = { FULL };
    CHECK_EQ_INT(count_of(&t, th, full, 1), 900);
    CHECK_EQ_INT(count_of(&t, th2, full, 1), 4);
    ps_stacktab_free(&t);

    /* Growth: many distinct stacks, each found again. */
    CHECK_EQ_INT(ps_stacktab_init(&t, 1000000, FULL), 0);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 50000; i++) {
            uint64_t s[] = { ps_frame(7, i), ps_frame(7, i * 7) };
            ps_stacktab_add(&t, 1, s, 2, 1);
        }
    CHECK_EQ_INT(t.used, 50000);
    CHECK_EQ_INT(t.total, 100000);
    uint64_t probe[] = { ps_frame(7, 4321), ps_frame(7, 4321 * 7) };
    CHECK_EQ_INT(count_of(&t, 1, probe, 2), 2);
    ps_stacktab_free(&t);

    /* Each label's last stack (the memo, stacktab.h): labels 3 and
     * 3 + PS_STACK_MEMO share an entry; s4 differs from s1 only at the
     * root; a stack counted again after the table grew (its slot moved)
     * is still the one stack. */
    CHECK_EQ_INT(ps_stacktab_init(&t, 1000000, FULL), 0);
    uint64_t s4[] = { ps_frame(10, 99), ps_frame(11, 3) };
    uint32_t la = 3, lb = 3 + PS_STACK_MEMO;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(ps_stacktab_add(&t, la, s1, 2, 1), 0);
        CHECK_EQ_INT(ps_stacktab_add(&t, la, s1, 2, 1), 0);
        CHECK_EQ_INT(ps_stacktab_add(&t, lb, s1, 2, 1), 0);
        CHECK_EQ_INT(ps_stacktab_add(&t, la, s4, 2, 1), 0);
        CHECK_EQ_INT(ps_stacktab_add(&t, la, s2, 2, 1), 0);
        CHECK_EQ_INT(ps_stacktab_add(&t, la, s1, 1, 1), 0);
    }
    CHECK_EQ_INT(t.used, 5);
    CHECK_EQ_INT(count_of(&t, la, s1, 2), 8);
    CHECK_EQ_INT(count_of(&t, lb, s1, 2), 4);
    CHECK_EQ_INT(count_of(&t, la, s4, 2), 4);
    CHECK_EQ_INT(count_of(&t, la, s2, 2), 4);
    CHECK_EQ_INT(count_of(&t, la, s1, 1), 4);
    size_t cap = t.cap;
    for (int i = 0; i < 5000; i++) {
        uint64_t s[] = { ps_frame(8, i) };
        CHECK_EQ_INT(ps_stacktab_add(&t, 5, s, 1, 1), 0);
    }
    CHECK(t.cap > cap);
    CHECK_EQ_INT(ps_stacktab_add(&t, la, s1, 1, 1), 0);
    CHECK_EQ_INT(ps_stacktab_add(&t, 5, s1, 1, 1), 0);
    CHECK_EQ_INT(t.used, 5006);
    CHECK_EQ_INT(count_of(&t, la, s1, 1), 5);
    CHECK_EQ_INT(count_of(&t, 5, s1, 1), 1);
    CHECK_EQ_INT(t.total, 24 + 5000 + 2);
    ps_stacktab_free(&t);
    CHECK_DONE();
}
