/*
 * test_native.c - the native-stack pieces on this process's own stack
 * (x86-64 Linux; elsewhere the test has nothing to run):
 *
 *   elfsyms  the loaded objects, their unwind tables and symbols (this
 *            executable's .symtab, static functions included);
 *   unwind   a real stack, captured with getcontext(), unwound through
 *            this executable and the C library to the root (_start), in
 *            order; garbage registers end in a truncation, not a fault;
 *   merge    a function named _PyEval_EvalFrameDefault on that stack
 *            stands for a group of fake Python frames, in its place, with
 *            the frames below it hidden (PYSAMPLE_NATIVE=1) or kept (all).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "memread.h"
#include "native.h"
#include "symtab.h"

#if defined(__x86_64__) && defined(__linux__)
#include <ucontext.h>

#define NOINLINE __attribute__((noinline))

static volatile int sink;
static uintptr_t pcs[PS_NATIVE_MAX];
static int npcs, truncated;

/* The registers getcontext() saved, as the signal handler would give them. */
static void regs_of(const ucontext_t *uc, struct ps_regs *rs)
{
    const greg_t *g = uc->uc_mcontext.gregs;
    rs->valid = 0;
    ps_regs_set(rs, 3, (uint64_t)g[REG_RBX]);
    ps_regs_set(rs, 6, (uint64_t)g[REG_RBP]);
    ps_regs_set(rs, 7, (uint64_t)g[REG_RSP]);
    ps_regs_set(rs, 12, (uint64_t)g[REG_R12]);
    ps_regs_set(rs, 13, (uint64_t)g[REG_R13]);
    ps_regs_set(rs, 14, (uint64_t)g[REG_R14]);
    ps_regs_set(rs, 15, (uint64_t)g[REG_R15]);
    ps_regs_set(rs, 16, (uint64_t)g[REG_RIP]);
}

NOINLINE static void leaf_capture(void)
{
    ucontext_t uc;
    struct ps_regs rs;
    getcontext(&uc);
    regs_of(&uc, &rs);
    npcs = ps_unwind(&rs, pcs, PS_NATIVE_MAX, &truncated);
    sink++;
}

NOINLINE static void middle(void)
{
    leaf_capture();
    sink++;
}

/* Stands for the interpreter's evaluation loop in the merge test. */
NOINLINE void _PyEval_EvalFrameDefault(void);
NOINLINE void _PyEval_EvalFrameDefault(void)
{
    middle();
    sink++;
}

NOINLINE static void outer(void)
{
    _PyEval_EvalFrameDefault();
    sink++;
}

static const char *name_at(uintptr_t a)
{
    const struct ps_obj *o = ps_objs_find(a);
    return o ? ps_obj_symbol(o, a) : NULL;
}

/* Index of the first frame named name, or -1. */
static int find(const char *name)
{
    for (int i = 0; i < npcs; i++) {
        const char *s = name_at(i == 0 ? pcs[i] : pcs[i] - 1);
        if (s != NULL && strcmp(s, name) == 0)
            return i;
    }
    return -1;
}

static void test_objects(void)
{
    CHECK_EQ_INT(ps_objs_refresh(0), 1);
    CHECK_EQ_INT(ps_objs_refresh(0), 0);   /* nothing loaded since */
    const struct ps_obj *o = ps_objs_find((uintptr_t)&middle);
    CHECK(o != NULL);
    if (o == NULL)
        return;
    CHECK_EQ_STR(ps_obj_name(o), "test_native");
    CHECK(ps_obj_eh_frame_hdr(o) != 0);
    CHECK_EQ_STR(ps_obj_symbol(o, (uintptr_t)&middle + 1), "middle");   /* static */
    const struct ps_obj *libc = ps_objs_find((uintptr_t)&getcontext);
    CHECK(libc != NULL && libc != o);
    if (libc != NULL)
        CHECK(strncmp(ps_obj_name(libc), "libc", 4) == 0);
    CHECK(ps_objs_find(0x1000) == NULL);
}

static void test_unwind(void)
{
    outer();
    CHECK(npcs >= 5);
    CHECK_EQ_INT(truncated, 0);   /* reached _start's undefined return address */
    int l = find("leaf_capture"), m = find("middle"), e = find("_PyEval_EvalFrameDefault"),
        o = find("outer"), mn = find("main");
    CHECK_EQ_INT(l, 0);
    CHECK(m == l + 1 && e == m + 1 && o == e + 1 && mn > o);
    if (truncated || mn < 0)
        for (int i = 0; i < npcs; i++)
            fprintf(stderr, "  #%d %#lx %s\n", i, (unsigned long)pcs[i],
                    name_at(i == 0 ? pcs[i] : pcs[i] - 1) ?: "?");

    /* Garbage: a pc in no object, a stack pointer into nothing. */
    struct ps_regs rs = { .valid = 0 };
    uintptr_t out[8];
    int tr;
    ps_regs_set(&rs, PS_REG_PC, 0x1234);
    ps_regs_set(&rs, PS_REG_SP, 0x2000);
    CHECK_EQ_INT(ps_unwind(&rs, out, 8, &tr), 1);
    CHECK_EQ_INT(tr, 1);
    ps_regs_set(&rs, PS_REG_PC, (uintptr_t)&middle + 4);
    CHECK_EQ_INT(ps_unwind(&rs, out, 8, &tr), 1);   /* [sp] unreadable */
    CHECK_EQ_INT(tr, 1);
    ps_regs_set(&rs, PS_REG_SP, UINT64_MAX - 7);
    CHECK_EQ_INT(ps_unwind(&rs, out, 8, &tr), 1);
    CHECK_EQ_INT(tr, 1);
    /* No registers at all. */
    rs.valid = 0;
    CHECK_EQ_INT(ps_unwind(&rs, out, 8, &tr), 0);
    CHECK_EQ_INT(tr, 1);
    /* A walk cut at max. */
    CHECK_EQ_INT(ps_unwind(&(struct ps_regs){ .valid = 0 }, out, 8, &tr), 0);
}

static void names_of(struct ps_symtab *t, const uint64_t *st, int d, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < d; i++) {
        struct ps_sym s;
        ps_sym_get(t, (uint32_t)(st[i] >> 32), &s);
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "%s%s", i ? ";" : "", s.name);
    }
}

static void test_merge(void)
{
    struct ps_symtab t;
    CHECK_EQ_INT(ps_symtab_init(&t, 1000), 0);
    /* A new table where the last one was: the cached names are void (the
     * library has one table for its life, emptied in place). */
    ps_native_objects_changed();
    uint32_t a = ps_sym_python(&t, "py_a", "x.py"), b = ps_sym_python(&t, "py_b", "x.py");
    /* Innermost first: py_b then py_a, one evaluation-loop call. */
    struct ps_pyframe py[2] = { { ps_frame(b, 2), 0 }, { ps_frame(a, 1), 1 } };
    uint64_t st[PS_NATIVE_MAX + 8];
    char buf[4096];

    int d = ps_native_merge(&t, PS_NATIVE_ON, py, 2, pcs, npcs, 0, NULL, st, PS_NATIVE_MAX + 8);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK_EQ_STR(buf, "py_a;py_b;middle;leaf_capture");

    /* all: outer, main and the C library's start-up stay, below. */
    d = ps_native_merge(&t, PS_NATIVE_ALL, py, 2, pcs, npcs, 0, NULL, st, PS_NATIVE_MAX + 8);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK(strncmp(buf, "_start;", 7) == 0 && strstr(buf, ";main;") != NULL);
    CHECK(strstr(buf, ";outer;py_a;py_b;middle;leaf_capture") != NULL);
    if (strstr(buf, ";outer;py_a;py_b;middle;leaf_capture") == NULL)
        fprintf(stderr, "  all: %s\n", buf);

    /* A walk that stopped below the evaluation loop: the Python frames it
     * did not reach at the root, then the marker. */
    d = ps_native_merge(&t, PS_NATIVE_ON, py, 2, pcs, 2, 1, NULL, st, PS_NATIVE_MAX + 8);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK_EQ_STR(buf, "py_a;py_b;[native: truncated];middle;leaf_capture");

    /* Two Python calls for one evaluation-loop frame, and a full walk. */
    py[0].entry = 1;
    d = ps_native_merge(&t, PS_NATIVE_ON, py, 2, pcs, npcs, 0, NULL, st, PS_NATIVE_MAX + 8);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK_EQ_STR(buf, "py_a;py_b;[native: mismatch]");

    /* No native part. */
    d = ps_native_merge(&t, PS_NATIVE_ON, py, 2, pcs, 0, 0, "[native: unavailable]", st, 8);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK_EQ_STR(buf, "py_a;py_b;[native: unavailable]");

    /* The room given is respected. */
    py[0].entry = 0;
    CHECK_EQ_INT(ps_native_merge(&t, PS_NATIVE_ON, py, 2, pcs, npcs, 0, NULL, st, 3), 3);
    ps_symtab_free(&t);
}

static void run_all(const char *path)
{
    fprintf(stderr, "read path: %s\n", path);
    npcs = 0;
    test_unwind();
    test_merge();
}

int main(void)
{
    CHECK_EQ_INT(ps_mem_init(), 0);
    test_objects();
    /* The syscall path, then the guarded direct one the sampler uses. */
    run_all("syscall");
    ps_mem_enable_direct();
    CHECK_EQ_INT(ps_mem_mode(), PS_READ_DIRECT);
    run_all("direct");
    ps_objs_free();
    CHECK_DONE();
}
#else
int main(void)
{
    return 77;   /* skipped: native stacks are x86-64 Linux only */
}
#endif
