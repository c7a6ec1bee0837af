/* Unit test: the profile's text -- line format, sort order, escaping,
 * marker and native frames, the limits' markers as they print. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "profile/render.h"
#include "profile/stacktab.h"
#include "util/symtab.h"

#define FULL ps_frame(PS_SYM_STACKS_FULL, PS_LINE_NONE)

/* A sink that collects what it is handed, or fails at call fail_at. */
struct collect {
    char *buf;
    size_t len, cap;
    int calls, fail_at;
};

static int collect(void *ctx, const char *data, size_t len)
{
    struct collect *c = ctx;
    if (++c->calls == c->fail_at)
        return -28;
    CHECK(len > 0 && data[len - 1] == '\n');   /* whole lines only */
    if (c->len + len + 1 > c->cap) {
        c->cap = (c->len + len + 1) * 2;
        c->buf = realloc(c->buf, c->cap);
    }
    memcpy(c->buf + c->len, data, len);
    c->len += len;
    c->buf[c->len] = '\0';
    return 0;
}

/* The text, from ps_render; the chunked path must give the same bytes. */
static char *render(const struct ps_stacktab *t, const struct ps_symtab *s)
{
    char *out;
    size_t len;
    CHECK_EQ_INT(ps_render(t, s, &out, &len), 0);
    CHECK_EQ_INT(strlen(out), len);
    struct ps_rendered *rd;
    struct collect c = { 0 };
    CHECK_EQ_INT(ps_render_prepare(t, s, &rd), 0);
    CHECK(ps_rendered_size(rd) >= len);
    CHECK_EQ_INT(ps_rendered_emit(rd, collect, &c), 0);
    CHECK_EQ_INT(c.len, len);
    CHECK(len == 0 || (c.buf != NULL && memcmp(c.buf, out, len) == 0));
    ps_rendered_free(rd);
    free(c.buf);
    return out;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether the lines of text are in strcmp order (what the file promises). */
static int sorted_as_strcmp(const char *text)
{
    char *copy = strdup(text), *lines[256];
    size_t n = 0;
    for (char *p = strtok(copy, "\n"); p != NULL && n < 256; p = strtok(NULL, "\n"))
        lines[n++] = p;
    char *sorted[256];
    memcpy(sorted, lines, n * sizeof *lines);
    qsort(sorted, n, sizeof *sorted, cmp_str);
    int ok = memcmp(sorted, lines, n * sizeof *lines) == 0;
    free(copy);
    return ok;
}

int main(void)
{
    struct ps_symtab s;
    struct ps_stacktab t;
    CHECK_EQ_INT(ps_symtab_init(&s, 1000), 0);
    CHECK_EQ_INT(ps_stacktab_init(&t, 1000, FULL), 0);

    uint32_t mod = ps_sym_python(&s, "<module>", "app.py");
    uint32_t f = ps_sym_python(&s, "Klass.f", "app.py");
    uint32_t g = ps_sym_python(&s, "g", "lib/x.py");
    uint32_t main_t = ps_sym_label(&s, 100, "MainThread");
    uint32_t other_t = ps_sym_label(&s, 101, NULL);

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

    char *out = render(&t, &s);
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
    uint32_t weird = ps_sym_python(&s, "na;me", "di r/f;i%le\n.py");
    uint32_t label = ps_sym_label(&s, 7, "we;ird\nname");
    uint64_t s4[] = { ps_frame(weird, 1) };
    CHECK_EQ_INT(ps_stacktab_add(&t, label, s4, 1, 3), 0);
    out = render(&t, &s);
    CHECK(strstr(out, "thread 7 (we%3Bird%0Aname);na%3Bme (di r/f%3Bi%25le%0A.py:1) 3\n") != NULL);
    /* Every line: frames joined by ';', a space and a count. */
    int lines = 0;
    for (char *p = out; *p; p++)
        lines += *p == '\n';
    CHECK_EQ_INT(lines, 5);
    free(out);

    /* Marker frames print bare. */
    uint32_t mk = ps_sym_marker(&s, "[pysample: truncated]");
    CHECK_EQ_INT(mk, PS_SYM_TRUNCATED);
    uint64_t s5[] = { ps_frame(mk, PS_LINE_NONE), ps_frame(f, 9) };
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, s5, 2, 1), 0);
    out = render(&t, &s);
    CHECK(strstr(out, "thread 100 (MainThread);[pysample: truncated];Klass.f (app.py:9) 1\n") != NULL);
    free(out);

    /* A cleared table renders empty; its symbols stay. */
    CHECK_EQ_INT(ps_stacktab_clear(&t), 0);
    out = render(&t, &s);
    CHECK_EQ_STR(out, "");
    free(out);
    CHECK_EQ_INT(ps_sym_python(&s, "Klass.f", "app.py"), f);

    /* What the next features print: native frames (with and without a
     * function name), a task marker; a negative line; a line on a native
     * frame is not shown. */
    uint32_t nat = ps_sym_native(&s, "PyObject_Call", "libpython3.12.so.1.0", 0);
    uint32_t addr = ps_sym_native(&s, NULL, "libfoo.so", 0x1234);
    uint32_t task = ps_sym_marker(&s, "[task Task-3 \"handle\"]");
    uint64_t s6[] = { ps_frame(task, PS_LINE_NONE), ps_frame(f, -3), ps_frame(nat, 77),
                      ps_frame(addr, PS_LINE_NONE) };
    CHECK_EQ_INT(ps_stacktab_add(&t, main_t, s6, 4, 2), 0);
    out = render(&t, &s);
    CHECK_EQ_STR(out, "thread 100 (MainThread);[task Task-3 \"handle\"];Klass.f (app.py:-3);"
                      "PyObject_Call (libpython3.12.so.1.0);libfoo.so+0x1234 2\n");
    free(out);
    CHECK_EQ_INT(ps_stacktab_clear(&t), 0);

    /* Sorting is strcmp's, also where a frame's text is a prefix of
     * another's (a marker "f" and a function "f"), a label a prefix of
     * another's, and for equal texts with different counts. */
    uint32_t mf = ps_sym_marker(&s, "f");
    uint32_t pf = ps_sym_python(&s, "f", "a.py");
    uint32_t pg = ps_sym_python(&s, "f", "b.py");
    uint32_t l1 = ps_sym_label(&s, 1, NULL), l10 = ps_sym_label(&s, 10, NULL);
    uint64_t a1[] = { ps_frame(mf, PS_LINE_NONE), ps_frame(pg, 1) };
    uint64_t a2[] = { ps_frame(pf, 2), ps_frame(mf, PS_LINE_NONE) };
    uint64_t a3[] = { ps_frame(mf, PS_LINE_NONE) };
    uint64_t a4[] = { ps_frame(pf, PS_LINE_NONE), ps_frame(pg, 5) };
    uint64_t a5[] = { ps_frame(pf, PS_LINE_NONE) };
    uint32_t labs[] = { l1, l10, main_t };
    for (int i = 0; i < 3; i++) {
        ps_stacktab_add(&t, labs[i], a1, 2, 1 + (uint64_t)i);
        ps_stacktab_add(&t, labs[i], a2, 2, 12);
        ps_stacktab_add(&t, labs[i], a3, 1, 3);
        ps_stacktab_add(&t, labs[i], a4, 2, 9);
        ps_stacktab_add(&t, labs[i], a5, 1, 100);
        ps_stacktab_add(&t, labs[i], a5, 0, 4);   /* empty stack: "label 4" */
    }
    out = render(&t, &s);
    CHECK(sorted_as_strcmp(out));
    CHECK(strstr(out, "thread 1;f (a.py:2);f 12\nthread 1;f 3\nthread 1;f;f (b.py:1) 1\n") != NULL);
    CHECK(strstr(out, "thread 1 4\n") != NULL);
    free(out);
    ps_stacktab_free(&t);
    ps_symtab_free(&s);

    /* The limits' markers as they print: past max_stacks, one marker
     * stack per thread... */
    CHECK_EQ_INT(ps_symtab_init(&s, 100), 0);
    CHECK_EQ_INT(ps_stacktab_init(&t, 100, FULL), 0);
    uint32_t th = ps_sym_label(&s, 1, NULL);
    uint32_t th2 = ps_sym_label(&s, 2, NULL);
    uint32_t fn = ps_sym_python(&s, "f", "f.py");
    for (int i = 0; i < 1000; i++) {
        uint64_t st[] = { ps_frame(fn, i) };
        CHECK_EQ_INT(ps_stacktab_add(&t, th, st, 1, 1), 0);
    }
    uint64_t s_other[] = { ps_frame(fn, 5000) };
    CHECK_EQ_INT(ps_stacktab_add(&t, th2, s_other, 1, 4), 0);
    out = render(&t, &s);
    CHECK(strstr(out, "thread 1;[pysample: stack table full] 900\n") != NULL);
    CHECK(strstr(out, "thread 2;[pysample: stack table full] 4\n") != NULL);
    free(out);
    CHECK_EQ_INT(ps_stacktab_clear(&t), 0);
    /* ... and past the name limits, the shared function and label. */
    uint32_t over = PS_ID_NONE;
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof name, "fn%d", i);
        over = ps_sym_python(&s, name, "gen.py");
    }
    uint32_t lab_over = PS_ID_NONE;
    for (long tid = 1; tid <= 5000; tid++)
        lab_over = ps_sym_label(&s, tid, NULL);
    uint64_t over_stack[] = { ps_frame(over, 3) };
    CHECK_EQ_INT(ps_stacktab_add(&t, lab_over, over_stack, 1, 1), 0);
    out = render(&t, &s);
    CHECK(strstr(out, "thread ? ([pysample: too many threads]);[pysample: function table full] 1\n")
          != NULL);
    free(out);
    ps_stacktab_free(&t);
    ps_symtab_free(&s);

    /* Chunks: lines longer than a chunk (256 KiB) and many short ones give
     * the same text both ways; a sink's error ends the emit and is
     * returned. */
    CHECK_EQ_INT(ps_symtab_init(&s, 10000), 0);
    CHECK_EQ_INT(ps_stacktab_init(&t, 10000, FULL), 0);
    char longname[2100];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    uint32_t lf = ps_sym_python(&s, longname, "long.py");
    th = ps_sym_label(&s, 1, NULL);
    th2 = ps_sym_label(&s, 2, NULL);
    fn = ps_sym_python(&s, "f", "f.py");
    uint64_t deep[300];
    for (int i = 0; i < 300; i++)
        deep[i] = ps_frame(lf, i);   /* ~640 KB */
    CHECK_EQ_INT(ps_stacktab_add(&t, th, deep, 300, 1), 0);
    for (int i = 0; i < 5000; i++) {
        uint64_t st[] = { ps_frame(fn, i), ps_frame(lf, i % 7) };
        CHECK_EQ_INT(ps_stacktab_add(&t, th2, st, 2, 1 + (uint64_t)i), 0);
    }
    out = render(&t, &s);
    CHECK(strlen(out) > 3 * 256 * 1024);
    free(out);
    struct ps_rendered *rd;
    struct collect c = { .fail_at = 2 };
    CHECK_EQ_INT(ps_render_prepare(&t, &s, &rd), 0);
    CHECK_EQ_INT(ps_rendered_emit(rd, collect, &c), -28);
    CHECK_EQ_INT(c.calls, 2);
    ps_rendered_free(rd);
    free(c.buf);
    ps_stacktab_free(&t);
    ps_symtab_free(&s);
    CHECK_DONE();
}
