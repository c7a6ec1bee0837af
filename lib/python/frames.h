/*
 * frames.h - walking one thread's Python frames.
 */
#ifndef PS_FRAMES_H
#define PS_FRAMES_H

#include <stdint.h>

#include "python/codecache.h"
#include "python/runtime.h"
#include "util/symtab.h"

struct walk_plan;  /* walkplan.h: what a walk takes of the layout */

/* Errors a walk reports (the sampler counts them). */
enum { PS_WALK_UNREADABLE = -1, PS_WALK_INCONSISTENT = -2 };

/*
 * Frame root of a thread state snapshot (ts: L.ts_read bytes copied from the
 * thread state).  Returns 0 with *frame set (0 if the thread runs no Python),
 * or -1.
 */
int ps_thread_top_frame(const struct ps_python *py, const uint8_t *ts, uintptr_t *frame);

/*
 * One walk: the chain from frame towards the root, each Python frame
 * resolved.  Set what is wanted with designated initialisers; what is left
 * out (0, NULL) is not wanted.
 */
struct ps_walk_req {
    const struct ps_python *py;
    struct ps_codecache *cc;
    struct ps_symtab *syms;
    int lines;                  /* resolve line numbers too */
    uintptr_t frame;            /* where to begin (ps_thread_top_frame); 0: no Python */
    int max;                    /* Python frames reported at most */
    uint64_t *out;              /* max frames, innermost first */
    /* max addresses, or NULL: the address of each frame reported in out
     * (the running asyncio task's coroutine frame is recognised by its
     * address: tasks_stacks.c). */
    uintptr_t *addrs;
    /* max flags, or NULL: for native stacks (native.h), entry[i] = 1 when
     * frame i is the first frame its evaluation-loop call ran (3.9/3.10:
     * every frame; 3.11: its is_entry flag; 3.12+: the frame before a
     * C-stack shim), else 0.  The outermost frame of a walk that reached
     * the root is always one. */
    uint8_t *entry;
    /* py's plan made once (ps_walk_plan_make), or NULL: the walk makes it
     * from the layout (ps_walk_plan_init), as a plan made for another
     * interpreter is not used either. */
    const struct walk_plan *plan;
};

/* What a walk found.  out, addrs and entry hold n frames each; after an
 * error they hold nothing worth reading. */
struct ps_walk_res {
    int n;                      /* frames reported (0 after an error) */
    int error;                  /* 0, or one of the PS_WALK_ errors */
    int truncated;              /* the chain went on beyond max */
    /* The address of the outermost Thread._bootstrap_inner frame seen, or
     * 0 (for thread names, threadnames.h). */
    uintptr_t boot;
};

/* Walks as rq says and fills *res.  Returns res->n, or res->error if the
 * walk failed. */
int ps_walk(const struct ps_walk_req *rq, struct ps_walk_res *res);

/*
 * Resolves the one frame at rq->frame without following its link (a
 * suspended coroutine's frame has none) into rq->out[0]; rq->max, addrs
 * and entry are not used.  1 with the frame set, 0 if the frame is not
 * shown (a shim), or a PS_WALK_ error.  *taskgroup is set to 1 when the
 * frame runs asyncio's TaskGroup.__aexit__ (its first local is the group).
 */
int ps_frame_one(const struct ps_walk_req *rq, int *taskgroup);

/*
 * How a frame chain is followed, by the walk below and by the copy of a
 * suspended thread (framecopy.c, macOS), which must copy exactly what the
 * walk may read.
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
