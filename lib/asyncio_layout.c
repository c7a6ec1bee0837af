/*
 * asyncio_layout.c - asyncio's objects in CPython 3.9 to 3.15, as data.
 *
 * TaskObj and FutureObj are private to Modules/_asynciomodule.c, so no
 * header and no _Py_DebugOffsets describe them before 3.14: the offsets
 * below were computed from each release's struct (FutureObj_HEAD and
 * TaskObj at the v3.9.18 ... v3.13.0 tags) and checked on the pyenv
 * interpreters by finding a live task's loop, coroutine, name and waiter
 * through ctypes at exactly these places.  The generator, frame and
 * container offsets are offsetof() against each version's headers
 * (release and Py_DEBUG agree).
 *
 * 3.13 moved the Future's bit-fields to the end and the Task's pointers
 * behind its own, and its C tasks drop the instance dict pointer
 * (managed dict): its row differs most.
 *
 * The done-callbacks (shield/wait_for links, tasks.c link_callbacks):
 * FutureObj_HEAD begins loop, callback0, context0, callbacks in every
 * version; functools.partial is fn, args, ... in all of them; a
 * function's func_closure follows code, globals, defaults and kwdefaults
 * on 3.9 and the seven common fields (globals ... kwdefaults) from 3.10
 * (offsetof against each version's headers: 48, then 72).  3.14+ need
 * none of it: asyncio records who awaits whom.
 *
 * 3.14 and 3.15 describe themselves: the Task's offsets are in _asyncio's
 * _AsyncioDebug table (read by tasks.c), the generator's and the frame's in
 * _Py_DebugOffsets.  Their rows hold only what those tables cannot say:
 * what the frame states mean (3.15 renumbered them) and where a suspended
 * await keeps the awaited object (3.15's SEND keeps two values).
 */
#include <stdio.h>
#include <string.h>

#include "asyncio_layout.h"

#define NO PS_NOFIELD

static const struct ps_async_layout rows[] = {
    /* 3.14 and 3.15: tasks in per-thread lists, the Task's offsets in
     * _asyncio's _AsyncioDebug (tasks.c), the generator's in
     * _Py_DebugOffsets (layout.h); what remains is what the frame states
     * mean and where an await keeps what it awaits. */
    {
      .minor = 14, .tasks_kind = PS_ATASKS_THREAD_LISTS, .yf_kind = PS_YF_STACKPTR,
      .gi_show_lo = -3, .gi_show_hi = -1, .gi_yf_lo = -1, .gi_yf_hi = -1, .yf_depth = 1,
      .long_kind = PS_LONG_LV_TAG,
    },
    {
      /* CREATED 0, SUSPENDED 1, SUSPENDED_YIELD_FROM 2 (and _LOCKED 3);
       * SEND keeps two values: the awaited object is second from the top */
      .minor = 15, .tasks_kind = PS_ATASKS_THREAD_LISTS, .yf_kind = PS_YF_STACKPTR,
      .gi_show_lo = 0, .gi_show_hi = 3, .gi_yf_lo = 2, .gi_yf_hi = 3, .yf_depth = 2,
      .long_kind = PS_LONG_LV_TAG,
    },
    {
      .minor = 9, .tasks_kind = PS_ATASKS_ALL,
      /* loop, 7 pointers, state/log_tb/blocking, dict, weakreflist,
       * _PyErr_StackItem (4 pointers), then the task's fields */
      .fut_loop = 16, .fut_state = 80, .task_fut_waiter = 144, .task_coro = 152, .task_name = 160,
      .fut_callback0 = 24, .fut_callbacks = 40, .func_closure = 48, .partial_args = 24,
      .gi_frame = 16, .gi_frame_embedded = 0, .gi_frame_state = NO, .gi_qualname = 56,
      .yf_kind = PS_YF_STACKTOP_PTR, .fr_stacktop = 72, .fr_valuestack = 64, .fr_state = NO,
      .long_kind = PS_LONG_OB_SIZE,
    },
    {
      .minor = 10, .tasks_kind = PS_ATASKS_ALL,
      /* + exception_tb */
      .fut_loop = 16, .fut_state = 88, .task_fut_waiter = 152, .task_coro = 160, .task_name = 168,
      .fut_callback0 = 24, .fut_callbacks = 40, .func_closure = 72, .partial_args = 24,
      .gi_frame = 16, .gi_frame_embedded = 0, .gi_frame_state = NO, .gi_qualname = 48,
      .yf_kind = PS_YF_STACKDEPTH, .fr_stacktop = 80, .fr_valuestack = 64, .fr_state = 108,
      .long_kind = PS_LONG_OB_SIZE,
    },
    {
      .minor = 11, .tasks_kind = PS_ATASKS_ALL,
      /* cancelled_exc is one pointer now; frames are embedded in generators */
      .fut_loop = 16, .fut_state = 88, .task_fut_waiter = 128, .task_coro = 136, .task_name = 144,
      .fut_callback0 = 24, .fut_callbacks = 40, .func_closure = 72, .partial_args = 24,
      .gi_frame = 80, .gi_frame_embedded = 1, .gi_frame_state = 75,
      /* FRAME_CREATED -2, FRAME_SUSPENDED -1 (a yield and an await alike) */
      .gi_show_lo = -2, .gi_show_hi = -1, .gi_yf_lo = -1, .gi_yf_hi = -1, .gi_qualname = 40,
      .yf_kind = PS_YF_IFRAME, .fr_stacktop = 64, .fr_valuestack = 72, .fr_state = NO,
      .long_kind = PS_LONG_OB_SIZE,
    },
    {
      .minor = 12, .tasks_kind = PS_ATASKS_SCHEDULED_EAGER,
      .fut_loop = 16, .fut_state = 88, .task_fut_waiter = 128, .task_coro = 136, .task_name = 144,
      .fut_callback0 = 24, .fut_callbacks = 40, .func_closure = 72, .partial_args = 24,
      .gi_frame = 72, .gi_frame_embedded = 1, .gi_frame_state = 67,
      .gi_show_lo = -2, .gi_show_hi = -1, .gi_yf_lo = -1, .gi_yf_hi = -1, .gi_qualname = 32,
      .yf_kind = PS_YF_IFRAME, .fr_stacktop = 64, .fr_valuestack = 72, .fr_state = NO,
      .long_kind = PS_LONG_LV_TAG,
    },
    {
      .minor = 13, .tasks_kind = PS_ATASKS_SCHEDULED_EAGER,
      /* cancelled_exc before the state; bit-fields last; no dict pointer */
      .fut_loop = 16, .fut_state = 96, .task_fut_waiter = 112, .task_coro = 120, .task_name = 128,
      .fut_callback0 = 24, .fut_callbacks = 40, .func_closure = 72, .partial_args = 24,
      .gi_frame = 72, .gi_frame_embedded = 1, .gi_frame_state = 67,
      /* CREATED -3, SUSPENDED -2; 3.13 tells an await (SUSPENDED_YIELD_FROM
       * -1) from a yield */
      .gi_show_lo = -3, .gi_show_hi = -1, .gi_yf_lo = -1, .gi_yf_hi = -1, .gi_qualname = 32,
      .yf_kind = PS_YF_IFRAME, .fr_stacktop = 64, .fr_valuestack = 72, .fr_state = NO,
      .long_kind = PS_LONG_LV_TAG,
    },
};

int ps_async_layout(const struct ps_layout *L, struct ps_async_layout *A, char *why,
                    size_t whylen)
{
    const struct ps_async_layout *r = NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].minor == L->minor)
            r = &rows[i];
    if (r == NULL) {
        snprintf(why, whylen, "asyncio tasks are not attributed on Python 3.%d "
                 "(supported: 3.9-3.15)", L->minor);
        return -1;
    }
    int objects = L->minor >= 14 ? L->objects_described && L->gen_iframe != PS_NOFIELD &&
                                       L->fr_stackpointer != PS_NOFIELD
                                 : L->inst_kind != PS_INST_NONE;
    if (!objects || L->is_modules == PS_NOFIELD || L->is_modules == 0) {
        snprintf(why, whylen, "asyncio tasks are not attributed: this build's object "
                 "layout is not described");
        return -1;
    }
    *A = *r;
    /* The rows' object offsets assume the GIL build's 16-byte header; a
     * free-threaded object's fields start 16 bytes later (3.13t: checked
     * on a real 3.13.5t).  3.14+ take theirs from the tables. */
    uint32_t shift = ps_ob_head(L) - 16;
    if (A->tasks_kind != PS_ATASKS_THREAD_LISTS) {
        A->fut_loop += shift;
        A->fut_state += shift;
        A->task_fut_waiter += shift;
        A->task_coro += shift;
        A->task_name += shift;
        A->gi_frame += shift;
        if (A->gi_frame_state != PS_NOFIELD)
            A->gi_frame_state += shift;
        A->gi_qualname += shift;
        A->fut_callback0 += shift;
        A->fut_callbacks += shift;
        A->func_closure += shift;
        A->partial_args += shift;
    }
    if (A->tasks_kind == PS_ATASKS_THREAD_LISTS) {
        /* The generator from _Py_DebugOffsets; gi_qualname follows gi_name. */
        A->gi_frame = L->gen_iframe;
        A->gi_frame_embedded = 1;
        A->gi_frame_state = L->gen_frame_state;
        A->gi_qualname = L->gen_name + 8;
        A->fr_stacktop = L->fr_stackpointer;
        A->fr_valuestack = PS_NOFIELD;
        A->fr_state = PS_NOFIELD;
        A->fut_callback0 = A->fut_callbacks = PS_NOFIELD;
        A->func_closure = A->partial_args = PS_NOFIELD;
    } else {
        A->task_read = A->task_name + 8;
    }
    /* the first field after the object header */
    A->wrapped = ps_ob_head(L);
    A->md_dict = ps_ob_head(L);
    A->wr_object = ps_ob_head(L);
    A->cell_ref = ps_ob_head(L);
    A->tuple_items = ps_ob_head(L) + 8;
    return 0;
}
