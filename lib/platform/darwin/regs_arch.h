/*
 * darwin/regs_arch.h - what darwin/regs.c needs of the CPU: one file per
 * architecture (regs_aarch64.c, regs_x86_64.c), chosen by lib/meson.build
 * as linux/regs_<arch>.c are.  regs.c has the hold and the frame-0 rule;
 * these have the thread state, the call instructions and where a call
 * leaves its return address.  ps_ret_addr (platform/stacks.h) is theirs
 * too.  Everything here runs while a thread is suspended: no allocation,
 * no lock, no dyld.
 */
#ifndef PS_DARWIN_REGS_ARCH_H
#define PS_DARWIN_REGS_ARCH_H

#include <mach/mach.h>
#include <stdint.h>

/* The registers as read from the suspended thread. */
struct ps_darwin_regs {
    uint64_t pc, sp, fp;
    uint64_t lr;      /* arm64 only */
};

/* The suspended thread's registers (pc and lr as plain addresses): 0, or
 * -1 if thread_get_state failed. */
int ps_darwin_get_state(mach_port_t port, struct ps_darwin_regs *r);

/* Where the interrupted function's own return address is if it has not
 * pushed its frame record (lr on arm64, [sp] on x86_64): that value, as
 * read (maybe signed), or 0 if it cannot be read. */
uint64_t ps_darwin_call_return(const struct ps_darwin_regs *r);

/* 1 if the instruction that ends right before ret is a call (so ret is a
 * return address a call left), from the forms compilers emit. */
int ps_darwin_call_before(uint64_t ret);

#endif
