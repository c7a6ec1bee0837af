/*
 * sampler.c - the sampler thread: each tick, every thread of every
 * interpreter, walked, resolved and counted.
 *
 * Locking.  The sampler never takes a lock that a program thread can hold:
 * it reads interpreter memory without the GIL or the runtime's HEAD_LOCK,
 * through ps_read() only.  It holds the profile's lock (profile.c) for one
 * tick at a time.
 *
 * Writing.  This thread is the profile's writer whenever it is alive
 * (lifecycle.c says why): periodically, and when asked
 * (ps_sampler_request_write), it serves the writer's requests (writer.c).
 * It calls down only: tick -> thread states -> frames -> code cache ->
 * symbols, then the stack table; and writer -> render -> output.
 *
 * Memory.  The thread list and frames are copied into fixed buffers owned
 * by this thread; malloc only happens when a new code object or stack is
 * seen, outside any guarded read.
 *
 * Waiting.  Between ticks the thread waits on a condition variable with an
 * absolute deadline instead of sleeping, so that pysample_stop() and the
 * exit path wake it at once: a plain sleep made every exit wait for the
 * rest of the current interval (10 ms at the default 100 Hz), which was
 * most of what profiling added to a short program's run time.
 *
 * Statistics for benchmarks.  PYSAMPLE_STATS=<path> (%p expands to the
 * pid) makes the thread write a small "key value" text file each time it
 * stops (pysample_stop, exit, runtime finalizing): ticks, samples, errors
 * (and by cause: unreadable, inconsistent),
 * skipped ticks, the sampler thread's own CPU time, how long it sampled,
 * tick lateness (wake-up time minus scheduled time) at p50/p90/p99/max and
 * the duration of a tick's own work at p50/p99, from log-linear histograms
 * (buckets 1/16 of a power of two wide; a percentile is its bucket's floor).
 * Counts are cumulative over the process's start/stop cycles.  Nothing is
 * printed, and an unwritable path is silently ignored: it is a measuring
 * aid for test/bench/, not a user feature.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "control.h"
#include "frames.h"
#include "memread.h"
#include "message.h"
#include "native.h"
#include "platform.h"
#include "profile.h"
#include "sampler.h"
#include "tasks.h"
#include "threadnames.h"
#include "threadstates.h"
#include "writer.h"

#define PS_FORKERS 8      /* forking ancestors remembered (forker_tids) */
#define PS_WALK_TRIES 3
#define PS_NAME_RETRIES 8
#define PS_NAME_REFRESH_NS 1000000000ull
#define PS_TIDCACHE 1024   /* power of two */
#define PS_LATE_BUCKETS (16 + 60 * 16)

/* Per-thread memory of the sampler: CPU time seen last tick and the name
 * (its label is interned per sample: symtab.h's ids need no caching). */
struct tid_info {
    long tid;
    int64_t last_cpu;
    uint64_t name_at;           /* when to read the name again */
    uint8_t had_boot;           /* last refresh saw Thread._bootstrap_inner */
    uint8_t name_misses;        /* reads of the Thread's name that failed */
    char name[64];              /* longer names are cut at a character */
};

static struct {
    struct ps_python py;
    struct ps_config cfg;
    int setup_done;

    pthread_mutex_t join_lock;  /* one thread joins the sampler thread */
    struct tid_info tids[PS_TIDCACHE];  /* under the profile's lock */
    uint64_t *scratch;          /* max_depth + 1 frames */
    uint64_t *rooted;           /* max_depth + PS_NATIVE_MAX + a few */
    uintptr_t *addrs;           /* the frames' addresses (asyncio tasks) */
    struct ps_tasks *tasks;     /* PYSAMPLE_ASYNC, else NULL (tasks.h) */
    /* This tick's task snapshot: 0 not taken, 1 due (the main
     * interpreter's threads are being visited: the first one sampled
     * takes it, so a CPU-mode tick where nothing ran reads no tasks),
     * 2 taken.  tasks_interp: the main interpreter. */
    int tasks_state;
    uintptr_t tasks_interp;
    /* native stacks (PYSAMPLE_NATIVE, native.h) */
    uint8_t *entry;             /* per scratch frame: first of its eval call */
    struct ps_pyframe *pyframes;
    uintptr_t pcs[PS_NATIVE_MAX];

    pthread_t thread;
    _Atomic int running;        /* thread exists */
    _Atomic int active;         /* ... and ticks (armed: only in a session) */
    _Atomic int ready;          /* the interpreter was seen initialised */
    int control;                /* armed: waits are control.c's poll */
    int tick_all;               /* this tick ignores PYSAMPLE_MODE (dump) */
    _Atomic int stop;           /* asks it to leave */
    _Atomic int rate_hz;        /* the rate ticks are at now ... */
    _Atomic int requested_hz;   /* ... and the one asked for (budget.h) */
    struct ps_budget budget;    /* owned by the sampler thread */
    _Atomic uint64_t budget_adjustments;
    /* PYSAMPLE_MAX_THREADS_PER_TICK (pick_threads): the sampler thread's */
    unsigned threads_seen;      /* thread states in the previous tick */
    unsigned rotate;            /* the first of this tick's subset */
    uint64_t rng;               /* xorshift64 state for the weights */
    _Atomic int finished;       /* runtime finalizing: nothing more to read */
    _Atomic int write_request;  /* serve the writer at the next chance */

    _Atomic uint64_t ticks, samples, errors, late_ticks;
    /* errors by cause: memory that could not be read, and memory read that
     * made no sense (a walk or thread list torn while we looked) */
    _Atomic uint64_t errors_unreadable, errors_inconsistent;
    _Atomic uint64_t truncated;
    _Atomic int64_t cpu_ns;
    uint64_t next_flush;
    pid_t pid;
    /* Kernel tids that, in this process, mean its main thread: the thread
     * that forked us (and our ancestors), as recorded in thread states
     * that a fork() without PyOS_AfterFork_Child() never updated (uWSGI's
     * workers unless --py-call-osafterfork).  Filled at fork. */
    long forker_tids[PS_FORKERS];
    long forking_tid;           /* set in the prepare handler */

    pthread_mutex_t wake_lock;  /* with wake: the interruptible wait */
    pthread_cond_t wake;

    /* PYSAMPLE_STATS (cfg.stats_path): owned by the sampler thread while
     * it runs. */
    _Atomic uint64_t active_ns; /* wall time spent sampling, all runs ... */
    _Atomic uint64_t run_began; /* ... but the one under way, begun then (0: none) */
    uint64_t late_hist[PS_LATE_BUCKETS];
    uint64_t tick_hist[PS_LATE_BUCKETS];  /* duration of the tick's work */
} sampler = { .join_lock = PTHREAD_MUTEX_INITIALIZER, .wake_lock = PTHREAD_MUTEX_INITIALIZER };

static void wake_init(void)
{
    ps_cond_init(&sampler.wake);
    pthread_mutex_init(&sampler.wake_lock, NULL);
}

int ps_sampler_setup(const struct ps_python *py, const struct ps_config *cfg)
{
    sampler.py = *py;
    sampler.cfg = *cfg;
    sampler.pid = getpid();
    sampler.control = cfg->arm;
    atomic_store(&sampler.rate_hz, cfg->rate_hz);
    atomic_store(&sampler.requested_hz, cfg->rate_hz);
    wake_init();
    if (ps_profile_setup((size_t)cfg->max_stacks) != 0)
        return -1;
    sampler.scratch = malloc(((size_t)cfg->max_depth + 2) * sizeof *sampler.scratch);
    sampler.rooted = malloc(((size_t)cfg->max_depth + PS_NATIVE_MAX + 8) * sizeof *sampler.rooted);
    if (sampler.scratch == NULL || sampler.rooted == NULL)
        return -1;
    if (cfg->async_tasks) {
        /* Task stacks are the thread's, plus a marker and the suspended
         * frames of each awaiting task: room for those too. */
        size_t room = (size_t)cfg->max_depth + 2 + PS_TASKS_CHAIN * (PS_TASKS_CORO_DEPTH + 1);
        if (room < (size_t)cfg->max_depth + PS_NATIVE_MAX + 8)
            room = (size_t)cfg->max_depth + PS_NATIVE_MAX + 8;
        uint64_t *r = realloc(sampler.rooted, room * sizeof *r);
        if (r == NULL)
            return -1;
        sampler.rooted = r;
        sampler.addrs = malloc(((size_t)cfg->max_depth + 2) * sizeof *sampler.addrs);
        if (sampler.addrs == NULL)
            return -1;
        sampler.tasks = ps_tasks_new(py);  /* NULL: a note said why */
    }
    if (cfg->native) {
        char why[256];
        sampler.entry = calloc((size_t)cfg->max_depth + 2, 1);
        sampler.pyframes = malloc(((size_t)cfg->max_depth + 2) * sizeof *sampler.pyframes);
        if (sampler.entry == NULL || sampler.pyframes == NULL)
            return -1;
        if (ps_native_platform_init(why, sizeof why) != 0) {
            ps_say("PYSAMPLE_NATIVE: %s; sampling Python frames only", why);
            sampler.cfg.native = 0;
        }
    }
    sampler.setup_done = 1;
    return 0;
}

static struct tid_info *tid_slot(long tid)
{
    size_t i = (size_t)tid & (PS_TIDCACHE - 1);
    for (size_t n = 0; n < 8; n++, i = (i + 1) & (PS_TIDCACHE - 1))
        if (sampler.tids[i].tid == tid || sampler.tids[i].tid == 0)
            break;
    struct tid_info *ti = &sampler.tids[i];
    if (ti->tid != tid) {
        /* New thread, or a slot reclaimed from a thread long gone. */
        memset(ti, 0, sizeof *ti);
        ti->tid = tid;
        ti->last_cpu = -1;
    }
    return ti;
}

/* Label id of thread tid, refreshing its name now and then (3.14+ and
 * programs that name threads change it at any time).  boot is the thread's
 * Thread._bootstrap_inner frame in this sample's walk, or 0. */
static uint32_t thread_label(struct ps_profile *p, struct tid_info *ti, uint64_t now,
                             uintptr_t boot)
{
    /* A thread first seen before it reached _bootstrap_inner is looked at
     * again as soon as it has, not a second later. */
    int boot_new = boot != 0 && !ti->had_boot;
    if (now >= ti->name_at || boot_new) {
        char name[sizeof ti->name];
        if (ti->tid == sampler.pid)
            strcpy(name, "MainThread");
        else if (ti->tid <= 0 || ps_thread_os_name(ti->tid, name, sizeof name) != 0)
            name[0] = '\0';
        /* No OS name of its own (3.9-3.13): the threading.Thread's name,
         * read from its object (threadnames.c).  The OS name wins. */
        if (name[0] == '\0' && ti->tid > 0 && boot != 0)
            ps_thread_py_name(&sampler.py, boot, name, sizeof name);
        /* A read of the name that failed (the thread was moving under us)
         * is tried again on the next sample rather than a second later,
         * so a short-lived thread does not spend its life unnamed; a few
         * misses in a row mean this object has no readable name. */
        if (boot != 0 && name[0] == '\0' && ti->name_misses < PS_NAME_RETRIES) {
            ti->name_misses++;
            ti->had_boot = 0;
        } else {
            ti->had_boot = boot != 0;
        }
        strcpy(ti->name, name);
        ti->name_at = now + PS_NAME_REFRESH_NS;
    }
    return ps_sym_label(&p->syms, ti->tid, ti->name[0] ? ti->name : NULL);
}

/*
 * The root frame "interp <id>" of stacks from an interpreter other than the
 * main one (docs/format.md), or PS_ID_NONE for the main interpreter (id 0)
 * and when the id cannot be read: a profile of a process with a single
 * interpreter looks as it always did.  Once per interpreter per tick.
 */
static uint32_t interp_frame(struct ps_profile *p, uintptr_t interp)
{
    int64_t id;
    if (sampler.py.L.is_id == PS_NOFIELD || sampler.py.L.is_id == 0 ||
        ps_read(&id, interp + sampler.py.L.is_id, sizeof id) != 0 || id <= 0)
        return PS_ID_NONE;
    char name[32];
    snprintf(name, sizeof name, "interp %lld", (long long)id);
    return ps_sym_marker(&p->syms, name);
}

/* Samples one thread state (snapshot ts) into p, which the caller holds,
 * for an interpreter whose root frame is interp_func (PS_ID_NONE: none). */
static void sample_thread(struct ps_profile *p, uintptr_t tsp, uint8_t *ts, uint64_t now,
                          uint32_t interp_func, uint64_t weight)
{
    const struct ps_layout *L = &sampler.py.L;
    long tid = -1;
    uintptr_t pth;

    if (L->ts_native_id != PS_NOFIELD) {
        unsigned long nid;
        memcpy(&nid, ts + L->ts_native_id, sizeof nid);
        tid = nid != 0 ? (long)nid : -1;
    }
    memcpy(&pth, ts + L->ts_thread_id, sizeof pth);
    if (tid < 0)
        tid = ps_thread_tid(pth);
    if (tid < 0 && pth == 0)
        return;  /* not yet bound to an OS thread */
    for (size_t i = 0; i < PS_FORKERS && sampler.forker_tids[i]; i++)
        if (tid == sampler.forker_tids[i])
            tid = sampler.pid;

    struct tid_info *ti = tid_slot(tid);
    if (sampler.cfg.mode == PS_MODE_CPU && !sampler.tick_all) {
        int64_t cpu = tid > 0 ? ps_thread_cpu_ns(tid) : -1;
        int64_t last = ti->last_cpu;
        ti->last_cpu = cpu;
        if (cpu < 0 || last < 0 || cpu <= last)
            return;  /* idle since the previous tick (or just seen) */
    }
    if (sampler.tasks_state == 1) {
        ps_tasks_tick(sampler.tasks, &p->cc, &p->syms, sampler.cfg.lines, sampler.tasks_interp,
                      now);
        sampler.tasks_state = 2;
    }

    int n = 0, truncated = 0;
    uintptr_t boot = 0;
    const int native = sampler.cfg.native;
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
                npcs = ps_unwind(&regs, sampler.pcs, most, &ntrunc);
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
        if (ps_thread_copy_begin(&sampler.py, tid, tsp, ts, sampler.cfg.max_depth) != 0) {
            if (cap >= 0)
                ps_native_release();
            break;
        }
        if (ps_thread_top_frame(&sampler.py, ts, &frame) != 0) {
            if (cap >= 0)
                ps_native_release();
            n = PS_WALK_UNREADABLE;
            continue;
        }
        if (native) {
            memset(sampler.entry, 0, (size_t)sampler.cfg.max_depth + 2);
            n = ps_walk_entries(&sampler.py, &p->cc, &p->syms, sampler.cfg.lines, frame,
                                sampler.scratch, sampler.addrs, sampler.entry,
                                sampler.cfg.max_depth, &truncated, &boot);
        } else {
            n = ps_walk_ex(&sampler.py, &p->cc, &p->syms, sampler.cfg.lines, frame,
                           sampler.scratch, sampler.addrs, sampler.cfg.max_depth, &truncated,
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
    if (n < 0) {
        atomic_fetch_add(&sampler.errors, 1);
        atomic_fetch_add(n == PS_WALK_UNREADABLE ? &sampler.errors_unreadable
                                                 : &sampler.errors_inconsistent, 1);
        return;
    }
    if (n == 0)
        return;  /* no Python code on this thread right now */

    /* Root first: the interpreter, then a marker for a cut stack, so it is
     * never silent. */
    int d = 0;
    if (interp_func != PS_ID_NONE)
        sampler.rooted[d++] = ps_frame(interp_func, PS_LINE_NONE);
    if (truncated) {
        atomic_fetch_add(&sampler.truncated, 1);
        sampler.rooted[d++] = ps_frame(PS_SYM_TRUNCATED, PS_LINE_NONE);
    }
    int d_root = d;
    int tasks_here = sampler.tasks != NULL && ps_tasks_on_thread(sampler.tasks, pth);
    int room = sampler.cfg.max_depth + 2 + PS_TASKS_CHAIN * (PS_TASKS_CORO_DEPTH + 1);
    int spliced = -1;
    if (tasks_here)
        /* The running task's markers between the loop's frames and its
         * coroutine's (tasks.h). */
        spliced = ps_tasks_splice_running(sampler.tasks, &p->syms, pth, sampler.scratch,
                                          sampler.addrs, n, sampler.rooted, d, room);
    if (spliced >= 0) {
        d = spliced;
    } else if (native) {
        /* The native frames, with the Python ones in place of the
         * evaluation loop's (native.c). */
        for (int i = 0; i < n; i++) {
            sampler.pyframes[i].frame = sampler.scratch[i];
            sampler.pyframes[i].entry = sampler.entry[i];
        }
        d += ps_native_merge(&p->syms, (enum ps_native_mode)native, sampler.pyframes, n,
                             sampler.pcs, native_ok ? npcs : 0, ntrunc,
                             cap >= 0 && !native_ok ? "[native: unavailable]" : NULL,
                             sampler.rooted + d, sampler.cfg.max_depth + PS_NATIVE_MAX + 6 - d);
    } else {
        for (int i = n - 1; i >= 0; i--)
            sampler.rooted[d++] = sampler.scratch[i];
    }
    uint32_t label = thread_label(p, ti, now, boot);
    if (label == PS_ID_NONE ||
        ps_stacktab_add(&p->tab, label, sampler.rooted, (uint32_t)d, weight) != 0) {
        atomic_fetch_add(&sampler.errors, 1);
        return;
    }
    atomic_fetch_add(&sampler.samples, weight);
    /* Wall mode: every other task of this thread's loops counts where it
     * waits, as if it were a thread of its own. */
    if (tasks_here && sampler.cfg.mode == PS_MODE_WALL) {
        int k = ps_tasks_emit_waiting(sampler.tasks, &p->syms, &p->tab, pth, label,
                                      sampler.rooted, truncated ? d_root - 1 : d_root, room,
                                      weight);
        atomic_fetch_add(&sampler.samples, (uint64_t)k * weight);
    }
}

/*
 * PYSAMPLE_MAX_THREADS_PER_TICK=k with more than k threads: each tick
 * walks k of them, a window that rotates by k every tick, so every thread
 * is walked once every ceil(T/k) ticks, in turn, whatever its place in the
 * interpreter's list.  Each walked stack then stands for the T/k ticks of
 * that thread that were not walked: it is counted T/k times, rounded to a
 * whole count at random (floor(T/k), plus one with probability frac(T/k)),
 * so that the expected count of every stack is what sampling every thread
 * every tick would give: the profile is unbiased, its totals right on
 * average, and only its variance grows.  T is the number of thread states
 * of the previous tick (the list is walked once; the tick after the count
 * changed is weighted by the old one).  Returns the weight of the thread
 * at position idx of this tick, or 0 to skip it.
 */
static uint64_t pick_thread(unsigned idx)
{
    unsigned k = (unsigned)sampler.cfg.max_threads_per_tick, t = sampler.threads_seen;
    if (k == 0 || t <= k || sampler.tick_all)
        return 1;
    if ((idx % t + t - sampler.rotate % t) % t >= k)
        return 0;
    uint64_t whole = t / k, rest = t % k;
    uint64_t x = sampler.rng ? sampler.rng : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    sampler.rng = x;
    return whole + ((x % k) < rest ? 1 : 0);
}

void ps_sampler_tick(void)
{
    uint8_t ts[PS_TS_MAX];
    uint64_t now = ps_now_ns();

    ps_mem_tick();
    if (ps_python_finalizing(&sampler.py)) {
        atomic_store(&sampler.finished, 1);
        return;
    }
    /* Loaded objects for native stacks: here, before the profile's lock
     * and before any thread is held (dl_iterate_phdr takes the loader's
     * lock, which a held thread could own). */
    if (sampler.cfg.native && ps_objs_refresh(sampler.py.runtime))
        ps_native_objects_changed();
    struct ps_tstate_iter it;
    if (ps_tstates_begin(&it, &sampler.py) != 0)
        return;

    struct ps_profile *p = ps_profile_lock();
    int batch = ps_mem_batch_begin();
    uintptr_t tsp, interp = 0;
    uint32_t interp_func = PS_ID_NONE;
    unsigned idx = 0;
    sampler.tasks_state = 0;
    if (sampler.tasks != NULL)
        ps_tasks_clear(sampler.tasks);
    while ((tsp = ps_tstates_next(&it, ts)) != 0) {
        if (it.interp != interp) {
            interp = it.interp;
            interp_func = interp_frame(p, interp);
            /* asyncio tasks: those of the main interpreter (id 0), read
             * when its first thread is sampled (sample_thread) */
            int64_t id = -1;
            if (sampler.tasks_state == 1)
                sampler.tasks_state = 0;
            if (sampler.tasks != NULL && sampler.tasks_state == 0 &&
                sampler.py.L.is_id != PS_NOFIELD && sampler.py.L.is_id != 0 &&
                ps_read(&id, interp + sampler.py.L.is_id, sizeof id) == 0 && id == 0) {
                sampler.tasks_interp = interp;
                sampler.tasks_state = 1;
            }
        }
        uint64_t weight = pick_thread(idx++);
        if (weight != 0)
            sample_thread(p, tsp, ts, now, interp_func, weight);
    }
    if (sampler.cfg.max_threads_per_tick > 0 && !sampler.tick_all) {
        sampler.rotate = idx ? (sampler.rotate + (unsigned)sampler.cfg.max_threads_per_tick) % idx : 0;
        sampler.threads_seen = idx;
    }
    ps_mem_batch_end(batch);
    ps_profile_unlock();
    if (it.torn) {
        atomic_fetch_add(&sampler.errors, it.torn);
        atomic_fetch_add(&sampler.errors_inconsistent, it.torn);
    }
    atomic_fetch_add(&sampler.ticks, 1);
}

void ps_sampler_tick_all(void)
{
    sampler.tick_all = 1;
    ps_sampler_tick();
    sampler.tick_all = 0;
}

static int armed(void)
{
    return sampler.control && ps_control_enabled();
}

/* Sleeps until deadline (monotonic ns; UINT64_MAX: none) or until asked
 * to stop or to write, or (armed) until sampling is switched on or off.
 * Armed, the wait is control.c's poll of the control socket, which serves
 * it meanwhile. */
static void wait_until(uint64_t deadline)
{
    if (armed()) {
        int was = atomic_load(&sampler.active);
        while (!atomic_load(&sampler.stop) && !atomic_load(&sampler.write_request) &&
               atomic_load(&sampler.active) == was && ps_now_ns() < deadline && armed())
            ps_control_wait(deadline);
        return;
    }
    pthread_mutex_lock(&sampler.wake_lock);
    while (!atomic_load(&sampler.stop) && !atomic_load(&sampler.write_request)) {
        if (ps_cond_wait_until(&sampler.wake, &sampler.wake_lock, deadline) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&sampler.wake_lock);
}

static unsigned late_bucket(uint64_t v)
{
    if (v < 16)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);   /* >= 4 */
    unsigned b = 16 + (e - 4) * 16 + (unsigned)((v >> (e - 4)) & 15);
    return b < PS_LATE_BUCKETS ? b : PS_LATE_BUCKETS - 1;
}

/* Smallest value of bucket b (the percentiles are reported as such). */
static uint64_t late_value(unsigned b)
{
    if (b < 16)
        return b;
    unsigned e = (b - 16) / 16 + 4;
    return (16ull + (b - 16) % 16) << (e - 4);
}

static uint64_t late_percentile(const uint64_t *hist, double q)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < PS_LATE_BUCKETS; b++)
        total += hist[b];
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total), seen = 0;
    for (unsigned b = 0; b < PS_LATE_BUCKETS; b++) {
        seen += hist[b];
        if (seen > want)
            return late_value(b);
    }
    return late_value(PS_LATE_BUCKETS - 1);
}

static void write_stats(void)
{
    char path[1100], buf[4096];
    const char *p = strstr(sampler.cfg.stats_path, "%p");
    if (p != NULL)
        snprintf(path, sizeof path, "%.*s%ld%s", (int)(p - sampler.cfg.stats_path),
                 sampler.cfg.stats_path,
                 (long)getpid(), p + 2);
    else
        snprintf(path, sizeof path, "%s", sampler.cfg.stats_path);
    uint64_t max = 0;
    for (unsigned b = 0; b < PS_LATE_BUCKETS; b++)
        if (sampler.late_hist[b])
            max = late_value(b);
    struct ps_profile_counts pc;
    ps_profile_counts(&pc);
    int n = snprintf(buf, sizeof buf,
                     "rate_hz %d\nticks %llu\nsamples %llu\nerrors %llu\nerrors_unreadable %llu\n"
                     "errors_inconsistent %llu\nskipped_ticks %llu\n"
                     "distinct_stacks %llu\nsampler_cpu_ns %lld\nactive_ns %llu\n"
                     "late_p50_ns %llu\nlate_p90_ns %llu\nlate_p99_ns %llu\nlate_max_ns %llu\n"
                     "tick_p50_ns %llu\ntick_p99_ns %llu\n"
                     "codecache_hits %llu\ncodecache_misses %llu\nread_mode %s\n",
                     atomic_load(&sampler.rate_hz), (unsigned long long)atomic_load(&sampler.ticks),
                     (unsigned long long)atomic_load(&sampler.samples),
                     (unsigned long long)atomic_load(&sampler.errors),
                     (unsigned long long)atomic_load(&sampler.errors_unreadable),
                     (unsigned long long)atomic_load(&sampler.errors_inconsistent),
                     (unsigned long long)atomic_load(&sampler.late_ticks),
                     (unsigned long long)pc.distinct_stacks,
                     (long long)atomic_load(&sampler.cpu_ns),
                     (unsigned long long)atomic_load(&sampler.active_ns),
                     (unsigned long long)late_percentile(sampler.late_hist, 0.50),
                     (unsigned long long)late_percentile(sampler.late_hist, 0.90),
                     (unsigned long long)late_percentile(sampler.late_hist, 0.99), (unsigned long long)max,
                     (unsigned long long)late_percentile(sampler.tick_hist, 0.50),
                     (unsigned long long)late_percentile(sampler.tick_hist, 0.99),
                     (unsigned long long)pc.codecache_hits, (unsigned long long)pc.codecache_misses,
                     ps_mem_mode_name());
    if (n <= 0 || (size_t)n >= sizeof buf)
        return;
    if (sampler.cfg.native) {
        struct ps_native_counts nc;
        ps_native_counts(&nc);
        int m = snprintf(buf + n, sizeof buf - (size_t)n,
                         "native_blocked %llu\nnative_held %llu\nnative_failed %llu\n"
                         "native_lost %llu\nnative_gone %llu\nnative_restarted %llu\nnative_eintr_left %llu\n",
                         (unsigned long long)nc.blocked, (unsigned long long)nc.held,
                         (unsigned long long)nc.failed, (unsigned long long)nc.lost, (unsigned long long)nc.gone,
                         (unsigned long long)nc.restarted, (unsigned long long)nc.eintr_left);
        if (m > 0 && (size_t)m < sizeof buf - (size_t)n)
            n += m;
        n += ps_native_stats(buf + n, sizeof buf - (size_t)n);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
    close(fd);
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
        atomic_fetch_add(&sampler.budget_adjustments, b->adjustments - before);
    atomic_store(&sampler.rate_hz, r);
}

/*
 * Ticks at the current rate until sampling is switched off, the runtime
 * finalizes or the thread is asked to stop.  The rate is read each tick,
 * so a change (a control session, the CPU budget) takes effect at once.
 */
static void sample_for_a_while(void)
{
    uint64_t began = ps_now_ns();
    atomic_store(&sampler.run_began, began);
    double share = sampler.cfg.cpu_budget;
    if (share > 0) {
        int want = atomic_load(&sampler.requested_hz);
        ps_budget_start(&sampler.budget, share, want, began, ps_self_cpu_ns());
        atomic_store(&sampler.rate_hz, want);
    }
    int rate = atomic_load(&sampler.rate_hz);
    uint64_t interval = 1000000000ull / (uint64_t)rate;
    uint64_t next = began + interval;
    uint64_t cpu_at = began;

    while (!atomic_load(&sampler.stop) && !atomic_load(&sampler.finished) &&
           atomic_load(&sampler.active)) {
        wait_until(next);
        if (atomic_load(&sampler.stop) || !atomic_load(&sampler.active))
            break;
        uint64_t woke = 0;
        if (sampler.cfg.stats_path[0]) {
            woke = ps_now_ns();
            sampler.late_hist[late_bucket(woke > next ? woke - next : 0)]++;
        }
        ps_sampler_tick();
        uint64_t now = ps_now_ns();
        if (woke)
            sampler.tick_hist[late_bucket(now - woke)]++;
        if (share > 0)
            apply_budget(now);
        if (atomic_load(&sampler.rate_hz) != rate) {
            rate = atomic_load(&sampler.rate_hz);
            interval = 1000000000ull / (uint64_t)rate;
            next = now;
        }
        next += interval;
        if (now > next) {
            /* We fell behind (descheduled, or a tick took too long): skip
             * the missed ticks rather than burst to catch up. */
            uint64_t missed = (now - next) / interval + 1;
            atomic_fetch_add(&sampler.late_ticks, missed);
            next += missed * interval;
        }
        serve_writes();
        if (sampler.next_flush && now >= sampler.next_flush) {
            if (ps_writer_serve())
                atomic_store(&sampler.stop, 1);
            sampler.next_flush = now + (uint64_t)sampler.cfg.flush_interval_s * 1000000000ull;
        }
        /* The thread's CPU clock is a system call (0.4-0.9 us here, as
         * much as walking a 10-frame stack): read it 10 times a second,
         * not every tick.  It is read once more on the way out. */
        if (now >= cpu_at) {
            atomic_store(&sampler.cpu_ns, ps_self_cpu_ns());
            cpu_at = now + 100000000ull;
        }
    }
    atomic_store(&sampler.cpu_ns, ps_self_cpu_ns());
    atomic_fetch_add(&sampler.active_ns, ps_now_ns() - began);
    atomic_store(&sampler.run_began, 0);
}

static void *sampler_main(void *arg)
{
    (void)arg;
    sigset_t all;
    /* Signals sent to the process are the program's business: never run
     * its handlers on this thread.  Faults must stay deliverable: a
     * blocked SIGSEGV raised by a guarded read would kill the process
     * instead of reaching our handler. */
    static const int faults[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE };
    sigfillset(&all);
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    ps_thread_precise_timers();

    /* Wait for the interpreter to exist before the first tick: every
     * millisecond at first (a Python executable initialises within tens of
     * them), then less and less often, up to 10 times a second, for a
     * libpython that was loaded long before its Py_Initialize (uWSGI) or
     * is never initialised at all. */
    uint64_t nap = 1000000, waiting_since = ps_now_ns();
    while (!atomic_load(&sampler.stop) && !ps_python_ready(&sampler.py) &&
           !ps_python_finalizing(&sampler.py)) {
        wait_until(ps_now_ns() + nap);
        if (ps_now_ns() - waiting_since > 200000000ull && nap < 100000000ull)
            nap *= 2;
        serve_writes();
    }
    ps_mem_enable_direct();
    atomic_store(&sampler.ready, 1);

    /* Only the first start sets the schedule: the thread is stopped and
     * started again around every os.fork() on 3.12+ (lifecycle.c), and a
     * server forking more often than the interval must still flush. */
    if (sampler.cfg.flush_interval_s > 0 && sampler.cfg.output[0] && sampler.next_flush == 0)
        sampler.next_flush = ps_now_ns() + (uint64_t)sampler.cfg.flush_interval_s * 1000000000ull;

    while (!atomic_load(&sampler.stop)) {
        if (!atomic_load(&sampler.active) || atomic_load(&sampler.finished)) {
            /* Not sampling: armed and idle, or the runtime finalized.  The
             * thread stays, to write when asked: a fatal signal that lands
             * during Python's exit must still find someone to write the
             * profile (lifecycle.c never writes from a signal handler),
             * and an armed process must still answer.  Armed without an
             * output file, nothing can ask for a write without waking us:
             * no timeout at all, so an idle armed process never wakes. */
            int forever = armed() && sampler.cfg.output[0] == '\0';
            wait_until(forever ? UINT64_MAX : ps_now_ns() + 100000000ull);
            serve_writes();
            continue;
        }
        sample_for_a_while();
    }
    if (sampler.cfg.stats_path[0])
        write_stats();
    return NULL;
}

/* Wakes the thread from its wait. */
static void wake_thread(void)
{
    if (armed())
        ps_control_wake();
    pthread_mutex_lock(&sampler.wake_lock);
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

void ps_sampler_request_write(int wake)
{
    atomic_store(&sampler.write_request, 1);
    if (wake)
        wake_thread();
    else if (armed())
        ps_control_wake();  /* one write(): async-signal-safe */
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
    return sampler.cfg.stats_path[0] != '\0';
}

int ps_sampler_rate(void)
{
    return atomic_load(&sampler.rate_hz);
}

void ps_sampler_stats(struct ps_stats *st)
{
    memset(st, 0, sizeof *st);
    st->ticks = atomic_load(&sampler.ticks);
    st->samples = atomic_load(&sampler.samples);
    st->errors = atomic_load(&sampler.errors);
    st->errors_unreadable = atomic_load(&sampler.errors_unreadable);
    st->errors_inconsistent = atomic_load(&sampler.errors_inconsistent);
    st->late_ticks = atomic_load(&sampler.late_ticks);
    st->sampler_cpu_ns = atomic_load(&sampler.cpu_ns);
    st->truncated = atomic_load(&sampler.truncated);
    st->rate_now_hz = atomic_load(&sampler.rate_hz);
    st->requested_hz = atomic_load(&sampler.requested_hz);
    uint64_t began = atomic_load(&sampler.run_began), now = ps_now_ns();
    st->sampled_ns = atomic_load(&sampler.active_ns) + (began && now > began ? now - began : 0);
    st->budget_pct = sampler.cfg.cpu_budget * 100.0;
    st->budget_adjustments = atomic_load(&sampler.budget_adjustments);
    struct ps_profile_counts pc;
    ps_profile_counts(&pc);
    st->distinct_stacks = pc.distinct_stacks;
}

void ps_sampler_prepare_fork(void)
{
    sampler.forking_tid = ps_gettid();
}

void ps_sampler_child_after_fork(int stop_sampling)
{
    /* Only the forking thread exists here; the sampler thread does not.
     * The profile is already empty (ps_profile_child_after_fork). */
    pthread_mutex_init(&sampler.join_lock, NULL);
    wake_init();
    memset(sampler.late_hist, 0, sizeof sampler.late_hist);
    memset(sampler.tick_hist, 0, sizeof sampler.tick_hist);
    atomic_store(&sampler.active_ns, 0);
    atomic_store(&sampler.run_began, 0);
    int was_running = atomic_load(&sampler.running) && !atomic_load(&sampler.finished);
    atomic_store(&sampler.running, 0);
    atomic_store(&sampler.write_request, 0);
    sampler.next_flush = 0;
    sampler.pid = getpid();
    /* Newest first; the oldest ancestor falls off a full list. */
    memmove(sampler.forker_tids + 1, sampler.forker_tids,
            (PS_FORKERS - 1) * sizeof sampler.forker_tids[0]);
    sampler.forker_tids[0] = sampler.forking_tid != sampler.pid ? sampler.forking_tid : 0;
    memset(sampler.tids, 0, sizeof sampler.tids);
    if (sampler.cfg.native)
        ps_native_after_fork();
    atomic_store(&sampler.ticks, 0);
    atomic_store(&sampler.samples, 0);
    atomic_store(&sampler.errors, 0);
    atomic_store(&sampler.errors_unreadable, 0);
    atomic_store(&sampler.errors_inconsistent, 0);
    atomic_store(&sampler.late_ticks, 0);
    atomic_store(&sampler.cpu_ns, 0);
    atomic_store(&sampler.truncated, 0);
    atomic_store(&sampler.budget_adjustments, 0);
    if (stop_sampling)
        atomic_store(&sampler.active, 0);
    if (sampler.setup_done && was_running)
        ps_sampler_start_thread();
}
