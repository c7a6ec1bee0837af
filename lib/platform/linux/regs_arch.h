/*
 * linux/regs_arch.h - what regs.c needs of the CPU: one file per
 * architecture (regs_x86_64.c, regs_aarch64.c; regs_other.c refuses native
 * stacks elsewhere), chosen by lib/meson.build.  regs.c has the protocol
 * (the signal, the hold, the /proc file); these have the registers, the
 * system call numbers and the instructions.
 *
 * Everything here but ps_arch_native_refused runs inside the SIGURG
 * handler or on the sampler thread during a walk: async-signal-safe, no
 * lock, no allocation.
 */
#ifndef PS_REGS_ARCH_H
#define PS_REGS_ARCH_H

#include <stdint.h>
#include <sys/ucontext.h>

#include "platform/stacks.h"

/* NULL if native stacks work on this CPU, else why not (one line). */
const char *ps_arch_native_refused(void);

/* ps_regs_from_context, the signal frame crossing (ps_sigframe_regs,
 * ps_is_sigreturn) and ps_ret_addr (platform/stacks.h) are defined by the
 * same file. */

/*
 * The handler's view of the interrupted context: whether it is the return
 * of a system call that our signal made fail with EINTR.  0: it is not;
 * 1: it is, and *nr is the call's number; -1: it is, but the number (or
 * what a restart needs) cannot be had.
 */
int ps_arch_interrupted_call(const ucontext_t *uc, long *nr);

/* 1 if system call nr blocks, returns EINTR when a handler runs, and is
 * right to issue again with the same arguments. */
int ps_arch_restartable(long nr);

/* Rewinds uc to issue call nr again (ps_arch_interrupted_call said 1):
 * 0, or -1 if an argument the call clobbered cannot be recovered. */
int ps_arch_restart(ucontext_t *uc, long nr);

/*
 * aarch64 (regs_aarch64.c; declared here for its unit test): the value x0
 * had at an `svc` whose return overwrote it, from the instructions before
 * it (code[0] the nearest, avail of them) and the registers now (x[0..30],
 * sp).  0 with *x0 set, or -1 if they do not tell.
 */
int ps_a64_x0_before(const uint32_t *code, int avail, const uint64_t *x, uint64_t sp,
                     uint64_t *x0);

#endif
