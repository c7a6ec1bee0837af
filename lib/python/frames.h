/*
 * frames.h - walking one thread's Python frames.
 */
#ifndef PS_FRAMES_H
#define PS_FRAMES_H

#include <stdint.h>

#include "python/codecache.h"
#include "python/runtime.h"
#include "profile/symtab.h"

/* Errors a walk reports (the sampler counts them). */
enum { PS_WALK_UNREADABLE = -1, PS_WALK_INCONSISTENT = -2 };

/*
 * Frame root of a thread state snapshot (ts: L.ts_read bytes copied from the
 * thread state).  Returns 0 with *frame set (0 if the thread runs no Python),
 * or -1.
 */
int ps_thread_top_frame(const struct ps_python *py, const uint8_t *ts, uintptr_t *frame);

/*
 * Walks the chain from frame towards the root and resolves each Python
 * frame.  out receives up to max frames, innermost first; *truncated is set
 * if the chain went on beyond max.  *boot receives the address of the
 * outermost Thread._bootstrap_inner frame seen, or 0 (for thread names,
 * threadnames.h).  Returns the number of frames or one of the PS_WALK_
 * errors.
 */
int ps_walk(const struct ps_python *py, struct ps_codecache *cc, struct ps_symtab *syms,
            int lines, uintptr_t frame, uint64_t *out, int max, int *truncated,
            uintptr_t *boot);

/* ps_walk, and addrs (if not NULL, max entries) receives the address of
 * each frame reported in out (the running asyncio task's coroutine frame
 * is recognised by its address: tasks_stacks.c). */
int ps_walk_ex(const struct ps_python *py, struct ps_codecache *cc, struct ps_symtab *syms,
               int lines, uintptr_t frame, uint64_t *out, uintptr_t *addrs, int max,
               int *truncated, uintptr_t *boot);

/*
 * Resolves the one frame at frame without following its link (a suspended
 * coroutine's frame has none): 1 with *out set, 0 if the frame is not shown
 * (a shim), or a PS_WALK_ error.  *taskgroup is set to 1 when the frame
 * runs asyncio's TaskGroup.__aexit__ (its first local is the group).
 */
int ps_frame_one(const struct ps_python *py, struct ps_codecache *cc, struct ps_symtab *syms,
                 int lines, uintptr_t frame, uint64_t *out, int *taskgroup);

/*
 * ps_walk_ex, and for native stacks (native.h) entry[i] = 1 when frame i is
 * the first frame its evaluation-loop call ran (3.9/3.10: every frame;
 * 3.11: its is_entry flag; 3.12+: the frame before a C-stack shim).  The
 * outermost frame is always one.  entry may be NULL.
 */
int ps_walk_entries(const struct ps_python *py, struct ps_codecache *cc, struct ps_symtab *syms,
                    int lines, uintptr_t frame, uint64_t *out, uintptr_t *addrs, uint8_t *entry,
                    int max, int *truncated, uintptr_t *boot);

/*
 * How a frame chain is followed, by the walk below and by the macOS copy of
 * a suspended thread (lib/platform/darwin/suspend.c), which must copy exactly what
 * the walk may read.
 *
 * Budget: how many links a walk of at most max Python frames may follow.
 * Shims are skipped but still cost a step; 3.12 can have one per Python
 * frame (every call through C), hence twice the limit, and a margin.
 */
static inline int ps_walk_budget(int max)
{
    return 2 * max + 256;
}

/* A frame address worth reading: frames are pointer-aligned. */
static inline int ps_frame_addr_ok(uintptr_t frame)
{
    return frame != 0 && (frame & 7) == 0;
}

/* The link from a frame (snapshot fr, L.fr_read bytes) towards the root:
 * 0 at the root.  A link equal to the frame's own address is a torn read. */
static inline uintptr_t ps_frame_back(const struct ps_layout *L, const uint8_t *fr)
{
    return ps_ptr_at(fr, L->fr_back);
}

#endif
