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

#include "python/frames.h"
#include "python/interpstate.h"
#include "memory/memread.h"
#include "native/native.h"
#include "platform/platform.h"
#include "sampler/stats.h"
#include "sampler/threadinfo.h"
#include "sampler/threadsample.h"
#include "settings.h"

#define PS_WALK_TRIES 3

static struct {
    const struct ps_python *py;   /* sampler.c's */
    uint64_t *scratch;          /* max_depth + 1 frames, innermost first */
    uint64_t *rooted;           /* the stack counted: max_depth + PS_NATIVE_MAX + a few */
    int room;                   /* task stacks' room in rooted (tasks.h) */
    uintptr_t *addrs;           /* the frames' addresses (asyncio tasks) */
    /* native stacks (PYSAMPLE_NATIVE, native.h) */
    uint8_t *entry;             /* per scratch frame: first of its eval call */
    struct ps_pyframe *pyframes;
    uintptr_t pcs[PS_NATIVE_MAX];
} sample;

int ps_threadsample_setup(const struct ps_python *py)
{
    const struct ps_config *cfg = ps_settings();
    size_t depth = (size_t)cfg->max_depth;
    size_t rooted = depth + PS_NATIVE_MAX + 8;
    sample.py = py;
    ps_threadinfo_setup();
    /* Task stacks are the thread's, plus a marker and the suspended frames
     * of each awaiting task: room for those too. */
    sample.room = cfg->max_depth + 2 + PS_TASKS_CHAIN * (PS_TASKS_CORO_DEPTH + 1);
    if (cfg->async_tasks && (size_t)sample.room > rooted)
        rooted = (size_t)sample.room;
    rooted += 1;    /* the [gc] frame on top of a full stack */
    sample.scratch = malloc((depth + 2) * sizeof *sample.scratch);
    sample.rooted = malloc(rooted * sizeof *sample.rooted);
    if (sample.scratch == NULL || sample.rooted == NULL)
        return -1;
    if (cfg->async_tasks) {
        sample.addrs = malloc((depth + 2) * sizeof *sample.addrs);
        if (sample.addrs == NULL)
            return -1;
    }
    if (cfg->native) {
        sample.entry = calloc(depth + 2, 1);
        sample.pyframes = malloc((depth + 2) * sizeof *sample.pyframes);
        if (sample.entry == NULL || sample.pyframes == NULL)
            return -1;
    }
    return 0;
}

/* One thread's walk, and its native frames. */
struct walk {
    int n;                      /* frames in scratch, or a PS_WALK_ error */
    int truncated;              /* cut at max_depth */
    uintptr_t boot;             /* its Thread._bootstrap_inner frame, or 0 */
    int cap, npcs, ntrunc, native_ok;   /* native: capture, pcs, how many cut, consistent */
};

/*
 * Walks the thread (tid, thread state at tsp, snapshot ts) into scratch,
 * tries again from a fresh copy of the thread state when the walk is
 * torn, and (native) takes and unwinds its registers around each try.
 */
static void walk_thread(struct ps_profile *p, uintptr_t tsp, uint8_t *ts, long tid,
                        struct walk *w)
{
    const struct ps_layout *L = &sample.py->L;
    int n = 0, truncated = 0;
    uintptr_t boot = 0;
    const int native = ps_settings()->native;
    int cap = PS_CAPTURE_FAILED, npcs = 0, ntrunc = 0, native_ok = 0;
    for (int tries = 0; tries < PS_WALK_TRIES; tries++) {
        uintptr_t frame;
        ps_thread_copy_end();
        /* Native stacks: the registers first (a running thread is held
         * in our handler from here to the release), unwound at once; the
         * thread state is read again so that the Python walk describes
         * the same moment. */
        if (native) {
            struct ps_regs regs;
            npcs = 0;
            ntrunc = 0;
            native_ok = 0;
            cap = ps_native_capture(tid, &regs);
            /* On the syscall read path (~1.3 us a read, some 20 reads a
             * frame) a deep unwind would outlast the hold: keep it to the
             * innermost frames, the rest is [native: truncated]. */
            int most = ps_mem_mode() == PS_READ_DIRECT ? PS_NATIVE_MAX : PS_NATIVE_MAX_SLOW;
            if (cap >= 0)
                npcs = ps_unwind(&regs, sample.pcs, most, &ntrunc);
        }
        /* A failed walk means the thread moved on under us: start again
         * from a fresh copy of its thread state. */
        if ((tries > 0 || cap >= 0) && ps_read(ts, tsp, L->ts_read) != 0) {
            if (cap >= 0)
                ps_native_release();
            break;
        }
        /* macOS: suspend the thread, copy its state and frame chain,
         * resume it; the walk below reads that copy (platform.h).  Linux
         * walks the running thread: nothing happens here. */
        if (ps_thread_copy_begin(sample.py, tid, tsp, ts, ps_settings()->max_depth) != 0) {
            if (cap >= 0)
                ps_native_release();
            break;
        }
        if (ps_thread_top_frame(sample.py, ts, &frame) != 0) {
            if (cap >= 0)
                ps_native_release();
            n = PS_WALK_UNREADABLE;
            continue;
        }
        if (native) {
            memset(sample.entry, 0, (size_t)ps_settings()->max_depth + 2);
            n = ps_walk_entries(sample.py, &p->cc, &p->syms, ps_settings()->lines, frame,
                                sample.scratch, sample.addrs, sample.entry,
                                ps_settings()->max_depth, &truncated, &boot);
        } else {
            n = ps_walk_ex(sample.py, &p->cc, &p->syms, ps_settings()->lines, frame,
                           sample.scratch, sample.addrs, ps_settings()->max_depth, &truncated,
                           &boot);
        }
        if (cap >= 0)
            native_ok = ps_native_release() == 0;
        /* A thread that left its system call while we read it (the GIL
         * handed over, an I/O wait ended) is tried again from new
         * registers, as a torn Python walk is. */
        if (n >= 0 && cap >= 0 && !native_ok && tries + 1 < PS_WALK_TRIES)
            continue;
        if (n >= 0)
            break;
    }
    ps_thread_copy_end();
    *w = (struct walk){ .n = n, .truncated = truncated, .boot = boot, .cap = cap,
                        .npcs = npcs, .ntrunc = ntrunc, .native_ok = native_ok };
}

/* The stack's root frames: the interpreter (not the main one), then a
 * marker for a cut stack, so that it is never silent.  Returns the depth. */
static int root_frames(const struct ps_tick_ctx *t, const struct walk *w)
{
    int d = 0;
    if (t->interp_func != PS_ID_NONE)
        sample.rooted[d++] = ps_frame(t->interp_func, PS_LINE_NONE);
    if (w->truncated) {
        ps_count(PS_COUNT_TRUNCATED, 1);
        sample.rooted[d++] = ps_frame(PS_SYM_TRUNCATED, PS_LINE_NONE);
    }
    return d;
}

/* The native frames, with the Python ones in place of the evaluation
 * loop's (merge.c), after rooted[0..d).  Returns the new depth. */
static int native_frames(struct ps_symtab *syms, const struct walk *w, int d)
{
    for (int i = 0; i < w->n; i++) {
        sample.pyframes[i].frame = sample.scratch[i];
        sample.pyframes[i].entry = sample.entry[i];
    }
    return d + ps_native_merge(syms, (enum ps_native_mode)ps_settings()->native, sample.pyframes,
                               w->n, sample.pcs, w->native_ok ? w->npcs : 0, w->ntrunc,
                               w->cap >= 0 && !w->native_ok ? "[native: unavailable]" : NULL,
                               sample.rooted + d, ps_settings()->max_depth + PS_NATIVE_MAX + 6 - d);
}

/* The walked frames after rooted[0..d), root first: with the running
 * task's markers (tasks.h) when one of the thread's tasks runs in them,
 * else with native frames, else as walked.  Returns the new depth. */
static int stack_frames(struct ps_tick_ctx *t, unsigned long pth, int tasks_here,
                        const struct walk *w, int d)
{
    int spliced = -1;
    if (tasks_here)
        spliced = ps_tasks_splice_running(t->tasks, &t->p->syms, pth, sample.scratch,
                                          sample.addrs, w->n, sample.rooted, d, sample.room);
    if (spliced >= 0)
        return spliced;
    if (ps_settings()->native)
        return native_frames(&t->p->syms, w, d);
    for (int i = w->n - 1; i >= 0; i--)
        sample.rooted[d++] = sample.scratch[i];
    return d;
}

void ps_sample_thread(struct ps_tick_ctx *t, uintptr_t tsp, uint8_t *ts, uint64_t weight)
{
    long tid;
    uintptr_t pth;
    if (ps_threadinfo_ids(&sample.py->L, ts, &tid, &pth) != 0)
        return;  /* not yet bound to an OS thread */
    struct ps_thread_info *ti = ps_threadinfo_find(tid);
    /* cpu mode: a stack counts the CPU time its thread used since it was
     * last looked at, whatever weight the tick gave (its CPU clock also
     * covers the ticks PYSAMPLE_MAX_THREADS_PER_TICK passed it by). */
    if (ps_settings()->mode == PS_MODE_CPU && !t->all)
        weight = ps_threadinfo_cpu_weight(ti, t->cpu_period_ns, t->run);
    if (weight == 0)
        return;  /* idle since the previous look, or less than a period */
    if (t->tasks_state == PS_TASKS_DUE) {
        ps_tasks_tick(t->tasks, &t->p->cc, &t->p->syms, ps_settings()->lines, t->tasks_interp,
                      t->now);
        t->tasks_state = PS_TASKS_TAKEN;
    }

    struct walk w;
    walk_thread(t->p, tsp, ts, tid, &w);
    if (w.n < 0) {
        ps_count_dropped(w.n == PS_WALK_UNREADABLE ? PS_COUNT_ERRORS_UNREADABLE
                                                   : PS_COUNT_ERRORS_INCONSISTENT, 1);
        return;
    }
    if (w.n == 0)
        return;  /* no Python code on this thread right now */

    int d_root = root_frames(t, &w);
    int tasks_here = t->tasks != NULL && ps_tasks_on_thread(t->tasks, pth);
    int d = stack_frames(t, pth, tasks_here, &w, d_root);
    /* The collector's stack, if it is collecting still now that it was
     * walked: [gc] on top (interpstate.c says why twice). */
    if (tsp == t->gc_collector && ps_gc_still_collecting(sample.py, t->interp, tsp))
        sample.rooted[d++] = ps_frame(PS_SYM_GC, PS_LINE_NONE);
    uint32_t label = ps_threadinfo_label(sample.py, &t->p->syms, ti, t->now, w.boot);
    if (label == PS_ID_NONE ||
        ps_stacktab_add(&t->p->tab, label, sample.rooted, (uint32_t)d, weight) != 0) {
        ps_count(PS_COUNT_ERRORS, 1);
        return;
    }
    ps_count(PS_COUNT_SAMPLES, weight);
    /* Wall mode: every other task of this thread's loops counts where it
     * waits, as if it were a thread of its own.  Its stack keeps the
     * interpreter frame but not the truncation marker, which was this
     * walk's. */
    if (tasks_here && ps_settings()->mode == PS_MODE_WALL) {
        int k = ps_tasks_emit_waiting(t->tasks, &t->p->syms, &t->p->tab, pth, label,
                                      sample.rooted, w.truncated ? d_root - 1 : d_root,
                                      sample.room, weight);
        ps_count(PS_COUNT_SAMPLES, (uint64_t)k * weight);
    }
}

void ps_threadsample_child_after_fork(void)
{
    ps_threadinfo_child_after_fork();
    if (sample.py != NULL && ps_settings()->native) {
        ps_native_after_fork();
        ps_native_stats_reset();
    }
}
