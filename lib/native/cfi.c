/*
 * cfi.c - DWARF call frame information (x86-64, aarch64): the row for one
 * address.
 *
 * Found the way the C runtime finds it for exceptions: the object
 * containing pc (elfsyms.c) has a .eh_frame_hdr mapped in memory, whose
 * sorted table gives the FDE by binary search; the FDE's CIE and
 * instructions are run up to pc and give the CFA and where the caller's
 * registers were saved.  Only the rules that gcc and clang emit for
 * ordinary code are followed (def_cfa with offsets,
 * offset/val_offset/register/same/undefined, remember/restore_state), and
 * the register-arithmetic CFA expression of PLT stubs.  Anything else
 * (other expressions, 64-bit DWARF, an opcode we do not know) is said to
 * be CFI we do not follow (PS_STOP_CFI), and unwind.c stops there: it is
 * never guessed.
 *
 * The records are copied (ps_read) into buffers on the stack and parsed
 * there, through a cursor that cannot read past the copy: the tables are
 * the target's memory, and may be anything.  No allocation, no lock.
 */
#include <stddef.h>
#include <string.h>

#include "native/cfi.h"
#include "memory/memread.h"

#if PS_ARCH_CFI

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

/* The augmentation data of a "z" CIE (its letters: aug), leaving c past
 * it: the FDEs' pointer encoding, the personality skipped, the signal
 * frame mark.  0 or -1. */
static int parse_augmentation(struct cur *c, const char *aug, struct cie *ci)
{
    uint64_t alen = rd_uleb(c);
    const uint8_t *aend = c->p + alen;
    if (c->bad || alen > (uint64_t)(c->end - c->p))
        return -1;
    ci->has_aug_data = 1;
    for (const char *a = aug + 1; *a; a++) {
        if (*a == 'R') {
            ci->fde_enc = (uint8_t)rd_u(c, 1);
        } else if (*a == 'L') {
            (void)rd_u(c, 1);
        } else if (*a == 'P') {
            uint8_t penc = (uint8_t)rd_u(c, 1);
            struct cur pc = *c;
            (void)rd_enc(&pc, (uint8_t)(penc & ~DW_EH_PE_indirect), 0);
            c->p = pc.p;
        } else if (*a == 'S') {
            ci->signal_frame = 1;
        } else if (*a == 'B') {
            /* aarch64 pointer-authentication key: no data */
        } else {
            break;   /* unknown letter: the length lets us skip the rest */
        }
    }
    c->p = aend;
    return 0;
}

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
    if (aug[0] == 'z' && parse_augmentation(&c, aug, ci) != 0)
        return -1;
    if (c.bad || ci->ra_reg != PS_REG_RA || ci->code_align == 0)
        return -1;
    ci->insns = c.p;
    ci->insns_end = c.end;
    return 0;
}

static void set_rule(struct ps_cfi_row *row, uint64_t reg, enum ps_cfi_rule r, int64_t arg)
{
    if (reg < PS_REG_N) {   /* registers we do not track are not followed */
        row->rule[reg] = (uint8_t)r;
        row->arg[reg] = arg;
    }
}

/* The rule the CIE's instructions gave reg (initial NULL: while running them). */
static void restore_rule(struct ps_cfi_row *row, const struct ps_cfi_row *initial, uint64_t reg)
{
    if (reg < PS_REG_N)
        set_rule(row, reg, initial ? (enum ps_cfi_rule)initial->rule[reg] : PS_CFI_SAME,
                 initial ? initial->arg[reg] : 0);
}

/* The call-frame instructions being run: the row they build up to the
 * target address, and the states remember_state saved. */
struct cfa_run {
    const struct cie *ci;
    struct cur c;
    uintptr_t loc, target;
    struct ps_cfi_row *row;
    const struct ps_cfi_row *initial;   /* the CIE's row, for restore; NULL in the CIE */
    struct ps_cfi_row stack[PS_CFI_STATES];
    int depth;
};

/* What one instruction leaves: go on, the row for the target is complete
 * (the location moved past it), or the instructions cannot be followed. */
enum step { STEP_ON, STEP_DONE, STEP_FAIL };

static enum step advance(struct cfa_run *r, uint64_t delta)
{
    r->loc += delta * r->ci->code_align;
    return r->loc > r->target ? STEP_DONE : STEP_ON;
}

/* set_loc and advance_loc1/2/4 (0x01-0x04). */
static enum step op_location(struct cfa_run *r, uint8_t op)
{
    if (op == 0x01) {
        r->loc = (uintptr_t)rd_enc(&r->c, r->ci->fde_enc, 0);
        return r->loc > r->target ? STEP_DONE : STEP_ON;
    }
    return advance(r, rd_u(&r->c, op == 0x02 ? 1 : op == 0x03 ? 2 : 4));
}

/* The rules of the CFA: def_cfa and its variants. */
static enum step op_cfa(struct cfa_run *r, uint8_t op)
{
    struct ps_cfi_row *row = r->row;
    switch (op) {
    case 0x0c:                      /* def_cfa */
        row->cfa_reg = (int)rd_uleb(&r->c);
        row->cfa_off = (int64_t)rd_uleb(&r->c);
        row->cfa_unknown = 0;
        return STEP_ON;
    case 0x0d:                      /* def_cfa_register */
        row->cfa_reg = (int)rd_uleb(&r->c);
        row->cfa_unknown = 0;
        return STEP_ON;
    case 0x0e:                      /* def_cfa_offset */
        row->cfa_off = (int64_t)rd_uleb(&r->c);
        return STEP_ON;
    case 0x0f: {                    /* def_cfa_expression */
        uint64_t n = rd_uleb(&r->c);
        if (n > (uint64_t)(r->c.end - r->c.p))
            return STEP_FAIL;
        row->cfa_expr = r->c.p;
        row->cfa_expr_len = n;
        r->c.p += n;
        row->cfa_unknown = 1;
        return STEP_ON;
    }
    case 0x12:                      /* def_cfa_sf */
        row->cfa_reg = (int)rd_uleb(&r->c);
        row->cfa_off = rd_sleb(&r->c) * r->ci->data_align;
        row->cfa_unknown = 0;
        return STEP_ON;
    default:                        /* 0x13: def_cfa_offset_sf */
        row->cfa_off = rd_sleb(&r->c) * r->ci->data_align;
        return STEP_ON;
    }
}

/* The extended forms of a register's rule: offsets, register, expression. */
static enum step op_register(struct cfa_run *r, uint8_t op)
{
    uint64_t reg = rd_uleb(&r->c);
    switch (op) {
    case 0x09: {                    /* register */
        uint64_t r2 = rd_uleb(&r->c);
        set_rule(r->row, reg, r2 < PS_REG_N ? PS_CFI_REG : PS_CFI_UNKNOWN, (int64_t)r2);
        return STEP_ON;
    }
    case 0x10:                      /* expression */
    case 0x16: {                    /* val_expression */
        uint64_t n = rd_uleb(&r->c);
        if (n > (uint64_t)(r->c.end - r->c.p))
            return STEP_FAIL;
        r->c.p += n;
        set_rule(r->row, reg, PS_CFI_UNKNOWN, 0);
        return STEP_ON;
    }
    default: {                      /* offset_extended(_sf), val_offset(_sf),
                                     * GNU_negative_offset_extended */
        int64_t f = op == 0x11 || op == 0x15 ? rd_sleb(&r->c) : (int64_t)rd_uleb(&r->c);
        set_rule(r->row, reg, op == 0x14 || op == 0x15 ? PS_CFI_VAL_OFFSET : PS_CFI_OFFSET,
                 (op == 0x2f ? -f : f) * r->ci->data_align);
        return STEP_ON;
    }
    }
}

/* One instruction whose opcode is not in the high two bits. */
static enum step op_extended(struct cfa_run *r, uint8_t op)
{
    switch (op) {
    case 0x00:                      /* nop */
        return STEP_ON;
    case 0x01: case 0x02: case 0x03: case 0x04:
        return op_location(r, op);
    case 0x05: case 0x09: case 0x10: case 0x11: case 0x14: case 0x15: case 0x16: case 0x2f:
        return op_register(r, op);
    case 0x06:                      /* restore_extended */
        restore_rule(r->row, r->initial, rd_uleb(&r->c));
        return STEP_ON;
    case 0x07:                      /* undefined */
        set_rule(r->row, rd_uleb(&r->c), PS_CFI_UNDEF, 0);
        return STEP_ON;
    case 0x08:                      /* same_value */
        set_rule(r->row, rd_uleb(&r->c), PS_CFI_SAME, 0);
        return STEP_ON;
    case 0x0a:                      /* remember_state */
        if (r->depth == PS_CFI_STATES)
            return STEP_FAIL;
        r->stack[r->depth++] = *r->row;
        return STEP_ON;
    case 0x0b:                      /* restore_state: the whole row, CFA too */
        if (r->depth == 0)
            return STEP_FAIL;
        *r->row = r->stack[--r->depth];
        return STEP_ON;
    case 0x0c: case 0x0d: case 0x0e: case 0x0f: case 0x12: case 0x13:
        return op_cfa(r, op);
    case 0x2e:                      /* GNU_args_size */
        (void)rd_uleb(&r->c);
        return STEP_ON;
    case 0x2d:                      /* AARCH64_negate_ra_state (platform/arch.h) */
        return PS_ARCH_NEGATE_RA_STATE ? STEP_ON : STEP_FAIL;
    default:
        return STEP_FAIL;           /* an opcode we do not know: stop */
    }
}

/* One instruction: the three with their operand in the opcode's low six
 * bits, else the extended ones. */
static enum step step(struct cfa_run *r)
{
    uint8_t op = *r->c.p++;
    uint8_t hi = op & 0xc0, lo = op & 0x3f;
    if (hi == 0x40)                 /* advance_loc */
        return advance(r, lo);
    if (hi == 0x80) {               /* offset */
        set_rule(r->row, lo, PS_CFI_OFFSET, (int64_t)rd_uleb(&r->c) * r->ci->data_align);
        return STEP_ON;
    }
    if (hi == 0xc0) {               /* restore */
        restore_rule(r->row, r->initial, lo);
        return STEP_ON;
    }
    return op_extended(r, op);
}

/* Runs r's CFA instructions (r->c) into r->row while the location is <=
 * r->target. */
static int run_cfi(struct cfa_run *r)
{
    while (r->c.p < r->c.end && !r->c.bad) {
        enum step st = step(r);
        if (st == STEP_DONE)
            return 0;
        if (st == STEP_FAIL)
            return -1;
    }
    return r->c.bad ? -1 : 0;
}

/* The binary operators of a CFA expression: the top two of the stack st
 * (depth *sp) replaced by their result.  0 or -1. */
static int arith(uint8_t op, uint64_t *st, int *sp)
{
    if (*sp < 2)
        return -1;
    uint64_t b = st[--*sp], a = st[*sp - 1];
    switch (op) {
    case 0x1a: a &= b; break;                              /* and */
    case 0x22: a += b; break;                              /* plus */
    case 0x1c: a -= b; break;                              /* minus */
    case 0x24: a = b < 64 ? a << b : 0; break;             /* shl */
    default: a = (int64_t)a >= (int64_t)b; break;          /* ge */
    }
    st[*sp - 1] = a;
    return 0;
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
            if (arith(op, st, &sp) != 0)
                return -1;
        } else {
            return -1;
        }
    }
    if (c.bad || sp != 1)
        return -1;
    *out = st[0];
    return 0;
}

/* The FDE's address range and augmentation data, read from c (left at
 * its instructions): 0 if it covers lookup, from *start; -1 if it does
 * not; -PS_STOP_CFI. */
static int fde_covers(struct cur *c, const struct cie *ci, uintptr_t lookup, uintptr_t *start)
{
    *start = (uintptr_t)rd_enc(c, ci->fde_enc, 0);
    uintptr_t range = (uintptr_t)rd_enc(c, (uint8_t)(ci->fde_enc & 0x0f), 0);
    if (ci->has_aug_data) {
        uint64_t alen = rd_uleb(c);
        if (alen > (uint64_t)(c->end - c->p))
            return -PS_STOP_CFI;
        c->p += alen;
    }
    if (c->bad || lookup < *start || lookup - *start >= range)
        return -1;   /* a gap between FDEs: no CFI for this pc */
    return 0;
}

/* cfi.h */
int ps_cfi_row(uintptr_t hdr, uintptr_t lookup, const struct ps_regs *rs, struct ps_cfi_row *row,
               uint64_t *cfa)
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
    uintptr_t start;
    rc = fde_covers(&c, &ci, lookup, &start);
    if (rc != 0)
        return rc;
    if (ci.signal_frame)
        return -PS_STOP_SIGNAL;

    memset(row, 0, sizeof *row);   /* every rule PS_CFI_SAME */
    row->cfa_reg = -1;
    struct cfa_run run = { .ci = &ci, .c = { ci.insns, ci.insns_end, cie_addr, cie_buf, 0 },
                           .loc = 0, .target = UINTPTR_MAX, .row = row };
    if (run_cfi(&run) != 0)
        return -PS_STOP_CFI;
    struct ps_cfi_row initial = *row;
    run = (struct cfa_run){ .ci = &ci, .c = c, .loc = start, .target = lookup, .row = row,
                            .initial = &initial };
    if (run_cfi(&run) != 0)
        return -PS_STOP_CFI;
    if (row->cfa_unknown &&
        (row->cfa_expr == NULL || eval_cfa_expr(row->cfa_expr, row->cfa_expr_len, rs, cfa) != 0))
        return -PS_STOP_CFI;
    return 0;
}

#endif /* PS_ARCH_CFI */
