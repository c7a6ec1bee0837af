/*
 * tasks_link.c - which task awaits which (tasks_impl.h).
 *
 * 3.9-3.13.  A suspended task's fut_waiter is the future it waits on:
 * another task (await task), or gather's _GatheringFuture whose _children
 * lists the tasks.  A task in `async with TaskGroup()` waits on a plain
 * future inside TaskGroup.__aexit__, whose first local is the group and
 * whose _tasks set holds the children.  shield() and (3.9-3.11)
 * wait_for() make the awaiting task wait on a private plain future that
 * only the inner task's done-callbacks know: shield's _inner_done_callback
 * holds it in a closure cell, wait_for's functools.partial(_release_waiter,
 * waiter) in its args.  A callback's cells or args equal to another
 * task's fut_waiter make that task the awaiter (link_callbacks).
 *
 * 3.14+: a task records who awaits it (task_awaited_by: a task or a set),
 * which replaces all of the above.
 *
 * Links are read at different moments and may disagree: a task gets at
 * most one awaiter, never itself; the stacks (tasks_stacks.c) drop a
 * chain that loops.
 */
#include <stdlib.h>

#include "util/bsearch.h"
#include "memory/memread.h"
#include "python/pyobj.h"
#include "asyncio/tasks_impl.h"

static int by_addr(const void *a, const void *b)
{
    const struct ps_taskref *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The task that address addr leads to in refs[0..n) (sorted by address),
 * or -1. */
static int ref_index(const struct ps_taskref *refs, int n, uintptr_t addr)
{
    size_t i = PS_UPPER_BOUND(refs, (size_t)n, struct ps_taskref, addr, addr);
    return i > 0 && refs[i - 1].addr == addr ? refs[i - 1].ix : -1;
}

void ps_tasks_sort(struct ps_tasks *T)
{
    for (int i = 0; i < T->n; i++) {
        T->refs[i].addr = T->t[i].addr;
        T->refs[i].ix = i;
    }
    qsort(T->refs, (size_t)T->n, sizeof T->refs[0], by_addr);
}

int ps_tasks_find(const struct ps_tasks *T, uintptr_t addr)
{
    return ref_index(T->refs, T->n, addr);
}

/* Task p awaits task c. */
static void link(struct ps_tasks *T, int p, int c)
{
    T->t[c].parent = p;
    T->t[p].has_child = 1;
}

/* --- 3.9-3.13: fut_waiter, gather, TaskGroup --------------------------------- */

static void link_child(struct ps_tasks *T, int parent, uintptr_t child)
{
    int c = ps_tasks_find(T, child);
    if (c < 0 || c == parent || T->t[c].parent >= 0)
        return;
    link(T, parent, c);
}

/* Links the tasks that future fut stands for to task i: fut itself, or
 * the children of a gather (nested gathers followed depth levels down). */
static void link_future(struct ps_tasks *T, int i, uintptr_t fut, int depth)
{
    const struct ps_python *py = T->py;
    uintptr_t items[64], v;
    if (!ps_obj_ok(fut))
        return;
    uintptr_t ft = ps_obj_type(py, fut);
    if (ft == T->future_type)
        return;  /* a plain future: a sleep, I/O, a lock */
    if (ps_tasks_is_task_type(T, ft)) {
        link_child(T, i, fut);
    } else if (depth > 0 && ps_type_named(py, ft, "_GatheringFuture") &&
               ps_attr_get(py, fut, "_children", &v) == 0) {
        int n = ps_list_items(py, v, items, 64);
        for (int k = 0; k < n; k++)
            link_future(T, i, items[k], depth - 1);
    }
}

static void link_children(struct ps_tasks *T, int i)
{
    const struct ps_python *py = T->py;
    struct ps_task *t = &T->t[i];
    uintptr_t items[64], v;

    if (t->waiter != 0)
        link_future(T, i, t->waiter, 4);
    if (t->tg != 0 && ps_attr_get(py, t->tg, "_tasks", &v) == 0) {
        uint64_t cursor = 0;
        int64_t used;
        int n = ps_set_keys(py, v, items, 64, &cursor, &used);
        for (int k = 0; k < n; k++)
            link_child(T, i, items[k]);
    }
}

/* --- 3.9-3.13: shield() and wait_for() --------------------------------------- */

/*
 * shield() and wait_for() (3.9-3.13).  The awaiting task waits on a plain
 * future private to them, which only the inner task's done-callbacks know:
 *   shield:          _inner_done_callback, a function whose closure cell
 *                    holds the outer future (before 3.14)
 *   wait_for (<3.12): functools.partial(_release_waiter, waiter)
 * So: the tasks waiting on a plain future, sorted by that future
 * (wrefs[]); then, for each task no awaiter was found for, the objects its
 * callbacks hold (closure cells, a partial's args) looked up there.  Only
 * a function, cell, tuple or functools.partial recognised by its type is
 * read; at most CB_MAX callbacks of CB_REFS objects each, so a task costs a
 * few reads.  A match needs both tasks on one loop; anything else is no
 * link.
 */
#define CB_MAX 8
#define CB_REFS 8

/* Up to max items of the tuple tup.  Returns the count, or -1. */
static int tuple_items(const struct ps_tasks *T, uintptr_t tup, uintptr_t *items, int max)
{
    int64_t size;
    if (T->py->tuple_type == 0 || ps_obj_type(T->py, tup) != T->py->tuple_type ||
        ps_read(&size, tup + T->A.tuple_items - 8, sizeof size) != 0 || size < 0)
        return -1;
    int n = size < max ? (int)size : max;
    if (n > 0 && ps_read(items, tup + T->A.tuple_items, (size_t)n * sizeof *items) != 0)
        return -1;
    return n;
}

/* The objects callback cb holds that could be a private future: a
 * function's closure cell contents, or a functools.partial's args. */
static int callback_refs(const struct ps_tasks *T, uintptr_t cb, uintptr_t *refs, int max)
{
    const struct ps_python *py = T->py;
    uintptr_t type = ps_obj_type(py, cb), tup;
    if (type == 0)
        return 0;
    if (type == py->func_type && py->func_type != 0) {
        uintptr_t cells[CB_REFS];
        if (ps_read_ptr(cb + T->A.func_closure, &tup) != 0 || tup == 0)
            return 0;
        int n = tuple_items(T, tup, cells, max < CB_REFS ? max : CB_REFS), k = 0;
        for (int c = 0; c < n; c++)
            if (py->cell_type != 0 && ps_obj_type(py, cells[c]) == py->cell_type &&
                ps_read_ptr(cells[c] + T->A.cell_ref, &refs[k]) == 0 && refs[k] != 0)
                k++;
        return k;
    }
    if (ps_type_named(py, type, "functools.partial") &&
        ps_read_ptr(cb + T->A.partial_args, &tup) == 0) {
        int n = tuple_items(T, tup, refs, max);
        return n < 0 ? 0 : n;
    }
    return 0;
}

/* wrefs[]: the tasks waiting on a plain future, sorted by that future.
 * Returns how many. */
static int index_waiters(struct ps_tasks *T)
{
    T->nw = 0;
    for (int i = 0; i < T->n; i++) {
        const struct ps_task *t = &T->t[i];
        if (ps_task_on_running_loop(T, t) && ps_obj_ok(t->waiter) &&
            ps_obj_type(T->py, t->waiter) == T->future_type) {
            T->wrefs[T->nw].addr = t->waiter;
            T->wrefs[T->nw].ix = i;
            T->nw++;
        }
    }
    qsort(T->wrefs, (size_t)T->nw, sizeof T->wrefs[0], by_addr);
    return T->nw;
}

/* Task t's done-callbacks (at most CB_MAX): callback0, then the callback
 * of each (callback, context) tuple of the list.  Returns how many. */
static int callbacks_of(const struct ps_tasks *T, const struct ps_task *t, uintptr_t *cbs)
{
    uintptr_t items[CB_MAX];
    int nc = 0;
    if (ps_obj_ok(t->cb0))
        cbs[nc++] = t->cb0;
    if (ps_obj_ok(t->cbs)) {
        int n = ps_list_items(T->py, t->cbs, items, CB_MAX - nc);
        for (int k = 0; k < n; k++) {
            uintptr_t pair[2];
            if (tuple_items(T, items[k], pair, 2) == 2 && ps_obj_ok(pair[0]))
                cbs[nc++] = pair[0];
        }
    }
    return nc;
}

/* The task on task i's loop whose private future callback cb holds, or -1. */
static int awaiter_via(const struct ps_tasks *T, int i, uintptr_t cb)
{
    uintptr_t refs[CB_REFS];
    int nr = callback_refs(T, cb, refs, CB_REFS);
    for (int r = 0; r < nr; r++) {
        int p = ref_index(T->wrefs, T->nw, refs[r]);
        if (p >= 0 && p != i && T->t[p].loop_ix == T->t[i].loop_ix)
            return p;
    }
    return -1;
}

static void link_callbacks(struct ps_tasks *T)
{
    uintptr_t cbs[CB_MAX];
    if (index_waiters(T) == 0)
        return;
    for (int i = 0; i < T->n; i++) {
        const struct ps_task *t = &T->t[i];
        if (t->parent >= 0 || !ps_task_on_running_loop(T, t))
            continue;
        int nc = callbacks_of(T, t, cbs);
        for (int c = 0; c < nc && T->t[i].parent < 0; c++) {
            int p = awaiter_via(T, i, cbs[c]);
            if (p >= 0)
                link(T, p, i);
        }
    }
}

void ps_tasks_link_waiters(struct ps_tasks *T)
{
    for (int i = 0; i < T->n; i++)
        if (ps_task_on_running_loop(T, &T->t[i]))
            link_children(T, i);
    link_callbacks(T);
}

/* --- 3.14+ ------------------------------------------------------------------- */

/* 3.14+: asyncio records who awaits a task (await, gather, TaskGroup,
 * shield) in the task's awaited_by: a task, or a set of them. */
static void link_awaited_by(struct ps_tasks *T, int i)
{
    struct ps_task *t = &T->t[i];
    uintptr_t items[8];
    int n = 0;
    if (t->awaited_by == 0)
        return;
    if (t->awaited_by_is_set) {
        uint64_t cursor = 0;
        int64_t used;
        n = ps_set_keys(T->py, t->awaited_by, items, 8, &cursor, &used);
    } else {
        items[0] = t->awaited_by;
        n = 1;
    }
    for (int k = 0; k < n; k++) {
        int p = ps_tasks_find(T, items[k]);
        if (p >= 0 && p != i) {
            link(T, p, i);
            return;
        }
    }
}

void ps_tasks_link_awaited_by(struct ps_tasks *T)
{
    for (int i = 0; i < T->n; i++)
        link_awaited_by(T, i);
}
