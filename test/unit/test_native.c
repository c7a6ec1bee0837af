/*
 * test_native.c - the native-stack pieces on this process's own stack
 * (x86-64 and aarch64 Linux; elsewhere the test has nothing to run):
 *
 *   elfsyms  the loaded objects, their unwind tables and symbols (this
 *            executable's .symtab, static functions included; the vDSO's
 *            from its image in memory);
 *   unwind   a real stack, captured with getcontext(), unwound through
 *            this executable and the C library to the root (_start), in
 *            order, and again from the rule cache; garbage registers end
 *            in a truncation with its cause, not a fault;
 *   rules    fake code with hand-written CFI in fake memory (an -O3 frame,
 *            a frame-pointer frame, the root, a signal frame crossed into
 *            the context it interrupted, a gap): each
 *            step follows the CFI, not the frame-pointer chain; repeats
 *            come from the cache; the cache is forgotten when the objects
 *            change (a table at the same address that says otherwise);
 *   (aarch64: the first argument of an interrupted svc recovered, the
 *            signal trampoline and frame, pointer authentication stripped)
 *   signal   a real handler's frame crossed into raise() and its callers;
 *   merge    a function named _PyEval_EvalFrameDefault on that stack
 *            stands for a group of fake Python frames, in its place, with
 *            the frames below it hidden (PYSAMPLE_NATIVE=1) or kept (all).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "check.h"
#include "memory/memread.h"
#include "native/native.h"
#include "util/symtab.h"

#include "fake_memory.h"

#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__linux__)
#include <signal.h>
#include <ucontext.h>

#include "platform/linux/regs_arch.h"

#define NOINLINE __attribute__((noinline))

static volatile int sink;
/* The caches a sampler context holds (made in main: the signal handler
 * below unwinds too). */
static struct ps_unwind_rules *rules;
static struct ps_native_names *names;
static uintptr_t pcs[PS_NATIVE_MAX];
static int npcs, truncated;

NOINLINE static void leaf_capture(void)
{
    ucontext_t uc;
    struct ps_regs rs;
    getcontext(&uc);
    ps_regs_from_context(&uc, &rs);
    npcs = ps_unwind(rules, &rs, pcs, PS_NATIVE_MAX, &truncated);
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

    /* The vDSO has no file: its names come from its image in memory. */
    uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    int named = 0, in_vdso = 0;
    for (uintptr_t a = vdso; vdso != 0 && a < vdso + 16384; a += 4) {
        const struct ps_obj *v = ps_objs_find(a);
        if (v == NULL || strcmp(ps_obj_name(v), "[vdso]") != 0)
            continue;   /* past its end: the next object */
        in_vdso++;
        const char *sym = ps_obj_symbol(v, a);
        if (sym != NULL && strstr(sym, "clock_gettime") != NULL)
            named++;
    }
    if (vdso != 0) {
        CHECK(in_vdso > 0);
        CHECK(named > 0);
    }
}

static void test_unwind(void)
{
    /* The same walk twice: the same frames up to outer, and the second
     * time from the rule cache, but for the return address into this
     * function (two call sites) and a pair that may share a slot (the
     * cache is direct-mapped). */
    struct ps_unwind_counts c0, c1;
    outer();
    uintptr_t first[PS_NATIVE_MAX];
    int nfirst = npcs, ofirst = find("outer");
    memcpy(first, pcs, sizeof first);
    ps_unwind_counts(rules, &c0);
    outer();
    ps_unwind_counts(rules, &c1);
    CHECK(npcs >= 5);
    CHECK_EQ_INT(truncated, PS_STOP_ROOT);   /* reached _start's undefined return address */
    CHECK_EQ_INT(npcs, nfirst);
    CHECK(ofirst > 0 && ofirst == find("outer"));
    CHECK(ofirst > 0 && memcmp(first, pcs, (size_t)(ofirst + 1) * sizeof pcs[0]) == 0);
    CHECK(c1.hits - c0.hits >= (uint64_t)npcs - 3);
    CHECK(c1.misses - c0.misses <= 3);
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
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &tr), 1);
    CHECK_EQ_INT(tr, PS_STOP_NO_OBJECT);
    ps_regs_set(&rs, PS_REG_PC, (uintptr_t)&middle + 4);
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &tr), 1);   /* [sp] unreadable */
    CHECK(tr != PS_STOP_ROOT);
    ps_regs_set(&rs, PS_REG_SP, UINT64_MAX - 7);
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &tr), 1);
    CHECK(tr != PS_STOP_ROOT);
    /* No registers at all. */
    rs.valid = 0;
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &tr), 0);
    CHECK_EQ_INT(tr, PS_STOP_NO_REGS);
}

/* ---- rules: fake code, fake CFI, fake stack ------------------------------- */

/* Fake code: 2 KiB inside one page (every address its own cache slot). */
enum { F_LEAF = 0x100, F_FP = 0x200, F_ROOT = 0x300, F_SIG = 0x400, F_GAP = 0x600, F_END = 0x800 };

struct bytes {
    uint8_t b[512];
    size_t n;
};

static void emit(struct bytes *o, const void *p, size_t n)
{
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void emit_u32(struct bytes *o, uint32_t v) { emit(o, &v, 4); }
static void emit_u64(struct bytes *o, uint64_t v) { emit(o, &v, 8); }

/* An FDE for [lo, lo + len) with instructions insns; returns its offset. */
static size_t emit_fde(struct bytes *o, size_t cie, uint64_t lo, uint64_t len,
                       const uint8_t *insns, size_t n)
{
    size_t at = o->n;
    emit_u32(o, (uint32_t)(4 + 8 + 8 + 1 + n));
    emit_u32(o, (uint32_t)(at + 4 - cie));   /* back to the CIE */
    emit_u64(o, lo);
    emit_u64(o, len);
    emit(o, "", 1);                          /* no augmentation data */
    emit(o, insns, n);
    return at;
}

/* The .eh_frame_hdr for a table at frame whose FDEs (at frame + off[i])
 * cover code from base + starts[i]; returns its address. */
static uintptr_t fake_hdr(uintptr_t frame, uintptr_t base, const uint64_t *starts,
                          const size_t *off, int n)
{
    /* version 1, eh_frame_ptr udata4, count udata4, table datarel|sdata4 */
    uintptr_t hdr = alloc(12 + 8 * (size_t)n + 16);
    uint8_t h[4] = { 1, 0x03, 0x03, 0x3b };
    memcpy((void *)hdr, h, 4);
    uint32_t v = (uint32_t)frame, count = (uint32_t)n;
    memcpy((void *)(hdr + 4), &v, 4);
    memcpy((void *)(hdr + 8), &count, 4);
    for (int i = 0; i < n; i++) {
        int32_t e[2] = { (int32_t)(base + starts[i] - hdr), (int32_t)(frame + off[i] - hdr) };
        memcpy((void *)(hdr + 12 + 8 * (uintptr_t)i), e, 8);
    }
    return hdr;
}

#if defined(__x86_64__)
/* A CIE of version 1, "zR" or "zRS", absolute 8-byte FDE addresses, code
 * alignment 1, data alignment -8, return address column 16; its initial
 * rules: CFA = rsp + 8, return address at CFA - 8. */
static size_t emit_cie(struct bytes *o, int signal)
{
    size_t at = o->n;
    static const uint8_t z[] = { 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x00,
                                 0x0c, 7, 8, 0x90, 1 };
    static const uint8_t zs[] = { 0, 0, 0, 0, 1, 'z', 'R', 'S', 0, 1, 0x78, 16, 1, 0x00,
                                  0x0c, 7, 8, 0x90, 1 };
    emit_u32(o, signal ? sizeof zs : sizeof z);
    emit(o, signal ? zs : z, signal ? sizeof zs : sizeof z);
    return at;
}

/*
 * A .eh_frame and its .eh_frame_hdr in fake memory for code at base: the
 * leaf is an -O3 frame (CFA = rsp + leaf_cfa after its prologue, rbx at
 * CFA - 16 when leaf_cfa is 48), F_FP a frame-pointer frame, F_ROOT the
 * outermost frame, F_SIG a signal frame, F_GAP without CFI.  Returns the
 * header's address.
 */
static uintptr_t fake_cfi(uintptr_t base, int leaf_cfa)
{
    struct bytes eh = { .n = 0 };
    size_t cie = emit_cie(&eh, 0);
    uint8_t leaf48[] = { 0x41, 0x0e, 16, 0x83, 2, 0x44, 0x0e, 48 };
    /* The second table's leaf restates the return address's rule with
     * offset_extended_sf, F_FP saves rbp with offset_extended: both forms
     * are read as the short one. */
    uint8_t leaf32[] = { 0x41, 0x0e, 32, 0x11, 16, 1 };
    uint8_t fp[] = { 0x41, 0x0e, 16, 0x05, 6, 2, 0x43, 0x0d, 6 };
    uint8_t root[] = { 0x07, 16 };
    size_t f[4];
    f[0] = leaf_cfa == 48 ? emit_fde(&eh, cie, base + F_LEAF, 0x100, leaf48, sizeof leaf48)
                          : emit_fde(&eh, cie, base + F_LEAF, 0x100, leaf32, sizeof leaf32);
    f[1] = emit_fde(&eh, cie, base + F_FP, 0x100, fp, sizeof fp);
    f[2] = emit_fde(&eh, cie, base + F_ROOT, 0x100, root, sizeof root);
    size_t sig = emit_cie(&eh, 1);
    f[3] = emit_fde(&eh, sig, base + F_SIG, 0x100, root, 0);
    emit_u32(&eh, 0);                        /* terminator */
    uintptr_t frame = alloc(eh.n);
    memcpy((void *)frame, eh.b, eh.n);
    static const uint64_t starts[4] = { F_LEAF, F_FP, F_ROOT, F_SIG };
    return fake_hdr(frame, base, starts, f, 4);
}

static void test_rules(void)
{
    uintptr_t page = alloc(8192), base = (page + 4095) & ~(uintptr_t)4095;
    uintptr_t hdr1 = fake_cfi(base, 48), hdr2 = fake_cfi(base, 32);
    struct ps_obj_desc obj = { base, base + F_END, hdr1, "fake.so" };
    CHECK_EQ_INT(ps_objs_replace(&obj, 1), 0);

    /* The stack: the leaf's frame at S (rbx saved at S + 32, the return
     * address into F_FP at S + 40), then F_FP's frame at B = S + 64 (the
     * caller's rbp, the return address into F_ROOT). */
    uintptr_t S = alloc(256), B = S + 64;
    put_i64(S + 32, 0x1111);
    put_ptr(S + 40, base + F_FP + 0x40);
    put_ptr(B, 0x77);
    put_ptr(B + 8, base + F_ROOT + 0x10);
    put_ptr(S + 24, base + F_ROOT + 0x20);   /* where the second table's leaf returns */

    struct ps_regs rs = { .valid = 0 };
    ps_regs_set(&rs, PS_REG_PC, base + F_LEAF + 0x20);
    ps_regs_set(&rs, PS_REG_SP, S);
    ps_regs_set(&rs, PS_REG_FP, B);
    ps_regs_set(&rs, 3, 0x2222);
    uintptr_t out[8];
    int stop;
    struct ps_unwind_counts c0, c1, c2;

    /* The CFI's walk: leaf -> F_FP (by the leaf's CFI, not by rbp, which
     * points at F_FP's frame and would skip it) -> F_ROOT. */
    ps_unwind_counts(rules, &c0);
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &stop), 3);
    CHECK_EQ_INT(stop, PS_STOP_ROOT);
    CHECK_EQ_INT(out[0], base + F_LEAF + 0x20);
    CHECK_EQ_INT(out[1], base + F_FP + 0x40);
    CHECK_EQ_INT(out[2], base + F_ROOT + 0x10);
    ps_unwind_counts(rules, &c1);
    CHECK_EQ_INT(c1.misses - c0.misses, 3);
    CHECK_EQ_INT(c1.hits - c0.hits, 0);
    CHECK_EQ_INT(c1.fp_frames - c0.fp_frames, 1);   /* F_FP's frame, by its CFI */

    /* Again: every rule from the cache, the same walk. */
    memset(out, 0, sizeof out);
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &stop), 3);
    CHECK_EQ_INT(stop, PS_STOP_ROOT);
    CHECK_EQ_INT(out[1], base + F_FP + 0x40);
    CHECK_EQ_INT(out[2], base + F_ROOT + 0x10);
    ps_unwind_counts(rules, &c2);
    CHECK_EQ_INT(c2.hits - c1.hits, 3);
    CHECK_EQ_INT(c2.misses - c1.misses, 0);

    /* Cut after one frame: the frame limit is a cause of its own. */
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 1, &stop), 1);
    CHECK_EQ_INT(stop, PS_STOP_MAX);

    /* A frame-pointer frame whose rbp is 0 is no root: the CFI says rbp
     * holds the frame's base. */
    struct ps_regs fr = { .valid = 0 };
    ps_regs_set(&fr, PS_REG_PC, base + F_FP + 0x40);
    ps_regs_set(&fr, PS_REG_SP, S);
    ps_regs_set(&fr, PS_REG_FP, 0);
    CHECK_EQ_INT(ps_unwind(rules, &fr, out, 8, &stop), 1);
    CHECK(stop != PS_STOP_ROOT);
    /* ... and one whose rbp is not known (a blocked thread: sp, pc). */
    fr.valid &= ~(1ull << PS_REG_FP);
    CHECK_EQ_INT(ps_unwind(rules, &fr, out, 8, &stop), 1);
    CHECK_EQ_INT(stop, PS_STOP_REGISTER);

    /* A signal handler's frame (F_SIG, the trampoline): the walk goes on
     * in the context the kernel saved at sp, here on a stack above (an
     * alternate signal stack is anywhere), interrupted at F_FP's first
     * byte: looked up there, not one byte before (the leaf's CFI, which
     * would read 0x5 at X + 40), then its return address at [X]. */
    uintptr_t U = alloc(sizeof(ucontext_t)), X = alloc(64);
    uintptr_t gregs = U + offsetof(ucontext_t, uc_mcontext.gregs);
    put_ptr(gregs + 8 * REG_RIP, base + F_FP);
    put_ptr(gregs + 8 * REG_RSP, X);
    put_ptr(X, base + F_ROOT + 0x30);
    put_ptr(X + 40, 0x5);
    ps_regs_set(&fr, PS_REG_SP, U);
    for (int i = 0; i < 2; i++) {   /* twice: the second time from the cache */
        ps_regs_set(&fr, PS_REG_PC, base + F_SIG + 0x8);
        memset(out, 0, sizeof out);
        CHECK_EQ_INT(ps_unwind(rules, &fr, out, 8, &stop), 3);
        CHECK_EQ_INT(stop, PS_STOP_ROOT);
        CHECK_EQ_INT(out[1], base + F_FP);
        CHECK_EQ_INT(out[2], base + F_ROOT + 0x30);
    }
    /* A context that is the same signal frame again: handlers nested
     * without end are cut, saying why. */
    put_ptr(gregs + 8 * REG_RIP, base + F_SIG + 0x8);
    put_ptr(gregs + 8 * REG_RSP, U);
    CHECK_EQ_INT(ps_unwind(rules, &fr, out, 8, &stop), 5);
    CHECK_EQ_INT(stop, PS_STOP_SIGNAL);
    ps_regs_set(&fr, PS_REG_SP, S);

    /* No CFI for the pc (the gap): the frame-pointer chain, then CFI. */
    ps_unwind_counts(rules, &c0);
    ps_regs_set(&fr, PS_REG_PC, base + F_GAP + 0x8);
    ps_regs_set(&fr, PS_REG_FP, B);
    CHECK_EQ_INT(ps_unwind(rules, &fr, out, 8, &stop), 2);
    CHECK_EQ_INT(stop, PS_STOP_ROOT);
    CHECK_EQ_INT(out[1], base + F_ROOT + 0x10);
    ps_unwind_counts(rules, &c1);
    CHECK_EQ_INT(c1.nocfi_frames - c0.nocfi_frames, 1);

    /* Another object at the same address whose CFI says otherwise (the
     * leaf's CFA is rsp + 32): the cache must not answer for the old one. */
    obj.eh_hdr = hdr2;
    CHECK_EQ_INT(ps_objs_replace(&obj, 1), 0);
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &stop), 2);
    CHECK_EQ_INT(stop, PS_STOP_ROOT);
    CHECK_EQ_INT(out[1], base + F_ROOT + 0x20);

    /* Gone altogether: its addresses are in no object. */
    CHECK_EQ_INT(ps_objs_replace(NULL, 0), 0);
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &stop), 1);
    CHECK_EQ_INT(stop, PS_STOP_NO_OBJECT);

    /* The real objects again, for what follows. */
    ps_objs_free();
    CHECK_EQ_INT(ps_objs_refresh(0), 1);
}

#else
/*
 * aarch64 CFI: a CIE with code alignment 4, data alignment -8, return
 * address column 30 (x30), initial CFA = sp + 0.  A leaf that saves
 * nothing (its CFA is sp, x30 keeps the return address), a caller with a
 * frame record (CFA = sp + 16, x29 at CFA - 16, x30 at CFA - 8), the root
 * (x30 undefined).  The walk from the leaf must reach the root: the leaf's
 * step leaves sp where it was, which only the interrupted frame may.
 */
static void test_a64_leaf(void)
{
    uintptr_t page = alloc(8192), base = (page + 4095) & ~(uintptr_t)4095;
    struct bytes eh = { .n = 0 };
    static const uint8_t cie[] = { 0, 0, 0, 0, 1, 'z', 'R', 0, 4, 0x78, 30, 1, 0x00,
                                   0x0c, 31, 0 };
    emit_u32(&eh, sizeof cie);
    emit(&eh, cie, sizeof cie);
    uint8_t caller[] = { 0x0e, 16, 0x80 | 29, 2, 0x80 | 30, 1 };
    uint8_t root[] = { 0x07, 30 };
    size_t off[3];
    off[0] = emit_fde(&eh, 0, base + F_LEAF, 0x100, root, 0);
    off[1] = emit_fde(&eh, 0, base + F_FP, 0x100, caller, sizeof caller);
    off[2] = emit_fde(&eh, 0, base + F_ROOT, 0x100, root, sizeof root);
    emit_u32(&eh, 0);
    uintptr_t frame = alloc(eh.n);
    memcpy((void *)frame, eh.b, eh.n);
    static const uint64_t starts[3] = { F_LEAF, F_FP, F_ROOT };
    struct ps_obj_desc obj = { base, base + F_END, fake_hdr(frame, base, starts, off, 3),
                               "fake.so" };
    CHECK_EQ_INT(ps_objs_replace(&obj, 1), 0);

    uintptr_t S = alloc(64);
    put_ptr(S, 0);                           /* the caller's saved x29 */
    put_ptr(S + 8, base + F_ROOT + 0x10);    /* and x30 */
    struct ps_regs rs = { .valid = 0 };
    ps_regs_set(&rs, PS_REG_PC, base + F_LEAF + 0x20);
    ps_regs_set(&rs, PS_REG_SP, S);
    ps_regs_set(&rs, PS_REG_RA, base + F_FP + 0x24);
    uintptr_t out[8];
    int stop;
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &stop), 3);
    CHECK_EQ_INT(stop, PS_STOP_ROOT);
    CHECK_EQ_INT(out[1], base + F_FP + 0x24);
    CHECK_EQ_INT(out[2], base + F_ROOT + 0x10);
    /* A blocked thread's capture has no x30: the leaf ends the walk. */
    rs.valid &= ~(1ull << PS_REG_RA);
    CHECK_EQ_INT(ps_unwind(rules, &rs, out, 8, &stop), 1);
    CHECK_EQ_INT(stop, PS_STOP_REGISTER);
    /* Above frame 0 a frame that does not move sp is no frame. */
    ps_regs_set(&rs, PS_REG_RA, base + F_LEAF + 0x44);   /* "returns" into the leaf */
    CHECK(ps_unwind(rules, &rs, out, 8, &stop) <= 2 && stop == PS_STOP_BAD_FRAME);
    ps_objs_free();
    CHECK_EQ_INT(ps_objs_refresh(0), 1);
}

/* aarch64: what differs from x86-64, on hand-made inputs. */
static void test_rules(void)
{
    test_a64_leaf();

    /* The first argument an svc's -EINTR overwrote, from the instructions
     * before it (nearest first), as glibc 2.36 compiles its wrappers. */
    uint64_t x[31], x0 = 0;
    for (int i = 0; i < 31; i++)
        x[i] = 0x1000 + (uint64_t)i;
    const uint32_t mov_x0_x19[] = { 0xaa1303e0 };
    CHECK_EQ_INT(ps_a64_x0_before(mov_x0_x19, 1, x, 0x8000, &x0), 0);
    CHECK_EQ_INT(x0, x[19]);
    /* sem_clockwait's futex wait: mov x0, x21 under five other moves */
    const uint32_t futex_wait[] = { 0xd2800c48, 0xb2407fe5, 0xd2800004, 0xaa1403e2, 0xaa1303e1,
                                    0xaa1503e0 };
    CHECK_EQ_INT(ps_a64_x0_before(futex_wait, 6, x, 0x8000, &x0), 0);
    CHECK_EQ_INT(x0, x[21]);
    const uint32_t add_imm[] = { 0xd2800c48, 0x91107260 };   /* add x0, x19, #0x41c */
    CHECK_EQ_INT(ps_a64_x0_before(add_imm, 2, x, 0x8000, &x0), 0);
    CHECK_EQ_INT(x0, x[19] + 0x41c);
    const uint32_t add_sp[] = { 0x910013e0 };                /* add x0, sp, #4 */
    CHECK_EQ_INT(ps_a64_x0_before(add_sp, 1, x, 0x8000, &x0), 0);
    CHECK_EQ_INT(x0, 0x8004);
    const uint32_t movz[] = { 0xd2800000 };                  /* pause: mov x0, #0 */
    x0 = 1;
    CHECK_EQ_INT(ps_a64_x0_before(movz, 1, x, 0x8000, &x0), 0);
    CHECK_EQ_INT(x0, 0);
    /* Not recoverable: the source written after the move, x0 from itself,
     * a branch before any move, nothing to read. */
    const uint32_t clobbered[] = { 0xaa0303f5, 0xaa1503e0 };  /* mov x21, x3 after mov x0, x21 */
    CHECK_EQ_INT(ps_a64_x0_before(clobbered, 2, x, 0x8000, &x0), -1);
    const uint32_t sxtw_self[] = { 0x93407c00 };
    CHECK_EQ_INT(ps_a64_x0_before(sxtw_self, 1, x, 0x8000, &x0), -1);
    const uint32_t branch[] = { 0xd28010e8, 0x34000161, 0xaa1303e0 };
    CHECK_EQ_INT(ps_a64_x0_before(branch, 3, x, 0x8000, &x0), -1);
    CHECK_EQ_INT(ps_a64_x0_before(mov_x0_x19, 0, x, 0x8000, &x0), -1);
    CHECK(ps_arch_restartable(98) && ps_arch_restartable(73) && !ps_arch_restartable(139));

    /* The rt_sigreturn trampoline by its code, and the kernel's frame at
     * its sp: a siginfo_t, then the ucontext_t. */
    uintptr_t code = alloc(16);
    put_i64(code, (int64_t)0xd4000001d2801168ull);   /* mov x8, #139; svc #0 */
    CHECK_EQ_INT(ps_is_sigreturn(code), 1);
    CHECK_EQ_INT(ps_is_sigreturn(code + 4), 0);
    CHECK_EQ_INT(ps_is_sigreturn(0x10), 0);
    uintptr_t frame = alloc(sizeof(siginfo_t) + sizeof(ucontext_t));
    ucontext_t *uc = (ucontext_t *)(frame + sizeof(siginfo_t));
    uc->uc_mcontext.regs[29] = 0x7000;
    uc->uc_mcontext.regs[30] = 0x4444;
    uc->uc_mcontext.sp = 0x6ff0;
    uc->uc_mcontext.pc = 0x5555;
    struct ps_regs rs = { .valid = 0 };
    CHECK_EQ_INT(ps_sigframe_regs(frame, &rs), 0);
    CHECK(rs.r[PS_REG_FP] == 0x7000 && rs.r[PS_REG_RA] == 0x4444 && rs.r[PS_REG_SP] == 0x6ff0 &&
          rs.r[PS_REG_PC] == 0x5555);
    put_ptr(frame, 0);

    /* A return address signed with pointer authentication (hint-space
     * pacia1716: a no-op where the CPU has none) comes back plain. */
    register uint64_t x17 __asm__("x17") = (uint64_t)(uintptr_t)&middle;
    register uint64_t x16 __asm__("x16") = 0;
    __asm__ volatile("hint #8" : "+r"(x17) : "r"(x16));   /* pacia1716 */
    fprintf(stderr, "pointer authentication: %s\n",
            x17 != (uint64_t)(uintptr_t)&middle ? "signed" : "absent");
    CHECK_EQ_INT(ps_ret_addr(x17), (uint64_t)(uintptr_t)&middle);
}
#endif

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

/* A PYSAMPLE_STATS counter of ps_native_stats, or -1. */
static long long stat_of(const char *name)
{
    char buf[2048], key[96];
    buf[0] = '\n';   /* so that the first line is found as the others */
    CHECK(ps_native_stats(rules, names, buf + 1, sizeof buf - 1) > 0);
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(buf, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

static void test_merge(void)
{
    long long root = stat_of("native_root"), mism = stat_of("native_mismatch"),
              unav = stat_of("native_unavailable"), tmax = stat_of("native_truncated_max"),
              tr = stat_of("native_truncated");
    struct ps_symtab t;
    CHECK_EQ_INT(ps_symtab_init(&t, 1000), 0);
    uint32_t a = ps_sym_python(&t, "py_a", "x.py"), b = ps_sym_python(&t, "py_b", "x.py");
    /* Innermost first: py_b then py_a, one evaluation-loop call. */
    struct ps_pyframe py[2] = { { ps_frame(b, 2), 0 }, { ps_frame(a, 1), 1 } };
    uint64_t st[PS_NATIVE_MAX + 8];
    char buf[4096];

    const struct ps_native_merge_req on = { .names = names, .syms = &t, .mode = PS_NATIVE_ON,
                                            .py = py, .npy = 2,
                                            .pcs = pcs, .npcs = npcs, .out = st,
                                            .cap = PS_NATIVE_MAX + 8 };
    int d = ps_native_merge(&on);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK_EQ_STR(buf, "py_a;py_b;middle;leaf_capture");

    /* all: outer, main and the C library's start-up stay, below. */
    struct ps_native_merge_req all = on;
    all.mode = PS_NATIVE_ALL;
    d = ps_native_merge(&all);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK(strncmp(buf, "_start;", 7) == 0 && strstr(buf, ";main;") != NULL);
    CHECK(strstr(buf, ";outer;py_a;py_b;middle;leaf_capture") != NULL);
    if (strstr(buf, ";outer;py_a;py_b;middle;leaf_capture") == NULL)
        fprintf(stderr, "  all: %s\n", buf);

    /* A walk that stopped below the evaluation loop: the Python frames it
     * did not reach at the root, then the marker. */
    struct ps_native_merge_req cut = on;
    cut.npcs = 2;
    cut.stop = PS_STOP_MAX;
    d = ps_native_merge(&cut);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK_EQ_STR(buf, "py_a;py_b;[native: truncated];middle;leaf_capture");

    /* Two Python calls for one evaluation-loop frame, and a full walk. */
    py[0].entry = 1;
    d = ps_native_merge(&on);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK_EQ_STR(buf, "py_a;py_b;[native: mismatch]");

    /* No native part. */
    struct ps_native_merge_req none = on;
    none.npcs = 0;
    none.no_native_why = "[native: unavailable]";
    none.cap = 8;
    d = ps_native_merge(&none);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK_EQ_STR(buf, "py_a;py_b;[native: unavailable]");

    /* The room given is respected. */
    py[0].entry = 0;
    struct ps_native_merge_req tight = on;
    tight.cap = 3;
    CHECK_EQ_INT(ps_native_merge(&tight), 3);

    /* The table emptied (a reset after it met its limit) and refilled in
     * another order: the native frames' ids cached per address belong to
     * the old table, and are not used (the stack would name py_a or a
     * marker where middle and leaf_capture are). */
    ps_symtab_clear(&t);
    uint32_t x = ps_sym_python(&t, "py_x", "y.py"), y = ps_sym_python(&t, "py_y", "y.py");
    a = ps_sym_python(&t, "py_a", "x.py");
    b = ps_sym_python(&t, "py_b", "x.py");
    CHECK(x != 0 && y != 0);
    py[0].frame = ps_frame(b, 2);
    py[1].frame = ps_frame(a, 1);
    d = ps_native_merge(&on);
    names_of(&t, st, d, buf, sizeof buf);
    CHECK_EQ_STR(buf, "py_a;py_b;middle;leaf_capture");
    ps_symtab_free(&t);

    /* Each merge counted once, by outcome. */
    CHECK_EQ_INT(stat_of("native_root") - root, 4);
    CHECK_EQ_INT(stat_of("native_mismatch") - mism, 1);
    CHECK_EQ_INT(stat_of("native_unavailable") - unav, 1);
    CHECK_EQ_INT(stat_of("native_truncated_max") - tmax, 1);
    CHECK_EQ_INT(stat_of("native_truncated") - tr, 1);
    char small[16];
    CHECK_EQ_INT(ps_native_stats(rules, names, small, sizeof small), 0);

    /* A forked child's counts start from zero. */
    CHECK(stat_of("native_unwinds") > 0);
    ps_native_stats_reset(rules, names);
    CHECK_EQ_INT(stat_of("native_root"), 0);
    CHECK_EQ_INT(stat_of("native_truncated_max"), 0);
    CHECK_EQ_INT(stat_of("native_unwinds"), 0);
}

/* A real signal handler's frame: the unwind from inside the handler goes
 * through the trampoline into raise() and on to raiser and main. */
static volatile sig_atomic_t in_handler;
static uintptr_t sig_pcs[PS_NATIVE_MAX];
static int sig_n, sig_stop;

static void on_usr1(int sig)
{
    (void)sig;
    ucontext_t uc;
    struct ps_regs rs;
    getcontext(&uc);
    ps_regs_from_context(&uc, &rs);
    sig_n = ps_unwind(rules, &rs, sig_pcs, PS_NATIVE_MAX, &sig_stop);
    in_handler++;
}

NOINLINE static void raiser(void)
{
    raise(SIGUSR1);
    sink++;
}

static void test_signal_frame(void)
{
    struct ps_unwind_counts c0, c1;
    signal(SIGUSR1, on_usr1);
    ps_unwind_counts(rules, &c0);
    raiser();
    ps_unwind_counts(rules, &c1);
    signal(SIGUSR1, SIG_DFL);
    CHECK_EQ_INT(in_handler, 1);
    CHECK(c1.signal_frames > c0.signal_frames);
    int r = -1, m = -1;
    for (int i = 1; i < sig_n; i++) {
        const char *s = name_at(sig_pcs[i] - 1);
        if (s != NULL && strcmp(s, "raiser") == 0 && r < 0)
            r = i;
        if (s != NULL && strcmp(s, "main") == 0)
            m = i;
    }
    CHECK(r > 1 && m > r);
    CHECK_EQ_INT(sig_stop, PS_STOP_ROOT);
    if (r < 0 || m < 0)
        for (int i = 0; i < sig_n; i++)
            fprintf(stderr, "  #%d %#lx %s\n", i, (unsigned long)sig_pcs[i],
                    name_at(i == 0 ? sig_pcs[i] : sig_pcs[i] - 1) ?: "?");
    in_handler = 0;
}

static void run_all(const char *path)
{
    fprintf(stderr, "read path: %s\n", path);
    npcs = 0;
    test_unwind();
    test_merge();
    test_rules();
    test_signal_frame();
}

int main(void)
{
    CHECK_EQ_INT(ps_mem_init(), 0);
    rules = ps_unwind_rules_new();
    names = ps_native_names_new();
    CHECK(rules != NULL && names != NULL);
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
    return 77;   /* skipped: native stacks are x86-64 and aarch64 Linux only */
}
#endif
