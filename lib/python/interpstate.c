/*
 * interpstate.c - who holds an interpreter's GIL, and who collects its
 * garbage (interpstate.h), read through ps_read() only.
 *
 * Which thread collects.  The interpreter says *that* it collects (its gc
 * state's 'collecting', set for the whole of gc_collect_main(), on 3.9 to
 * 3.15), not on which thread; 3.15 alone also records the frame that
 * triggered the collection.  The collection runs on the thread that
 * triggered it, which keeps running it until it is over:
 *
 *  - With a GIL, that thread holds the GIL throughout: the collector is
 *    the GIL's holder.  Only Python code the collection calls (finalizers,
 *    weakref callbacks, gc.callbacks) can let the GIL go; while another
 *    thread holds it then, that thread would be taken for the collector.
 *    The walk is bracketed: the flag and the holder are read before it and
 *    again after it, and a thread is marked only if it held the GIL with
 *    the flag set both times.  Another thread can only take the GIL when a
 *    collection ends or its finalizers let go of it, and the GIL changes
 *    hands at most once per switch interval (5 ms): for a thread to be
 *    marked wrongly both readings would have to fall into such a hand-over.
 *
 *  - Free-threaded, there is no GIL.  The collector stops the world for
 *    its marking phases: every other thread is then suspended or detached
 *    (tstate->state), and the collector is the one thread attached.  While
 *    the world runs again (finalizers, tp_clear) other threads are attached
 *    too, and no thread is marked: free-threaded profiles show the
 *    stop-the-world part of collections only.  After the walk the flag and
 *    the thread's being attached are read again.
 *
 * Every value read is checked: the flag must be 0 or 1, the state one of
 * the few a thread state takes, and a thread state must point back at its
 * interpreter; anything else reads as "not collecting".
 */
#include <string.h>

#include "memory/memread.h"
#include "python/interpstate.h"
#include "python/threadstates.h"
#include "util/tickpath.h"

PS_TICK_PATH uintptr_t ps_gil_holder(const struct ps_python *py, uintptr_t interp)
{
    const struct ps_layout *L = &py->L;
    uintptr_t gil = 0, holder = 0;
    int locked = 0;
    if (L->gil_locked == PS_NOFIELD || L->gil_last_holder == PS_NOFIELD)
        return 0;
    /* 3.9-3.11: one GIL in _PyRuntime; 3.12+: each interpreter's
     * ceval.gil points at the GIL it uses (its own, or the main
     * interpreter's for a legacy sub-interpreter). */
    if (L->rt_gil != PS_NOFIELD)
        gil = py->runtime + L->rt_gil;
    else if (L->is_ceval_gil == PS_NOFIELD ||
             ps_read(&gil, interp + L->is_ceval_gil, sizeof gil) != 0)
        return 0;
    if (gil == 0 || ps_read(&locked, gil + L->gil_locked, sizeof locked) != 0 || !locked ||
        ps_read(&holder, gil + L->gil_last_holder, sizeof holder) != 0)
        return 0;
    return holder;
}

int ps_gc_collecting(const struct ps_python *py, uintptr_t interp)
{
    const struct ps_layout *L = &py->L;
    int collecting = 0;
    if (L->is_gc == PS_NOFIELD || L->gc_collecting == PS_NOFIELD ||
        ps_read(&collecting, interp + L->is_gc + L->gc_collecting, sizeof collecting) != 0)
        return 0;
    return collecting == 1;
}

/* tstate->state of tsp, or -1 when it cannot be read or is not one of the
 * states a thread state takes (detached, attached, suspended; 3.14 adds
 * shutting down). */
static int thread_state(const struct ps_layout *L, uintptr_t tsp)
{
    int state;
    if (ps_read(&state, tsp + L->ts_state, sizeof state) != 0 || state < 0 || state > 3)
        return -1;
    return state;
}

/* Free-threaded: the one thread state of interp that is attached, or 0
 * when none, several, or not all could be read. */
static uintptr_t only_attached(const struct ps_python *py, uintptr_t interp)
{
    const struct ps_layout *L = &py->L;
    uintptr_t tsp = 0, found = 0;
    if (L->ts_state == PS_NOFIELD || ps_read_ptr(interp + L->is_threads_head, &tsp) != 0)
        return 0;
    for (int n = 0; tsp != 0; n++) {
        uintptr_t back = 0, next = 0;
        if (n >= PS_MAX_THREADS || ps_read_ptr(tsp + L->ts_interp, &back) != 0 || back != interp ||
            ps_read_ptr(tsp + L->ts_next, &next) != 0)
            return 0;
        int state = thread_state(L, tsp);
        if (state < 0 || (state == PS_THREAD_ATTACHED && found != 0))
            return 0;
        if (state == PS_THREAD_ATTACHED)
            found = tsp;
        tsp = next;
    }
    return found;
}

PS_TICK_PATH uintptr_t ps_gc_collector(const struct ps_python *py, uintptr_t interp)
{
    if (!ps_gc_collecting(py, interp))
        return 0;
    return py->L.free_threaded ? only_attached(py, interp) : ps_gil_holder(py, interp);
}

PS_TICK_PATH int ps_gc_still_collecting(const struct ps_python *py, uintptr_t interp, uintptr_t tsp)
{
    if (tsp == 0 || !ps_gc_collecting(py, interp))
        return 0;
    if (py->L.free_threaded)
        return thread_state(&py->L, tsp) == PS_THREAD_ATTACHED;
    return ps_gil_holder(py, interp) == tsp;
}
