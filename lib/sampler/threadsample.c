/*
 * threadsample.c - one thread's sample (threadsample.h): which OS thread
 * it is, what it counts for this tick (PYSAMPLE_MODE=cpu), its walk, and
 * the stack made of it and counted.
 *
 * The walk is retried from a fresh copy of the thread state when it comes
 * out torn (the thread moved on under us); what still fails is counted by
 * cause, never guessed at.  With PYSAMPLE_NATIVE the thread's registers
 * are taken first and unwound at once, and the Python walk is done while
 * the thread is held, so that both describe the same moment (native.h).
 *
 * Memory.  The frames are copied into fixed buffers owned by the sampler
 * thread, sized at set-up; malloc only happens when a new code object or
 * stack is seen, outside any guarded read.
 */
#include <stdlib.h>
#include <string.h>

#include "python/framecopy.h"
#include "python/frames.h"
#include "python/interpstate.h"
#include "memory/memread.h"
#include "native/native.h"
#include "sampler/stats.h"
#include "sampler/threadinfo.h"
#include "sampler/threadsample.h"
#include "settings.h"
#include "util/tickpath.h"

#define PS_WALK_TRIES 3

/*
 * How deep a stack may be in rooted, [gc] aside: the root frames (the
 * interpreter, the truncation marker) and the walk's max_depth frames;
 * with native frames, PS_NATIVE_MAX of those and the merge's markers;
 * with asyncio tasks, a marker and the suspended frames of each awaiting
 * task.  Set-up sizes rooted by it, and each sample's writers stop at it.
 */
static int stack_room(const struct ps_config *cfg)
{
    int room = cfg->max_depth + 2;
    int native = cfg->max_depth + PS_NATIVE_MAX + 6;
    int tasks = cfg->max_depth + 2 + PS_TASKS_CHAIN * (PS_TASKS_CORO_DEPTH + 1);
    if (cfg->native && native > room)
        room = native;
    if (cfg->async_tasks && tasks > room)
        room = tasks;
    return room;
}

int ps_threadsample_setup(struct ps_sampler_ctx *ctx)
{
    const struct ps_config *cfg = ps_settings();
    struct ps_sample_bufs *b = &ctx->buf;
    /* The walk reports max_depth frames at most; two more spare. */
    size_t frames = (size_t)cfg->max_depth + 2;
    ps_threadinfo_setup(&ctx->threads);
    /* A layout the walk cannot use leaves no plan: each walk then finds
     * so itself and is counted unreadable, as before. */
    (void)ps_walk_plan_make(&b->plan, &ctx->py);
    b->room = stack_room(cfg);
    b->scratch = malloc(frames * sizeof *b->scratch);
    /* one more: the [gc] frame on top of a full stack */
    b->rooted = malloc(((size_t)b->room + 1) * sizeof *b->rooted);
    if (b->scratch == NULL || b->rooted == NULL)
        return -1;
    if (cfg->async_tasks) {
        b->addrs = malloc(frames * sizeof *b->addrs);
        if (b->addrs == NULL)
            return -1;
    }
    if (cfg->native) {
        b->entry = calloc(frames, 1);
        b->pyframes = malloc(frames * sizeof *b->pyframes);
        b->pcs = malloc(PS_NATIVE_MAX * sizeof *b->pcs);
        b->rules = ps_unwind_rules_new();
        b->names = ps_native_names_new();
        if (b->entry == NULL || b->pyframes == NULL || b->pcs == NULL || b->rules == NULL ||
            b->names == NULL)
            return -1;
    }
    return 0;
}

/* One thread's walk, and its native frames. */
struct walk {
    struct ps_walk_res py;      /* the Python walk: its frames in scratch */
    int cap;                    /* native: the capture (enum ps_capture) */
    int npcs, stop;             /* native: pcs unwound, and why the unwind stopped */
    int native_ok;              /* native: nothing moved while we read */
};

/* Native stacks: the registers first (a running thread is held in our
 * handler from here to hold_end), unwound at once. */
static void native_take(struct ps_sample_bufs *b, long tid, struct walk *w)
{
    struct ps_regs regs;
    w->npcs = 0;
    w->stop = 0;
    w->native_ok = 0;
    w->cap = ps_native_capture(tid, &regs);
    /* On the syscall read path (~1.3 us a read, some 20 reads a frame) a
     * deep unwind would outlast the hold: keep it to the innermost
     * frames, the rest is [native: truncated]. */
    int most = ps_mem_mode() == PS_READ_DIRECT ? PS_NATIVE_MAX : PS_NATIVE_MAX_SLOW;
    if (w->cap >= 0)
        w->npcs = ps_unwind(b->rules, &regs, b->pcs, most, &w->stop);
}

/* Lets a thread native_take held go: 1 if what was read meanwhile is
 * consistent (native.h), 0 if not or if nothing was taken. */
static int hold_end(const struct walk *w)
{
    return w->cap >= 0 && ps_native_release() == 0;
}

/* The Python walk from frame into scratch, with the frames' addresses
 * (asyncio) and entry marks (native) where those are kept. */
static void python_walk(struct ps_tick_ctx *t, uintptr_t frame, struct ps_walk_res *res)
{
    const struct ps_sample_bufs *b = &t->sampler->buf;
    ps_walk(&(struct ps_walk_req){ .py = &t->sampler->py, .cc = &t->p->cc, .syms = &t->p->syms,
                                   .lines = ps_settings()->lines, .frame = frame,
                                   .max = ps_settings()->max_depth, .out = b->scratch,
                                   .addrs = b->addrs, .entry = b->entry, .plan = &b->plan },
            res);
}

/*
 * One try at the thread's walk, after tries others: 1 if it is over
 * (walked, or nothing more to try), 0 to try again.  w keeps the last
 * walk that worked when a later try cannot read the thread any more.
 */
static int walk_try(struct ps_tick_ctx *t, uintptr_t tsp, uint8_t *ts, long tid, int tries,
                    struct walk *w)
{
    const struct ps_python *py = &t->sampler->py;
    uintptr_t frame;
    ps_framecopy_end();
    /* Native stacks: the thread state is read again after the registers,
     * so that the Python walk describes the same moment. */
    if (ps_settings()->native)
        native_take(&t->sampler->buf, tid, w);
    /* A failed walk means the thread moved on under us: start again
     * from a fresh copy of its thread state. */
    if ((tries > 0 || w->cap >= 0) && ps_read(ts, tsp, py->L.ts_read) != 0) {
        hold_end(w);
        return 1;
    }
    /* macOS: suspend the thread, copy its state and frame chain,
     * resume it; the walk below reads that copy (framecopy.h).  Linux
     * walks the running thread: nothing happens here. */
    if (ps_framecopy_begin(py, tid, tsp, ts, ps_settings()->max_depth) != 0) {
        hold_end(w);
        return 1;
    }
    if (ps_thread_top_frame(py, ts, &frame) != 0) {
        hold_end(w);
        w->py = (struct ps_walk_res){ .error = PS_WALK_UNREADABLE };
        return 0;
    }
    python_walk(t, frame, &w->py);
    w->native_ok = hold_end(w);
    if (w->py.error != 0)
        return 0;
    /* A thread that left its system call while we read it (the GIL
     * handed over, an I/O wait ended) is tried again from new
     * registers, as a torn Python walk is. */
    return !(w->cap >= 0 && !w->native_ok && tries + 1 < PS_WALK_TRIES);
}

/*
 * Walks the thread (tid, thread state at tsp, snapshot ts) into scratch,
 * tries again from a fresh copy of the thread state when the walk is
 * torn, and (native) takes and unwinds its registers around each try.
 */
static void walk_thread(struct ps_tick_ctx *t, uintptr_t tsp, uint8_t *ts, long tid,
                        struct walk *w)
{
    *w = (struct walk){ .cap = PS_CAPTURE_FAILED };
    for (int tries = 0; tries < PS_WALK_TRIES; tries++)
        if (walk_try(t, tsp, ts, tid, tries, w))
            break;
    ps_framecopy_end();
}

/* The stack's root frames: the interpreter (not the main one), then a
 * marker for a cut stack, so that it is never silent.  Returns the depth. */
static int root_frames(const struct ps_tick_ctx *t, const struct walk *w)
{
    uint64_t *rooted = t->sampler->buf.rooted;
    int d = 0;
    if (t->interp_func != PS_ID_NONE)
        rooted[d++] = ps_frame(t->interp_func, PS_LINE_NONE);
    if (w->py.truncated) {
        ps_count(PS_COUNT_TRUNCATED, 1);
        rooted[d++] = ps_frame(PS_SYM_TRUNCATED, PS_LINE_NONE);
    }
    return d;
}

/* The native frames, with the Python ones in place of the evaluation
 * loop's (merge.c), after rooted[0..d).  Returns the new depth. */
static int native_frames(struct ps_tick_ctx *t, const struct walk *w, int d)
{
    struct ps_sample_bufs *b = &t->sampler->buf;
    for (int i = 0; i < w->py.n; i++) {
        b->pyframes[i].frame = b->scratch[i];
        b->pyframes[i].entry = b->entry[i];
    }
    return d + ps_native_merge(&(struct ps_native_merge_req){
                   .names = b->names, .syms = &t->p->syms,
                   .mode = (enum ps_native_mode)ps_settings()->native,
                   .py = b->pyframes, .npy = w->py.n,
                   .pcs = b->pcs, .npcs = w->native_ok ? w->npcs : 0, .stop = w->stop,
                   .no_native_why = w->cap >= 0 && !w->native_ok ? "[native: unavailable]" : NULL,
                   .out = b->rooted + d, .cap = b->room - d });
}

/* The walked frames after rooted[0..d), root first: with the running
 * task's markers (tasks.h) when one of the thread's tasks runs in them,
 * else with native frames, else as walked.  Returns the new depth. */
static int stack_frames(struct ps_tick_ctx *t, unsigned long pth, int tasks_here,
                        const struct walk *w, int d)
{
    struct ps_sample_bufs *b = &t->sampler->buf;
    struct ps_stack_buf out = { b->rooted, d, b->room };
    if (tasks_here &&
        ps_tasks_splice_running(t->tasks, &t->p->syms, pth,
                                &(struct ps_tasks_walk){ b->scratch, b->addrs, w->py.n },
                                &out) == 0)
        return out.depth;
    if (ps_settings()->native)
        return native_frames(t, w, d);
    /* Through locals: stores through b->rooted could alias b's fields. */
    const uint64_t *walked = b->scratch;
    uint64_t *to = b->rooted + d;
    for (int i = 0, n = w->py.n; i < n; i++)
        to[i] = walked[n - 1 - i];
    return d + w->py.n;
}

/* The weight a stack of the thread ti counts with, of the tick's weight;
 * 0: nothing to count.  cpu mode: if the thread is on a CPU, the time
 * since it was last looked at within the CPU time it used, whatever
 * weight the tick gave (that time also covers the ticks
 * PYSAMPLE_MAX_THREADS_PER_TICK passed it by; threadinfo.h). */
static uint64_t thread_weight(const struct ps_tick_ctx *t, struct ps_thread_info *ti,
                              uint64_t weight)
{
    if (ps_settings()->mode == PS_MODE_CPU && !t->all)
        return ps_threadinfo_cpu_weight(&t->sampler->threads, ti, t->cpu_period_ns, t->run);
    return weight;
}

/* The one place samples are counted: rooted[0..d) on label, weight
 * times.  0, or -1 if the stack could not be counted. */
static int count_stack(struct ps_tick_ctx *t, uint32_t label, int d, uint64_t weight)
{
    if (ps_stacktab_add(&t->p->tab, label, t->sampler->buf.rooted, (uint32_t)d, weight) != 0)
        return -1;
    ps_count(PS_COUNT_SAMPLES, weight);
    return 0;
}

/* Wall mode: every other task of this thread's loops counts where it
 * waits, as if it were a thread of its own, on rooted[0..root) (tasks.h);
 * the tasks not looked at this tick, on one stack.  A stack that cannot
 * be counted is left out (not an error of this thread's walk). */
static void count_waiting(struct ps_tick_ctx *t, unsigned long pth, uint32_t label, int root,
                          uint64_t weight)
{
    struct ps_stack_buf out = { t->sampler->buf.rooted, root, t->sampler->buf.room };
    int at = 0;
    while (ps_tasks_next_waiting(t->tasks, &t->p->syms, pth, &at, &out)) {
        (void)count_stack(t, label, out.depth, weight);
        out.depth = root;
    }
    uint64_t more = ps_tasks_unsampled(t->tasks, &t->p->syms, pth, &out);
    if (more > 0)
        (void)count_stack(t, label, out.depth, more * weight);
}

/* Counts the walk w of the thread state tsp (pthread pth, ti) weight
 * times: its stack, with root frames, tasks and [gc]; in wall mode also
 * the other tasks of the thread's loops where they wait. */
static void count_walk(struct ps_tick_ctx *t, uintptr_t tsp, uintptr_t pth,
                       struct ps_thread_info *ti, const struct walk *w, uint64_t weight)
{
    const struct ps_python *py = &t->sampler->py;
    int d_root = root_frames(t, w);
    int tasks_here = t->tasks != NULL && ps_tasks_on_thread(t->tasks, pth);
    int d = stack_frames(t, pth, tasks_here, w, d_root);
    /* The collector's stack, if it is collecting still now that it was
     * walked: [gc] on top (interpstate.c says why twice). */
    if (tsp == t->gc_collector && ps_gc_still_collecting(py, t->interp, tsp))
        t->sampler->buf.rooted[d++] = ps_frame(PS_SYM_GC, PS_LINE_NONE);
    uint32_t label =
        ps_threadinfo_label(&t->sampler->threads, py, &t->p->syms, ti, t->now, w->py.boot);
    if (label == PS_ID_NONE || count_stack(t, label, d, weight) != 0) {
        ps_count(PS_COUNT_ERRORS, 1);
        return;
    }
    /* Their stacks keep the interpreter frame but not the truncation
     * marker, which was this walk's. */
    if (tasks_here && ps_settings()->mode == PS_MODE_WALL)
        count_waiting(t, pth, label, w->py.truncated ? d_root - 1 : d_root, weight);
}

PS_TICK_PATH void ps_sample_thread(struct ps_tick_ctx *t, uintptr_t tsp, uint8_t *ts, uint64_t weight)
{
    long tid;
    uintptr_t pth;
    if (ps_threadinfo_ids(&t->sampler->threads, &t->sampler->py.L, ts, &tid, &pth) != 0)
        return;  /* not yet bound to an OS thread */
    struct ps_thread_info *ti = ps_threadinfo_find(&t->sampler->threads, tid);
    weight = thread_weight(t, ti, weight);
    if (weight == 0)
        return;  /* idle since the previous look, or less than a period */
    if (t->tasks_state == PS_TASKS_DUE) {
        ps_tasks_tick(t->tasks, &t->p->cc, &t->p->syms, ps_settings()->lines, t->tasks_interp,
                      t->now);
        t->tasks_state = PS_TASKS_TAKEN;
    }

    struct walk w;
    walk_thread(t, tsp, ts, tid, &w);
    if (w.py.error != 0) {
        ps_count_dropped(w.py.error == PS_WALK_UNREADABLE ? PS_COUNT_ERRORS_UNREADABLE
                                                          : PS_COUNT_ERRORS_INCONSISTENT, 1);
        return;
    }
    if (w.py.n == 0)
        return;  /* no Python code on this thread right now */
    count_walk(t, tsp, pth, ti, &w, weight);
}
