/*
 * interpstate.h - what an interpreter is doing at this moment, as far as
 * the sampler needs to know: which thread holds its GIL (PYSAMPLE_GIL),
 * and whether, and on which thread, it is collecting garbage (the [gc]
 * frame, docs/format.md).
 *
 * Every answer is one moment's reading of memory the program changes
 * without telling us: the callers read again after their walk where a
 * wrong answer would show (ps_gc_still_collecting).
 */
#ifndef PS_INTERPSTATE_H
#define PS_INTERPSTATE_H

#include <stdint.h>

#include "python/runtime.h"

/* tstate->state of a thread running Python code (pycore_pystate.h:
 * _Py_THREAD_DETACHED 0, _Py_THREAD_ATTACHED 1, _Py_THREAD_SUSPENDED 2). */
#define PS_THREAD_ATTACHED 1

/* The thread state holding interp's GIL now, or 0 when the GIL is free
 * or cannot be read (free-threaded builds have none). */
uintptr_t ps_gil_holder(const struct ps_python *py, uintptr_t interp);

/* 1 while interp collects garbage (its gc state's 'collecting'); 0 when it
 * does not, when this layout does not say where that is, or when the value
 * read is not a flag. */
int ps_gc_collecting(const struct ps_python *py, uintptr_t interp);

/*
 * The thread state collecting interp's garbage now, or 0: not collecting,
 * or which thread does cannot be told.  With a GIL, the collection runs on
 * the thread that holds it; free-threaded, on the one thread attached to
 * the interpreter while the others are stopped (see interpstate.c).
 */
uintptr_t ps_gc_collector(const struct ps_python *py, uintptr_t interp);

/* After tsp, which ps_gc_collector() named, was walked: 1 if it is
 * collecting still, so that the walk saw it in the collection. */
int ps_gc_still_collecting(const struct ps_python *py, uintptr_t interp, uintptr_t tsp);

#endif
