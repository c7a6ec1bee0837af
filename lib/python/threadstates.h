/*
 * threadstates.h - every thread state of every interpreter, in the order
 * the runtime lists them.  The one enumeration: the sampler's tick and the
 * fork-time position check (ps_python_position) both go through it.
 */
#ifndef PS_THREADSTATES_H
#define PS_THREADSTATES_H

#include <stdint.h>

#include "python/runtime.h"

/* Bounds that end a list a torn read has turned into a cycle. */
#define PS_MAX_INTERPS 256
#define PS_MAX_THREADS 4096

/* Bytes a thread state snapshot may take (L.ts_read must fit). */
#define PS_TS_MAX 1024

struct ps_tstate_iter {
    const struct ps_python *py;
    uintptr_t interp, next_interp, tsp;
    int ninterps, nthreads;
    unsigned torn;  /* lists cut short: a thread state did not point back */
    int64_t interp_id;  /* interp's id (0: the main one), -1 where unknown */
};

/* Starts at the runtime's first interpreter.  -1 if the layout's thread
 * state does not fit PS_TS_MAX (then nothing is listed). */
int ps_tstates_begin(struct ps_tstate_iter *it, const struct ps_python *py);

/* The same, at the first interpreter head, read by the caller
 * (ps_python_heads: the tick reads it with the finalizing flag). */
int ps_tstates_begin_at(struct ps_tstate_iter *it, const struct ps_python *py, uintptr_t head);

/*
 * Copies the next thread state (L.ts_read bytes) into ts and returns its
 * address, or 0 at the end.  A thread state that cannot be read ends its
 * interpreter's list; one that does not point back at its interpreter was
 * freed (and maybe reused) while we looked, so the rest of that list cannot
 * be trusted either: it ends too, counted in it->torn.
 */
uintptr_t ps_tstates_next(struct ps_tstate_iter *it, uint8_t *ts);

/*
 * A value that changes whenever a thread of this process executes Python
 * code.  A fork() child that execs without running any Python (subprocess
 * forks and execs in C) still shows its parent's frozen stack, which the
 * sampler dutifully samples; comparing this value at the fork and at the
 * exec tells such a child from one that ran code of its own (lifecycle.c).
 */
uint64_t ps_python_position(const struct ps_python *py);

#endif
