/*
 * platform/arch.h - what the unwinder (unwind.c, cfi.c) needs of the CPU:
 * its DWARF register numbers, the slots of struct ps_regs and how many
 * saved registers one cached rule holds.  Everything the unwinder does
 * differently per architecture is a value here; the code is the same.
 * What also differs per operating system (registers from a context, the
 * signal frame, how a signed return address is stripped) is the
 * platform's: platform/stacks.h, lib/platform/linux/regs_<arch>.c and
 * lib/platform/darwin/regs.c.
 */
#ifndef PS_PLATFORM_ARCH_H
#define PS_PLATFORM_ARCH_H

/*
 * PS_REG_N      slots of ps_regs.r[]: the DWARF registers we track, and pc
 * PS_REG_FP     the frame pointer
 * PS_REG_SP     the stack pointer (the CFA of the frame below)
 * PS_REG_PC     our slot for pc
 * PS_REG_RA     the CFI's return address column: where the caller's pc is
 *               had (x86-64: pc's own slot; aarch64: the link register)
 * PS_ARCH_CFI   1 where the unwinder reads .eh_frame (else frame pointers)
 * PS_ARCH_RULE_SAVED  registers one cached rule restores (gcc and clang
 *               save at most 7 on x86-64; aarch64 code saves x19-x30: 12)
 * PS_ARCH_NEGATE_RA_STATE  1 where DW_CFA 0x2d is aarch64's
 *               negate_ra_state (the return address is signed from here
 *               on: ps_ret_addr, platform/stacks.h, strips it anyway),
 *               not SPARC's window_save
 */
#if defined(__x86_64__)
#define PS_REG_N 17
#define PS_REG_FP 6   /* rbp */
#define PS_REG_SP 7   /* rsp */
#define PS_REG_PC 16
#define PS_REG_RA 16  /* the return address column is pc's */
#define PS_ARCH_CFI 1
#define PS_ARCH_RULE_SAVED 8
#define PS_ARCH_NEGATE_RA_STATE 0
#elif defined(__aarch64__)
#define PS_REG_N 33
#define PS_REG_FP 29  /* x29 */
#define PS_REG_SP 31
#define PS_REG_PC 32  /* not a DWARF number here: our slot for pc */
#define PS_REG_RA 30  /* x30, the link register */
#define PS_ARCH_CFI 1
#define PS_ARCH_RULE_SAVED 12
#define PS_ARCH_NEGATE_RA_STATE 1
#else
#define PS_REG_N 3
#define PS_REG_FP 0
#define PS_REG_SP 1
#define PS_REG_PC 2
#define PS_REG_RA 2
#define PS_ARCH_CFI 0
#define PS_ARCH_RULE_SAVED 1
#define PS_ARCH_NEGATE_RA_STATE 0
#endif

#endif
