/*
 * native.h - mixed native and Python stacks (docs/native.md).
 *
 * Three parts, called in this order by the sampler for each thread while
 * PYSAMPLE_NATIVE is on:
 *
 *   capture   the thread's registers: the platform's (platform/stacks.h,
 *             which also has the loaded objects and their symbols);
 *   unwind    the register set into return addresses (unwind.c: DWARF CFI
 *             from the in-memory .eh_frame_hdr (cfi.c), frame pointers where there
 *             is no CFI), every load through ps_read();
 *   merge     the native frames with the Python walk (merge.c): each
 *             evaluation-loop frame stands for the Python frames it runs.
 */
#ifndef PS_NATIVE_H
#define PS_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "platform/stacks.h"

struct ps_symtab;

/* Native frames kept per sample (innermost ones: the leaf is what counts). */
#define PS_NATIVE_MAX 512
/* ... and where every read is a system call (memread.h's syscall path). */
#define PS_NATIVE_MAX_SLOW 64

/* --- unwinding (unwind.c) ------------------------------------------------- */

/* Why an unwind stopped: 0 at the root, else the walk is truncated. */
enum ps_unwind_stop {
    PS_STOP_ROOT = 0,    /* the outermost frame: not truncated */
    PS_STOP_NO_REGS,     /* no pc or stack pointer to start from */
    PS_STOP_MAX,         /* the frame limit */
    PS_STOP_NO_OBJECT,   /* a pc in no loaded object's code (JIT code, garbage) */
    PS_STOP_CFI,         /* CFI we do not follow (an expression, an unknown opcode) */
    PS_STOP_SIGNAL,      /* signal frames (nested more than we follow, or not crossed here) */
    PS_STOP_REGISTER,    /* the CFA's register is not known (blocked: sp and pc only) */
    PS_STOP_READ,        /* a saved register or an unwind table was unreadable */
    PS_STOP_BAD_FRAME,   /* a step down the stack, or one too large */
    PS_STOP_N
};

/* The unwinder's cache of rules (unwind.c): one per sampler context
 * (context.h), made at set-up; NULL when out of memory. */
struct ps_unwind_rules;
struct ps_unwind_rules *ps_unwind_rules_new(void);

/*
 * Unwinds regs into pcs[0..] (innermost first; pcs[0] is the interrupted
 * pc, the others return addresses).  Returns the count; *stop says why
 * the walk ended (PS_STOP_ROOT: at the root; anything else: truncated).
 * Reads only through ps_read; allocates nothing, takes no lock.  One
 * thread at a time per ur (the sampler's): the rules found are kept in it.
 */
int ps_unwind(struct ps_unwind_rules *ur, const struct ps_regs *regs, uintptr_t *pcs, int max,
              int *stop);


/* How frames were unwound, for PYSAMPLE_STATS: rules found in the cache,
 * rules looked up in the CFI, frames that were frame-pointer frames by
 * their CFI, frames of code without CFI walked by frame pointers, signal
 * handlers' frames crossed into the interrupted context; and
 * the walks, their frames and their time (wall, ns) in all. */
struct ps_unwind_counts {
    uint64_t hits, misses, fp_frames, nocfi_frames, signal_frames;
    uint64_t walks, frames, ns;
};
void ps_unwind_counts(struct ps_unwind_rules *ur, struct ps_unwind_counts *c);
void ps_unwind_counts_reset(struct ps_unwind_rules *ur);

/* --- merging (merge.c) ---------------------------------------------------- */

/* One Python frame of the walk (innermost first) and whether it is the
 * first frame its evaluation-loop call ran (the outermost of its group). */
struct ps_pyframe {
    uint64_t frame;
    int entry;
};

/*
 * One merge: the two walks of a sample, and where the stack goes.  Set
 * what applies with designated initialisers.
 */
/* The merge's cache of native frames' names (merge.c): one per sampler
 * context (context.h), made at set-up; NULL when out of memory. */
struct ps_native_names;
struct ps_native_names *ps_native_names_new(void);

struct ps_native_merge_req {
    struct ps_native_names *names;  /* the caller's cache, one thread at a time */
    struct ps_symtab *syms;
    enum ps_native_mode mode;
    const struct ps_pyframe *py;    /* the Python walk, innermost first */
    int npy;
    const uintptr_t *pcs;           /* the unwind, innermost first (ps_unwind) */
    int npcs;                       /* 0: no native part */
    int stop;                       /* why the unwind ended (enum ps_unwind_stop) */
    /* Not NULL: the native part is not to be used, and this marker says
     * why (npcs 0 without one: "[native: unavailable]"). */
    const char *no_native_why;
    uint64_t *out;                  /* the merged stack, root first */
    int cap;                        /* room in out, in frames */
};

/* Writes the merged stack rq asks for and returns its depth.  Each call
 * counts one outcome (ps_native_stats). */
int ps_native_merge(const struct ps_native_merge_req *rq);

/*
 * The native samples' outcomes so far (counted in nn by the merges, in ur
 * by the unwinds), as PYSAMPLE_STATS lines into buf:
 * native_root (unwound to the root), native_truncated and, per cause,
 * native_truncated_<cause> (enum ps_unwind_stop), native_unavailable,
 * native_mismatch; then how frames were unwound and what the walks cost
 * (ps_unwind_counts: native_rule_hits ... native_unwind_ns).
 * Returns the length written (0 if it does not fit).
 */
int ps_native_stats(struct ps_unwind_rules *ur, struct ps_native_names *nn, char *buf,
                    size_t len);
/* In a forked child: those counts start from zero, as the sampler's own
 * statistics do (the child's file says what the child did). */
void ps_native_stats_reset(struct ps_unwind_rules *ur, struct ps_native_names *nn);

#endif
