/*
 * linux/regs_x86_64.c - x86-64's part of regs.c (regs_arch.h): the
 * registers of a ucontext_t, the signal frame, and the blocking system
 * calls our signal may interrupt with EINTR, recognised and restarted.
 *
 * EINTR (regs.c says when): the context is the return of a system call
 * when the two bytes before rip are `syscall` (0f 05) and rax is -EINTR.
 * The call's number is gone from rax; it is recovered from the instruction
 * that loaded eax just before (`mov $nr,%eax` or `xor %eax,%eax`, which is
 * how the C library's wrappers are compiled; see syscall_nr_before).  The
 * arguments are still in their registers (syscall clobbers only rcx and
 * r11): the restart is rip back by 2, rax = the number.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ucontext.h>

#include "memory/memread.h"
#include "platform/linux/regs_arch.h"

const char *ps_arch_native_refused(void)
{
    return NULL;
}

/* Blocking calls that return -EINTR when a handler runs, and are right to
 * issue again with the same arguments (they did nothing; select has
 * updated its timeout in place as it does for a restart).  x86-64
 * numbers. */
int ps_arch_restartable(long nr)
{
    switch (nr) {
    case 0:   /* read */
    case 7:   /* poll */
    case 23:  /* select */
    case 34:  /* pause */
    case 35:  /* nanosleep */
    case 43:  /* accept */
    case 45:  /* recvfrom */
    case 47:  /* recvmsg */
    case 61:  /* wait4 */
    case 69:  /* msgrcv */
    case 128: /* rt_sigtimedwait */
    case 130: /* rt_sigsuspend */
    case 202: /* futex */
    case 208: /* io_getevents */
    case 220: /* semtimedop */
    case 230: /* clock_nanosleep */
    case 232: /* epoll_wait */
    case 247: /* waitid */
    case 270: /* pselect6 */
    case 271: /* ppoll */
    case 281: /* epoll_pwait */
    case 288: /* accept4 */
    case 441: /* epoll_pwait2 */
        return 1;
    default:
        return 0;
    }
}

/*
 * The system call number of the `syscall` at ip - 2, from the instruction
 * that set eax right before it: b8 imm32 (mov $imm32,%eax; not preceded
 * by a REX prefix, which would make it mov to r8d or a movabs), or 31 c0
 * (xor %eax,%eax).  glibc 2.36 also puts one of a few fixed instructions
 * between the two (a reload of the first argument from the stack, an xor
 * of the futex operation's private bit): those are skipped.  -1 if
 * unknown.  Only bytes of the code page(s) just executed are read.
 */
static long syscall_nr_before(const uint8_t *ip)
{
    if (((uintptr_t)ip & 4095) < 16)
        return -1;   /* could reach into a page we know nothing of */
    const uint8_t *p = ip - 2;   /* the syscall instruction */
    for (int filler = 0; filler < 2; filler++) {
        if (p[-5] == 0xb8 && p[-6] != 0x41 && p[-6] != 0x48 && p[-6] != 0x49) {
            uint32_t nr;
            memcpy(&nr, p - 4, 4);
            return (long)nr;
        }
        if (p[-2] == 0x31 && p[-1] == 0xc0 && p[-3] != 0x48 && p[-3] != 0x40)
            return 0;
        /* mov disp8(%rsp),%edi: 8b 7c 24 d8; xor $imm8,%sil: 40 80 f6 ib;
         * mov (%rsp),%edi: 8b 3c 24 */
        if (p[-4] == 0x8b && p[-3] == 0x7c && p[-2] == 0x24)
            p -= 4;
        else if (p[-4] == 0x40 && p[-3] == 0x80 && p[-2] == 0xf6)
            p -= 4;
        else if (p[-3] == 0x8b && p[-2] == 0x3c && p[-1] == 0x24)
            p -= 3;
        else
            return -1;
    }
    return -1;
}

int ps_arch_interrupted_call(const ucontext_t *uc, long *nr)
{
    const greg_t *g = uc->uc_mcontext.gregs;
    if ((long long)g[REG_RAX] != -EINTR)
        return 0;
    const uint8_t *ip = (const uint8_t *)(uintptr_t)g[REG_RIP];
    if (((uintptr_t)ip & 4095) < 2 || ip[-2] != 0x0f || ip[-1] != 0x05)
        return 0;   /* not the return of a system call */
    *nr = syscall_nr_before(ip);
    return *nr < 0 ? -1 : 1;
}

int ps_arch_restart(ucontext_t *uc, long nr)
{
    greg_t *g = uc->uc_mcontext.gregs;
    g[REG_RIP] -= 2;
    g[REG_RAX] = nr;
    return 0;
}

void ps_regs_from_context(const void *ucontext, struct ps_regs *rs)
{
    const greg_t *g = ((const ucontext_t *)ucontext)->uc_mcontext.gregs;
    rs->valid = 0;
    ps_regs_set(rs, 0, (uint64_t)g[REG_RAX]);
    ps_regs_set(rs, 1, (uint64_t)g[REG_RDX]);
    ps_regs_set(rs, 2, (uint64_t)g[REG_RCX]);
    ps_regs_set(rs, 3, (uint64_t)g[REG_RBX]);
    ps_regs_set(rs, 4, (uint64_t)g[REG_RSI]);
    ps_regs_set(rs, 5, (uint64_t)g[REG_RDI]);
    ps_regs_set(rs, 6, (uint64_t)g[REG_RBP]);
    ps_regs_set(rs, 7, (uint64_t)g[REG_RSP]);
    ps_regs_set(rs, 8, (uint64_t)g[REG_R8]);
    ps_regs_set(rs, 9, (uint64_t)g[REG_R9]);
    ps_regs_set(rs, 10, (uint64_t)g[REG_R10]);
    ps_regs_set(rs, 11, (uint64_t)g[REG_R11]);
    ps_regs_set(rs, 12, (uint64_t)g[REG_R12]);
    ps_regs_set(rs, 13, (uint64_t)g[REG_R13]);
    ps_regs_set(rs, 14, (uint64_t)g[REG_R14]);
    ps_regs_set(rs, 15, (uint64_t)g[REG_R15]);
    ps_regs_set(rs, 16, (uint64_t)g[REG_RIP]);
}

/*
 * The signal frame (platform/stacks.h): at the C library's return trampoline
 * (__restore_rt, which its CFI marks as a signal frame) the stack pointer
 * points at the ucontext_t the kernel saved the interrupted registers in
 * (the rt_sigframe's return address has been popped by the handler's ret).
 */
int ps_sigframe_regs(uint64_t sp, struct ps_regs *rs)
{
    ucontext_t uc;
    uintptr_t at = (uintptr_t)sp + offsetof(ucontext_t, uc_mcontext.gregs);
    if (ps_read(&uc.uc_mcontext.gregs, at, sizeof uc.uc_mcontext.gregs) != 0)
        return -1;
    ps_regs_from_context(&uc, rs);
    return 0;
}

/* The trampoline is known by its CFI here ('S'), never by its code. */
int ps_is_sigreturn(uint64_t pc)
{
    (void)pc;
    return 0;
}

/* x86-64 has no pointer authentication: a return address is an address. */
uint64_t ps_ret_addr(uint64_t a)
{
    return a;
}
