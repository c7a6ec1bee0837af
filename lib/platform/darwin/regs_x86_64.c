/*
 * darwin/regs_x86_64.c - darwin/regs.c's CPU part on x86_64 (regs_arch.h):
 * x86_THREAD_STATE64, the call instructions compilers emit, the return
 * address at [sp]; addresses are plain.
 */
#include <string.h>

#include "memory/memread.h"
#include "platform/darwin/darwin.h"
#include "platform/darwin/regs_arch.h"
#include "platform/stacks.h"

uint64_t ps_ret_addr(uint64_t a)
{
    return a;
}

int ps_darwin_get_state(mach_port_t port, struct ps_darwin_regs *r)
{
    memset(r, 0, sizeof *r);
    x86_thread_state64_t st;
    mach_msg_type_number_t cnt = x86_THREAD_STATE64_COUNT;
    if (thread_get_state(port, x86_THREAD_STATE64, (thread_state_t)&st, &cnt) != KERN_SUCCESS)
        return -1;
    r->pc = st.__rip;
    r->sp = st.__rsp;
    r->fp = st.__rbp;
    return 0;
}

uint64_t ps_darwin_call_return(const struct ps_darwin_regs *r)
{
    uint64_t ret;
    if (ps_read(&ret, (uintptr_t)r->sp, sizeof ret) != 0)
        return 0;
    return ret;
}

int ps_darwin_call_before(uint64_t ret)
{
    uint8_t b[7];   /* b[6] is the byte at ret - 1 */
    if (ps_read(b, (uintptr_t)ret - 7, sizeof b) != 0)
        return 0;
    return b[2] == 0xe8 ||                                   /* call rel32 */
           (b[1] == 0xff && b[2] == 0x15) ||                 /* call *disp32(%rip) */
           (b[1] == 0xff && (b[2] & 0xf8) == 0x90) ||        /* call *disp32(%reg) */
           (b[3] == 0xff && b[4] == 0x54) ||                 /* call *disp8(%reg,sib) */
           (b[4] == 0xff && (b[5] & 0xf8) == 0x50) ||        /* call *disp8(%reg) */
           (b[5] == 0xff && (b[6] & 0xf8) == 0xd0) ||        /* call *%reg */
           (b[5] == 0xff && (b[6] & 0xf8) == 0x10);          /* call *(%reg) */
}
