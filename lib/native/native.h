/*
 * native.h - mixed native and Python stacks (docs/native.md).
 *
 * Three parts, called in this order by the sampler for each thread while
 * PYSAMPLE_NATIVE is on:
 *
 *   capture   the thread's registers (platform: lib/platform/linux/regs.c): a thread
 *             blocked in a system call from /proc, a running one from a
 *             signal whose handler holds it still until released; macOS
 *             (lib/platform/darwin/regs.c): thread_get_state of the thread
 *             suspended until its Python frames are copied (suspend.c);
 *   unwind    the register set into return addresses (unwind.c: DWARF CFI
 *             from the in-memory .eh_frame_hdr (cfi.c), frame pointers where there
 *             is no CFI), every load through ps_read();
 *   merge     the native frames with the Python walk (merge.c): each
 *             evaluation-loop frame stands for the Python frames it runs.
 *
 * The loaded objects and their symbols (lib/platform/linux/elfsyms.c,
 * lib/platform/darwin/machosyms.c) are refreshed
 * by the sampler thread before each tick, outside any hold: looking an
 * address up in them during a hold takes no lock and allocates nothing.
 */
#ifndef PS_NATIVE_H
#define PS_NATIVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "native/arch.h"

struct ps_symtab;

/* Native frames kept per sample (innermost ones: the leaf is what counts). */
#define PS_NATIVE_MAX 512
/* ... and where every read is a system call (memread.h's syscall path). */
#define PS_NATIVE_MAX_SLOW 64

/* --- registers ------------------------------------------------------------ */

/* The architecture's registers (native/arch.h); r[] holds what is known. */
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
 * the signal we use: -2 if that signal is not ours (the caller goes on),
 * else what sigaction() returns.  Counters for PYSAMPLE_STATS.
 */
int ps_native_platform_init(char *why, size_t whylen);
int ps_native_capture(long tid, struct ps_regs *regs);
int ps_native_release(void);
int ps_native_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* The registers of a ucontext_t (a signal handler's, or getcontext()'s in
 * the unit tests), as the unwinder takes them.  Async-signal-safe. */
void ps_regs_from_context(const void *ucontext, struct ps_regs *rs);
/* Signal handlers' frames crossed by the unwinder (Linux, per architecture:
 * lib/platform/linux/regs_<arch>.c).  ps_is_sigreturn: 1 if pc is the
 * trampoline a handler returns to, known by its code where no CFI marks
 * it (aarch64); ps_sigframe_regs: the registers the signal interrupted,
 * from the kernel's frame at sp (sp as the trampoline runs): 0, or -1 if
 * unreadable.  Both read only through ps_read. */
int ps_is_sigreturn(uint64_t pc);
int ps_sigframe_regs(uint64_t sp, struct ps_regs *rs);
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

/* --- loaded objects and symbols (lib/platform/linux/elfsyms.c, lib/platform/darwin/machosyms.c) */

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

/* --- unwinding (unwind.c) ------------------------------------------------- */

/* Why an unwind stopped: 0 at the root, else the walk is truncated. */
enum ps_unwind_stop {
    PS_STOP_ROOT = 0,    /* the outermost frame: not truncated */
    PS_STOP_NO_REGS,     /* no pc or stack pointer to start from */
    PS_STOP_MAX,         /* the frame limit */
    PS_STOP_NO_OBJECT,   /* a pc in no loaded object's code (JIT code, garbage) */
    PS_STOP_CFI,         /* CFI we do not follow (an expression, an unknown opcode) */
    PS_STOP_SIGNAL,      /* signal frames (nested more than we follow, or not Linux) */
    PS_STOP_REGISTER,    /* the CFA's register is not known (blocked: sp and pc only) */
    PS_STOP_READ,        /* a saved register or an unwind table was unreadable */
    PS_STOP_BAD_FRAME,   /* a step down the stack, or one too large */
    PS_STOP_N
};

/*
 * Unwinds regs into pcs[0..] (innermost first; pcs[0] is the interrupted
 * pc, the others return addresses).  Returns the count; *stop says why
 * the walk ended (PS_STOP_ROOT: at the root; anything else: truncated).
 * Reads only through ps_read; allocates nothing, takes no lock.  One
 * thread at a time (the sampler's): it keeps a cache of unwind rules.
 */
int ps_unwind(const struct ps_regs *regs, uintptr_t *pcs, int max, int *stop);


/* How frames were unwound, for PYSAMPLE_STATS: rules found in the cache,
 * rules looked up in the CFI, frames that were frame-pointer frames by
 * their CFI, frames of code without CFI walked by frame pointers, signal
 * handlers' frames crossed into the interrupted context; and
 * the walks, their frames and their time (wall, ns) in all. */
struct ps_unwind_counts {
    uint64_t hits, misses, fp_frames, nocfi_frames, signal_frames;
    uint64_t walks, frames, ns;
};
void ps_unwind_counts(struct ps_unwind_counts *c);
void ps_unwind_counts_reset(void);

/* --- merging (merge.c) ---------------------------------------------------- */

/* One Python frame of the walk (innermost first) and whether it is the
 * first frame its evaluation-loop call ran (the outermost of its group). */
struct ps_pyframe {
    uint64_t frame;
    int entry;
};

/* The names cached per address are stale: the loaded objects changed, or
 * the symbol table their ids belong to was emptied (profile.c, where the
 * code cache is dropped for the same reason). */
void ps_native_objects_changed(void);

/*
 * Writes the merged stack, root first, into out (room for cap frames) and
 * returns its depth.  py: the Python walk, innermost first; pcs: the
 * unwind, innermost first, and stop why it ended (ps_unwind); npcs 0: no
 * native part, and no_native_why (or "[native: unavailable]") says so.
 * Each call counts one outcome (ps_native_stats).
 */
int ps_native_merge(struct ps_symtab *t, enum ps_native_mode mode,
                    const struct ps_pyframe *py, int npy, const uintptr_t *pcs, int npcs,
                    int stop, const char *no_native_why, uint64_t *out, int cap);

/*
 * The native samples' outcomes so far, as PYSAMPLE_STATS lines into buf:
 * native_root (unwound to the root), native_truncated and, per cause,
 * native_truncated_<cause> (enum ps_unwind_stop), native_unavailable,
 * native_mismatch; then how frames were unwound and what the walks cost
 * (ps_unwind_counts: native_rule_hits ... native_unwind_ns).
 * Returns the length written (0 if it does not fit).
 */
int ps_native_stats(char *buf, size_t len);
/* In a forked child: those counts start from zero, as the sampler's own
 * statistics do (the child's file says what the child did). */
void ps_native_stats_reset(void);

#endif
