/* Unit test: what a reset (pysample_reset, a fork child) clears -- the
 * samples, never the symbols, unless the symbol table met its limit, when
 * it is rebuilt with the code cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "profile/profile.h"

static char *text(void)
{
    char *out = NULL;
    size_t len = 0;
    CHECK_EQ_INT(ps_profile_render(&out, &len), 0);
    return out;
}

int main(void)
{
    CHECK_EQ_INT(ps_profile_setup(100), 0);
    struct ps_profile *p = ps_profile_lock();
    uint32_t f = ps_sym_python(&p->syms, "f", "app.py");
    uint32_t th = ps_sym_label(&p->syms, 5, "MainThread");
    uint64_t st[] = { ps_frame(PS_SYM_TRUNCATED, PS_LINE_NONE), ps_frame(f, 3) };
    CHECK_EQ_INT(ps_stacktab_add(&p->tab, th, st, 2, 2), 0);
    /* stands for a resolved code object */
    p->cc.set[0].way[0].id.addr = 1;
    p->cc.set[0].way[0].func = f;
    ps_profile_unlock();
    char *out = text();
    CHECK_EQ_STR(out, "thread 5 (MainThread);[pysample: truncated];f (app.py:3) 2\n");
    free(out);

    /* A reset: no samples; the symbols and the code cache stay. */
    CHECK_EQ_INT(ps_profile_reset(), 0);
    out = text();
    CHECK_EQ_STR(out, "");
    free(out);
    p = ps_profile_lock();
    CHECK_EQ_INT(p->tab.used, 0);
    CHECK_EQ_INT(ps_sym_python(&p->syms, "f", "app.py"), f);
    CHECK_EQ_INT(ps_sym_label(&p->syms, 5, "MainThread"), th);
    CHECK_EQ_INT(p->cc.set[0].way[0].id.addr, 1);
    /* The ids still name the same symbols: a stack made with them before
     * the reset prints the same after it. */
    CHECK_EQ_INT(ps_stacktab_add(&p->tab, th, st, 2, 1), 0);
    ps_profile_unlock();
    out = text();
    CHECK_EQ_STR(out, "thread 5 (MainThread);[pysample: truncated];f (app.py:3) 1\n");
    free(out);

    /* A table that met its limit is rebuilt at the next reset, with the
     * code cache, so the next profile names new functions again. */
    p = ps_profile_lock();
    uint32_t last = PS_ID_NONE;
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof name, "gen%d", i);
        last = ps_sym_python(&p->syms, name, "gen.py");
    }
    CHECK_EQ_INT(last, PS_SYM_FUNCS_FULL);
    CHECK(ps_symtab_refused(&p->syms));
    ps_profile_unlock();
    CHECK_EQ_INT(ps_profile_reset(), 0);
    p = ps_profile_lock();
    CHECK(!ps_symtab_refused(&p->syms));
    CHECK_EQ_INT(p->cc.set[0].way[0].id.addr, 0);
    uint32_t again = ps_sym_python(&p->syms, "gen4999", "gen.py");
    CHECK(again != PS_SYM_FUNCS_FULL);
    uint64_t st2[] = { ps_frame(again, 1) };
    CHECK_EQ_INT(ps_stacktab_add(&p->tab, ps_sym_label(&p->syms, 5, NULL), st2, 1, 1), 0);
    ps_profile_unlock();
    out = text();
    CHECK_EQ_STR(out, "thread 5;gen4999 (gen.py:1) 1\n");
    free(out);

    /* A fork child starts with no samples, its symbols kept. */
    ps_profile_prepare_fork();
    ps_profile_child_after_fork();
    p = ps_profile_lock();
    CHECK_EQ_INT(p->tab.used, 0);
    CHECK_EQ_INT(ps_sym_python(&p->syms, "gen4999", "gen.py"), again);
    ps_profile_unlock();
    CHECK_DONE();
}
