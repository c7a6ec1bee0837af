/*
 * tasks.h - asyncio task-aware samples (PYSAMPLE_ASYNC=1).
 *
 * Once a tick the sampler takes a snapshot of the asyncio tasks of the
 * main interpreter (ps_tasks_tick): which tasks exist, on which loop and
 * thread, which one runs, which awaits which, and each suspended task's
 * coroutine chain.  Then, per thread:
 *   - the running task's markers are spliced into the thread's real stack
 *     (ps_tasks_splice_running);
 *   - in wall mode every other task of the thread's loops that awaits no
 *     other task makes a stack, with the chain of tasks awaiting it
 *     (ps_tasks_next_waiting), which the sampler counts.
 * docs/format.md shows the stacks.  Everything is read from memory (tasks_impl.h
 * says which file does what); the sampler thread only.
 */
#ifndef PS_TASKS_H
#define PS_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "asyncio/asyncio_layout.h"
#include "python/codecache.h"
#include "python/runtime.h"
#include "util/symtab.h"

/* Tasks looked at per tick; the rest are counted on one marker stack and
 * the next tick starts where this one stopped. */
#define PS_TASKS_MAX 1024
#define PS_TASKS_LOOPS 16
#define PS_TASKS_CHAIN 32      /* tasks in one awaiting chain */
#define PS_TASKS_CORO_DEPTH 64 /* coroutine frames of one task */

struct ps_task;
struct ps_tasks;

/* 1 if a code object named name in file is asyncio's TaskGroup.__aexit__. */
int ps_is_taskgroup_exit(const char *name, const char *file);

/* Allocates the state for py, which must outlive it (the sampler's
 * context.h).  NULL (with a note on stderr) if tasks cannot be attributed
 * on this interpreter; profiling goes on without them. */
struct ps_tasks *ps_tasks_new(const struct ps_python *py);

/* Forgets the last snapshot (a tick that takes none sees no tasks). */
void ps_tasks_clear(struct ps_tasks *T);

/* Snapshot of the tasks of interpreter interp for this tick. */
void ps_tasks_tick(struct ps_tasks *T, struct ps_codecache *cc, struct ps_symtab *syms,
                   int lines, uintptr_t interp, uint64_t now);

/* 1 if the thread (pthread id) runs an event loop with tasks this tick. */
int ps_tasks_on_thread(const struct ps_tasks *T, unsigned long pthread_id);

/* The thread's stack as walked, innermost first: frames[0..n) and the
 * frames' addresses addrs[0..n). */
struct ps_tasks_walk {
    const uint64_t *frames;
    const uintptr_t *addrs;
    int n;
};

/*
 * The thread's stack with the running task's markers: writes it, root
 * first, after out->frames[0..out->depth) and moves out->depth on: 0; or
 * -1 if no task of this thread is running in these frames or the stack
 * does not fit (out->depth unchanged: the caller keeps its plain stack).
 */
int ps_tasks_splice_running(struct ps_tasks *T, struct ps_symtab *syms,
                            unsigned long pthread_id, const struct ps_tasks_walk *w,
                            struct ps_stack_buf *out);

/*
 * Wall mode: the tasks of the thread's loops that are not running and
 * await no other task, each with the chain of tasks awaiting it, one at a
 * time from *at (0 first): the next one's stack after
 * out->frames[0..out->depth) (the root: the interpreter frame, if any),
 * out->depth moved on and 1; 0 when none is left.  The caller resets
 * out->depth to its root before the next one, and counts each stack as a
 * sample of the thread.
 */
int ps_tasks_next_waiting(struct ps_tasks *T, struct ps_symtab *syms, unsigned long pthread_id,
                          int *at, struct ps_stack_buf *out);

/* The tasks beyond PS_TASKS_MAX, on the first loop's thread: their marker
 * after the root (out->depth moved on) and how many they are, the samples
 * that one stack stands for; 0 if none (or not this thread). */
uint64_t ps_tasks_unsampled(struct ps_tasks *T, struct ps_symtab *syms, unsigned long pthread_id,
                            struct ps_stack_buf *out);

#endif
