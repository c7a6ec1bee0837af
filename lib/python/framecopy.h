/*
 * framecopy.h - the copy of a stopped thread's Python frames (framecopy.c),
 * where the platform stops threads to read them (macOS).
 */
#ifndef PS_FRAMECOPY_H
#define PS_FRAMECOPY_H

#include <stdint.h>

#include "platform/platform.h"
#include "python/runtime.h"

/*
 * Brackets the walk of one thread (threadsample.c).  Where the platform
 * stops threads to read them (ps_plat_walk_reads_copy), begin suspends
 * thread tid, refreshes ts (L.ts_read bytes at tsp) and copies its frame
 * chain as far as a walk of max_frames may go, then resumes it; until end,
 * ps_read() serves those addresses from the copy, so the walk, which may
 * allocate, sees the thread as it was while stopped.  Returns 0 (walk: the
 * copy, or live memory when the thread could not be stopped), or -1 if the
 * thread or its state is gone (do not walk).
 *
 * Where running threads are read (Linux) both are the test of a constant:
 * no call, nothing copied.
 */
int ps_framecopy_take(const struct ps_python *py, long tid, uintptr_t tsp, uint8_t *ts,
                      int max_frames);

static inline int ps_framecopy_begin(const struct ps_python *py, long tid, uintptr_t tsp,
                                     uint8_t *ts, int max_frames)
{
    return ps_plat_walk_reads_copy ? ps_framecopy_take(py, tid, tsp, ts, max_frames) : 0;
}

static inline void ps_framecopy_end(void)
{
    if (ps_plat_walk_reads_copy)
        ps_thread_copy_end();
}

#endif
