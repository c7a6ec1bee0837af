/* Unit test: stack aggregation, interning, escaping, rendering, limits. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stacktab.h"

static char *render(struct ps_stacktab *t)
{
    char *out;
    size_t len;
    CHECK_EQ_INT(ps_stacktab_render(t, &out, &len), 0);
    CHECK_EQ_INT(strlen(out), len);
    return out;
}

int main(void)
{
    struct ps_stacktab t;
    CHECK_EQ_INT(ps_stacktab_init(&t, 1000), 0);

    uint32_t mod = ps_func_intern(&t, "<module>", "app.py");
    uint32_t f = ps_func_intern(&t, "Klass.f", "app.py");
    uint32_t g = ps_func_intern(&t, "g", "lib/x.py");
    CHECK(mod != PS_ID_NONE && f != PS_ID_NONE && g != PS_ID_NONE);
    CHECK_EQ_INT(ps_func_intern(&t, "Klass.f", "app.py"), f);      /* interned once */
    CHECK(ps_func_intern(&t, "Klass.f", "other.py") != f);         /* file matters */
    uint32_t main_t = ps_label_intern(&t, 100, "MainThread");
    uint32_t other_t = ps_label_intern(&t, 101, NULL);
    CHECK_EQ_INT(ps_label_intern(&t, 100, "MainThread"), main_t);

    uint64_t s1[] = { ps_frame(mod, 10), ps_frame(f, 3) };
    uint64_t s2[] = { ps_frame(mod, 10), ps_frame(f, 4) };          /* other line */
    uint64_t s3[] = { ps_frame(mod, 12), ps_frame(g, PS_LINE_NONE) };
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(ps_stacktab_add(&t, main_t, s1, 2, 1), 0);
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, s2, 2, 2), 0);
    CHECK_EQ_INT(ps_stacktab_add(&t, other_t, s1, 2, 1), 0);        /* same frames, other thread */
    CHECK_EQ_INT(ps_stacktab_add(&t, other_t, s3, 2, 7), 0);
    CHECK_EQ_INT(t.used, 4);
    CHECK_EQ_INT(t.total, 15);

    char *out = render(&t);
    CHECK_EQ_STR(out,
        "thread 100 (MainThread);<module> (app.py:10);Klass.f (app.py:3) 5\n"
        "thread 100 (MainThread);<module> (app.py:10);Klass.f (app.py:4) 2\n"
        "thread 101;<module> (app.py:10);Klass.f (app.py:3) 1\n"
        "thread 101;<module> (app.py:12);g (lib/x.py) 7\n");
    free(out);

    /* Escaping: the separators and control characters never reach the file raw. */
    char esc[64];
    ps_escape("a;b%c\nd\re\x01" "f\x7fg h", esc, sizeof esc);
    CHECK_EQ_STR(esc, "a%3Bb%25c%0Ad%0De%01f%7Fg h");
    ps_escape("abcdef", esc, 4);  /* truncates, stays terminated */
    CHECK_EQ_STR(esc, "abc");
    ps_escape("%%%", esc, 7);     /* never splits an escape */
    CHECK_EQ_STR(esc, "%25%25");
    uint32_t weird = ps_func_intern(&t, "na;me", "di r/f;i%le\n.py");
    uint32_t label = ps_label_intern(&t, 7, "we;ird\nname");
    uint64_t s4[] = { ps_frame(weird, 1) };
    CHECK_EQ_INT(ps_stacktab_add(&t, label, s4, 1, 3), 0);
    out = render(&t);
    CHECK(strstr(out, "thread 7 (we%3Bird%0Aname);na%3Bme (di r/f%3Bi%25le%0A.py:1) 3\n") != NULL);
    /* Every line: frames joined by ';', a space and a count. */
    int lines = 0;
    for (char *p = out; *p; p++)
        lines += *p == '\n';
    CHECK_EQ_INT(lines, 5);
    free(out);

    /* Marker frames print bare. */
    uint32_t mk = ps_func_intern(&t, "[pysample: truncated]", NULL);
    uint64_t s5[] = { ps_frame(mk, PS_LINE_NONE), ps_frame(f, 9) };
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, s5, 2, 1), 0);
    out = render(&t);
    CHECK(strstr(out, "thread 100 (MainThread);[pysample: truncated];Klass.f (app.py:9) 1\n") != NULL);
    free(out);

    /* Clearing empties everything (fork child, pysample_reset). */
    ps_stacktab_clear(&t);
    CHECK_EQ_INT(t.used, 0);
    CHECK_EQ_INT(t.total, 0);
    out = render(&t);
    CHECK_EQ_STR(out, "");
    free(out);
    ps_stacktab_free(&t);

    /* The limit: past max_stacks, samples land on one marker stack per
     * thread and the total stays exact. */
    CHECK_EQ_INT(ps_stacktab_init(&t, 100), 0);
    uint32_t th = ps_label_intern(&t, 1, NULL);
    uint32_t fn = ps_func_intern(&t, "f", "f.py");
    for (int i = 0; i < 1000; i++) {
        uint64_t s[] = { ps_frame(fn, i) };
        CHECK_EQ_INT(ps_stacktab_add(&t, th, s, 1, 1), 0);
    }
    CHECK_EQ_INT(t.total, 1000);
    CHECK_EQ_INT(t.overflowed, 900);
    CHECK(t.used <= 101);
    out = render(&t);
    CHECK(strstr(out, "thread 1;[pysample: stack table full] 900\n") != NULL);
    free(out);
    ps_stacktab_free(&t);

    /* Names are bounded as well: past max(4096, 2 x max_stacks) functions
     * and max(4096, max_stacks / 4) thread labels, new ones share a
     * marker, while known ones keep their ids. */
    CHECK_EQ_INT(ps_stacktab_init(&t, 100), 0);
    uint32_t first = ps_func_intern(&t, "fn0", "gen.py");
    uint32_t over = PS_ID_NONE;
    for (int i = 1; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof name, "fn%d", i);
        uint32_t id = ps_func_intern(&t, name, "gen.py");
        CHECK(id != PS_ID_NONE);
        if (i >= 4096)
            over = over == PS_ID_NONE ? id : over;
        if (i >= 4096)
            CHECK_EQ_INT(id, over);
    }
    CHECK_EQ_INT(ps_func_intern(&t, "fn0", "gen.py"), first);
    CHECK(over != first);
    uint32_t lab_over = PS_ID_NONE;
    for (long tid = 1; tid <= 5000; tid++) {
        uint32_t id = ps_label_intern(&t, tid, NULL);
        if (tid > 4096) {
            lab_over = lab_over == PS_ID_NONE ? id : lab_over;
            CHECK_EQ_INT(id, lab_over);
        }
    }
    uint64_t over_stack[] = { ps_frame(over, 3) };
    CHECK_EQ_INT(ps_stacktab_add(&t, lab_over, over_stack, 1, 1), 0);
    out = render(&t);
    CHECK(strstr(out, "thread ? ([pysample: too many threads]);[pysample: function table full] 1\n")
          != NULL);
    free(out);
    ps_stacktab_free(&t);

    /* Growth: many distinct stacks, each found again. */
    CHECK_EQ_INT(ps_stacktab_init(&t, 1000000), 0);
    th = ps_label_intern(&t, 1, NULL);
    fn = ps_func_intern(&t, "f", "f.py");
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 50000; i++) {
            uint64_t s[] = { ps_frame(fn, i), ps_frame(fn, i * 7) };
            ps_stacktab_add(&t, th, s, 2, 1);
        }
    CHECK_EQ_INT(t.used, 50000);
    CHECK_EQ_INT(t.total, 100000);
    ps_stacktab_free(&t);
    CHECK_DONE();
}
