/*
 * profile.c - the profile's tables and their lock (profile.h).
 *
 * The lock is held by the sampler thread for one tick at a time; the other
 * takers are the writers (render), pysample_reset and fork(), which takes it
 * in the prepare handler so that the child never inherits it locked by a
 * thread that does not exist there.  A program thread never waits on it
 * for longer than a tick.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "profile/output.h"
#include "profile/profile.h"
#include "profile/render.h"
#include "platform/platform.h"
#include "util/arena.h"
#include "util/lock.h"
#include "util/message.h"
#include "util/tickpath.h"

/* How long a write waits for the tables' lock: its holders keep it for one
 * tick or one render.  Held longer, its holder is the thread a signal
 * handler that wants the write interrupted (profile.h). */
#define PS_TABLES_WAIT_MS 5000

PS_TICK_DATA static struct {
    pthread_mutex_t lock;
    int ready;
    struct ps_profile p;
} profile = { .lock = PTHREAD_MUTEX_INITIALIZER };

int ps_profile_setup(size_t max_stacks)
{
    if (ps_symtab_init(&profile.p.syms, max_stacks) != 0 ||
        ps_stacktab_init(&profile.p.tab, max_stacks,
                         ps_frame(PS_SYM_STACKS_FULL, PS_LINE_NONE)) != 0 ||
        ps_codecache_init(&profile.p.cc, 16384) != 0)
        return -1;
    profile.ready = 1;
    return 0;
}

static uint64_t real_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ps_profile_setup_timeline(size_t max_records, int rate_hz)
{
    pthread_mutex_lock(&profile.lock);
    ps_timeline_init(&profile.p.tl, max_records, rate_hz, ps_now_ns(), real_now_ns());
    profile.p.tab.tl = max_records ? &profile.p.tl : NULL;
    pthread_mutex_unlock(&profile.lock);
}

PS_TICK_PATH struct ps_profile *ps_profile_lock(void)
{
    pthread_mutex_lock(&profile.lock);
    return &profile.p;
}

PS_TICK_PATH void ps_profile_unlock(void)
{
    pthread_mutex_unlock(&profile.lock);
}

int ps_profile_render(char **out, size_t *len)
{
    if (!profile.ready)
        return -1;
    pthread_mutex_lock(&profile.lock);
    int rc = ps_render(&profile.p.tab, &profile.p.syms, out, len);
    pthread_mutex_unlock(&profile.lock);
    return rc;
}

static int fill_rendered(void *ctx, ps_output_put_fn put, void *put_ctx)
{
    return ps_rendered_emit(ctx, put, put_ctx);
}

struct timeline_fill {
    const struct ps_timeline *tl;
    const struct ps_rendered *rd;
    struct ps_arena *mem;
};

static int fill_timeline(void *ctx, ps_output_put_fn put, void *put_ctx)
{
    const struct timeline_fill *f = ctx;
    return ps_timeline_emit(f->tl, f->rd, put, put_ctx, f->mem);
}

/* <path>.timeline from the copy tl and the lines rd of one moment.  A
 * failure is said when it begins and when it ends (message.h): a full
 * disk said it on every flush. */
static struct ps_episode timeline_failing;

static void write_timeline(const char *path, const struct ps_timeline *tl,
                           const struct ps_rendered *rd, struct ps_arena *mem)
{
    struct timeline_fill f = { tl, rd, mem };
    int rc = tl == NULL ? -ENOMEM : ps_output_write_beside(path, ".timeline", fill_timeline, &f);
    if (!ps_episode_turn(&timeline_failing, rc))
        return;
    if (rc != 0)
        ps_say("cannot write the timeline %s.timeline: %s; said once, until it is written again",
               path, ps_output_strerror(rc));
    else
        ps_say("the timeline %s.timeline is written again", path);
}

int ps_profile_write(const char *tmpl, char *written, size_t writtenlen)
{
    if (!profile.ready)
        return -ENOMEM;
    struct ps_rendered *rd;
    if (ps_lock_bounded(&profile.lock, PS_TABLES_WAIT_MS) != 0)
        return -ETIMEDOUT;
    struct ps_timeline *tl = NULL;
    struct ps_arena tlmem = { 0 };   /* the timeline's copy: not malloc, as the render */
    char path[4096];
    int rc = ps_render_prepare(&profile.p.tab, &profile.p.syms, &rd);
    int timeline = ps_timeline_on(profile.p.tab.tl);
    if (rc == 0 && timeline)
        tl = ps_timeline_copy(profile.p.tab.tl, &tlmem);
    pthread_mutex_unlock(&profile.lock);
    if (rc != 0) {
        ps_arena_free(&tlmem);
        return -ENOMEM;
    }
    rc = ps_output_write_with(tmpl, fill_rendered, rd, path, sizeof path);
    if (rc == 0 && written != NULL)
        snprintf(written, writtenlen, "%s", path);
    if (rc == 0 && timeline)
        write_timeline(path, tl, rd, &tlmem);
    ps_arena_free(&tlmem);
    ps_rendered_free(rd);
    return rc;
}

/* Caller holds the lock.  0, or -1 with the samples as they were. */
static int clear_locked(void)
{
    if (ps_stacktab_clear(&profile.p.tab) != 0)
        return -1;
    ps_timeline_restart(&profile.p.tl, ps_now_ns(), real_now_ns());
    /* A symbol table that met its limit (a program making functions or
     * threads without end) is rebuilt now that no stack refers to it, so
     * the next profile names them again; the code cache goes with it,
     * as its entries hold its ids (merge.c's names per address see the
     * table's new generation).  The sampler keeps none across ticks
     * except the reserved markers, whose ids every table shares. */
    if (ps_symtab_refused(&profile.p.syms)) {
        ps_symtab_clear(&profile.p.syms);
        ps_codecache_clear(&profile.p.cc);
    }
    return 0;
}

int ps_profile_reset(void)
{
    if (!profile.ready)
        return 0;
    pthread_mutex_lock(&profile.lock);
    int rc = clear_locked();
    pthread_mutex_unlock(&profile.lock);
    return rc;
}

int ps_profile_lend(int lent)
{
    if (!profile.ready)
        return 0;
    pthread_mutex_lock(&profile.lock);
    int rc = clear_locked();
    if (rc == 0 && lent) {
        profile.p.tab.tl = NULL;
        ps_timeline_free(&profile.p.tl);
    } else if (rc == 0) {
        profile.p.tab.tl = profile.p.tl.max ? &profile.p.tl : NULL;
    }
    pthread_mutex_unlock(&profile.lock);
    return rc;
}

void ps_profile_counts(struct ps_profile_counts *c)
{
    memset(c, 0, sizeof *c);
    if (!profile.ready)
        return;
    pthread_mutex_lock(&profile.lock);
    c->distinct_stacks = profile.p.tab.used;
    c->codecache_hits = profile.p.cc.hits;
    c->codecache_misses = profile.p.cc.misses;
    pthread_mutex_unlock(&profile.lock);
}

void ps_profile_prepare_fork(void)
{
    pthread_mutex_lock(&profile.lock);
}

void ps_profile_parent_after_fork(void)
{
    pthread_mutex_unlock(&profile.lock);
}

void ps_profile_child_after_fork(void)
{
    /* Only the forking thread exists here, and it took the lock in
     * prepare. */
    pthread_mutex_init(&profile.lock, NULL);
    /* Its timeline has a name of its own: its failures are new. */
    atomic_store(&timeline_failing.failing, 0);
    /* Out of memory: the child goes on with its parent's samples rather
     * than none at all. */
    if (profile.ready)
        clear_locked();
}
