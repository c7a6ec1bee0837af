/*
 * tick.c - one tick (tick.h): the interpreters' thread states listed,
 * which of them are sampled and with what weight, and when the asyncio
 * task snapshot is taken.
 *
 * Locking.  The tick never takes a lock that a program thread can hold:
 * it reads interpreter memory without the GIL or the runtime's HEAD_LOCK,
 * through ps_read() only.  It holds the profile's lock (profile.c) for the
 * whole tick, and nothing else.
 *
 * PYSAMPLE_GIL.  The GIL's holder is read once per interpreter per tick,
 * before its threads: a tick's sample is of the thread that held the GIL
 * when the tick began (the holder may hand it over while we walk, as it
 * may under py-spy's --gil).  A released GIL means no thread of that
 * interpreter runs Python code: none is sampled.
 */
#include <stdio.h>

#include "memory/memread.h"
#include "util/message.h"
#include "platform/platform.h"
#include "native/native.h"
#include "profile/profile.h"
#include "sampler/stats.h"
#include "sampler/threadsample.h"
#include "python/threadstates.h"
#include "sampler/tick.h"
#include "sampler/weight.h"
#include "python/codecache.h"
#include "python/interpstate.h"
#include "python/threadnames.h"
#include "asyncio/tasks.h"
#include "settings.h"
#include "util/tickpath.h"

/* PYSAMPLE_GIL: 1 if this build's GIL holder can be read, else 0 after one
 * line saying why and that every thread is sampled. */
static int gil_supported(const struct ps_layout *L)
{
    const char *why = NULL;
    if (L->free_threaded)
        why = "this CPython is free-threaded: it has no GIL";
    else if ((L->rt_gil == PS_NOFIELD && L->is_ceval_gil == PS_NOFIELD) ||
             L->gil_locked == PS_NOFIELD || L->gil_last_holder == PS_NOFIELD)
        why = "where this CPython keeps its GIL is not known";
    if (why == NULL)
        return 1;
    ps_say("PYSAMPLE_GIL: %s; sampling every thread", why);
    return 0;
}

int ps_tick_setup(struct ps_sampler_ctx *ctx)
{
    const struct ps_config *cfg = ps_settings();
    /* Before the first code object is resolved, and whatever the
     * settings, so that no cached entry ever lacks a role: thread names
     * need the bootstrap frame in every walk (threadnames.h), asyncio the
     * frames of TaskGroup.__aexit__ (tasks.h). */
    ps_code_classify_with(PS_ROLE_THREAD_BOOT, ps_is_thread_bootstrap);
    ps_code_classify_with(PS_ROLE_TASKGROUP_EXIT, ps_is_taskgroup_exit);
    if (cfg->async_tasks)
        ctx->tasks = ps_tasks_new(&ctx->py);  /* NULL: a note said why */
    if (cfg->gil_only)
        ctx->gil_only = gil_supported(&ctx->py.L);
    return 0;
}

/*
 * The root frame "interp <id>" of stacks from an interpreter other than
 * the main one (docs/format.md), or PS_ID_NONE for the main interpreter
 * (id 0) and when the id cannot be read: a profile of a process with a
 * single interpreter looks as it always did.
 */
static uint32_t interp_frame(struct ps_profile *p, int64_t id)
{
    char name[32];
    if (id <= 0)
        return PS_ID_NONE;
    snprintf(name, sizeof name, "interp %lld", (long long)id);
    return ps_sym_marker(&p->syms, name);
}

/* A new interpreter's threads begin (id: -1 where this layout has none
 * or it could not be read; ps_tstates_next reads it with the list's
 * links): its root frame, its GIL's holder (PYSAMPLE_GIL), the thread
 * collecting its garbage, if any (the [gc] frame, interpstate.h), and
 * whether the asyncio tasks (those of the main interpreter, id 0) are
 * read when its first thread is sampled.  Once per interpreter per tick. */
static void enter_interp(struct ps_tick_ctx *t, uintptr_t interp, int64_t id)
{
    const struct ps_python *py = &t->sampler->py;
    t->interp = interp;
    t->interp_func = interp_frame(t->p, id);
    t->gil_holder = t->sampler->gil_only && !t->all ? ps_gil_holder(py, interp) : 0;
    t->gc_collector = ps_gc_collector(py, interp);
    if (t->tasks_state == PS_TASKS_DUE)
        t->tasks_state = PS_TASKS_NOT_TAKEN;
    if (t->tasks != NULL && t->tasks_state == PS_TASKS_NOT_TAKEN && id == 0) {
        t->tasks_interp = interp;
        t->tasks_state = PS_TASKS_DUE;
    }
}

/* Every thread state, under the profile's lock. */
static void sample_threads(struct ps_tick_ctx *t, struct ps_tstate_iter *it)
{
    uint8_t ts[PS_TS_MAX];
    uintptr_t tsp, interp = 0;
    unsigned idx = 0;
    while ((tsp = ps_tstates_next(it, ts)) != 0) {
        if (it->interp != interp) {
            interp = it->interp;
            enter_interp(t, interp, it->interp_id);
        }
        /* PYSAMPLE_GIL: one thread per interpreter at most, so the
         * PYSAMPLE_MAX_THREADS_PER_TICK subset has nothing to spare. */
        uint64_t weight;
        if (t->sampler->gil_only && !t->all)
            weight = tsp == t->gil_holder;
        else
            weight = ps_subset_weight(&t->sampler->subset,
                                      (unsigned)ps_settings()->max_threads_per_tick, idx, t->all);
        idx++;
        if (weight != 0)
            ps_sample_thread(t, tsp, ts, weight);
    }
    ps_subset_next(&t->sampler->subset, (unsigned)ps_settings()->max_threads_per_tick, idx,
                   t->all);
}

PS_TICK_PATH int ps_tick(struct ps_sampler_ctx *ctx, int all, uint64_t cpu_period_ns, unsigned run,
            uint64_t now)
{
    struct ps_tstate_iter it;
    struct ps_tick_ctx t = { .sampler = ctx, .now = now, .all = all,
                             .cpu_period_ns = cpu_period_ns, .run = run,
                             .interp_func = PS_ID_NONE, .tasks = ctx->tasks,
                             .tasks_state = PS_TASKS_NOT_TAKEN };

    ps_mem_tick_at(now);
    /* Loaded objects for native stacks: here, before the profile's lock,
     * before the batch and before any thread is held (dl_iterate_phdr
     * takes the loader's lock, which a held thread could own, and a thread
     * that holds it may be waiting in sigaction() for our batch to end). */
    if (ps_settings()->native)
        ps_objs_refresh(ctx->py.runtime);

    /* The runtime's fixed reads too go inside the batch: outside it each
     * took and released the read guard (a compare-and-swap and a
     * sequentially consistent load, ~80 instructions a read). */
    t.p = ps_profile_lock();
    ps_timeline_tick(&t.p->tl, t.now);
    int batch = ps_mem_batch_begin();
    /* Whether it finalizes and where its interpreters begin: one read. */
    uintptr_t head;
    int finalizing = ps_python_heads(&ctx->py, &head);
    int listed = !finalizing && ps_tstates_begin_at(&it, &ctx->py, head) == 0;
    if (listed) {
        if (ctx->tasks != NULL)
            ps_tasks_clear(ctx->tasks);
        sample_threads(&t, &it);
    }
    ps_mem_batch_end(batch);
    ps_profile_unlock();
    if (finalizing)
        return 1;
    if (!listed)
        return 0;
    if (it.torn)
        ps_count_dropped(PS_COUNT_ERRORS_INCONSISTENT, it.torn);
    ps_count(PS_COUNT_TICKS, 1);
    return 0;
}
