/*
 * asyncio_layout.h - where asyncio keeps its tasks, per CPython version.
 *
 * The C accelerator's Task and Future objects (Modules/_asynciomodule.c),
 * coroutine objects and the few builtin containers the task walk reads,
 * as data: one row per minor version in asyncio_layout.c, in the style of
 * layout_legacy.c.  Object-relative offsets are written for the GIL build's
 * 16-byte object header and moved for a free-threaded build's 32.
 */
#ifndef PS_ASYNCIO_LAYOUT_H
#define PS_ASYNCIO_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "python/layout.h"

/* Where the set of all tasks is. */
enum ps_atasks_kind {
    PS_ATASKS_ALL = 1,        /* 3.9-3.11: _asyncio._all_tasks, a WeakSet */
    PS_ATASKS_SCHEDULED_EAGER, /* 3.12/3.13: _scheduled_tasks (WeakSet) + _eager_tasks (set) */
    PS_ATASKS_THREAD_LISTS,   /* 3.14+: per-thread linked lists, _AsyncioDebug */
};

/* How a suspended coroutine says what it awaits (CPython's _PyGen_yf). */
enum ps_yf_kind {
    PS_YF_STACKTOP_PTR = 1,   /* 3.9: frame f_stacktop != NULL, awaited object at f_stacktop[-1] */
    PS_YF_STACKDEPTH,         /* 3.10: f_state SUSPENDED, f_valuestack[f_stackdepth - 1] */
    PS_YF_IFRAME,             /* 3.11-3.13: gi_frame_state says suspended,
                               * localsplus[stacktop - 1] */
    PS_YF_STACKPTR,           /* 3.14+: stackpointer[-yf_depth], a tagged _PyStackRef */
};

/* Integers (task names on 3.12+, a loop's _thread_id). */
enum ps_long_kind {
    PS_LONG_OB_SIZE = 1,      /* 3.9-3.11: signed digit count in ob_size */
    PS_LONG_LV_TAG,           /* 3.12+: lv_tag = ndigits << 3 | sign */
};

struct ps_async_layout {
    int minor;
    enum ps_atasks_kind tasks_kind;
    /* FutureObj / TaskObj (_asynciomodule.c) */
    uint32_t fut_loop, fut_state, task_fut_waiter, task_coro, task_name;
    /* 3.14+, from _AsyncioDebug (tasks_search.c fills them) */
    uint32_t task_awaited_by, task_awaited_by_is_set, task_node;
    uint32_t ts_running_task, ts_tasks_head, ts_impl_size;
    uint32_t task_read;         /* bytes to snapshot from a task */
    /* 3.9-3.13: a future's done-callbacks (callback0, then a list of
     * (callback, context) tuples), where shield's and wait_for's private
     * futures show (tasks_link.c link_callbacks); PS_NOFIELD on 3.14+ */
    uint32_t fut_callback0, fut_callbacks;
    uint32_t func_closure;      /* PyFunctionObject: a tuple of cells, or NULL */
    uint32_t partial_args;      /* functools.partial: its positional args, a tuple */
    uint32_t cell_ref;          /* PyCellObject.ob_ref */
    uint32_t tuple_items;       /* PyTupleObject.ob_item (ob_size just before) */
    /* generators and coroutines (PyGenObject and its relatives) */
    uint32_t gi_frame;          /* 3.9/3.10: PyFrameObject*; 3.11+: the embedded frame */
    int gi_frame_embedded;
    uint32_t gi_frame_state;    /* int8, 3.11+ */
    int8_t gi_show_lo, gi_show_hi;  /* frame states whose frame is shown (created, suspended) */
    int8_t gi_yf_lo, gi_yf_hi;      /* states of a generator suspended in an await */
    uint8_t yf_depth;           /* 3.14+: the awaited object at stackpointer[-yf_depth] */
    uint32_t gi_qualname;
    enum ps_yf_kind yf_kind;
    uint32_t fr_stacktop;       /* 3.9 f_stacktop ptr, 3.10 f_stackdepth int, 3.11+ stacktop int */
    uint32_t fr_valuestack;     /* 3.10 f_valuestack ptr; 3.11+ localsplus (embedded) */
    uint32_t fr_state;          /* 3.10 f_state (char) */
    uint32_t wrapped;           /* async_generator_asend.ags_gen, coroutine_wrapper.cw_coroutine */
    /* builtins (sets, lists and ints: pyobj.c) */
    uint32_t md_dict;           /* PyModuleObject */
    uint32_t wr_object;         /* PyWeakReference */
    enum ps_long_kind long_kind;
};

/*
 * Fills *A for the interpreter described by L.  Returns 0, or -1 with why
 * set (a version or build whose asyncio objects are not described).
 */
int ps_async_layout(const struct ps_layout *L, struct ps_async_layout *A, char *why,
                    size_t whylen);

#endif
