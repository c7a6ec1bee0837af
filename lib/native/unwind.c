/*
 * unwind.c - a thread's registers into its chain of return addresses.
 *
 * x86-64 and aarch64 (platform/arch.h: register numbers, the return
 * address column): DWARF call frame information, read by cfi.c from the
 * .eh_frame_hdr of the object containing pc: the CFA and where the
 * caller's registers were saved.  CFI it does not follow (an expression
 * other than the PLT stubs', 64-bit DWARF) or a CFA register whose value
 * is unknown stops the walk, which is then reported truncated, with why
 * (enum ps_unwind_stop); it is never guessed.  An object with no unwind
 * information for pc falls back to the frame pointer chain (x86-64: [rbp]
 * and [rbp + 8]; aarch64: the x29 chain, [x29] and [x29 + 8]), as do
 * other architectures, which have no CFI reader.
 *
 * The common case is cheap: what the CFI says for an address is compiled
 * into a small rule (CFA register and offset, where the return address
 * and the saved registers are) and cached per address, so a return
 * address seen before costs one lookup and, for the frame, one read of
 * its saved registers.  Where the CFI for an address is the standard rbp
 * frame (3.15 and other code built with frame pointers), the step is the
 * frame-pointer step: one 16-byte read.  The CFI stays the authority: the
 * frame-pointer chain is followed without it only where there is none.
 *
 * The walk reads memory of a thread that may be running (a blocked thread
 * can wake up): every load goes through ps_read(), every step must move
 * the stack pointer up, and every return address must lie inside a loaded
 * object's code.  The root is where the CFI marks the return address
 * undefined (_start, clone/clone3 thread starts) or a frame pointer or
 * return address of 0.  Frame 0 is the interrupted pc itself, looked up
 * as is; the others are return addresses, looked up at pc - 1.  A signal
 * handler's frame (Linux: the C library's return trampoline) is crossed
 * into the context the signal interrupted, from the kernel's signal frame.
 *
 * No allocation, no lock: it runs while a thread is held in our handler
 * (its rule cache is allocated once, at the sampler's set-up).
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "native/cfi.h"
#include "util/counters.h"
#include "memory/memread.h"
#include "native/native.h"
#include "platform/platform.h"

/* A stack frame larger than this between two return addresses is taken as
 * a wrong step (the thread stacks here are at most a few MiB; one frame
 * of more than 16 MiB is no real frame). */
#define PS_MAX_FRAME (16u << 20)
/* Signal handlers' frames one walk goes through (nested handlers). */
#define PS_SIGNAL_FRAMES 4

/* ---- frame pointers ------------------------------------------------------ */

/* Counters of how frames were unwound (PYSAMPLE_STATS), in the rules
 * (struct ps_unwind_rules), written by their thread only: relaxed loads
 * and stores, no read-modify-write. */
enum { C_HITS, C_MISSES, C_FP, C_NOCFI, C_SIGNAL, C_WALKS, C_FRAMES, C_NS, C_N };
#define ADD(x, v)                                                                  \
    atomic_store_explicit(&(x), atomic_load_explicit(&(x), memory_order_relaxed) + (v), \
                          memory_order_relaxed)
#define BUMP(x) ADD(x, 1)

/* One step along the frame-pointer chain: [fp] the caller's fp, [fp + 8]
 * the return address.  1 on success, 0 at the root, -cause to stop.  A
 * zero fp is the root only where no CFI says there is a frame (cfi 0:
 * code without unwind tables); where the CFI says rbp holds this frame's
 * base (cfi 1), it is a register that does not hold what it should. */
static int fp_step(struct ps_regs *rs, int cfi)
{
    if (!ps_regs_has(rs, PS_REG_FP))
        return -PS_STOP_REGISTER;
    uint64_t fp = rs->r[PS_REG_FP], sp = rs->r[PS_REG_SP];
    if (fp == 0 && !cfi)
        return 0;
    if ((fp & 7) != 0 || fp < sp || fp - sp > PS_MAX_FRAME)
        return -PS_STOP_BAD_FRAME;
    uint64_t pair[2];
    if (ps_read(pair, (uintptr_t)fp, sizeof pair) != 0)
        return -PS_STOP_READ;
    uint64_t ra = ps_ret_addr(pair[1]);
    if (ra == 0)
        return 0;
    ps_regs_set(rs, PS_REG_FP, pair[0]);
    ps_regs_set(rs, PS_REG_SP, fp + 16);
    ps_regs_set(rs, PS_REG_PC, ra);
    return 1;
}

/*
 * Whether a step from a frame may leave the stack pointer where it is.
 * Where the return address is in a register (aarch64's x30), a leaf
 * function that never saves it has no frame at all: its CFA is sp, and so
 * is its caller's sp.  Only the frame that was interrupted (exact: frame
 * 0, or the context a signal frame saved) can be such a leaf; every frame
 * above it made a call, and so has a frame.
 */
static int leaf_may_stay(int exact)
{
    return exact && PS_REG_RA != PS_REG_PC;
}

#if PS_ARCH_CFI

/* ---- the rule cache ------------------------------------------------------ */

/*
 * What the CFI says for one lookup address, compiled: where the CFA is
 * and how each register that does not keep its value is had.  Filled the
 * first time an address is unwound through, so that a return address
 * seen again costs one lookup here instead of a binary search of the
 * .eh_frame_hdr, two record copies of up to 4 KiB and a CFI program.
 * Direct-mapped, one entry per address.  Negative answers are kept too
 * (no CFI there: frame pointers; CFI we do not follow; a signal frame);
 * what depends on more than the address is not (a CFA expression, which
 * is computed from the registers: PLT stubs; a table we could not read).
 *
 * One thread uses it, the sampler's: ps_unwind runs there, and so does
 * ps_objs_refresh; ps_unwind forgets the cache whenever the list of
 * loaded objects changed (ps_objs_generation), so no entry outlives the code it describes
 * (an object unloaded and another loaded at its address).  No lock, no
 * atomics; a thread held in our handler never touches it.
 */
#define PS_RULES 2048       /* entries, a power of two: 2048 * 88 bytes */
#define PS_RULE_SAVED PS_ARCH_RULE_SAVED   /* registers one rule restores */

enum kind { K_ROW = 1, K_NOCFI, K_STOP };
enum how { H_OFFSET = 1, H_VAL_OFFSET, H_REG, H_DROP };

struct urule {
    uintptr_t at;           /* the lookup address */
    uint32_t gen;           /* the rules' gen when filled (0: never) */
    uint8_t kind;
    uint8_t stop;           /* K_STOP: why (enum ps_unwind_stop) */
    int8_t cfa_reg;         /* -1: the CFA is an expression's (never cached) */
    uint8_t root;           /* the return address is undefined: the outermost frame */
    uint8_t fp;             /* CFA = rbp + 16, return address at -8, rbp at -16 */
    uint8_t n;              /* saved[0..n) */
    int32_t cfa_off;
    struct { int32_t off; uint8_t reg, how; } saved[PS_RULE_SAVED];
};

/* The sampler's cache of rules (native.h): its context's, not a
 * file-level table, and allocated only where native stacks are asked
 * for. */
struct ps_unwind_rules {
    _Atomic uint64_t counts[C_N];
    uint32_t objs_seen;     /* ps_objs_generation() the rules are for */
    uint32_t gen;           /* valid entries are of this generation */
    struct urule slot[PS_RULES];
};

static void forget_rules(struct ps_unwind_rules *ur)
{
    if (++ur->gen == 0) {   /* wrapped: no old entry may look valid */
        memset(ur->slot, 0, sizeof ur->slot);
        ur->gen = 1;
    }
}

/* The offset reg is saved at, or 1 if it is not saved at CFA + offset. */
static int64_t saved_at(const struct urule *ru, int reg)
{
    for (int i = 0; i < ru->n; i++)
        if (ru->saved[i].reg == reg)
            return ru->saved[i].how == H_OFFSET ? ru->saved[i].off : 1;
    return 1;
}

/* row as a rule; -1 if it does not fit one (a CFA register we do not
 * track, more than PS_RULE_SAVED registers, offsets beyond 2 GiB). */
static int compile(const struct ps_cfi_row *row, struct urule *ru)
{
    ru->kind = K_ROW;
    ru->cfa_reg = -1;
    if (!row->cfa_unknown) {
        if (row->cfa_reg < 0 || row->cfa_reg >= PS_REG_N || row->cfa_off != (int32_t)row->cfa_off)
            return -1;
        ru->cfa_reg = (int8_t)row->cfa_reg;
        ru->cfa_off = (int32_t)row->cfa_off;
    }
    for (int i = 0; i < PS_REG_N; i++) {
        uint8_t how;
        switch (row->rule[i]) {
        case PS_CFI_SAME: continue;
        case PS_CFI_OFFSET: how = H_OFFSET; break;
        case PS_CFI_VAL_OFFSET: how = H_VAL_OFFSET; break;
        case PS_CFI_REG: how = H_REG; break;
        case PS_CFI_UNDEF:
            if (i == PS_REG_RA) {
                ru->root = 1;
                continue;
            }
            how = H_DROP;
            break;
        default: how = H_DROP; break;
        }
        if (ru->n == PS_RULE_SAVED || row->arg[i] != (int32_t)row->arg[i])
            return -1;
        ru->saved[ru->n].reg = (uint8_t)i;
        ru->saved[ru->n].how = how;
        ru->saved[ru->n].off = (int32_t)row->arg[i];
        ru->n++;
    }
    ru->fp = ru->cfa_reg == PS_REG_FP && ru->cfa_off == 16 && saved_at(ru, PS_REG_RA) == -8 &&
             saved_at(ru, PS_REG_FP) == -16;
    return 0;
}

/* What the CFI says for at, into ru: a rule, no CFI, or a stop and why.
 * Returns 1 if that may be cached, 0 if not, -PS_STOP_NO_OBJECT if at is
 * in no loaded object's code. */
static int find_rule(uintptr_t at, const struct ps_regs *rs, struct urule *ru, uint64_t *cfa)
{
    memset(ru, 0, sizeof *ru);
    const struct ps_obj *o = ps_objs_find(at);
    if (o == NULL)
        return -PS_STOP_NO_OBJECT;
    uintptr_t hdr = ps_obj_eh_frame_hdr(o);
    struct ps_cfi_row row;
    int rc = hdr == 0 ? -1 : ps_cfi_row(hdr, at, rs, &row, cfa);
    if (rc == -1) {
        ru->kind = K_NOCFI;
    } else if (rc < 0) {
        ru->kind = K_STOP;
        ru->stop = (uint8_t)-rc;
        return rc != -PS_STOP_READ;
    } else if (compile(&row, ru) != 0) {
        ru->kind = K_STOP;
        ru->stop = PS_STOP_CFI;
    }
    return ru->kind != K_ROW || ru->cfa_reg >= 0;
}

/* The registers saved relative to the CFA lie side by side (pushed at
 * entry): one read takes them all into blk (size bytes).  1 if it did, 0
 * if each is to be read on its own; *lo_out: blk's offset from the CFA. */
static int read_saved_block(const struct urule *ru, uint64_t cfa, uint8_t *blk, size_t size,
                            int64_t *lo_out)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int i = 0; i < ru->n; i++)
        if (ru->saved[i].how == H_OFFSET) {
            lo = ru->saved[i].off < lo ? ru->saved[i].off : lo;
            hi = ru->saved[i].off + 8 > hi ? ru->saved[i].off + 8 : hi;
        }
    *lo_out = lo;
    return lo < hi && hi - lo <= (int64_t)size &&
           ps_read(blk, (uintptr_t)(cfa + (uint64_t)lo), (size_t)(hi - lo)) == 0;
}

/* The registers the rule names, as the frame at cfa saved them, into
 * next.  0, or -PS_STOP_READ. */
static int restore_saved(const struct urule *ru, uint64_t cfa, const struct ps_regs *rs,
                         struct ps_regs *next)
{
    uint8_t blk[PS_RULE_SAVED * 16];
    int64_t lo;
    int have = read_saved_block(ru, cfa, blk, sizeof blk, &lo);
    for (int i = 0; i < ru->n; i++) {
        int r = ru->saved[i].reg, off = ru->saved[i].off;
        uint64_t v;
        switch (ru->saved[i].how) {
        case H_OFFSET:
            if (have)
                memcpy(&v, blk + (off - lo), 8);
            else if (ps_read(&v, (uintptr_t)(cfa + (uint64_t)(int64_t)off), 8) != 0)
                return -PS_STOP_READ;
            ps_regs_set(next, r, v);
            break;
        case H_VAL_OFFSET:
            ps_regs_set(next, r, cfa + (uint64_t)(int64_t)off);
            break;
        case H_REG:   /* from a register we may not know */
            if (ps_regs_has(rs, off))
                ps_regs_set(next, r, rs->r[off]);
            else
                next->valid &= ~(1ull << r);
            break;
        default:      /* H_DROP */
            next->valid &= ~(1ull << r);
            break;
        }
    }
    return 0;
}

/*
 * Applies a rule to rs (cfa: the CFA, where the rule's is an
 * expression's).  A frame whose CFI is the standard rbp frame and
 * nothing else is one frame-pointer step.
 */
static int apply(const struct urule *ru, uint64_t cfa, struct ps_regs *rs, int exact)
{
    if (ru->root)
        return 0;
    if (ru->fp && ru->n == 2)
        return fp_step(rs, 1);
    if (ru->cfa_reg >= 0) {
        if (!ps_regs_has(rs, ru->cfa_reg))
            return -PS_STOP_REGISTER;
        cfa = rs->r[ru->cfa_reg] + (uint64_t)(int64_t)ru->cfa_off;
    }
    uint64_t sp = rs->r[PS_REG_SP];
    if (cfa < sp || (cfa == sp && !leaf_may_stay(exact)) || cfa - sp > PS_MAX_FRAME)
        return -PS_STOP_BAD_FRAME;
    struct ps_regs next = *rs;   /* same_value for what the rule does not name */
    int rc = restore_saved(ru, cfa, rs, &next);
    if (rc != 0)
        return rc;
    /* The caller's pc is the return address column's value (x86-64: pc's
     * own slot; aarch64: x30, which a leaf may never have saved, and which
     * a blocked thread's capture does not have). */
    if (!ps_regs_has(&next, PS_REG_RA))
        return PS_REG_RA == PS_REG_PC ? -PS_STOP_CFI : -PS_STOP_REGISTER;
    uint64_t ra = ps_ret_addr(next.r[PS_REG_RA]);
    if (ra == 0)
        return 0;
    ps_regs_set(&next, PS_REG_PC, ra);
    ps_regs_set(&next, PS_REG_SP, cfa);
    *rs = next;
    return 1;
}

/*
 * Through a signal handler's frame: pc is the trampoline the handler
 * returns to (x86-64 Linux: the C library's __restore_rt, whose CIE is
 * marked 'S'; aarch64 Linux: the vDSO's, marked the same, or an
 * emulator's, known by its code: ps_is_sigreturn), where the stack
 * pointer locates the registers the kernel saved for the interrupted
 * context (the kernel's signal frame layout, an ABI: the platform reads
 * it, platform/stacks.h).  The walk goes on from the interrupted pc,
 * which is exact, not a return address; that context may be on another
 * stack (sigaltstack), so the step need not move up.  2, or -cause.
 */
static int sigframe_step(struct ps_unwind_rules *ur, struct ps_regs *rs)
{
    if (ps_sigframe_regs(rs->r[PS_REG_SP], rs) != 0)
        return -PS_STOP_READ;
    BUMP(ur->counts[C_SIGNAL]);
    return 2;
}

/* One CFI step (frame pointers where there is no CFI): 1, 0 at the root,
 * 2 into an interrupted context (exact pc, maybe another stack), or
 * -cause. */
static int cfi_step(struct ps_unwind_rules *ur, struct ps_regs *rs, int first)
{
    uintptr_t pc = rs->r[PS_REG_PC], at = first ? pc : pc - 1;
    struct urule *slot = &ur->slot[(at ^ (at >> 11) ^ (at >> 22)) & (PS_RULES - 1)];
    struct urule fresh;
    const struct urule *ru = slot;
    uint64_t cfa = 0;
    if (slot->gen == ur->gen && slot->at == at) {
        BUMP(ur->counts[C_HITS]);
    } else {
        int keep = find_rule(at, rs, &fresh, &cfa);
        if (keep == -PS_STOP_NO_OBJECT && ps_is_sigreturn(pc))
            return sigframe_step(ur, rs);
        if (keep < 0)
            return keep;
        BUMP(ur->counts[C_MISSES]);
        ru = &fresh;
        if (keep) {
            fresh.at = at;
            fresh.gen = ur->gen;
            *slot = fresh;
        }
    }
    switch (ru->kind) {
    case K_NOCFI:
        BUMP(ur->counts[C_NOCFI]);
        return fp_step(rs, 0);
    case K_STOP:
        if (ru->stop == PS_STOP_SIGNAL)
            return sigframe_step(ur, rs);
        return -ru->stop;
    default:
        if (ru->fp)
            BUMP(ur->counts[C_FP]);
        return apply(ru, cfa, rs, first);
    }
}

#else

struct ps_unwind_rules {
    _Atomic uint64_t counts[C_N];
    uint32_t objs_seen;     /* (no rules where CFI is not followed) */
};

static void forget_rules(struct ps_unwind_rules *ur)
{
    (void)ur;
}

#endif /* PS_ARCH_CFI */

/* Frame 0 without its frame record (native.h, the frame-0 contract): its
 * return address is frame 1, and the registers already describe that
 * caller's frame.  0, or PS_STOP_NO_OBJECT. */
static int leaf_return(struct ps_regs *rs)
{
    rs->valid &= ~PS_REGS_LEAF_RET;
    if (ps_objs_find((uintptr_t)rs->leaf_ret - 1) == NULL)
        return PS_STOP_NO_OBJECT;
    rs->r[PS_REG_PC] = rs->leaf_ret;
    return 0;
}

/* One step up from rs: 1, 2 into an interrupted context (exact pc, maybe
 * another stack), 0 at the root, or -cause.  Frame pointers only where
 * this CPU's CFI is not followed. */
static int step(struct ps_unwind_rules *ur, struct ps_regs *rs, int exact)
{
#if PS_ARCH_CFI
    return cfi_step(ur, rs, exact);
#else
    (void)ur;
    (void)exact;
    return fp_step(rs, 0);
#endif
}

/* Whether a step from old_sp (from an exact pc: was_exact) to rs landed
 * in a frame: 0 if it did, else why not. */
static int landed(const struct ps_regs *rs, uint64_t old_sp, int was_exact, int exact)
{
    /* A stack that did not move up, or a return address outside every
     * object's code: not a frame. */
    if (!exact && (rs->r[PS_REG_SP] < old_sp ||
                   (rs->r[PS_REG_SP] == old_sp && !leaf_may_stay(was_exact))))
        return PS_STOP_BAD_FRAME;
    /* ... a pc in no object may still be a signal trampoline (an
     * emulator's page of its own: ps_is_sigreturn). */
    if (ps_objs_find((uintptr_t)rs->r[PS_REG_PC] - !exact) == NULL &&
        !ps_is_sigreturn(rs->r[PS_REG_PC]))
        return PS_STOP_NO_OBJECT;
    return 0;
}

static int walk(struct ps_unwind_rules *ur, const struct ps_regs *regs, uintptr_t *pcs, int max,
                int *stop)
{
    struct ps_regs rs = *regs;
    int n = 0;
    *stop = PS_STOP_ROOT;
    if (!ps_regs_has(&rs, PS_REG_PC) || !ps_regs_has(&rs, PS_REG_SP)) {
        *stop = PS_STOP_NO_REGS;
        return 0;
    }
    /* exact: pc is where the thread stopped (frame 0, or the context a
     * signal interrupted), not a return address.  Signal frames crossed
     * may change stacks: a few only (each is a handler running). */
    int exact = 1, signals = 0;
    for (;;) {
        if (n >= max) {
            *stop = PS_STOP_MAX;
            return n;
        }
        pcs[n++] = (uintptr_t)rs.r[PS_REG_PC];
        if (rs.valid & PS_REGS_LEAF_RET) {
            *stop = leaf_return(&rs);
            if (*stop != PS_STOP_ROOT)
                return n;
            continue;
        }
        uint64_t old_sp = rs.r[PS_REG_SP];
        int was_exact = exact;
        int rc = step(ur, &rs, exact);
        if (rc <= 0) {
            *stop = -rc;
            return n;
        }
        exact = rc == 2;
        if (exact && ++signals > PS_SIGNAL_FRAMES) {
            *stop = PS_STOP_SIGNAL;
            return n;
        }
        *stop = landed(&rs, old_sp, was_exact, exact);
        if (*stop != PS_STOP_ROOT)
            return n;
    }
}

struct ps_unwind_rules *ps_unwind_rules_new(void)
{
    struct ps_unwind_rules *ur = calloc(1, sizeof *ur);
    if (ur != NULL)
        forget_rules(ur);   /* generation 1: no zeroed slot looks valid */
    return ur;
}

int ps_unwind(struct ps_unwind_rules *ur, const struct ps_regs *regs, uintptr_t *pcs, int max,
              int *stop)
{
    if (ps_objs_generation() != ur->objs_seen) {
        ur->objs_seen = ps_objs_generation();
        forget_rules(ur);
    }
    uint64_t t0 = ps_now_ns();
    int n = walk(ur, regs, pcs, max, stop);
    ADD(ur->counts[C_NS], ps_now_ns() - t0);
    ADD(ur->counts[C_FRAMES], (uint64_t)n);
    ADD(ur->counts[C_WALKS], 1);
    return n;
}

void ps_unwind_counts(struct ps_unwind_rules *ur, struct ps_unwind_counts *c)
{
    uint64_t v[C_N];
    ps_counters_read(ur->counts, v, C_N);
    *c = (struct ps_unwind_counts){ .hits = v[C_HITS], .misses = v[C_MISSES], .fp_frames = v[C_FP],
                                    .nocfi_frames = v[C_NOCFI], .signal_frames = v[C_SIGNAL],
                                    .walks = v[C_WALKS], .frames = v[C_FRAMES], .ns = v[C_NS] };
}

void ps_unwind_counts_reset(struct ps_unwind_rules *ur)
{
    ps_counters_zero(ur->counts, C_N);
}
