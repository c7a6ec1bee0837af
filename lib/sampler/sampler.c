/*
 * sampler.c - the sampler thread: its states, its ticks at the rate, and
 * the writes it serves.
 *
 * States (docs/design.md draws them).  The thread, once started, waits
 * for the interpreter to be initialised, then is in one of: sampling (a
 * tick every 1/rate, tick.c); armed and idle (PYSAMPLE_ARM: it serves the
 * control socket, control.c, and ticks only while a session asks);
 * finished (the runtime is finalizing: nothing more is read, but the
 * thread stays to serve writes); asked to stop.
 *
 * Writing.  This thread is the profile's writer whenever it is alive
 * (lifecycle.c says why): periodically, and when asked
 * (ps_sampler_request_write), it serves the writer's requests (writer.c).
 * It calls down only: tick -> thread states -> one thread's sample
 * (threadsample.c) -> frames -> code cache -> symbols, then the stack
 * table; and writer -> render -> output.
 *
 * Waiting.  Between ticks the thread waits on a condition variable with an
 * absolute deadline instead of sleeping, so that pysample_stop() and the
 * exit path wake it at once: a plain sleep made every exit wait for the
 * rest of the current interval (10 ms at the default 100 Hz), which was
 * most of what profiling added to a short program's run time.
 *
 * Its own counts (pysample_status, PYSAMPLE_STATS) are stats.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sampler/budget.h"
#include "control/control.h"
#include "memory/memread.h"
#include "util/message.h"
#include "native/native.h"
#include "platform/platform.h"
#include "profile/profile.h"
#include "sampler/sampler.h"
#include "sampler/schedule.h"
#include "sampler/sessions.h"
#include "sampler/stats.h"
#include "sampler/threadinfo.h"
#include "sampler/threadsample.h"
#include "sampler/tick.h"
#include "settings.h"
#include "profile/writer.h"

static struct {
    /* The interpreter, for the sampler's life: tick.c and threadsample.c
     * read it through the pointer given at set-up. */
    struct ps_python py;
    int setup_done;

    pthread_mutex_t join_lock;  /* one thread joins the sampler thread */
    pthread_t thread;
    _Atomic int running;        /* thread exists */
    _Atomic int ended;          /* ... and has returned from its main */
    _Atomic int active;         /* ... and ticks (armed: only in a session) */
    _Atomic int ready;          /* the interpreter was seen initialised */
    int control;                /* armed: waits are control.c's poll */
    _Atomic int stop;           /* asks it to leave */
    _Atomic int rate_hz;        /* the rate ticks are at now ... */
    _Atomic int requested_hz;   /* ... and the one asked for (budget.h) */
    unsigned run;               /* sampling runs begun (sample_for_a_while) */
    struct ps_budget budget;    /* owned by the sampler thread */
    _Atomic int finished;       /* runtime finalizing: nothing more to read */
    _Atomic int write_request;  /* serve the writer at the next chance */
    uint64_t next_flush;
    uint64_t next_orphan_check; /* when to look for the program's threads */
    uint64_t orphan_watch_until;/* armed and idle: look until then, not never */
    _Atomic int thread_ended;   /* a program thread said it is ending */

    pthread_mutex_t wake_lock;  /* with wake: the interruptible wait */
    pthread_cond_t wake;
} sampler = { .join_lock = PTHREAD_MUTEX_INITIALIZER, .wake_lock = PTHREAD_MUTEX_INITIALIZER };

static void wake_init(void)
{
    ps_cond_init(&sampler.wake);
    pthread_mutex_init(&sampler.wake_lock, NULL);
}

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

static void thread_ending(void);

int ps_sampler_setup(const struct ps_python *py)
{
    ps_settings_freeze();
    const struct ps_config *cfg = ps_settings();
    sampler.py = *py;
    sampler.control = cfg->arm;
    atomic_store(&sampler.rate_hz, cfg->rate_hz);
    atomic_store(&sampler.requested_hz, cfg->rate_hz);
    wake_init();
    if (ps_profile_setup((size_t)cfg->max_stacks) != 0 ||
        ps_threadsample_setup(&sampler.py) != 0 ||
        ps_tick_setup(&sampler.py) != 0)
        return -1;
    if (cfg->timeline)
        ps_profile_setup_timeline((size_t)cfg->timeline_max, cfg->rate_hz);
    if (cfg->native)
        native_init();
    ps_threads_on_end(thread_ending);
    sampler.setup_done = 1;
    return 0;
}

/* One tick; the runtime finalizing ends sampling for good.  In cpu mode a
 * sample stands for one period of the requested rate, whatever the rate
 * ticks are at now (the CPU budget's), so that counts are CPU time /
 * the period the profile's readers assume (docs/format.md). */
static void tick(int all)
{
    int hz = atomic_load(&sampler.requested_hz);
    uint64_t period = 1000000000ull / (uint64_t)(hz > 0 ? hz : PS_DEFAULT_RATE);
    if (ps_tick(all, period, sampler.run) != 0)
        atomic_store(&sampler.finished, 1);
}

void ps_sampler_tick_all(void)
{
    tick(1);
}

static int armed(void)
{
    return sampler.control && ps_control_enabled();
}

/* A program thread is about to end (platform.h): the armed, idle wait
 * has no deadline, so it is woken to look (exit_if_orphaned). */
static void thread_ending(void)
{
    if (atomic_exchange(&sampler.thread_ended, 1) == 0 && armed())
        ps_control_wake();
}

/* Sleeps until deadline (monotonic ns; UINT64_MAX: none) or until asked
 * to stop or to write, or (armed) until sampling is switched on or off.
 * Armed, the control socket is a source of the wait (control.c does its
 * I/O and queues the requests) and the commands it queued are served after
 * each wake-up (sessions.c). */
static void wait_until(uint64_t deadline)
{
    if (armed()) {
        /* A wait without end (armed and idle) also ends when a program
         * thread ends: it may have been the last one. */
        int was = atomic_load(&sampler.active);
        while (!atomic_load(&sampler.stop) && !atomic_load(&sampler.write_request) &&
               atomic_load(&sampler.active) == was && ps_now_ns() < deadline && armed() &&
               !(deadline == UINT64_MAX && atomic_load(&sampler.thread_ended))) {
            uint64_t moment = ps_sessions_deadline();
            ps_control_wait(moment < deadline ? moment : deadline);
            ps_sessions_serve();
        }
        return;
    }
    pthread_mutex_lock(&sampler.wake_lock);
    while (!atomic_load(&sampler.stop) && !atomic_load(&sampler.write_request)) {
        if (ps_cond_wait_until(&sampler.wake, &sampler.wake_lock, deadline) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&sampler.wake_lock);
}

/* Serves the writer (writer.h) if asked; a final write ends this thread's
 * work: the loop only learns here that it must end. */
static void serve_writes(void)
{
    if (atomic_exchange(&sampler.write_request, 0) && ps_writer_serve())
        atomic_store(&sampler.stop, 1);
}

/*
 * PYSAMPLE_CPU_BUDGET, after a tick: a new requested rate restarts the
 * budget from it; at the end of a window the rate follows what the ticks
 * cost (budget.h).  The CPU clock is read once a window.
 */
static void apply_budget(uint64_t now)
{
    struct ps_budget *b = &sampler.budget;
    ps_budget_tick(b);
    int want = atomic_load(&sampler.requested_hz);
    if (want != b->max_hz) {
        ps_budget_start(b, b->share, want, now, ps_self_cpu_ns());
        atomic_store(&sampler.rate_hz, want);
        return;
    }
    if (!ps_budget_due(b, now))
        return;
    uint64_t before = b->adjustments;
    int r = ps_budget_update(b, now, ps_self_cpu_ns());
    if (b->adjustments != before)
        ps_count(PS_COUNT_BUDGET_ADJUSTMENTS, b->adjustments - before);
    atomic_store(&sampler.rate_hz, r);
}

/* The ticks' schedule at the current rate: deadlines on a fixed grid, late
 * wake-ups skip deadlines rather than burst (schedule.h). */
struct schedule {
    int rate;
    struct ps_schedule grid;
};

static void schedule_start(struct schedule *sc, uint64_t now)
{
    sc->rate = atomic_load(&sampler.rate_hz);
    ps_schedule_start(&sc->grid, 1000000000ull / (uint64_t)sc->rate, now);
}

/* Counts the deadlines the grid let go since skipped was read. */
static void count_skipped(const struct schedule *sc, uint64_t skipped)
{
    if (sc->grid.skipped != skipped)
        ps_count(PS_COUNT_LATE_TICKS, sc->grid.skipped - skipped);
}

/* After a tick that woke at woke and ended at now: the next deadline.  A
 * new rate (a control session, the CPU budget) starts a grid from now. */
static void schedule_next(struct schedule *sc, uint64_t woke, uint64_t now)
{
    uint64_t skipped = sc->grid.skipped;
    if (atomic_load(&sampler.rate_hz) != sc->rate)
        schedule_start(sc, now);
    else
        ps_schedule_ticked(&sc->grid, woke, now);
    count_skipped(sc, skipped);
}

/* PYSAMPLE_FLUSH_INTERVAL: the profile written every so often. */
static void flush_if_due(uint64_t now)
{
    if (sampler.next_flush == 0 || now < sampler.next_flush)
        return;
    if (ps_writer_serve())
        atomic_store(&sampler.stop, 1);
    sampler.next_flush = now + (uint64_t)ps_settings()->flush_interval_s * 1000000000ull;
}

/*
 * The program's last thread has ended, and only this one keeps the
 * process alive.  It happens in a child forked by a thread other than the
 * main one: the forking thread is the child's only thread, and when it
 * returns (or calls pthread_exit) glibc would end the process with
 * exit(0), as the last thread to end does -- but ours is still there, so
 * the child would stay for ever as a zombie leader and its parent's
 * waitpid would never return.  So this thread does what the last one
 * would have done: exit(0), after the final profile (and PYSAMPLE_STATS)
 * is written here, so that our atexit handler finds it done and waits for
 * nobody.  Looked at every 100 ms at most: one read of /proc/self/stat
 * while the leader runs (platform.h).  An armed, idle thread that never
 * wakes by itself is woken when a program thread ends (thread_ending) and
 * then looks every 100 ms for a second: the thread that told it is still
 * finishing when it first looks.
 */
static void exit_if_orphaned(uint64_t now)
{
    if (atomic_exchange(&sampler.thread_ended, 0)) {
        sampler.orphan_watch_until = now + 1000000000ull;
        sampler.next_orphan_check = now;
    }
    if (now < sampler.next_orphan_check)
        return;
    sampler.next_orphan_check = now + 100000000ull;
    if (!ps_program_threads_gone())
        return;
    if (ps_settings()->output[0]) {
        ps_writer_ask(PS_WRITE_FINAL);
        ps_writer_serve();
    }
    if (ps_settings()->stats_path[0])
        ps_stats_write(ps_settings()->stats_path, atomic_load(&sampler.rate_hz), ps_settings()->native,
                       ps_settings()->file_mode);
    exit(0);
}

/* One tick for the latest deadline that has passed, timed for
 * PYSAMPLE_STATS: how late it is for that deadline, how long its work
 * took.  Sets *woke; returns when it ended. */
static uint64_t timed_tick(struct schedule *sc, uint64_t *woke)
{
    uint64_t skipped = sc->grid.skipped;
    *woke = ps_now_ns();
    uint64_t late = ps_schedule_woke(&sc->grid, *woke);
    count_skipped(sc, skipped);
    if (ps_settings()->stats_path[0])
        ps_stats_late(late);
    tick(0);
    uint64_t now = ps_now_ns();
    if (ps_settings()->stats_path[0])
        ps_stats_tick_took(now - *woke);
    return now;
}

/*
 * Ticks at the current rate until sampling is switched off, the runtime
 * finalizes or the thread is asked to stop.  The rate is read each tick,
 * so a change (a control session, the CPU budget) takes effect at once.
 */
static void sample_for_a_while(void)
{
    uint64_t began = ps_now_ns();
    ps_stats_run_begin(began);
    sampler.run++;
    double share = ps_settings()->cpu_budget;
    if (share > 0) {
        int want = atomic_load(&sampler.requested_hz);
        ps_budget_start(&sampler.budget, share, want, began, ps_self_cpu_ns());
        atomic_store(&sampler.rate_hz, want);
    }
    struct schedule sc;
    schedule_start(&sc, began);
    uint64_t cpu_at = began;

    while (!atomic_load(&sampler.stop) && !atomic_load(&sampler.finished) &&
           atomic_load(&sampler.active)) {
        wait_until(sc.grid.next);
        if (atomic_load(&sampler.stop) || !atomic_load(&sampler.active))
            break;
        uint64_t woke;
        uint64_t now = timed_tick(&sc, &woke);
        if (share > 0)
            apply_budget(now);
        schedule_next(&sc, woke, now);
        serve_writes();
        flush_if_due(now);
        exit_if_orphaned(now);
        /* The thread's CPU clock is a system call (0.4-0.9 us here, as
         * much as walking a 10-frame stack): read it 10 times a second,
         * not every tick.  It is read once more on the way out. */
        if (now >= cpu_at) {
            ps_stats_cpu(ps_self_cpu_ns());
            cpu_at = now + 100000000ull;
        }
    }
    ps_stats_cpu(ps_self_cpu_ns());
    ps_stats_run_end(ps_now_ns());
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

/* Waits for the interpreter to exist before the first tick: every
 * millisecond at first (a Python executable initialises within tens of
 * them), then less and less often, up to 10 times a second, for a
 * libpython that was loaded long before its Py_Initialize (uWSGI) or is
 * never initialised at all.  Writes are served meanwhile. */
static void wait_for_interpreter(void)
{
    uint64_t nap = 1000000, waiting_since = ps_now_ns();
    while (!atomic_load(&sampler.stop) && !ps_python_ready(&sampler.py) &&
           !ps_python_finalizing(&sampler.py)) {
        wait_until(ps_now_ns() + nap);
        if (ps_now_ns() - waiting_since > 200000000ull && nap < 100000000ull)
            nap *= 2;
        serve_writes();
        exit_if_orphaned(ps_now_ns());
    }
}

/*
 * Not sampling: armed and idle, or the runtime finalized.  The thread
 * stays, to write when asked: a fatal signal that lands during Python's
 * exit must still find someone to write the profile (lifecycle.c never
 * writes from a signal handler), and an armed process must still answer.
 * Armed without an output file, nothing can ask for a write without
 * waking us: no timeout here (control.c's wait checks its descriptors
 * every 2 s, and that is all an idle armed process wakes for).
 */
static void idle_a_while(void)
{
    int forever = armed() && ps_settings()->output[0] == '\0' &&
                  ps_now_ns() >= sampler.orphan_watch_until;
    wait_until(forever ? UINT64_MAX : ps_now_ns() + 100000000ull);
    serve_writes();
    exit_if_orphaned(ps_now_ns());
}

static void *sampler_main(void *arg)
{
    (void)arg;
    block_signals();
    ps_thread_precise_timers();
    wait_for_interpreter();
    ps_mem_enable_direct();
    atomic_store(&sampler.ready, 1);

    /* Only the first start sets the schedule: the thread is stopped and
     * started again around every os.fork() on 3.12+ (lifecycle.c), and a
     * server forking more often than the interval must still flush. */
    if (ps_settings()->flush_interval_s > 0 && ps_settings()->output[0] && sampler.next_flush == 0)
        sampler.next_flush = ps_now_ns() + (uint64_t)ps_settings()->flush_interval_s * 1000000000ull;

    while (!atomic_load(&sampler.stop)) {
        if (!atomic_load(&sampler.active) || atomic_load(&sampler.finished))
            idle_a_while();
        else
            sample_for_a_while();
    }
    if (ps_settings()->stats_path[0])
        ps_stats_write(ps_settings()->stats_path, atomic_load(&sampler.rate_hz), ps_settings()->native,
                       ps_settings()->file_mode);
    atomic_store(&sampler.ended, 1);
    return NULL;
}

/*
 * Wakes the thread from its wait; callable from a signal handler.  The
 * wake lock is only tried: a handler may have interrupted the thread that
 * holds it (in this very function), and then the sampler wakes at its
 * next deadline instead (a tick, or 100 ms idle).  The flags the wait
 * looks at are set before this is called, and the wait reads them under
 * the lock, so when the lock is busy because the sampler is about to
 * wait, it sees them first.
 */
static void wake_thread(void)
{
    if (armed())
        ps_control_wake();  /* one write(): async-signal-safe */
    if (pthread_mutex_trylock(&sampler.wake_lock) != 0)
        return;
    pthread_cond_broadcast(&sampler.wake);
    pthread_mutex_unlock(&sampler.wake_lock);
}

int ps_sampler_start_thread(void)
{
    if (!sampler.setup_done)
        return -ENOENT;
    if (atomic_load(&sampler.running))
        return 0;
    atomic_store(&sampler.stop, 0);
    atomic_store(&sampler.finished, 0);
    atomic_store(&sampler.ended, 0);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* frames.c and pystr.c keep their buffers on the stack: 256 KiB is
     * several times what they need and far less than the 8 MiB default. */
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(&sampler.thread, &attr, sampler_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return -rc;
    atomic_store(&sampler.running, 1);
    return 0;
}

int ps_sampler_start(int rate_hz)
{
    if (!sampler.setup_done)
        return -ENOENT;
    if (rate_hz < 0 || rate_hz > PS_MAX_RATE)
        return -EINVAL;
    if (atomic_load(&sampler.running)) {
        /* Armed, the thread idles: switch sampling on.  Otherwise a
         * running thread already samples, at the rate it has. */
        if (armed() && !atomic_load(&sampler.active)) {
            if (rate_hz > 0)
                ps_sampler_set_rate(rate_hz);
            ps_sampler_set_active(1);
        }
        return 0;
    }
    if (rate_hz > 0)
        ps_sampler_set_rate(rate_hz);
    atomic_store(&sampler.active, 1);
    return ps_sampler_start_thread();
}

void ps_sampler_set_active(int on)
{
    atomic_store(&sampler.active, on);
    wake_thread();
}

void ps_sampler_set_rate(int rate_hz)
{
    if (rate_hz >= 1 && rate_hz <= PS_MAX_RATE) {
        atomic_store(&sampler.requested_hz, rate_hz);
        atomic_store(&sampler.rate_hz, rate_hz);
    }
}

int ps_sampler_sampling(void)
{
    return ps_sampler_running() && atomic_load(&sampler.active);
}

int ps_sampler_ready(void)
{
    return atomic_load(&sampler.ready);
}

int ps_sampler_finished(void)
{
    return atomic_load(&sampler.finished);
}

void ps_sampler_stop(void)
{
    if (!atomic_load(&sampler.running))
        return;
    atomic_store(&sampler.stop, 1);
    wake_thread();
    /* On the sampler thread itself (a write it was asked for ends
     * profiling) the loop only learns it must end.  The thread still runs,
     * so it stays "running" until another thread joins it: marking it
     * stopped here let the exit path skip the join and end the process
     * while the thread was still writing (PYSAMPLE_STATS files came out
     * empty). */
    if (pthread_equal(pthread_self(), sampler.thread))
        return;
    pthread_mutex_lock(&sampler.join_lock);
    if (atomic_load(&sampler.running)) {
        pthread_join(sampler.thread, NULL);
        atomic_store(&sampler.running, 0);
    }
    pthread_mutex_unlock(&sampler.join_lock);
}

void ps_sampler_request_write(void)
{
    atomic_store(&sampler.write_request, 1);
    wake_thread();
}

int ps_sampler_end_bounded(long ms)
{
    if (!atomic_load(&sampler.running) || pthread_equal(pthread_self(), sampler.thread))
        return 0;
    atomic_store(&sampler.stop, 1);
    wake_thread();
    for (long waited_us = 0; !atomic_load(&sampler.ended); waited_us += 100) {
        if (waited_us >= ms * 1000)
            return 0;
        struct timespec nap = { 0, 100000 };
        nanosleep(&nap, NULL);
    }
    return 1;
}

int ps_sampler_alive(void)
{
    return atomic_load(&sampler.running);
}

int ps_sampler_running(void)
{
    return atomic_load(&sampler.running) && !atomic_load(&sampler.finished);
}

int ps_sampler_stats_wanted(void)
{
    return ps_settings()->stats_path[0] != '\0';
}

int ps_sampler_rate(void)
{
    return atomic_load(&sampler.rate_hz);
}

void ps_sampler_stats(struct ps_stats *st)
{
    ps_stats_read(st);
    st->rate_now_hz = atomic_load(&sampler.rate_hz);
    st->requested_hz = atomic_load(&sampler.requested_hz);
    st->budget_pct = ps_settings()->cpu_budget * 100.0;
}

void ps_sampler_prepare_fork(void)
{
    ps_threadinfo_prepare_fork();
}

void ps_sampler_child_after_fork(int stop_sampling)
{
    /* Only the forking thread exists here; the sampler thread does not.
     * The profile is already empty (ps_profile_child_after_fork). */
    pthread_mutex_init(&sampler.join_lock, NULL);
    wake_init();
    ps_stats_child_after_fork();
    int was_running = atomic_load(&sampler.running) && !atomic_load(&sampler.finished);
    atomic_store(&sampler.running, 0);
    atomic_store(&sampler.write_request, 0);
    sampler.next_flush = 0;
    ps_threadsample_child_after_fork();
    ps_sessions_child_after_fork();
    if (stop_sampling)
        atomic_store(&sampler.active, 0);
    if (sampler.setup_done && was_running)
        ps_sampler_start_thread();
}
