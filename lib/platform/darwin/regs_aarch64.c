/*
 * darwin/regs_aarch64.c - darwin/regs.c's CPU part on arm64 (regs_arch.h):
 * ARM_THREAD_STATE64, bl/blr and their authenticated forms, the return
 * address in lr, pointer-authentication bits stripped.
 */
#include <string.h>

#include "memory/memread.h"
#include "platform/darwin/darwin.h"
#include "platform/darwin/regs_arch.h"
#include "platform/stacks.h"

/* A code address as a plain address (platform/stacks.h): lr and saved
 * return addresses may carry a pointer-authentication signature (arm64e
 * system code signs them in place before saving them), in the bits above
 * the 47-bit user address space. */
uint64_t ps_ret_addr(uint64_t a)
{
    return a & ((1ull << 47) - 1);
}

int ps_darwin_get_state(mach_port_t port, struct ps_darwin_regs *r)
{
    memset(r, 0, sizeof *r);
    arm_thread_state64_t st;
    mach_msg_type_number_t cnt = ARM_THREAD_STATE64_COUNT;
    if (thread_get_state(port, ARM_THREAD_STATE64, (thread_state_t)&st, &cnt) != KERN_SUCCESS)
        return -1;
    /* The accessors: the fields are opaque (and, in arm64e code, signed)
     * in some SDK configurations. */
    r->pc = ps_ret_addr((uint64_t)__darwin_arm_thread_state64_get_pc(st));
    r->lr = ps_ret_addr((uint64_t)__darwin_arm_thread_state64_get_lr(st));
    r->sp = (uint64_t)__darwin_arm_thread_state64_get_sp(st);
    r->fp = (uint64_t)__darwin_arm_thread_state64_get_fp(st);
    return 0;
}

uint64_t ps_darwin_call_return(const struct ps_darwin_regs *r)
{
    return r->lr;
}

int ps_darwin_call_before(uint64_t ret)
{
    uint32_t insn;
    if ((ret & 3) != 0 || ps_read(&insn, (uintptr_t)ret - 4, 4) != 0)
        return 0;
    return (insn & 0xfc000000u) == 0x94000000u ||   /* bl */
           (insn & 0xfffffc1fu) == 0xd63f0000u ||   /* blr */
           (insn & 0xfffff81fu) == 0xd63f081fu ||   /* blraaz, blrabz */
           (insn & 0xfffff800u) == 0xd73f0800u;     /* blraa, blrab */
}
