/*
 * linux/regs_other.c - regs_arch.h for CPUs without native stacks (not
 * x86-64 or aarch64): ps_native_platform_init refuses PYSAMPLE_NATIVE with
 * the reason below, so nothing else here is ever reached.
 */
#include <stddef.h>

#include "platform/linux/regs_arch.h"

const char *ps_arch_native_refused(void)
{
    return "native stacks are supported on x86-64 and aarch64 Linux only";
}

int ps_arch_interrupted_call(const ucontext_t *uc, long *nr)
{
    (void)uc;
    (void)nr;
    return 0;
}

int ps_arch_restartable(long nr)
{
    (void)nr;
    return 0;
}

int ps_arch_restart(ucontext_t *uc, long nr)
{
    (void)uc;
    (void)nr;
    return -1;
}

void ps_regs_from_context(const void *ucontext, struct ps_regs *rs)
{
    (void)ucontext;
    rs->valid = 0;
}

int ps_sigframe_regs(uint64_t sp, struct ps_regs *rs)
{
    (void)sp;
    (void)rs;
    return -1;
}

int ps_is_sigreturn(uint64_t pc)
{
    (void)pc;
    return 0;
}

uint64_t ps_ret_addr(uint64_t a)
{
    return a;
}
