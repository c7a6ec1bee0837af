/*
 * threadnames.h - the name of a threading.Thread, read from its object.
 *
 * CPython 3.14+ gives every threading.Thread an OS thread name; 3.9-3.13
 * keep the name only in the Thread object (Thread._name).  The frame walker
 * notes the frame of Thread._bootstrap_inner, which every threading thread
 * runs at the root of its stack and whose first local is the Thread object;
 * from there the name is found by reading memory only (see threadnames.c).
 */
#ifndef PS_THREADNAMES_H
#define PS_THREADNAMES_H

#include <stddef.h>
#include <stdint.h>

#include "python/runtime.h"

/*
 * 1 if a code object named name (co_qualname on 3.11+, co_name before) in
 * file is threading's Thread._bootstrap_inner.  Called once per code object
 * when the code cache fills an entry.
 */
int ps_is_thread_bootstrap(const char *name, const char *file);

/*
 * Reads the name of the Thread whose _bootstrap_inner frame is at frame
 * (the address the walker reported) into out as NUL-terminated UTF-8, cut
 * at a character boundary if longer than outlen - 1 bytes.  Returns the
 * length, or -1 when this build is not described or anything read is
 * missing or implausible (out is then the empty string).  A few dozen reads:
 * call it about once a second per thread, not per sample.  Sampler thread
 * only (it keeps a small cache).
 */
int ps_thread_py_name(const struct ps_python *py, uintptr_t frame, char *out, size_t outlen);

#endif
