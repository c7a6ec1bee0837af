/*
 * linux/regs_aarch64.c - aarch64's part of regs.c (regs_arch.h): the
 * registers of a ucontext_t, the signal frame, and the blocking system
 * calls our signal may interrupt with EINTR, recognised and restarted.
 *
 * EINTR (regs.c says when): the context is the return of a system call
 * when the instruction before pc is `svc #0` and x0 is -EINTR.  The
 * call's number is still in x8 (the kernel changes only x0), but x0 held
 * the first argument and now holds the error.  The C library's wrappers
 * load x0 right before the svc from a register that survives the call
 * (glibc 2.36: `mov x0, x19` after its cancellation bookkeeping, `mov x0,
 * #0` in pause, `add x0, x19, #imm` in some futex waits), so x0 is
 * recovered from the instructions before the svc (x0_before): the latest
 * one that writes x0 gives its value, if it is a move, a constant, an add
 * or subtract of an immediate, or a sign extension, and the registers it
 * reads were not written after it.  Instructions between it and the svc
 * must be ones whose destination we can tell (moves, immediates, loads
 * and stores without write-back); anything else (a branch, a call, an
 * instruction we do not decode) leaves the EINTR, counted as on x86-64.
 * As there, only instructions of the page pc is in are read, and a branch
 * into the middle of that sequence from elsewhere is not seen: the C
 * library's wrappers have none.
 *
 * The restart: pc back by 4, x0 = the recovered argument.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ucontext.h>

#include "memory/memread.h"
#include "platform/linux/regs_arch.h"

#define A64_SVC0 0xd4000001u
#define A64_MOV_X8_SIGRETURN 0xd2801168u   /* mov x8, #139 (rt_sigreturn) */
#define A64_SP 31                          /* bit 31 of a write mask: sp */

const char *ps_arch_native_refused(void)
{
    return NULL;
}

/* The same calls as on x86-64 (regs_x86_64.c), by aarch64's numbers (the
 * generic table: no poll, select, pause or epoll_wait of their own; the C
 * library issues ppoll, pselect6 and epoll_pwait for them). */
int ps_arch_restartable(long nr)
{
    switch (nr) {
    case 4:   /* io_getevents */
    case 22:  /* epoll_pwait */
    case 63:  /* read */
    case 72:  /* pselect6 */
    case 73:  /* ppoll */
    case 95:  /* waitid */
    case 98:  /* futex */
    case 101: /* nanosleep */
    case 115: /* clock_nanosleep */
    case 133: /* rt_sigsuspend */
    case 137: /* rt_sigtimedwait */
    case 188: /* msgrcv */
    case 192: /* semtimedop */
    case 202: /* accept */
    case 207: /* recvfrom */
    case 212: /* recvmsg */
    case 242: /* accept4 */
    case 260: /* wait4 */
    case 441: /* epoll_pwait2 */
        return 1;
    default:
        return 0;
    }
}

/* The general registers instruction in writes (bit i: xi, bit 31: sp), 0
 * for none, or -1 if it is not one we decode. */
static int64_t writes(uint32_t in)
{
    unsigned rd = in & 31;
    int64_t rdbit = rd == 31 ? 0 : (int64_t)1 << rd;   /* 31 is xzr here */
    if (in == 0xd503201fu)                           /* nop */
        return 0;
    if ((in & 0x1f800000u) == 0x12800000u)           /* movn, movz, movk */
        return rdbit;
    if ((in & 0x1f000000u) == 0x0a000000u)           /* logical (shifted register): mov */
        return rdbit;
    if ((in & 0x1f800000u) == 0x12000000u)           /* logical (immediate): 31 is sp except ands */
        return rd == 31 ? (((in >> 29) & 3) == 3 ? 0 : (int64_t)1 << A64_SP) : rdbit;
    if ((in & 0x1f200000u) == 0x0b000000u)           /* add/sub (shifted register) */
        return rdbit;
    if ((in & 0x1fe00000u) == 0x1a800000u)           /* conditional select: cset */
        return rdbit;
    if ((in & 0x1f000000u) == 0x11000000u)           /* add/sub (immediate): 31 is sp */
        return rd == 31 ? ((in >> 29) & 1 ? 0 : (int64_t)1 << A64_SP) : rdbit;
    if ((in & 0x1f800000u) == 0x13000000u)           /* bitfield: sxtw, lsl, ... */
        return rdbit;
    if ((in & 0xbfc00000u) == 0xb9000000u ||         /* str (unsigned offset) */
        (in & 0xbfe00c00u) == 0xb8000000u ||         /* stur */
        (in & 0x7fc00000u) == 0x29000000u)           /* stp (signed offset) */
        return 0;
    if ((in & 0xbfc00000u) == 0xb9400000u ||         /* ldr (unsigned offset) */
        (in & 0xbfe00c00u) == 0xb8400000u)           /* ldur */
        return rdbit;
    return -1;
}

/* The value the instruction in, which writes x0, gave it, from the
 * registers as they are now (x[0..30], sp) when none it reads is in
 * clobbered.  0 or -1. */
static int x0_value(uint32_t in, const uint64_t *x, uint64_t sp, int64_t clobbered, uint64_t *v)
{
    unsigned n = (in >> 5) & 31, m = (in >> 16) & 31, hw = (in >> 21) & 3;
    uint64_t imm16 = (in >> 5) & 0xffff;
    if ((in & 0x7fe0ffe0u) == 0x2a0003e0u) {         /* mov x0, xm / mov w0, wm */
        if (m == 0 || (m != 31 && ((clobbered >> m) & 1)))
            return -1;
        uint64_t r = m == 31 ? 0 : x[m];
        *v = (in >> 31) ? r : (uint32_t)r;
        return 0;
    }
    if ((in & 0x7f800000u) == 0x52800000u) {         /* movz */
        *v = imm16 << (16 * hw);
        if (!(in >> 31))
            *v = (uint32_t)*v;
        return 0;
    }
    if ((in & 0x7f800000u) == 0x12800000u) {         /* movn */
        *v = ~(imm16 << (16 * hw));
        if (!(in >> 31))
            *v = (uint32_t)*v;
        return 0;
    }
    if ((in & 0xbf800000u) == 0x91000000u) {         /* add/sub x0, xn|sp, #imm (64-bit) */
        int bit = n == 31 ? A64_SP : (int)n;
        if (n == 0 || ((clobbered >> bit) & 1))
            return -1;
        uint64_t imm = (uint64_t)((in >> 10) & 0xfff) << ((in >> 22) & 1 ? 12 : 0);
        uint64_t base = n == 31 ? sp : x[n];
        *v = (in >> 30) & 1 ? base - imm : base + imm;
        return 0;
    }
    if ((in & 0xfffffc00u) == 0x93407c00u) {         /* sxtw x0, wn */
        if (n == 0 || n == 31 || ((clobbered >> n) & 1))
            return -1;
        *v = (uint64_t)(int64_t)(int32_t)x[n];
        return 0;
    }
    return -1;
}

/* regs_arch.h (its unit test: test/unit/test_native.c).  code[0..avail)
 * are the instructions before the svc, nearest first. */
int ps_a64_x0_before(const uint32_t *code, int avail, const uint64_t *x, uint64_t sp,
                     uint64_t *x0)
{
    int64_t clobbered = 0;
    for (int i = 0; i < avail && i < 8; i++) {
        uint32_t in = code[i];
        int64_t w = writes(in);
        if (w < 0)
            return -1;
        if (w & 1)
            return x0_value(in, x, sp, clobbered, x0);
        clobbered |= w;
    }
    return -1;
}

int ps_arch_interrupted_call(const ucontext_t *uc, long *nr)
{
    const mcontext_t *m = &uc->uc_mcontext;
    if ((int64_t)m->regs[0] != -EINTR || (m->pc & 4095) < 4 || (m->pc & 3) != 0)
        return 0;
    if (((const uint32_t *)(uintptr_t)m->pc)[-1] != A64_SVC0)
        return 0;   /* not the return of a system call */
    *nr = (long)m->regs[8];   /* the kernel changes only x0 */
    return 1;
}

int ps_arch_restart(ucontext_t *uc, long nr)
{
    mcontext_t *m = &uc->uc_mcontext;
    const uint32_t *svc = (const uint32_t *)(uintptr_t)m->pc - 1;
    int avail = (int)((m->pc & 4095) / 4) - 1;   /* instructions of this page before the svc */
    uint32_t code[8];
    int n = avail < 8 ? avail : 8;
    for (int i = 0; i < n; i++)
        code[i] = svc[-1 - i];
    uint64_t x[31], x0;
    memcpy(x, m->regs, sizeof x);   /* unsigned long long there, uint64_t here */
    if (ps_a64_x0_before(code, n, x, m->sp, &x0) != 0)
        return -1;
    m->regs[0] = x0;
    m->regs[8] = (uint64_t)nr;
    m->pc -= 4;
    return 0;
}

void ps_regs_from_context(const void *ucontext, struct ps_regs *rs)
{
    const mcontext_t *m = &((const ucontext_t *)ucontext)->uc_mcontext;
    rs->valid = 0;
    for (int i = 0; i < 31; i++)
        ps_regs_set(rs, i, m->regs[i]);
    ps_regs_set(rs, PS_REG_SP, m->sp);
    ps_regs_set(rs, PS_REG_PC, m->pc);
}

/*
 * The signal frame (platform/stacks.h).  A handler returns to a trampoline that is
 * `mov x8, #139; svc #0` (rt_sigreturn): the vDSO's __kernel_rt_sigreturn
 * on Linux (whose CFI marks it a signal frame), or a page of its own under
 * an emulator (qemu-user), which no loaded object holds; so it is known by
 * its two instructions, as libgcc's unwinder knows it.  There the stack
 * pointer points at the kernel's rt_sigframe: a siginfo_t, then the
 * ucontext_t with the interrupted registers.
 */
int ps_is_sigreturn(uint64_t pc)
{
    uint32_t code[2];
    if ((pc & 3) != 0 || ps_read(code, (uintptr_t)pc, sizeof code) != 0)
        return 0;
    return code[0] == A64_MOV_X8_SIGRETURN && code[1] == A64_SVC0;
}

int ps_sigframe_regs(uint64_t sp, struct ps_regs *rs)
{
    /* regs[31], sp and pc: contiguous in the kernel's sigcontext. */
    struct { uint64_t regs[31], sp, pc; } r;
    uintptr_t at = (uintptr_t)sp + sizeof(siginfo_t) + offsetof(ucontext_t, uc_mcontext) +
                   offsetof(mcontext_t, regs);
    if (ps_read(&r, at, sizeof r) != 0)
        return -1;
    rs->valid = 0;
    for (int i = 0; i < 31; i++)
        ps_regs_set(rs, i, r.regs[i]);
    ps_regs_set(rs, PS_REG_SP, r.sp);
    ps_regs_set(rs, PS_REG_PC, r.pc);
    return 0;
}

/*
 * A return address as a plain address (platform/stacks.h).  xpaclri (a
 * hint: a no-op on CPUs without pointer authentication, which then never
 * sign) strips exactly what this process's configuration put there,
 * whatever its virtual address size.
 */
uint64_t ps_ret_addr(uint64_t a)
{
    register uint64_t lr __asm__("x30") = a;
    __asm__("hint #7" : "+r"(lr));   /* xpaclri */
    return lr;
}
