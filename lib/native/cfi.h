/*
 * cfi.h - DWARF call frame information (x86-64, aarch64): what the .eh_frame of a
 * loaded object says about one address, for unwind.c.
 *
 * unwind.c compiles the row this gives into its cached rule; cfi.c is the
 * interpreter behind it (the .eh_frame_hdr search, CIE and FDE records,
 * the call-frame instructions, the PLT stubs' CFA expression).  Every load
 * goes through ps_read(); nothing is allocated and no lock is taken (it
 * runs on the sampler thread, and may while a thread is held).
 */
#ifndef PS_CFI_H
#define PS_CFI_H

#include <stdint.h>

#include "native/native.h"

/* How the caller's value of a register is had (DWARF's register rules). */
enum ps_cfi_rule {
    PS_CFI_SAME = 0,     /* same_value: the register keeps its value */
    PS_CFI_UNDEF,        /* undefined (the return address: the outermost frame) */
    PS_CFI_OFFSET,       /* saved at CFA + arg */
    PS_CFI_VAL_OFFSET,   /* is CFA + arg */
    PS_CFI_REG,          /* is in register arg */
    PS_CFI_UNKNOWN       /* an expression, or a register we do not track */
};

/* The CFI row at one address: the CFA and a rule per register. */
struct ps_cfi_row {
    int cfa_reg;
    int64_t cfa_off;
    int cfa_unknown;        /* def_cfa_expression ... */
    const uint8_t *cfa_expr; /* ... this one, inside the copied record (gone
                              * once ps_cfi_row returns: it has evaluated it) */
    uint64_t cfa_expr_len;
    uint8_t rule[PS_REG_N]; /* enum ps_cfi_rule */
    int64_t arg[PS_REG_N];
};

/*
 * The CFI row for lookup (pc, or pc - 1 for a return address, which may
 * lie just past a call at the very end of a function) in the table at
 * hdr (an object's .eh_frame_hdr, mapped).  Returns 0; -1 if there is no
 * CFI for it (frame pointers are tried); else -cause (enum
 * ps_unwind_stop): PS_STOP_SIGNAL for a signal frame, PS_STOP_CFI for CFI
 * we do not follow, PS_STOP_READ if the tables could not be read.  A CFA
 * expression (PLT stubs) is evaluated against rs into *cfa here, while
 * the record it points into is alive.
 */
int ps_cfi_row(uintptr_t hdr, uintptr_t lookup, const struct ps_regs *rs, struct ps_cfi_row *row,
               uint64_t *cfa);

#endif
