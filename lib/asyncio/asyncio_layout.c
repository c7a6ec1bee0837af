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
 * (managed dict): its column differs most.
 *
 * The done-callbacks (shield/wait_for links, tasks_link.c link_callbacks):
 * FutureObj_HEAD begins loop, callback0, context0, callbacks in every
 * version; functools.partial is fn, args, ... in all of them; a
 * function's func_closure follows code, globals, defaults and kwdefaults
 * on 3.9 and the seven common fields (globals ... kwdefaults) from 3.10
 * (offsetof against each version's headers: 48, then 72).  3.14+ need
 * none of it: asyncio records who awaits whom.
 *
 * 3.14 and 3.15 describe themselves: the Task's offsets are in _asyncio's
 * _AsyncioDebug table (read by tasks_search.c), the generator's and the frame's in
 * _Py_DebugOffsets.  Their columns hold only what those tables cannot say:
 * what the frame states mean (3.15 renumbered them) and where a suspended
 * await keeps the awaited object (3.15's SEND keeps two values).
 */
#include <stdio.h>
#include <string.h>

#include "asyncio/asyncio_layout.h"

#define NO PS_NOFIELD
#define NVERSIONS 7      /* 3.9 ... 3.15 */
#define NTABLED 5        /* offsets[] covers 3.9 ... 3.13 */

/* The offsets written down here: first those inside an object, after its
 * header, which move with the header on a free-threaded build; then the
 * frame's, which do not (3.11+'s frame has no header; 3.9/3.10 have no
 * free-threaded build). */
enum afield {
    AF_FUT_LOOP, AF_FUT_STATE, AF_TASK_FUT_WAITER, AF_TASK_CORO, AF_TASK_NAME,
    AF_FUT_CALLBACK0, AF_FUT_CALLBACKS, AF_FUNC_CLOSURE, AF_PARTIAL_ARGS,
    AF_GI_FRAME, AF_GI_FRAME_STATE, AF_GI_QUALNAME,
    AF_FR_STACKTOP, AF_FR_VALUESTACK, AF_FR_STATE,
    AF_COUNT,
    AF_FIRST_UNMOVED = AF_FR_STACKTOP
};

/* Where each goes in struct ps_async_layout. */
static const size_t at[AF_COUNT] = {
    [AF_FUT_LOOP] = offsetof(struct ps_async_layout, fut_loop),
    [AF_FUT_STATE] = offsetof(struct ps_async_layout, fut_state),
    [AF_TASK_FUT_WAITER] = offsetof(struct ps_async_layout, task_fut_waiter),
    [AF_TASK_CORO] = offsetof(struct ps_async_layout, task_coro),
    [AF_TASK_NAME] = offsetof(struct ps_async_layout, task_name),
    [AF_FUT_CALLBACK0] = offsetof(struct ps_async_layout, fut_callback0),
    [AF_FUT_CALLBACKS] = offsetof(struct ps_async_layout, fut_callbacks),
    [AF_FUNC_CLOSURE] = offsetof(struct ps_async_layout, func_closure),
    [AF_PARTIAL_ARGS] = offsetof(struct ps_async_layout, partial_args),
    [AF_GI_FRAME] = offsetof(struct ps_async_layout, gi_frame),
    [AF_GI_FRAME_STATE] = offsetof(struct ps_async_layout, gi_frame_state),
    [AF_GI_QUALNAME] = offsetof(struct ps_async_layout, gi_qualname),
    [AF_FR_STACKTOP] = offsetof(struct ps_async_layout, fr_stacktop),
    [AF_FR_VALUESTACK] = offsetof(struct ps_async_layout, fr_valuestack),
    [AF_FR_STATE] = offsetof(struct ps_async_layout, fr_state),
};

/*
 * Offsets per minor version, one row per field, one column per version
 * (the GIL build's 16-byte object header): a difference between versions
 * is a difference along a row.  NO: the version has no such field.
 */
static const uint32_t offsets[AF_COUNT][NTABLED] = {
    /*                          3.9  3.10  3.11  3.12  3.13 */
    /* FutureObj: loop, callback0, context0, callbacks, 7 pointers (3.9),
     * then state/log_tb/blocking; 3.10 adds exception_tb; 3.13 puts
     * cancelled_exc before the state and the bit-fields last */
    [AF_FUT_LOOP] =           {  16,   16,   16,   16,   16 },
    [AF_FUT_STATE] =          {  80,   88,   88,   88,   96 },
    /* TaskObj, after FutureObj_HEAD: 3.9/3.10 a dict, weakreflist and a
     * _PyErr_StackItem (4 pointers) first; 3.11 makes cancelled_exc one
     * pointer; 3.13 drops the dict pointer (managed dict) */
    [AF_TASK_FUT_WAITER] =    { 144,  152,  128,  128,  112 },
    [AF_TASK_CORO] =          { 152,  160,  136,  136,  120 },
    [AF_TASK_NAME] =          { 160,  168,  144,  144,  128 },
    /* done-callbacks, functools.partial's args, a function's closure */
    [AF_FUT_CALLBACK0] =      {  24,   24,   24,   24,   24 },
    [AF_FUT_CALLBACKS] =      {  40,   40,   40,   40,   40 },
    [AF_FUNC_CLOSURE] =       {  48,   72,   72,   72,   72 },
    [AF_PARTIAL_ARGS] =       {  24,   24,   24,   24,   24 },
    /* PyGenObject: a PyFrameObject pointer (3.9/3.10), then the frame
     * embedded, with its state byte just before it */
    [AF_GI_FRAME] =           {  16,   16,   80,   72,   72 },
    [AF_GI_FRAME_STATE] =     {  NO,   NO,   75,   67,   67 },
    [AF_GI_QUALNAME] =        {  56,   48,   40,   32,   32 },
    /* PyFrameObject (3.9/3.10), _PyInterpreterFrame (3.11+) */
    [AF_FR_STACKTOP] =        {  72,   80,   64,   64,   64 },
    [AF_FR_VALUESTACK] =      {  64,   64,   72,   72,   72 },
    [AF_FR_STATE] =           {  NO,  108,   NO,   NO,   NO },
};

/*
 * What is not an offset, likewise one column per version.  The frame
 * states whose frame is shown (created or suspended) and those of a
 * generator suspended in an await: 3.11/3.12 FRAME_CREATED -2,
 * FRAME_SUSPENDED -1 (a yield and an await alike); 3.13/3.14 CREATED -3,
 * SUSPENDED -2, SUSPENDED_YIELD_FROM -1; 3.15 CREATED 0, SUSPENDED 1,
 * SUSPENDED_YIELD_FROM 2 (and _LOCKED 3), and its SEND keeps two values:
 * the awaited object is second from the top (yf_depth).
 */
static const struct {
    enum ps_atasks_kind tasks_kind[NVERSIONS];
    enum ps_yf_kind yf_kind[NVERSIONS];
    int gi_frame_embedded[NVERSIONS];
    int8_t gi_show_lo[NVERSIONS], gi_show_hi[NVERSIONS];
    int8_t gi_yf_lo[NVERSIONS], gi_yf_hi[NVERSIONS];
    uint8_t yf_depth[NVERSIONS];
    enum ps_long_kind long_kind[NVERSIONS];
} kinds = {
    /*                  3.9  3.10  3.11  3.12  3.13  3.14  3.15 */
    .tasks_kind = { PS_ATASKS_ALL, PS_ATASKS_ALL, PS_ATASKS_ALL, PS_ATASKS_SCHEDULED_EAGER,
                    PS_ATASKS_SCHEDULED_EAGER, PS_ATASKS_THREAD_LISTS, PS_ATASKS_THREAD_LISTS },
    .yf_kind = { PS_YF_STACKTOP_PTR, PS_YF_STACKDEPTH, PS_YF_IFRAME, PS_YF_IFRAME, PS_YF_IFRAME,
                 PS_YF_STACKPTR, PS_YF_STACKPTR },
    .gi_frame_embedded = { 0, 0, 1, 1, 1, 1, 1 },
    .gi_show_lo =      {   0,    0,   -2,   -2,   -3,   -3,    0 },
    .gi_show_hi =      {   0,    0,   -1,   -1,   -1,   -1,    3 },
    .gi_yf_lo =        {   0,    0,   -1,   -1,   -1,   -1,    2 },
    .gi_yf_hi =        {   0,    0,   -1,   -1,   -1,   -1,    3 },
    .yf_depth =        {   0,    0,    0,    0,    0,    1,    2 },
    .long_kind = { PS_LONG_OB_SIZE, PS_LONG_OB_SIZE, PS_LONG_OB_SIZE, PS_LONG_LV_TAG,
                   PS_LONG_LV_TAG, PS_LONG_LV_TAG, PS_LONG_LV_TAG },
};

static void set_offset(struct ps_async_layout *A, enum afield f, uint32_t off)
{
    memcpy((char *)A + at[f], &off, sizeof off);
}

/* Column v of kinds[]. */
static void fill_kinds(struct ps_async_layout *A, int v)
{
    A->tasks_kind = kinds.tasks_kind[v];
    A->yf_kind = kinds.yf_kind[v];
    A->gi_frame_embedded = kinds.gi_frame_embedded[v];
    A->gi_show_lo = kinds.gi_show_lo[v];
    A->gi_show_hi = kinds.gi_show_hi[v];
    A->gi_yf_lo = kinds.gi_yf_lo[v];
    A->gi_yf_hi = kinds.gi_yf_hi[v];
    A->yf_depth = kinds.yf_depth[v];
    A->long_kind = kinds.long_kind[v];
}

/*
 * 3.9-3.13: column v of offsets[].  Its object offsets assume the GIL
 * build's 16-byte header; a free-threaded object's fields start shift (16)
 * bytes later (3.13t: checked on a real 3.13.5t).
 */
static void fill_offsets(struct ps_async_layout *A, int v, uint32_t shift)
{
    for (int f = 0; f < AF_COUNT; f++) {
        uint32_t off = offsets[f][v];
        if (off != NO && f < AF_FIRST_UNMOVED)
            off += shift;
        set_offset(A, (enum afield)f, off);
    }
    A->task_read = A->task_name + 8;
}

/*
 * 3.14+: the generator and frame from _Py_DebugOffsets (gi_qualname
 * follows gi_name); the Task's offsets come later, from _AsyncioDebug
 * (tasks_search.c); no done-callbacks are read.
 */
static void fill_described(struct ps_async_layout *A, const struct ps_layout *L)
{
    for (int f = 0; f < AF_COUNT; f++)
        set_offset(A, (enum afield)f, NO);
    A->fut_loop = A->fut_state = A->task_fut_waiter = A->task_coro = A->task_name = 0;
    A->gi_frame = L->gen_iframe;
    A->gi_frame_state = L->gen_frame_state;
    A->gi_qualname = L->gen_name + 8;
    A->fr_stacktop = L->fr_stackpointer;
}

int ps_async_layout(const struct ps_layout *L, struct ps_async_layout *A, char *why,
                    size_t whylen)
{
    int v = L->minor - 9;
    if (v < 0 || v >= NVERSIONS) {
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
    memset(A, 0, sizeof *A);
    A->minor = L->minor;
    fill_kinds(A, v);
    if (v < NTABLED)
        fill_offsets(A, v, ps_ob_head(L) - 16);
    else
        fill_described(A, L);
    /* the first field after the object header */
    A->wrapped = ps_ob_head(L);
    A->md_dict = ps_ob_head(L);
    A->wr_object = ps_ob_head(L);
    A->cell_ref = ps_ob_head(L);
    A->tuple_items = ps_ob_head(L) + 8;
    return 0;
}
