/*
 * platform/stacks.h - what native stacks (lib/native/, docs/native.md) take
 * from the operating system: a thread's registers, the signal frames and
 * signed return addresses the unwinder crosses, and the loaded objects with
 * their symbols.
 *
 *   registers  Linux (linux/regs.c; per CPU: regs_<arch>.c): a thread
 *              blocked in a system call from /proc, a running one from a
 *              signal whose handler holds it still until released; macOS
 *              (darwin/regs.c): thread_get_state of the thread suspended
 *              until its Python frames are copied (darwin/suspend.c);
 *   objects    linux/elfsyms.c, darwin/machosyms.c: refreshed by the
 *              sampler thread before each tick, outside any hold: looking
 *              an address up in them during a hold takes no lock and
 *              allocates nothing.
 *
 * The CPU's register numbers are platform/arch.h's, which this builds on.
 */
#ifndef PS_PLATFORM_STACKS_H
#define PS_PLATFORM_STACKS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/arch.h"

/* --- registers ------------------------------------------------------------ */

/* The architecture's registers (platform/arch.h); r[] holds what is known. */
struct ps_regs {
    uint64_t r[PS_REG_N];
    uint64_t valid;         /* bit i: r[i] is known; PS_REGS_LEAF_RET: leaf_ret is */
    uint64_t leaf_ret;      /* the frame-0 contract, below */
};

/*
 * The frame-0 contract.  pcs[0] of an unwind is always the interrupted pc.
 * A function that has not pushed its frame record (a leaf that never does:
 * arm64 leaves, the system-call stubs of macOS's libsystem_kernel; any
 * function in its prologue or epilogue) is not in the frame-pointer chain,
 * which then starts at its caller's record and would skip that caller.  A
 * capture that can tell (lib/platform/darwin/regs.c: arm64 lr, x86_64 [sp]) sets
 * PS_REGS_LEAF_RET in valid and leaf_ret to the interrupted function's
 * return address: the unwind takes it as frame 1 and goes on from the same
 * registers (fp still points at that caller's record).  Nothing else sets
 * it (Linux captures never do), so leaf_ret is read only under that bit.
 */
#define PS_REGS_LEAF_RET (1ull << 63)

static inline void ps_regs_set(struct ps_regs *rs, int i, uint64_t v)
{
    rs->r[i] = v;
    rs->valid |= 1ull << i;
}

static inline int ps_regs_has(const struct ps_regs *rs, int i)
{
    return (rs->valid >> i) & 1;
}

/* How a capture went (platform: regs.c). */
enum ps_capture {
    PS_CAPTURE_FAILED = -1,  /* no registers: the sample has no native part */
    PS_CAPTURE_BLOCKED = 0,  /* the thread sleeps in a system call: sp and pc */
    PS_CAPTURE_HELD = 1,     /* the thread was stopped by our signal: all registers */
};

/*
 * Platform side.  ps_native_platform_init installs what capture needs
 * (Linux: the SIGURG handler); it returns 0, or -1 with why filled.
 * ps_native_capture gets tid's registers; the thread may be held until
 * ps_native_release, which returns 0 if what was read meanwhile is
 * consistent (the thread stayed held, or stayed in the same system call),
 * -1 if not.  ps_native_sigaction is the sigaction() interposer's hook for
 * the signal we use (the PS_SIGKEEP_NATIVE row of platform/sigview.c's
 * table): what sigaction() returns, the program's view while our handler is
 * in, the kernel's action otherwise.  Counters for PYSAMPLE_STATS.
 */
int ps_native_platform_init(char *why, size_t whylen);
int ps_native_capture(long tid, struct ps_regs *regs);
int ps_native_release(void);
int ps_native_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* The registers of a ucontext_t (a signal handler's, or getcontext()'s in
 * the unit tests), as the unwinder takes them.  Async-signal-safe. */
void ps_regs_from_context(const void *ucontext, struct ps_regs *rs);
/* Signal handlers' frames crossed by the unwinder (Linux, per architecture:
 * lib/platform/linux/regs_<arch>.c; macOS crosses none: darwin/regs.c).
 * ps_is_sigreturn: 1 if pc is the trampoline a handler returns to, known
 * by its code where no CFI marks it (aarch64); ps_sigframe_regs: the
 * registers the signal interrupted, from the kernel's frame at sp (sp as
 * the trampoline runs): 0, or -1 if unreadable or not crossed here.  Both
 * read only through ps_read. */
int ps_is_sigreturn(uint64_t pc);
int ps_sigframe_regs(uint64_t sp, struct ps_regs *rs);
/* A return address read from a frame record or a saved register, as a
 * plain code address: arm64 code built with pointer authentication
 * (-mbranch-protection, Apple's arm64e system libraries) signs it before
 * saving it, in the bits above the virtual address size.  Elsewhere
 * unchanged.  Async-signal-safe; reads no memory. */
uint64_t ps_ret_addr(uint64_t a);
void ps_native_after_fork(void);

enum ps_native_count {
    PS_NATIVE_BLOCKED, PS_NATIVE_HELD, PS_NATIVE_FAILED,  /* captures by outcome */
    PS_NATIVE_LOST,         /* the signal was not answered in time */
    PS_NATIVE_GONE,         /* the handler stopped waiting before we looked */
    PS_NATIVE_RESTARTED,    /* system calls our signal interrupted, restarted */
    PS_NATIVE_EINTR_LEFT,   /* ... that could not be restarted (docs/native.md) */
    PS_NATIVE_MASKED,       /* running threads not signalled: they block it */
    PS_NATIVE_COUNTS
};
struct ps_native_counts {
    uint64_t n[PS_NATIVE_COUNTS];   /* by enum ps_native_count */
};
void ps_native_counts(struct ps_native_counts *c);

/* --- loaded objects and symbols (linux/elfsyms.c, darwin/machosyms.c) ---- */

struct ps_obj;

/* Re-reads the list of loaded objects if it changed (cheap otherwise).
 * interp is an address inside the interpreter (&_PyRuntime): its object
 * is marked as the interpreter's own.  Sampler thread, outside holds. */
int ps_objs_refresh(uintptr_t interp);   /* 1 if the list changed */
/* Changes whenever the list of objects changes (refresh, replace, free):
 * what the unwinder's per-address cache is keyed on, so that it asks
 * rather than being told. */
uint32_t ps_objs_generation(void);
/* The object whose code contains pc, or NULL.  No lock, no allocation. */
const struct ps_obj *ps_objs_find(uintptr_t pc);
/* Its .eh_frame_hdr in memory, or 0. */
uintptr_t ps_obj_eh_frame_hdr(const struct ps_obj *o);
int ps_obj_is_interp(const struct ps_obj *o);
/* Its file's base name. */
const char *ps_obj_name(const struct ps_obj *o);
/* Offset of pc from the object's load address. */
uintptr_t ps_obj_offset(const struct ps_obj *o, uintptr_t pc);
/* The function containing pc, or NULL; loads the object's symbols the first
 * time (file I/O and malloc: never during a hold). */
const char *ps_obj_symbol(const struct ps_obj *o, uintptr_t pc);
void ps_objs_free(void);
/* The refresh's second half, for the unit tests' fake objects (Linux):
 * the list becomes these n objects, code [lo, hi) with its unwind table at
 * eh_hdr (0: none), no symbols, as if the loader had reported them.  A
 * refresh keeps them until the loader's counters move or ps_objs_free. */
struct ps_obj_desc {
    uintptr_t lo, hi, eh_hdr;
    const char *name;
};
int ps_objs_replace(const struct ps_obj_desc *d, size_t n);

#endif
