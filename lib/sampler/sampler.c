/*
 * sampler.c - the sampler thread: set up, started, stopped, and carried
 * across a fork.
 *
 * Its states and what it can be asked are state.c's; what it does while
 * it runs, loop.c's.  This file owns the thread itself: who creates it,
 * who joins it (one thread, under join_lock), and the exit paths that may
 * not join it (ps_sampler_end_bounded).
 *
 * Writing.  This thread is the profile's writer whenever it is alive
 * (lifecycle.c says why): periodically, and when asked
 * (ps_sampler_request_write), it serves the writer's requests (writer.c).
 * It calls down only: loop -> tick -> thread states -> one thread's
 * sample (threadsample.c) -> frames -> code cache -> symbols, then the
 * stack table; and writer -> render -> output.
 *
 * Its own counts (pysample_status, PYSAMPLE_STATS) are stats.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "native/native.h"
#include "platform/platform.h"
#include "profile/profile.h"
#include "sampler/loop.h"
#include "sampler/orphan.h"
#include "sampler/sessions.h"
#include "sampler/sampler.h"
#include "sampler/state.h"
#include "sampler/threadinfo.h"
#include "sampler/threadsample.h"
#include "sampler/tick.h"
#include "settings.h"
#include "util/message.h"
#include "util/tickpath.h"

PS_TICK_DATA static struct {
    /* The thread's context (context.h): the interpreter and what the
     * loop and the tick keep from one tick to the next, passed down its
     * calls. */
    struct ps_sampler_ctx ctx;
    int setup_done;

    pthread_mutex_t join_lock;  /* one thread joins the sampler thread */
    pthread_t thread;
    _Atomic long tid;           /* its kernel tid, set by the thread itself */
} sampler = { .ctx.session = PS_SESSION_NONE, .join_lock = PTHREAD_MUTEX_INITIALIZER };

/* PYSAMPLE_NATIVE: what capture needs on this platform (Linux: the
 * SIGURG handler), or a note and Python frames only. */
static void native_init(void)
{
    char why[256];
    if (ps_native_platform_init(why, sizeof why) != 0) {
        ps_say("PYSAMPLE_NATIVE: %s; sampling Python frames only", why);
        ps_settings_no_native();
    }
}

int ps_sampler_setup(const struct ps_python *py)
{
    ps_settings_freeze();
    const struct ps_config *cfg = ps_settings();
    sampler.ctx.py = *py;
    ps_sampler_state_setup(py, cfg->rate_hz);
    if (ps_profile_setup((size_t)cfg->max_stacks) != 0 ||
        ps_threadsample_setup(&sampler.ctx) != 0 ||
        ps_tick_setup(&sampler.ctx) != 0)
        return -1;
    if (cfg->timeline)
        ps_profile_setup_timeline((size_t)cfg->timeline_max, cfg->rate_hz);
    if (cfg->native)
        native_init();
    sampler.setup_done = 1;
    return 0;
}

const struct ps_python *ps_sampler_python(void)
{
    return &sampler.ctx.py;
}

/* Signals sent to the process are the program's business: never run its
 * handlers on this thread.  Faults must stay deliverable: a blocked
 * SIGSEGV raised by a guarded read would kill the process instead of
 * reaching our handler. */
static void block_signals(void)
{
    static const int faults[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE };
    sigset_t all;
    sigfillset(&all);
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
}

static void *sampler_main(void *arg)
{
    (void)arg;
    atomic_store(&sampler.tid, ps_gettid());
    block_signals();
    ps_thread_precise_timers();
    ps_sampler_loop(&sampler.ctx);
    /* From WAITING, SAMPLING, IDLE or FINISHED: the loop's last state. */
    ps_sampler_move(ps_sampler_state(), PS_SAMPLER_ENDED);
    return NULL;
}

/* OFF (or PAUSED) -> WAITING before the thread exists, so that it is
 * never seen alive without being so (and never moves itself before this
 * move).  A refused move: another thread started it meanwhile. */
int ps_sampler_start_thread(void)
{
    if (!sampler.setup_done)
        return -ENOENT;
    enum ps_sampler_state from = ps_sampler_state();
    if (from != PS_SAMPLER_OFF && from != PS_SAMPLER_PAUSED)
        return 0;
    ps_sampler_clear_stop();
    if (ps_sampler_move(from, PS_SAMPLER_WAITING) != 0)
        return 0;

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* frames.c and pystr.c keep their buffers on the stack: 256 KiB is
     * several times what they need and far less than the 8 MiB default. */
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(&sampler.thread, &attr, sampler_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        ps_sampler_move(PS_SAMPLER_WAITING, PS_SAMPLER_OFF);
        return -rc;
    }
    return 0;
}

int ps_sampler_start(int rate_hz)
{
    if (!sampler.setup_done)
        return -ENOENT;
    if (rate_hz < 0 || rate_hz > PS_MAX_RATE)
        return -EINVAL;
    if (ps_sampler_alive()) {
        /* Armed, the thread idles: switch sampling on.  Otherwise a
         * running thread already samples, at the rate it has. */
        if (ps_sampler_armed() && !ps_sampler_active()) {
            if (rate_hz > 0)
                ps_sampler_set_rate(rate_hz);
            ps_sampler_set_active(1);
        }
        return 0;
    }
    if (rate_hz > 0)
        ps_sampler_set_rate(rate_hz);
    ps_sampler_set_active(1);
    return ps_sampler_start_thread();
}

/* How long a joined thread may take to leave the kernel's thread count.
 * Normally microseconds; a preempted exit on a loaded machine, a few
 * scheduler periods (ms); held by a tracer that has not waited for it
 * yet, as long as the tracer likes.  100 ms covers the first two with
 * room, and is the most an os.fork() or a pysample_stop() ever waits for
 * the third (docs/processes.md). */
#define PS_RELEASE_WAIT_NS 100000000ull

/* The joined thread tid out of the kernel's count, or the bound passed.
 * Joined is not yet uncounted: pthread_join returns when the kernel clears
 * the thread's tid (CLONE_CHILD_CLEARTID, as it gives up its memory), and
 * only after that is the thread taken out of the process's thread count
 * (that CPython reads after os.fork(): forkpause.c) and thread list (that
 * unshare(CLONE_NEWUSER) wants empty after pysample_stop():
 * docs/troubleshooting.md). */
static void wait_released(long tid)
{
    uint64_t until = ps_now_ns() + PS_RELEASE_WAIT_NS;
    while (!ps_thread_released(tid) && ps_now_ns() < until) {
        struct timespec nap = { 0, 50000 };
        nanosleep(&nap, NULL);
    }
}

void ps_sampler_stop(void)
{
    /* Stopped while out for a fork's thread count: it stays out. */
    if (ps_sampler_move(PS_SAMPLER_PAUSED, PS_SAMPLER_OFF) == 0 || !ps_sampler_alive())
        return;
    ps_sampler_ask_stop();
    /* On the sampler thread itself (a write it was asked for ends
     * profiling) the loop only learns it must end.  The thread still runs,
     * so it stays alive until another thread joins it: marking it
     * stopped here let the exit path skip the join and end the process
     * while the thread was still writing (PYSAMPLE_STATS files came out
     * empty). */
    if (pthread_equal(pthread_self(), sampler.thread))
        return;
    pthread_mutex_lock(&sampler.join_lock);
    if (ps_sampler_alive()) {
        pthread_join(sampler.thread, NULL);
        /* The tid is the joined thread's (written by it before it ran,
         * read after the join), taken so that nobody waits for it again. */
        wait_released(atomic_exchange(&sampler.tid, 0));
        ps_sampler_move(PS_SAMPLER_ENDED, PS_SAMPLER_OFF);
    }
    pthread_mutex_unlock(&sampler.join_lock);
}

int ps_sampler_end_bounded(long ms)
{
    if (!ps_sampler_alive() || pthread_equal(pthread_self(), sampler.thread))
        return 0;
    ps_sampler_ask_stop();
    for (long waited_us = 0; ps_sampler_state() != PS_SAMPLER_ENDED; waited_us += 100) {
        if (!ps_sampler_alive())
            return 1;  /* joined meanwhile */
        if (waited_us >= ms * 1000)
            return 0;
        struct timespec nap = { 0, 100000 };
        nanosleep(&nap, NULL);
    }
    return 1;
}

int ps_sampler_pause(void)
{
    if (!ps_sampler_may_read())
        return 0;
    /* Joined and released (ps_sampler_stop): out of the kernel's count. */
    ps_sampler_stop();
    return ps_sampler_move(PS_SAMPLER_OFF, PS_SAMPLER_PAUSED) == 0;
}

void ps_sampler_resume(int restart)
{
    if (ps_sampler_state() != PS_SAMPLER_PAUSED)
        return;
    if (!restart || ps_sampler_start_thread() != 0)
        ps_sampler_move(PS_SAMPLER_PAUSED, PS_SAMPLER_OFF);
}

int ps_sampler_child_forked(void)
{
    /* Only the forking thread exists here; the sampler thread does not.
     * Asked before state.c forgets the parent's state (the next steps of
     * lifecycle.c's table). */
    int was_running = ps_sampler_may_read();
    pthread_mutex_init(&sampler.join_lock, NULL);
    return was_running;
}

void ps_sampler_child_loop(void)
{
    /* The periodic flush is scheduled anew at the child's start; its
     * PYSAMPLE_STATS timings start from none, as its counts do. */
    sampler.ctx.next_flush = 0;
    memset(&sampler.ctx.times, 0, sizeof sampler.ctx.times);
}

void ps_sampler_prepare_fork(void)
{
    ps_threadinfo_prepare_fork(&sampler.ctx.threads);
}

void ps_sampler_child_threads(void)
{
    ps_threadinfo_child_after_fork(&sampler.ctx.threads);
}

void ps_sampler_child_sessions(void)
{
    ps_sessions_child_after_fork(&sampler.ctx.session);
}

void ps_sampler_child_native(void)
{
    /* Native capture starts afresh: only the forking thread exists, and
     * it was not held. */
    if (sampler.setup_done && ps_settings()->native) {
        ps_native_after_fork();
        if (sampler.ctx.buf.rules != NULL && sampler.ctx.buf.names != NULL)
            ps_native_stats_reset(sampler.ctx.buf.rules, sampler.ctx.buf.names);
    }
}

void ps_sampler_child_restart(int was_running)
{
    /* The profile is already empty (ps_profile_child_after_fork), the
     * state, counts and sessions the child's own. */
    if (sampler.setup_done && was_running)
        ps_sampler_start_thread();
}
