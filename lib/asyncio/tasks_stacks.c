/*
 * tasks_stacks.c - the stacks made of the tick's tasks (tasks.h): each
 * task's marker "[task <name> "<coroutine>"]", the chain of tasks
 * awaiting it, the running task spliced into its thread's real stack, and
 * the waiting tasks' stacks where they wait (docs/format.md), which the
 * sampler counts (threadsample.c: the one place samples are counted).
 */
#include <stdio.h>
#include <string.h>

#include "memory/memread.h"
#include "python/pyobj.h"
#include "python/pystr.h"
#include "asyncio/tasks_impl.h"

int ps_tasks_on_thread(const struct ps_tasks *T, unsigned long pthread_id)
{
    for (int i = 0; i < T->nloops; i++)
        if (T->loops[i].thread == pthread_id)
            return 1;
    return 0;
}

/* The marker frame "[task <name> "<coroutine>"]" of task t. */
static uint32_t task_marker(struct ps_tasks *T, struct ps_symtab *syms, const struct ps_task *t)
{
    struct mark *m = &T->marks[(t->addr >> 4) & (MARKS - 1)];
    if (m->task == t->addr && m->name == t->name && m->coro == t->coro && m->text[0])
        return ps_sym_marker(syms, m->text);
    char name[64], coro[96];
    uint64_t num;
    uintptr_t q;
    /* A name or coroutine that does not read as one is a task changing
     * under us (being set up, or freed): no marker, and the task is left
     * out of this sample rather than shown under a made-up name. */
    if (ps_obj_type(T->py, t->name) == T->py->str_type &&
        ps_str_read(&T->py->L, t->name, name, sizeof name) >= 0)
        ;
    else if (ps_long_value(T->py, t->name, &num) == 0)
        snprintf(name, sizeof name, "Task-%llu", (unsigned long long)num);  /* 3.12+: lazy */
    else
        return PS_ID_NONE;
    if (ps_read_ptr(t->coro + T->A.gi_qualname, &q) != 0 ||
        ps_obj_type(T->py, q) != T->py->str_type ||
        ps_str_read(&T->py->L, q, coro, sizeof coro) < 0)
        return PS_ID_NONE;
    snprintf(m->text, sizeof m->text, "[task %s \"%s\"]", name, coro);
    m->task = t->addr;
    m->name = t->name;
    m->coro = t->coro;
    return ps_sym_marker(syms, m->text);
}

/* Appends, root first, the chain of tasks awaiting task i (outermost
 * first), each as its marker and its suspended frames.  Returns the new
 * depth, or -1 if it does not fit. */
static int awaiters(struct ps_tasks *T, struct ps_symtab *syms, int i,
                    uint64_t *out, int d, int max)
{
    int chain[PS_TASKS_CHAIN], nc = 0;
    for (int p = T->t[i].parent; p >= 0 && nc < PS_TASKS_CHAIN; p = T->t[p].parent) {
        for (int k = 0; k < nc; k++)
            if (chain[k] == p)
                return -1;  /* a cycle: links read at different moments */
        chain[nc++] = p;
    }
    for (int k = nc - 1; k >= 0; k--) {
        const struct ps_task *t = &T->t[chain[k]];
        if (d + 1 + (int)t->nfr > max)
            return -1;
        uint32_t f = task_marker(T, syms, t);
        if (f == PS_ID_NONE)
            return -1;
        out[d++] = ps_frame(f, PS_LINE_NONE);
        memcpy(out + d, T->fr + t->fr_at, t->nfr * sizeof *out);
        d += (int)t->nfr;
    }
    return d;
}

/* Where task i's coroutine frame is in the walk (its outermost
 * appearance), or -1. */
static int frame_in_walk(const struct ps_tasks *T, int i, const struct ps_tasks_walk *w)
{
    int k = -1;
    if (i < 0 || T->t[i].coro_frame == 0)
        return -1;
    for (int j = 0; j < w->n; j++)
        if (w->addrs[j] == T->t[i].coro_frame)
            k = j;
    return k;
}

/*
 * The task of loop l that the walk shows running, and *k, where its
 * coroutine's frame is in the walk; -1 if none.  The one the table says
 * is running, else the task of that loop whose coroutine frame is
 * innermost in the walk: the table was read earlier in the tick, and a
 * loop that runs short steps (a server's handlers) has often moved on to
 * another task, or was between two steps, by the time its thread is
 * walked.  The stack is the truth about what runs now (issue #35: one
 * running-task sample in five had no marker).
 */
static int running_in_walk(const struct ps_tasks *T, int l, const struct ps_tasks_walk *w, int *k)
{
    const struct ps_aloop *lp = &T->loops[l];
    int i = lp->running != 0 ? ps_tasks_find(T, lp->running) : -1;
    if ((*k = frame_in_walk(T, i, w)) >= 0)
        return i;
    int best = -1;
    *k = -1;
    for (int j = 0; j < T->n; j++) {
        if (T->t[j].loop_ix != l)
            continue;
        int kj = frame_in_walk(T, j, w);
        if (kj >= 0 && (best < 0 || kj < *k)) {
            best = j;
            *k = kj;
        }
    }
    return best;
}

int ps_tasks_splice_running(struct ps_tasks *T, struct ps_symtab *syms,
                            unsigned long pthread_id, const struct ps_tasks_walk *w,
                            struct ps_stack_buf *out)
{
    const int n = w->n, max = out->room;
    uint64_t *frames = out->frames;
    for (int l = 0; l < T->nloops; l++) {
        struct ps_aloop *lp = &T->loops[l];
        if (lp->thread != pthread_id)
            continue;
        int k;
        int i = running_in_walk(T, l, w, &k);
        /* The loop's frames must be above the coroutine's: a walk that
         * ends at the coroutine was torn (3.11 clears a generator frame's
         * previous as it leaves it) and is not dressed as a task's. */
        if (i < 0 || k == n - 1)
            continue;
        int d = out->depth;
        if (d + (n - k - 1) > max)
            return -1;
        for (int j = n - 1; j > k; j--)
            frames[d++] = w->frames[j];    /* the loop running the task */
        d = awaiters(T, syms, i, frames, d, max);
        if (d < 0 || d + 1 + k + 1 > max)
            return -1;
        uint32_t f = task_marker(T, syms, &T->t[i]);
        if (f == PS_ID_NONE)
            return -1;
        frames[d++] = ps_frame(f, PS_LINE_NONE);
        for (int j = k; j >= 0; j--)
            frames[d++] = w->frames[j];
        out->depth = d;
        lp->shown = T->t[i].addr;
        return 0;
    }
    return -1;
}

/* Task i's stack after out's root if it waits on this thread and fits:
 * the chain awaiting it, its marker, its frames.  1 with out->depth moved
 * on, else 0. */
static int waiting_stack(struct ps_tasks *T, struct ps_symtab *syms, unsigned long pthread_id,
                         int i, struct ps_stack_buf *out)
{
    const struct ps_task *t = &T->t[i];
    if (t->loop_ix < 0 || t->has_child)
        return 0;
    const struct ps_aloop *lp = &T->loops[t->loop_ix];
    /* The task the thread's stack showed running is counted there; the
     * one the table said was running, if another, waits by now. */
    if (lp->thread != pthread_id || t->addr == (lp->shown != 0 ? lp->shown : lp->running))
        return 0;
    int d = awaiters(T, syms, i, out->frames, out->depth, out->room);
    if (d < 0 || d + 1 + (int)t->nfr > out->room)
        return 0;
    uint32_t f = task_marker(T, syms, t);
    if (f == PS_ID_NONE)
        return 0;
    out->frames[d++] = ps_frame(f, PS_LINE_NONE);
    memcpy(out->frames + d, T->fr + t->fr_at, t->nfr * sizeof *out->frames);
    out->depth = d + (int)t->nfr;
    return 1;
}

int ps_tasks_next_waiting(struct ps_tasks *T, struct ps_symtab *syms, unsigned long pthread_id,
                          int *at, struct ps_stack_buf *out)
{
    while (*at < T->n) {
        if (waiting_stack(T, syms, pthread_id, (*at)++, out))
            return 1;
    }
    return 0;
}

uint64_t ps_tasks_unsampled(struct ps_tasks *T, struct ps_symtab *syms, unsigned long pthread_id,
                            struct ps_stack_buf *out)
{
    if (T->skipped == 0 || T->nloops == 0 || T->loops[0].thread != pthread_id)
        return 0;
    T->more_func = ps_sym_marker(syms, "[pysample: asyncio tasks not sampled]");
    if (T->more_func == PS_ID_NONE)
        return 0;
    out->frames[out->depth++] = ps_frame(T->more_func, PS_LINE_NONE);
    return (uint64_t)T->skipped;
}
