/*
 * tasks.c - the tick's snapshot of asyncio tasks (tasks.h): set-up, and
 * the steps of one tick in order; the steps are in tasks_search.c,
 * tasks_read.c, tasks_link.c and tasks_stacks.c (tasks_impl.h).
 *
 * Tasks finish and are freed while we read: every object is recognised by
 * its type before its fields are used, a task must be pending, each chain
 * is bounded, and anything that does not hold together is left out, never
 * guessed.  At most PS_TASKS_MAX tasks are read per tick (64 when reads are
 * system calls), rotating through the set or lists from tick to tick; the
 * others are counted on a marker stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/memread.h"
#include "util/message.h"
#include "python/pyobj.h"
#include "asyncio/tasks_impl.h"

/* Tasks read per tick when reads are system calls (memread.h): a tick of
 * 1024 tasks would then take tens of milliseconds. */
#define PS_TASKS_MAX_SLOW 64

int ps_is_taskgroup_exit(const char *name, const char *file)
{
    static const char tail[] = "asyncio/taskgroups.py";
    size_t n = strlen(file), t = sizeof tail - 1;
    return n >= t && strcmp(file + n - t, tail) == 0 && strcmp(name, "TaskGroup.__aexit__") == 0;
}

struct ps_tasks *ps_tasks_new(const struct ps_python *py)
{
    char why[160];
    struct ps_async_layout A;
    if (ps_async_layout(&py->L, &A, why, sizeof why) != 0 || py->dict_type == 0 ||
        py->set_type == 0 || py->str_type == 0 || py->coro_type == 0 ||
        (py->L.minor <= 13 && py->weakref_type == 0)) {
        if (py->dict_type == 0 || py->set_type == 0)
            snprintf(why, sizeof why, "asyncio tasks are not attributed: builtin types not found");
        ps_say("PYSAMPLE_ASYNC: %s; sampling threads only", why);
        return NULL;
    }
    struct ps_tasks *T = calloc(1, sizeof *T);
    if (T == NULL)
        return NULL;
    T->py = py;
    T->A = A;
    T->t = calloc(PS_TASKS_MAX, sizeof *T->t);
    T->refs = calloc(PS_TASKS_MAX, sizeof *T->refs);
    T->wrefs = calloc(PS_TASKS_MAX, sizeof *T->wrefs);
    T->keys = calloc(PS_TASKS_MAX, sizeof *T->keys);
    T->fr = calloc((size_t)PS_TASKS_MAX * PS_TASKS_CORO_DEPTH, sizeof *T->fr);
    if (T->t == NULL || T->refs == NULL || T->wrefs == NULL || T->keys == NULL ||
        T->fr == NULL) {
        free(T->t);
        free(T->refs);
        free(T->wrefs);
        free(T->keys);
        free(T->fr);
        free(T);
        return NULL;
    }
    return T;
}

void ps_tasks_clear(struct ps_tasks *T)
{
    T->n = 0;
    T->nloops = 0;
    T->nfr = 0;
    T->skipped = 0;
}

/* 1 once asyncio's registries are known for interp (looked for now if the
 * back-off allows). */
static int asyncio_found(struct ps_tasks *T, uintptr_t interp, uint64_t now)
{
    if (T->state == PS_ASYNCIO_GAVE_UP)
        return 0;
    if (T->state == PS_ASYNCIO_LOOKING) {
        if (now < T->next_search && !ps_tasks_modules_grew(T, interp, now))
            return 0;
        ps_tasks_search(T, interp, now);
        if (T->state != PS_ASYNCIO_FOUND)
            return 0;
    }
    return interp == T->interp;
}

/* 3.14+: the threads' task lists; asyncio records the awaiters. */
static void tick_thread_lists(struct ps_tasks *T, struct ps_codecache *cc,
                              struct ps_symtab *tab, int lines, uintptr_t interp)
{
    ps_tasks_collect_lists(T, interp);
    ps_tasks_sort(T);
    ps_tasks_chains(T, cc, tab, lines);
    ps_tasks_link_awaited_by(T);
}

/* 3.9-3.13: the tasks: the eager ones first (few, and running now), then
 * the scheduled ones from where the last tick stopped.  -1 if the set of
 * tasks could not be read. */
static int collect_sets(struct ps_tasks *T)
{
    int64_t used = 0, total = 0, seen = 0;
    int nk;
    if (T->eager_set != 0) {
        uint64_t c = 0;
        nk = ps_set_keys(T->py, T->eager_set, T->keys, T->limit, &c, &used);
        if (nk > 0) {
            ps_tasks_add(T, T->keys, nk, 0);
            total += used;
            seen += nk;
        }
    }
    nk = ps_set_keys(T->py, T->all_set, T->keys, T->limit - T->n, &T->cursor, &used);
    if (nk < 0)
        return -1;
    total += used;
    seen += nk;
    ps_tasks_add(T, T->keys, nk, 1);
    if (total > seen)
        T->skipped = total - seen;
    return 0;
}

/* 3.9-3.13: the task sets; awaiters found from what each task waits on. */
static void tick_task_sets(struct ps_tasks *T, struct ps_codecache *cc,
                           struct ps_symtab *tab, int lines)
{
    if (collect_sets(T) != 0)
        return;
    ps_tasks_sort(T);
    ps_tasks_find_loops(T);
    ps_tasks_chains(T, cc, tab, lines);
    ps_tasks_link_waiters(T);
}

void ps_tasks_tick(struct ps_tasks *T, struct ps_codecache *cc, struct ps_symtab *tab,
                   int lines, uintptr_t interp, uint64_t now)
{
    ps_tasks_clear(T);
    if (!asyncio_found(T, interp, now))
        return;
    T->limit = ps_mem_mode() == PS_READ_DIRECT ? PS_TASKS_MAX : PS_TASKS_MAX_SLOW;
    if (T->A.tasks_kind == PS_ATASKS_THREAD_LISTS)
        tick_thread_lists(T, cc, tab, lines, interp);
    else
        tick_task_sets(T, cc, tab, lines);
}
