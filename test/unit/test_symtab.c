/* Unit test: interned symbols -- identity, kinds, reserved markers, limits,
 * and a rebuild that keeps the reserved ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/symtab.h"

static void check_sym(const struct ps_symtab *s, uint32_t id, enum ps_sym_kind kind,
                      const char *name, const char *file)
{
    struct ps_sym sym;
    ps_sym_get(s, id, &sym);
    CHECK_EQ_INT(sym.kind, kind);
    CHECK_EQ_STR(sym.name, name);
    if (file == NULL)
        CHECK(sym.file == NULL);
    else
        CHECK_EQ_STR(sym.file, file);
}

int main(void)
{
    struct ps_symtab s;
    CHECK_EQ_INT(ps_symtab_init(&s, 1000), 0);

    /* The reserved markers are there from the start, at their ids. */
    check_sym(&s, PS_SYM_STACKS_FULL, PS_SYM_MARKER, "[pysample: stack table full]", NULL);
    check_sym(&s, PS_SYM_TRUNCATED, PS_SYM_MARKER, "[pysample: truncated]", NULL);
    check_sym(&s, PS_SYM_FUNCS_FULL, PS_SYM_MARKER, "[pysample: function table full]", NULL);
    CHECK_EQ_STR(ps_sym_label_text(&s, PS_LABEL_TOO_MANY),
                 "thread ? ([pysample: too many threads])");
    CHECK_EQ_INT(ps_sym_marker(&s, "[pysample: truncated]"), PS_SYM_TRUNCATED);

    /* Python functions: interned once, the file matters, stored raw. */
    uint32_t mod = ps_sym_python(&s, "<module>", "app.py");
    uint32_t f = ps_sym_python(&s, "Klass.f", "app.py");
    uint32_t g = ps_sym_python(&s, "g", "lib/x.py");
    CHECK(mod != PS_ID_NONE && f != PS_ID_NONE && g != PS_ID_NONE);
    CHECK_EQ_INT(ps_sym_python(&s, "Klass.f", "app.py"), f);      /* interned once */
    CHECK(ps_sym_python(&s, "Klass.f", "other.py") != f);         /* file matters */
    check_sym(&s, f, PS_SYM_PYTHON, "Klass.f", "app.py");
    uint32_t weird = ps_sym_python(&s, "na;me", "di r/f;i%le\n.py");
    check_sym(&s, weird, PS_SYM_PYTHON, "na;me", "di r/f;i%le\n.py");
    /* A name/file split elsewhere is another symbol. */
    CHECK(ps_sym_python(&s, "Klass", ".fapp.py") != f);

    /* Kinds never meet: a marker, a native function and a Python function
     * of the same text are three symbols. */
    uint32_t mk = ps_sym_marker(&s, "Klass.f");
    uint32_t nat = ps_sym_native(&s, "Klass.f", "app.py", 0);
    CHECK(mk != f && nat != f && mk != nat);
    check_sym(&s, mk, PS_SYM_MARKER, "Klass.f", NULL);
    check_sym(&s, nat, PS_SYM_NATIVE, "Klass.f", "app.py");
    /* A native address without a function name is a bare text. */
    uint32_t addr = ps_sym_native(&s, NULL, "libfoo.so", 0x1234);
    check_sym(&s, addr, PS_SYM_MARKER, "libfoo.so+0x1234", NULL);
    CHECK_EQ_INT(ps_sym_native(&s, NULL, "libfoo.so", 0x1234), addr);
    uint32_t task = ps_sym_marker(&s, "[task Task-3 \"handle\"]");
    check_sym(&s, task, PS_SYM_MARKER, "[task Task-3 \"handle\"]", NULL);

    /* Thread labels. */
    uint32_t main_t = ps_sym_label(&s, 100, "MainThread");
    uint32_t other_t = ps_sym_label(&s, 101, NULL);
    CHECK_EQ_INT(ps_sym_label(&s, 100, "MainThread"), main_t);
    CHECK(main_t != other_t);
    CHECK_EQ_STR(ps_sym_label_text(&s, main_t), "thread 100 (MainThread)");
    CHECK_EQ_STR(ps_sym_label_text(&s, other_t), "thread 101");
    CHECK_EQ_STR(ps_sym_label_text(&s, ps_sym_label(&s, 102, "")), "thread 102");
    CHECK_EQ_STR(ps_sym_label_text(&s, ps_sym_label(&s, -1, "x")), "thread ?");
    CHECK_EQ_INT(ps_sym_label_count(&s), PS_LABEL_RESERVED + 4);
    CHECK(!ps_symtab_refused(&s));
    ps_symtab_free(&s);

    /* Names are bounded: past max(4096, 2 x max_stacks) functions and
     * max(4096, max_stacks / 4) thread labels, new ones share a marker,
     * while known ones keep their ids. */
    CHECK_EQ_INT(ps_symtab_init(&s, 100), 0);
    uint32_t first = ps_sym_python(&s, "fn0", "gen.py");
    uint32_t over = PS_ID_NONE;
    for (int i = 1; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof name, "fn%d", i);
        uint32_t id = ps_sym_python(&s, name, "gen.py");
        CHECK(id != PS_ID_NONE);
        if (i >= 4096)
            over = over == PS_ID_NONE ? id : over;
        if (i >= 4096)
            CHECK_EQ_INT(id, over);
        else
            CHECK(id != PS_SYM_FUNCS_FULL);
    }
    CHECK_EQ_INT(over, PS_SYM_FUNCS_FULL);
    CHECK_EQ_INT(ps_sym_python(&s, "fn0", "gen.py"), first);
    CHECK(over != first);
    CHECK(ps_symtab_refused(&s));
    uint32_t lab_over = PS_ID_NONE;
    for (long tid = 1; tid <= 5000; tid++) {
        uint32_t id = ps_sym_label(&s, tid, NULL);
        if (tid > 4096) {
            lab_over = lab_over == PS_ID_NONE ? id : lab_over;
            CHECK_EQ_INT(id, lab_over);
        } else {
            CHECK(id != PS_LABEL_TOO_MANY);
        }
    }
    CHECK_EQ_INT(lab_over, PS_LABEL_TOO_MANY);
    /* The limit grows with max_stacks. */
    struct ps_symtab big;
    CHECK_EQ_INT(ps_symtab_init(&big, 10000), 0);
    for (int i = 0; i < 20000; i++) {
        char name[32];
        snprintf(name, sizeof name, "fn%d", i);
        if (ps_sym_python(&big, name, "gen.py") == PS_SYM_FUNCS_FULL) {
            CHECK(0);
            break;
        }
    }
    CHECK(!ps_symtab_refused(&big));
    CHECK_EQ_INT(ps_sym_python(&big, "one more", "gen.py"), PS_SYM_FUNCS_FULL);
    ps_symtab_free(&big);

    /* A rebuild (profile.c, at a reset, when the table met its limit)
     * empties it back to the reserved symbols at the same ids, with the
     * same limits. */
    ps_symtab_clear(&s);
    CHECK(!ps_symtab_refused(&s));
    CHECK_EQ_INT(ps_sym_label_count(&s), PS_LABEL_RESERVED);
    check_sym(&s, PS_SYM_TRUNCATED, PS_SYM_MARKER, "[pysample: truncated]", NULL);
    uint32_t again = ps_sym_python(&s, "fn4999", "gen.py");
    CHECK(again != PS_SYM_FUNCS_FULL && again != PS_ID_NONE);
    check_sym(&s, again, PS_SYM_PYTHON, "fn4999", "gen.py");
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof name, "gn%d", i);
        ps_sym_python(&s, name, "gen.py");
    }
    CHECK(ps_symtab_refused(&s));
    ps_symtab_free(&s);
    CHECK_DONE();
}
