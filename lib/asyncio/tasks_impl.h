/*
 * tasks_impl.h - what the asyncio task files share (tasks.h is their
 * public face): the tick's snapshot of tasks, and the steps that fill it.
 *
 *   tasks.c         the snapshot: set-up, and the steps of one tick in order
 *   tasks_search.c  where asyncio's task registries are found (once)
 *   tasks_read.c    asyncio objects read: tasks, loops, coroutine chains
 *   tasks_link.c    which task awaits which
 *   tasks_stacks.c  the stacks made of them: markers, the running task
 *                   spliced into its thread's stack, the waiting ones
 *
 * Sampler thread only; nothing here takes a lock or calls into Python.
 */
#ifndef PS_TASKS_IMPL_H
#define PS_TASKS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "asyncio/tasks.h"

#define MARKS 2048                     /* power of two */
#define MARK_TEXT 200

struct ps_task {
    uintptr_t addr, loop, coro, waiter, name;
    uintptr_t cb0, cbs;      /* 3.9-3.13: done-callbacks (callback0, the list) */
    uintptr_t coro_frame;    /* the coroutine's own frame, 0 if unknown */
    uintptr_t tg;            /* a TaskGroup its chain waits in, or 0 */
    uintptr_t awaited_by;    /* 3.14+: the task (or set of them) awaiting it */
    uint8_t awaited_by_is_set;
    int32_t parent;          /* the task awaiting this one, or -1 */
    int32_t loop_ix;         /* in loops[], or -1 */
    uint32_t fr_at, nfr;     /* its suspended frames (root first) in fr[] */
    uint8_t has_child;
};

/* An address and the task it leads to, in arrays sorted by address. */
struct ps_taskref {
    uintptr_t addr;
    int ix;
};

struct ps_aloop {
    uintptr_t loop;
    unsigned long thread;    /* 0: not running */
    uintptr_t running;       /* its current task, or 0 */
    uintptr_t shown;         /* the task its thread's stack showed running
                              * (tasks_stacks.c), or 0 */
};

/* A task's marker text, made once from its name and coroutine: later
 * ticks intern the remembered text (a hash probe, no reads). */
struct mark {
    uintptr_t task, name, coro;
    char text[MARK_TEXT];
};

enum ps_asyncio_state { PS_ASYNCIO_LOOKING = 0, PS_ASYNCIO_FOUND, PS_ASYNCIO_GAVE_UP };

struct ps_tasks {
    const struct ps_python *py;  /* the sampler's (context.h): it outlives this */
    struct ps_async_layout A;
    enum ps_asyncio_state state;
    uint64_t next_search, search_every;
    uint64_t next_peek;      /* when sys.modules is next checked for growth */
    int64_t modules_seen;    /* its entries at the last search, -1 unknown */
    int limit;               /* tasks read this tick */
    uintptr_t interp, task_type, future_type, all_set, eager_set, current;
    uint64_t cursor;
    struct ps_task *t;
    int n;
    int64_t skipped;         /* tasks not read this tick */
    struct ps_taskref *refs; /* tasks sorted by address */
    struct ps_taskref *wrefs; /* tasks waiting on a plain future, by its address */
    int nw;
    uintptr_t *keys;
    uint64_t *fr;
    size_t nfr;
    struct ps_aloop loops[PS_TASKS_LOOPS];
    int nloops;
    struct { uintptr_t type; int kind; } kinds[16];
    struct mark marks[MARKS];
    uint32_t more_func;
};

/* 1 if task t is on a loop that runs on a thread: the tasks whose chains
 * are read and whose stacks are shown (a loop not running has no thread
 * to count them on). */
static inline int ps_task_on_running_loop(const struct ps_tasks *T, const struct ps_task *t)
{
    return t->loop_ix >= 0 && T->loops[t->loop_ix].thread != 0;
}

/* tasks_search.c: looks for asyncio in interpreter interp's modules (at
 * most as often as its back-off allows); T->state says what came of it. */
void ps_tasks_search(struct ps_tasks *T, uintptr_t interp, uint64_t now);
int ps_tasks_modules_grew(struct ps_tasks *T, uintptr_t interp, uint64_t now);

/* tasks_read.c */
/* 1 if type is asyncio's Task type or derives from it. */
int ps_tasks_is_task_type(const struct ps_tasks *T, uintptr_t type);
/* Adds the tasks among keys (tasks, or weakrefs to them: weak), up to the
 * tick's limit. */
void ps_tasks_add(struct ps_tasks *T, const uintptr_t *keys, int nk, int weak);
/* 3.14+: the tasks of each thread of interp, from its list. */
void ps_tasks_collect_lists(struct ps_tasks *T, uintptr_t interp);
/* 3.9-3.13: each task's loop, the thread it runs on and its current task. */
void ps_tasks_find_loops(struct ps_tasks *T);
/* Each attributed task's suspended coroutine chain, into fr[]. */
void ps_tasks_chains(struct ps_tasks *T, struct ps_codecache *cc, struct ps_symtab *tab,
                     int lines);

/* tasks_link.c */
/* refs[] sorted by address, for ps_tasks_find. */
void ps_tasks_sort(struct ps_tasks *T);
/* Index of the task at addr in this tick's snapshot, or -1. */
int ps_tasks_find(const struct ps_tasks *T, uintptr_t addr);
/* 3.9-3.13: awaiters found from fut_waiter, gather, TaskGroup, and the
 * done-callbacks of shield() and wait_for(). */
void ps_tasks_link_waiters(struct ps_tasks *T);
/* 3.14+: awaiters as asyncio records them (task_awaited_by). */
void ps_tasks_link_awaited_by(struct ps_tasks *T);

#endif
