/*
 * frames.h - walking one thread's Python frames.
 */
#ifndef PS_FRAMES_H
#define PS_FRAMES_H

#include <stdint.h>

#include "codecache.h"
#include "python.h"
#include "stacktab.h"

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
int ps_walk(const struct ps_python *py, struct ps_codecache *cc, struct ps_stacktab *t,
            int lines, uintptr_t frame, uint64_t *out, int max, int *truncated,
            uintptr_t *boot);

#endif
