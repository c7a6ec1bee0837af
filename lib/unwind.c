/*
 * unwind.c - a thread's registers into its chain of return addresses.
 *
 * x86-64: DWARF call frame information, found the way the C runtime finds
 * it for exceptions: the object containing pc (elfsyms.c) has a
 * .eh_frame_hdr mapped in memory, whose sorted table gives the FDE by
 * binary search; the FDE's CIE and instructions are run up to pc and give
 * the CFA and where the caller's registers were saved.  Only the rules that
 * gcc and clang emit for ordinary code are followed (def_cfa with offsets,
 * offset/val_offset/register/same/undefined, remember/restore_state), and
 * the register-arithmetic CFA expression of PLT stubs.  Anything else
 * (other expressions, 64-bit DWARF, a CFA register whose value is
 * unknown) stops the walk, which is then reported
 * truncated, with why (enum ps_unwind_stop); it is never guessed.  An
 * object with no unwind information for pc falls back to the frame
 * pointer chain, as do architectures other than x86-64 (compiled and
 * walked by frame pointers only: aarch64).
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
 * No allocation, no lock: it runs while a thread is held in our handler.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/ucontext.h>
#endif

#include "counters.h"
#include "memread.h"
#include "native.h"

/* A stack frame larger than this between two return addresses is taken as
 * a wrong step (the thread stacks here are at most a few MiB; one frame
 * of more than 16 MiB is no real frame). */
#define PS_MAX_FRAME (16u << 20)
/* Signal handlers' frames one walk goes through (nested handlers). */
#define PS_SIGNAL_FRAMES 4

/* ---- frame pointers ------------------------------------------------------ */

/* Counters of how frames were unwound (PYSAMPLE_STATS), written by the
 * sampler thread only: relaxed loads and stores, no read-modify-write. */
enum { C_HITS, C_MISSES, C_FP, C_NOCFI, C_SIGNAL, C_WALKS, C_FRAMES, C_NS, C_N };
static _Atomic uint64_t counts[C_N];
#define ADD(x, v) atomic_store_explicit(&(x), atomic_load_explicit(&(x), memory_order_relaxed) + (v), \
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

#if defined(__x86_64__)

/* ---- DWARF CFI ----------------------------------------------------------- */

#define DW_EH_PE_omit 0xff
#define DW_EH_PE_absptr 0x00
#define DW_EH_PE_uleb128 0x01
#define DW_EH_PE_udata2 0x02
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_udata8 0x04
#define DW_EH_PE_sleb128 0x09
#define DW_EH_PE_sdata2 0x0a
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_sdata8 0x0c
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30
#define DW_EH_PE_indirect 0x80

#define PS_CFI_MAX 4096   /* bytes of one CIE or FDE we copy */
#define PS_CFI_STATES 8   /* remember_state depth */

enum rule { R_SAME = 0, R_UNDEF, R_OFFSET, R_VAL_OFFSET, R_REG, R_UNKNOWN };

struct cfi_row {
    int cfa_reg;
    int64_t cfa_off;
    int cfa_unknown;        /* def_cfa_expression ... */
    const uint8_t *cfa_expr; /* ... this one, inside the copied record */
    uint64_t cfa_expr_len;
    uint8_t rule[PS_REG_N];
    int64_t arg[PS_REG_N];
};

/* A cursor over one copied record; a read past its end sets bad. */
struct cur {
    const uint8_t *p, *end;
    uintptr_t addr_of_start; /* where buf[0] lives in the target, for pcrel */
    const uint8_t *start;
    int bad;
};

static uint64_t rd_u(struct cur *c, size_t n)
{
    uint64_t v = 0;
    if ((size_t)(c->end - c->p) < n) {
        c->bad = 1;
        c->p = c->end;
        return 0;
    }
    memcpy(&v, c->p, n);   /* little-endian */
    c->p += n;
    return v;
}

static uint64_t rd_uleb(struct cur *c)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (c->p < c->end) {
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            return v;
    }
    c->bad = 1;
    return 0;
}

static int64_t rd_sleb(struct cur *c)
{
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0x80;
    while (c->p < c->end) {
        b = *c->p++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    if (b & 0x80) {
        c->bad = 1;
        return 0;
    }
    if (shift < 64 && (b & 0x40))
        v |= -(int64_t)((uint64_t)1 << shift);
    return v;
}

/* A pointer in encoding enc; datarel is relative to data_base. */
static uint64_t rd_enc(struct cur *c, uint8_t enc, uintptr_t data_base)
{
    if (enc == DW_EH_PE_omit)
        return 0;
    uintptr_t here = c->addr_of_start + (uintptr_t)(c->p - c->start);
    uint64_t v;
    switch (enc & 0x0f) {
    case DW_EH_PE_absptr: v = rd_u(c, 8); break;
    case DW_EH_PE_uleb128: v = rd_uleb(c); break;
    case DW_EH_PE_udata2: v = rd_u(c, 2); break;
    case DW_EH_PE_udata4: v = rd_u(c, 4); break;
    case DW_EH_PE_udata8: v = rd_u(c, 8); break;
    case DW_EH_PE_sleb128: v = (uint64_t)rd_sleb(c); break;
    case DW_EH_PE_sdata2: v = (uint64_t)(int64_t)(int16_t)rd_u(c, 2); break;
    case DW_EH_PE_sdata4: v = (uint64_t)(int64_t)(int32_t)rd_u(c, 4); break;
    case DW_EH_PE_sdata8: v = rd_u(c, 8); break;
    default: c->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0: break;
    case DW_EH_PE_pcrel: v += here; break;
    case DW_EH_PE_datarel: v += data_base; break;
    default: c->bad = 1; return 0;   /* textrel, funcrel: not emitted for x86-64 */
    }
    if (enc & DW_EH_PE_indirect)
        c->bad = 1;   /* only in personality pointers, which we skip over */
    return v;
}

/* Copies the CIE or FDE record at addr (length word included) into buf.
 * 0; -1 if it is no record we read (a terminator, 64-bit DWARF, which is
 * not emitted for .eh_frame, or longer than PS_CFI_MAX); -PS_STOP_READ. */
static int read_record(uintptr_t addr, uint8_t *buf, size_t *len)
{
    uint32_t l32;
    if (ps_read(&l32, addr, 4) != 0)
        return -PS_STOP_READ;
    if (l32 == 0 || l32 == 0xffffffffu || (size_t)l32 + 4 > PS_CFI_MAX)
        return -1;
    if (ps_read(buf, addr, (size_t)l32 + 4) != 0)
        return -PS_STOP_READ;
    *len = (size_t)l32 + 4;
    return 0;
}

/*
 * Finds the FDE covering pc through the binary search table of the
 * .eh_frame_hdr at hdr.  Only the table encoding every toolchain emits
 * (datarel|sdata4 pairs, sorted) is read.  0 with *fde set; -1 if the
 * table has no entry for pc; -PS_STOP_READ.
 */
static int find_fde(uintptr_t hdr, uintptr_t pc, uintptr_t *fde)
{
    uint8_t h[4];
    if (ps_read(h, hdr, 4) != 0)
        return -PS_STOP_READ;
    if (h[0] != 1 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
        return -1;
    uint8_t rest[16];
    if (ps_read(rest, hdr + 4, sizeof rest) != 0)
        return -PS_STOP_READ;
    struct cur c = { rest, rest + sizeof rest, hdr + 4, rest, 0 };
    (void)rd_enc(&c, h[1], hdr);                /* eh_frame_ptr */
    uint64_t count = rd_enc(&c, h[2], hdr);
    if (c.bad || count == 0 || count > (1u << 24))
        return -1;
    uintptr_t table = hdr + 4 + (uintptr_t)(c.p - c.start);
    /* Last entry whose initial location is <= pc. */
    uint64_t lo = 0, hi = count;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        int32_t loc;
        if (ps_read(&loc, table + mid * 8, 4) != 0)
            return -PS_STOP_READ;
        if ((uintptr_t)((intptr_t)hdr + loc) <= pc)
            lo = mid;
        else
            hi = mid;
    }
    int32_t e[2];
    if (ps_read(e, table + lo * 8, 8) != 0)
        return -PS_STOP_READ;
    if ((uintptr_t)((intptr_t)hdr + e[0]) > pc)
        return -1;
    *fde = (uintptr_t)((intptr_t)hdr + e[1]);
    return 0;
}

struct cie {
    uint64_t code_align;
    int64_t data_align;
    int ra_reg;
    uint8_t fde_enc;
    int has_aug_data;
    int signal_frame;
    const uint8_t *insns, *insns_end;
};

static int parse_cie(const uint8_t *buf, size_t len, uintptr_t addr, struct cie *ci)
{
    struct cur c = { buf + 8, buf + len, addr, buf, 0 };   /* past length and id */
    memset(ci, 0, sizeof *ci);
    ci->fde_enc = DW_EH_PE_absptr;
    uint8_t version = (uint8_t)rd_u(&c, 1);
    if (version != 1 && version != 3)
        return -1;
    const char *aug = (const char *)c.p;
    const uint8_t *nul = memchr(c.p, 0, (size_t)(c.end - c.p));
    if (nul == NULL)
        return -1;
    c.p = nul + 1;
    if (aug[0] != '\0' && aug[0] != 'z')
        return -1;   /* "eh" and other ancient forms */
    ci->code_align = rd_uleb(&c);
    ci->data_align = rd_sleb(&c);
    ci->ra_reg = version == 1 ? (int)rd_u(&c, 1) : (int)rd_uleb(&c);
    if (aug[0] == 'z') {
        uint64_t alen = rd_uleb(&c);
        const uint8_t *aend = c.p + alen;
        if (c.bad || alen > (uint64_t)(c.end - c.p))
            return -1;
        ci->has_aug_data = 1;
        for (const char *a = aug + 1; *a; a++) {
            if (*a == 'R') {
                ci->fde_enc = (uint8_t)rd_u(&c, 1);
            } else if (*a == 'L') {
                (void)rd_u(&c, 1);
            } else if (*a == 'P') {
                uint8_t penc = (uint8_t)rd_u(&c, 1);
                struct cur pc = c;
                (void)rd_enc(&pc, (uint8_t)(penc & ~DW_EH_PE_indirect), 0);
                c.p = pc.p;
            } else if (*a == 'S') {
                ci->signal_frame = 1;
            } else if (*a == 'B') {
                /* aarch64 pointer-authentication key: no data */
            } else {
                break;   /* unknown letter: the length lets us skip the rest */
            }
        }
        c.p = aend;
    }
    if (c.bad || ci->ra_reg != PS_REG_PC || ci->code_align == 0)
        return -1;
    ci->insns = c.p;
    ci->insns_end = c.end;
    return 0;
}

static void set_rule(struct cfi_row *row, uint64_t reg, enum rule r, int64_t arg)
{
    if (reg < PS_REG_N) {   /* registers we do not track are not followed */
        row->rule[reg] = (uint8_t)r;
        row->arg[reg] = arg;
    }
}

/* The rule the CIE's instructions gave reg (initial NULL: while running them). */
static void restore_rule(struct cfi_row *row, const struct cfi_row *initial, uint64_t reg)
{
    if (reg < PS_REG_N)
        set_rule(row, reg, initial ? (enum rule)initial->rule[reg] : R_SAME,
                 initial ? initial->arg[reg] : 0);
}

/* Runs CFA instructions [p, end) while the location is <= target. */
static int run_cfi(const struct cie *ci, const uint8_t *p, const uint8_t *end, uintptr_t loc,
                   uintptr_t target, struct cfi_row *row, const struct cfi_row *initial,
                   uintptr_t rec_addr, const uint8_t *rec_start)
{
    struct cfi_row stack[PS_CFI_STATES];
    int depth = 0;
    struct cur c = { p, end, rec_addr, rec_start, 0 };

    while (c.p < c.end && !c.bad) {
        uint8_t op = *c.p++;
        uint8_t hi = op & 0xc0, lo = op & 0x3f;
        uint64_t reg, delta;
        if (hi == 0x40) {               /* advance_loc */
            loc += lo * ci->code_align;
            if (loc > target)
                return 0;
            continue;
        }
        if (hi == 0x80) {               /* offset */
            set_rule(row, lo, R_OFFSET, (int64_t)rd_uleb(&c) * ci->data_align);
            continue;
        }
        if (hi == 0xc0) {               /* restore */
            restore_rule(row, initial, lo);
            continue;
        }
        switch (op) {
        case 0x00:                      /* nop */
            break;
        case 0x01:                      /* set_loc */
            loc = (uintptr_t)rd_enc(&c, ci->fde_enc, 0);
            if (loc > target)
                return 0;
            break;
        case 0x02: delta = rd_u(&c, 1); goto advance;
        case 0x03: delta = rd_u(&c, 2); goto advance;
        case 0x04: delta = rd_u(&c, 4);
        advance:
            loc += delta * ci->code_align;
            if (loc > target)
                return 0;
            break;
        case 0x05:                      /* offset_extended */
        case 0x11:                      /* offset_extended_sf */
        case 0x14:                      /* val_offset */
        case 0x15:                      /* val_offset_sf */
        case 0x2f: {                    /* GNU_negative_offset_extended */
            reg = rd_uleb(&c);
            int64_t f = op == 0x11 || op == 0x15 ? rd_sleb(&c) : (int64_t)rd_uleb(&c);
            set_rule(row, reg, op == 0x14 || op == 0x15 ? R_VAL_OFFSET : R_OFFSET,
                     (op == 0x2f ? -f : f) * ci->data_align);
            break;
        }
        case 0x06:                      /* restore_extended */
            restore_rule(row, initial, rd_uleb(&c));
            break;
        case 0x07:                      /* undefined */
            set_rule(row, rd_uleb(&c), R_UNDEF, 0);
            break;
        case 0x08:                      /* same_value */
            set_rule(row, rd_uleb(&c), R_SAME, 0);
            break;
        case 0x09: {                    /* register */
            reg = rd_uleb(&c);
            uint64_t r2 = rd_uleb(&c);
            set_rule(row, reg, r2 < PS_REG_N ? R_REG : R_UNKNOWN, (int64_t)r2);
            break;
        }
        case 0x0a:                      /* remember_state */
            if (depth == PS_CFI_STATES)
                return -1;
            stack[depth++] = *row;
            break;
        case 0x0b:                      /* restore_state: keeps the CFA? no: all */
            if (depth == 0)
                return -1;
            *row = stack[--depth];
            break;
        case 0x0c:                      /* def_cfa */
            row->cfa_reg = (int)rd_uleb(&c);
            row->cfa_off = (int64_t)rd_uleb(&c);
            row->cfa_unknown = 0;
            break;
        case 0x0d:                      /* def_cfa_register */
            row->cfa_reg = (int)rd_uleb(&c);
            row->cfa_unknown = 0;
            break;
        case 0x0e:                      /* def_cfa_offset */
            row->cfa_off = (int64_t)rd_uleb(&c);
            break;
        case 0x0f: {                    /* def_cfa_expression */
            uint64_t n = rd_uleb(&c);
            if (n > (uint64_t)(c.end - c.p))
                return -1;
            row->cfa_expr = c.p;
            row->cfa_expr_len = n;
            c.p += n;
            row->cfa_unknown = 1;
            break;
        }
        case 0x10:                      /* expression */
        case 0x16: {                    /* val_expression */
            reg = rd_uleb(&c);
            uint64_t n = rd_uleb(&c);
            if (n > (uint64_t)(c.end - c.p))
                return -1;
            c.p += n;
            set_rule(row, reg, R_UNKNOWN, 0);
            break;
        }
        case 0x12:                      /* def_cfa_sf */
            row->cfa_reg = (int)rd_uleb(&c);
            row->cfa_off = rd_sleb(&c) * ci->data_align;
            row->cfa_unknown = 0;
            break;
        case 0x13:                      /* def_cfa_offset_sf */
            row->cfa_off = rd_sleb(&c) * ci->data_align;
            break;
        case 0x2e:                      /* GNU_args_size */
            (void)rd_uleb(&c);
            break;
        default:
            return -1;                  /* an opcode we do not know: stop */
        }
    }
    return c.bad ? -1 : 0;
}

/*
 * A CFA expression, for the one kind the linker emits for every PLT:
 * rsp + 8, plus 8 more past the push in a lazy-binding stub
 * (DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_lit11;
 * DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus).  Registers, literals and
 * integer arithmetic only: no memory, no branches.  0 or -1.
 */
static int eval_cfa_expr(const uint8_t *p, uint64_t len, const struct ps_regs *rs,
                         uint64_t *out)
{
    uint64_t st[8];
    int sp = 0;
    struct cur c = { p, p + len, 0, p, 0 };
    while (c.p < c.end && !c.bad) {
        uint8_t op = *c.p++;
        if (op >= 0x30 && op <= 0x4f) {                 /* lit0..lit31 */
            if (sp == 8)
                return -1;
            st[sp++] = op - 0x30u;
        } else if (op >= 0x70 && op <= 0x8f) {          /* breg0..breg31 */
            int r = op - 0x70;
            int64_t off = rd_sleb(&c);
            if (sp == 8 || r >= PS_REG_N || !ps_regs_has(rs, r))
                return -1;
            st[sp++] = rs->r[r] + (uint64_t)off;
        } else if (op == 0x08) {                        /* const1u */
            if (sp == 8)
                return -1;
            st[sp++] = rd_u(&c, 1);
        } else if (op == 0x23) {                        /* plus_uconst */
            if (sp < 1)
                return -1;
            st[sp - 1] += rd_uleb(&c);
        } else if (op == 0x1a || op == 0x22 || op == 0x1c || op == 0x24 || op == 0x2a) {
            if (sp < 2)
                return -1;
            uint64_t b = st[--sp], a = st[sp - 1];
            switch (op) {
            case 0x1a: a &= b; break;                              /* and */
            case 0x22: a += b; break;                              /* plus */
            case 0x1c: a -= b; break;                              /* minus */
            case 0x24: a = b < 64 ? a << b : 0; break;             /* shl */
            default: a = (int64_t)a >= (int64_t)b; break;          /* ge */
            }
            st[sp - 1] = a;
        } else {
            return -1;
        }
    }
    if (c.bad || sp != 1)
        return -1;
    *out = st[0];
    return 0;
}

/*
 * The CFI row for lookup (pc, or pc - 1 for a return address, which may
 * lie just past a call at the very end of a function) in the table at
 * hdr.  Returns 0; -1 if there is no CFI for it (frame pointers are
 * tried); else -cause: PS_STOP_SIGNAL for a signal frame, PS_STOP_CFI for
 * CFI we do not follow, PS_STOP_READ if the tables could not be read.  A
 * CFA expression (PLT stubs) is evaluated against rs into *cfa here,
 * while the record it points into is alive.
 */
static int cfi_row_for(uintptr_t hdr, uintptr_t lookup, const struct ps_regs *rs,
                       struct cfi_row *row, uint64_t *cfa)
{
    uint8_t fde[PS_CFI_MAX], cie_buf[PS_CFI_MAX];
    size_t flen, clen;
    uintptr_t fde_addr;
    int rc = find_fde(hdr, lookup, &fde_addr);
    if (rc == 0)
        rc = read_record(fde_addr, fde, &flen);
    if (rc != 0)
        return rc;
    uint32_t cie_off;
    memcpy(&cie_off, fde + 4, 4);
    if (cie_off == 0)
        return -1;   /* it is a CIE: the table pointed at the wrong record */
    uintptr_t cie_addr = fde_addr + 4 - cie_off;
    struct cie ci;
    rc = read_record(cie_addr, cie_buf, &clen);
    if (rc != 0)
        return rc == -1 ? -PS_STOP_CFI : rc;
    if (parse_cie(cie_buf, clen, cie_addr, &ci) != 0)
        return -PS_STOP_CFI;
    struct cur c = { fde + 8, fde + flen, fde_addr, fde, 0 };
    uintptr_t start = (uintptr_t)rd_enc(&c, ci.fde_enc, 0);
    uintptr_t range = (uintptr_t)rd_enc(&c, (uint8_t)(ci.fde_enc & 0x0f), 0);
    if (ci.has_aug_data) {
        uint64_t alen = rd_uleb(&c);
        if (alen > (uint64_t)(c.end - c.p))
            return -PS_STOP_CFI;
        c.p += alen;
    }
    if (c.bad || lookup < start || lookup - start >= range)
        return -1;   /* a gap between FDEs: no CFI for this pc */
    if (ci.signal_frame)
        return -PS_STOP_SIGNAL;

    memset(row, 0, sizeof *row);   /* every rule R_SAME */
    row->cfa_reg = -1;
    if (run_cfi(&ci, ci.insns, ci.insns_end, 0, UINTPTR_MAX, row, NULL, cie_addr, cie_buf) != 0)
        return -PS_STOP_CFI;
    struct cfi_row initial = *row;
    if (run_cfi(&ci, c.p, c.end, start, lookup, row, &initial, fde_addr, fde) != 0)
        return -PS_STOP_CFI;
    if (row->cfa_unknown &&
        (row->cfa_expr == NULL || eval_cfa_expr(row->cfa_expr, row->cfa_expr_len, rs, cfa) != 0))
        return -PS_STOP_CFI;
    return 0;
}

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
 * ps_objs_refresh, which forgets it (ps_unwind_forget) whenever the list
 * of loaded objects changed, so no entry outlives the code it describes
 * (an object unloaded and another loaded at its address).  No lock, no
 * atomics; a thread held in our handler never touches it.
 */
#define PS_RULES 2048       /* entries, a power of two: 2048 * 88 bytes */
#define PS_RULE_SAVED 8     /* registers one rule restores (gcc, clang: at most 7) */

enum kind { K_ROW = 1, K_NOCFI, K_STOP };
enum how { H_OFFSET = 1, H_VAL_OFFSET, H_REG, H_DROP };

struct urule {
    uintptr_t at;           /* the lookup address */
    uint32_t gen;           /* rules_gen when filled (0: never) */
    uint8_t kind;
    uint8_t stop;           /* K_STOP: why (enum ps_unwind_stop) */
    int8_t cfa_reg;         /* -1: the CFA is an expression's (never cached) */
    uint8_t root;           /* the return address is undefined: the outermost frame */
    uint8_t fp;             /* CFA = rbp + 16, return address at -8, rbp at -16 */
    uint8_t n;              /* saved[0..n) */
    int32_t cfa_off;
    struct { int32_t off; uint8_t reg, how; } saved[PS_RULE_SAVED];
};

static struct urule rules[PS_RULES];
static uint32_t rules_gen = 1;

void ps_unwind_forget(void)
{
    if (++rules_gen == 0) {   /* wrapped: no old entry may look valid */
        memset(rules, 0, sizeof rules);
        rules_gen = 1;
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
static int compile(const struct cfi_row *row, struct urule *ru)
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
        case R_SAME: continue;
        case R_OFFSET: how = H_OFFSET; break;
        case R_VAL_OFFSET: how = H_VAL_OFFSET; break;
        case R_REG: how = H_REG; break;
        case R_UNDEF:
            if (i == PS_REG_PC) {
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
    ru->fp = ru->cfa_reg == PS_REG_FP && ru->cfa_off == 16 && saved_at(ru, PS_REG_PC) == -8 &&
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
    struct cfi_row row;
    int rc = hdr == 0 ? -1 : cfi_row_for(hdr, at, rs, &row, cfa);
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

/*
 * Applies a rule to rs (cfa: the CFA, where the rule's is an
 * expression's).  The registers saved relative to the CFA lie side by
 * side (pushed at entry): one read takes them all.  A frame whose CFI is
 * the standard rbp frame and nothing else is one frame-pointer step.
 */
static int apply(const struct urule *ru, uint64_t cfa, struct ps_regs *rs)
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
    if (cfa <= sp || cfa - sp > PS_MAX_FRAME)
        return -PS_STOP_BAD_FRAME;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int i = 0; i < ru->n; i++)
        if (ru->saved[i].how == H_OFFSET) {
            lo = ru->saved[i].off < lo ? ru->saved[i].off : lo;
            hi = ru->saved[i].off + 8 > hi ? ru->saved[i].off + 8 : hi;
        }
    uint8_t blk[PS_RULE_SAVED * 16];
    int have = lo < hi && hi - lo <= (int64_t)sizeof blk &&
               ps_read(blk, (uintptr_t)(cfa + (uint64_t)lo), (size_t)(hi - lo)) == 0;
    struct ps_regs next = *rs;   /* same_value for what the rule does not name */
    for (int i = 0; i < ru->n; i++) {
        int r = ru->saved[i].reg, off = ru->saved[i].off;
        uint64_t v;
        switch (ru->saved[i].how) {
        case H_OFFSET:
            if (have)
                memcpy(&v, blk + (off - lo), 8);
            else if (ps_read(&v, (uintptr_t)(cfa + (uint64_t)(int64_t)off), 8) != 0)
                return -PS_STOP_READ;
            ps_regs_set(&next, r, v);
            break;
        case H_VAL_OFFSET:
            ps_regs_set(&next, r, cfa + (uint64_t)(int64_t)off);
            break;
        case H_REG:   /* from a register we may not know */
            if (ps_regs_has(rs, off))
                ps_regs_set(&next, r, rs->r[off]);
            else
                next.valid &= ~(1ull << r);
            break;
        default:      /* H_DROP */
            next.valid &= ~(1ull << r);
            break;
        }
    }
    if (!ps_regs_has(&next, PS_REG_PC))
        return -PS_STOP_CFI;
    if (next.r[PS_REG_PC] == 0)
        return 0;
    ps_regs_set(&next, PS_REG_SP, cfa);
    *rs = next;
    return 1;
}

#if defined(__linux__)
/*
 * Through a signal handler's frame: pc is in the C library's return
 * trampoline (__restore_rt, whose CIE is marked 'S'), where the stack
 * pointer points at the ucontext_t the kernel saved the interrupted
 * registers in (the kernel's signal frame layout, an ABI: glibc's CFI
 * for the trampoline says the same with expressions).  The walk goes on
 * from the interrupted pc, which is exact, not a return address; that
 * context may be on another stack (sigaltstack), so the step need not
 * move up.  2, or -cause.
 */
static int sigframe_step(struct ps_regs *rs)
{
    ucontext_t uc;
    uintptr_t at = (uintptr_t)rs->r[PS_REG_SP] + offsetof(ucontext_t, uc_mcontext.gregs);
    if (ps_read(&uc.uc_mcontext.gregs, at, sizeof uc.uc_mcontext.gregs) != 0)
        return -PS_STOP_READ;
    ps_regs_from_context(&uc, rs);
    BUMP(counts[C_SIGNAL]);
    return 2;
}
#endif

/* One CFI step (frame pointers where there is no CFI): 1, 0 at the root,
 * 2 into an interrupted context (exact pc, maybe another stack), or
 * -cause. */
static int cfi_step(struct ps_regs *rs, int first)
{
    uintptr_t pc = rs->r[PS_REG_PC], at = first ? pc : pc - 1;
    struct urule *slot = &rules[(at ^ (at >> 11) ^ (at >> 22)) & (PS_RULES - 1)];
    struct urule fresh;
    const struct urule *ru = slot;
    uint64_t cfa = 0;
    if (slot->gen == rules_gen && slot->at == at) {
        BUMP(counts[C_HITS]);
    } else {
        int keep = find_rule(at, rs, &fresh, &cfa);
        if (keep < 0)
            return keep;
        BUMP(counts[C_MISSES]);
        ru = &fresh;
        if (keep) {
            fresh.at = at;
            fresh.gen = rules_gen;
            *slot = fresh;
        }
    }
    switch (ru->kind) {
    case K_NOCFI:
        BUMP(counts[C_NOCFI]);
        return fp_step(rs, 0);
    case K_STOP:
#if defined(__linux__)
        if (ru->stop == PS_STOP_SIGNAL)
            return sigframe_step(rs);
#endif
        return -ru->stop;
    default:
        if (ru->fp)
            BUMP(counts[C_FP]);
        return apply(ru, cfa, rs);
    }
}

#else

void ps_unwind_forget(void)
{
}

#endif /* __x86_64__ */

static int walk(const struct ps_regs *regs, uintptr_t *pcs, int max, int *stop)
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
        /* Frame 0 without its frame record (native.h, the frame-0
         * contract): its return address is frame 1, and the registers
         * already describe that caller's frame. */
        if (rs.valid & PS_REGS_LEAF_RET) {
            rs.valid &= ~PS_REGS_LEAF_RET;
            if (ps_objs_find((uintptr_t)rs.leaf_ret - 1) == NULL) {
                *stop = PS_STOP_NO_OBJECT;
                return n;
            }
            rs.r[PS_REG_PC] = rs.leaf_ret;
            continue;
        }
        uint64_t old_sp = rs.r[PS_REG_SP];
#if defined(__x86_64__)
        int rc = cfi_step(&rs, exact);
#else
        int rc = fp_step(&rs, 0);
#endif
        if (rc <= 0) {
            *stop = -rc;
            return n;
        }
        exact = rc == 2;
        if (exact && ++signals > PS_SIGNAL_FRAMES) {
            *stop = PS_STOP_SIGNAL;
            return n;
        }
        /* A stack that did not move up, or a return address outside every
         * object's code: not a frame. */
        if (!exact && rs.r[PS_REG_SP] <= old_sp) {
            *stop = PS_STOP_BAD_FRAME;
            return n;
        }
        if (ps_objs_find((uintptr_t)rs.r[PS_REG_PC] - !exact) == NULL) {
            *stop = PS_STOP_NO_OBJECT;
            return n;
        }
    }
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* the vDSO: no system call */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ps_unwind(const struct ps_regs *regs, uintptr_t *pcs, int max, int *stop)
{
    uint64_t t0 = mono_ns();
    int n = walk(regs, pcs, max, stop);
    ADD(counts[C_NS], mono_ns() - t0);
    ADD(counts[C_FRAMES], (uint64_t)n);
    ADD(counts[C_WALKS], 1);
    return n;
}

void ps_unwind_counts(struct ps_unwind_counts *c)
{
    uint64_t v[C_N];
    ps_counters_read(counts, v, C_N);
    *c = (struct ps_unwind_counts){ .hits = v[C_HITS], .misses = v[C_MISSES], .fp_frames = v[C_FP],
                                    .nocfi_frames = v[C_NOCFI], .signal_frames = v[C_SIGNAL],
                                    .walks = v[C_WALKS], .frames = v[C_FRAMES], .ns = v[C_NS] };
}

void ps_unwind_counts_reset(void)
{
    ps_counters_zero(counts, C_N);
}
