/*
 * pysample.c - the library's entry points: the constructor that switches
 * profiling on from the environment, the public API of include/pysample.h,
 * and the moments the profile is written (exit, _exit, exec, fork, fatal
 * signals, periodic flush).  docs/processes.md tells users what happens
 * in each case.
 *
 * Inert unless wanted.  The constructor runs in every process that has us
 * in LD_PRELOAD -- shells, compilers, git.  There its whole cost is one
 * dlsym("_PyRuntime"); without PYSAMPLE_OUTPUT it also stops at once.  No
 * thread, no file, no handler, no output in either case.
 *
 * The environment is read from environ as the process received it, not
 * through getenv(): some hosts (bash among them) replace getenv with their
 * own, and the constructor runs before they have set up what it reads.
 *
 * Who writes the final profile.  The sampler thread whenever it is alive:
 * _exit() may be called from a signal handler, and a fatal signal
 * interrupts a thread that may hold any lock (malloc's included), so those
 * threads only ask (ps_sampler_request_flush) and wait, bounded.  Only when
 * the sampler has already stopped (the runtime finished, so the program is
 * in ordinary exit code: atexit, Python's SIGINT exit) does the exiting
 * thread write itself.  final_state makes it happen once per process;
 * write_lock keeps a periodic flush, an exec-time write and the final one
 * from interleaving.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pysample.h"

#include "config.h"
#include "dlwatch.h"
#include "frames.h"
#include "lifecycle.h"
#include "memread.h"
#include "output.h"
#include "platform.h"
#include "python.h"
#include "sampler.h"

extern char **environ;

enum { FINAL_NONE = 0, FINAL_WRITING, FINAL_DONE };

/* How long a thread that asked for the final profile waits for it: enough
 * for a very large profile on a slow disk, short next to the 30 s a
 * Kubernetes pod gets between SIGTERM and SIGKILL. */
#define PS_FINAL_WAIT_MS 5000

static struct {
    pthread_mutex_t lock;       /* serialises start/stop/write from the API */
    pthread_mutex_t write_lock; /* one write of PYSAMPLE_OUTPUT at a time */
    int setup;                  /* python detected and tables ready */
    int setup_failed;           /* said why once; do not try again */
    int atfork;                 /* fork handlers registered */
    int auto_output;            /* PYSAMPLE_OUTPUT given: write at exit */
    pid_t pid;                  /* the process this state belongs to */
    _Atomic int final_state;    /* FINAL_*: the final profile of this process */
    _Atomic int final_request;  /* the sampler thread is to write it */
    _Atomic unsigned write_asked; /* writes asked for "now" (fatal signals) */
    _Atomic unsigned write_done;  /* the last of those a finished write covered */
    _Atomic int just_written;   /* kill()/raise() to ourselves wrote already */
    int paused;                 /* sampler stopped for a moment (interpose.c) */
    int forked;                 /* this process is a fork() child ... */
    uint64_t fork_position;     /* ... and this was python_position() then */
    struct ps_python py;
    struct ps_config cfg;
    char python_path[512];      /* the libpython loaded late, for messages */
} G = { .lock = PTHREAD_MUTEX_INITIALIZER, .write_lock = PTHREAD_MUTEX_INITIALIZER };

/* One line on stderr, prefixed so the user knows who speaks. */
static void vsay(const char *fmt, va_list ap)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "pysample: ");
    vsnprintf(msg + n, sizeof msg - (size_t)n - 1, fmt, ap);
    size_t len = strlen(msg);
    msg[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, msg, len);
    (void)w;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

void ps_lifecycle_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

static const char *env_get(const char *name, void *ctx)
{
    (void)ctx;
    size_t n = strlen(name);
    for (char **e = environ; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static void env_warn(void *ctx, const char *msg)
{
    (void)ctx;
    say("%s", msg);
}

static void output_note(const char *msg)
{
    say("%s", msg);
}

/*
 * Keeps our fatal-signal handler off this thread while it is inside the
 * library's locked sections: the handler waits for the sampler thread,
 * which may need the very lock this thread holds (seen: SIGTERM from
 * Pool.terminate() landing in a worker's own os._exit, inside finish()).
 * The signal stays pending and is delivered when the section ends.
 */
static void fatal_block(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

static void fatal_restore(const sigset_t *old)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void flush_now(void);
static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

/* Detects the interpreter (through lookup when given: the symbols of a
 * libpython loaded late, lib/linux/dlwatch.c) and prepares the sampler.
 * Caller holds G.lock. */
static int setup_locked(ps_sym_lookup lookup, void *ctx)
{
    char why[512];
    if (G.setup)
        return 0;
    if (G.setup_failed)
        return -ENOTSUP;
    if (ps_mem_init() != 0) {
        say("no safe way to read memory in this process; profiling is off");
        G.setup_failed = 1;
        return -ENOSYS;
    }
    enum ps_detect det = lookup != NULL ? ps_python_detect_with(&G.py, lookup, ctx, why, sizeof why)
                                        : ps_python_detect(&G.py, why, sizeof why);
    switch (det) {
    case PS_DETECT_NOT_PYTHON:
        G.setup_failed = 1;
        return -ENOENT;
    case PS_DETECT_UNSUPPORTED:
        if (G.python_path[0])
            say("%s (%s); profiling is off", why, G.python_path);
        else
            say("%s; profiling is off", why);
        G.setup_failed = 1;
        return -ENOTSUP;
    case PS_DETECT_OK:
        break;
    }
    ps_threads_track();
    if (ps_sampler_setup(&G.py, &G.cfg, flush_now) != 0) {
        say("out of memory; profiling is off");
        G.setup_failed = 1;
        return -ENOMEM;
    }
    G.pid = getpid();
    if (!G.atfork) {
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        G.atfork = 1;
    }
    G.setup = 1;
    return 0;
}

/* Writes this process's profile to PYSAMPLE_OUTPUT; says so if it fails. */
static void write_profile(int final)
{
    char *data;
    size_t len;
    char path[4096];
    pthread_mutex_lock(&G.write_lock);
    /* Whoever asked before the render is served by this write. */
    unsigned covers = atomic_load(&G.write_asked);
    if (ps_sampler_render(&data, &len) != 0) {
        atomic_store(&G.write_done, covers);
        pthread_mutex_unlock(&G.write_lock);
        say("out of memory while writing the profile");
        return;
    }
    int rc = ps_output_write(NULL, data, len, path, sizeof path);
    atomic_store(&G.write_done, covers);
    pthread_mutex_unlock(&G.write_lock);
    free(data);
    if (rc != 0 && final)
        say("cannot write the profile for %s: %s", G.cfg.output, strerror(-rc));
}

/* The final write, once per process, by whoever gets here first. */
static int final_write(void)
{
    int expect = FINAL_NONE;
    if (!atomic_compare_exchange_strong(&G.final_state, &expect, FINAL_WRITING))
        return 0;
    write_profile(1);
    atomic_store(&G.final_state, FINAL_DONE);
    return 1;
}

/*
 * Waits (naps: nanosleep and atomics only, so a signal handler may wait
 * too) until the final profile is written, or, if asked is not 0, until a
 * write that covers request number asked is.  Returns 1 once it is, 0
 * after ms, or at once if nobody is going to write (no final write under
 * way and no sampler thread to do it) unless any_writer is 0.
 */
static int wait_written(int ms, int any_writer, unsigned asked)
{
    /* Naps from 20 us up to 1 ms: a small profile is written in well under
     * a millisecond, and every exiting process waits here. */
    long nap_ns = 20000, waited_ns = 0;
    for (;;) {
        int st = atomic_load(&G.final_state);
        if (st == FINAL_DONE || (asked && (int)(atomic_load(&G.write_done) - asked) >= 0))
            return 1;
        if (any_writer && st == FINAL_NONE && !ps_sampler_alive())
            return 0;
        if (waited_ns > (long)ms * 1000000)
            return 0;
        struct timespec nap = { 0, nap_ns };
        nanosleep(&nap, NULL);
        waited_ns += nap_ns;
        if (nap_ns < 1000000)
            nap_ns *= 2;
    }
}

static int wait_final(int ms, int any_writer)
{
    return wait_written(ms, any_writer, 0);
}

/* Called on the sampler thread: a periodic flush, or the final write. */
static void flush_now(void)
{
    if (atomic_load(&G.final_request)) {
        final_write();
        ps_sampler_stop();   /* on this thread: only asks the loop to end */
        return;
    }
    if (atomic_load(&G.final_state) == FINAL_NONE)
        write_profile(0);
}

/*
 * A value that changes whenever a thread of this process executes Python
 * code: every thread state's innermost frame and its position in it.  A
 * fork() child that execs without running any Python (subprocess forks and
 * execs in C) still shows its parent's frozen stack, which the sampler
 * dutifully samples; this tells such a child from one that ran code of its
 * own.  Reads may fail while the sampler reads too (pipe and file paths):
 * the value then differs, and the child writes, which is harmless.
 */
static uint64_t python_position(void)
{
    const struct ps_layout *L = &G.py.L;
    uint8_t ts[1024];
    uint64_t h = 1469598103934665603ull;
    uintptr_t interp;
    if (L->ts_read > sizeof ts || ps_read_ptr(G.py.runtime + L->rt_interp_head, &interp) != 0)
        return 0;
    for (int ni = 0; interp != 0 && ni < 256; ni++) {
        uintptr_t tsp, next;
        if (ps_read_ptr(interp + L->is_threads_head, &tsp) != 0 ||
            ps_read_ptr(interp + L->is_next, &next) != 0)
            break;
        for (int nt = 0; tsp != 0 && nt < 4096; nt++) {
            uintptr_t frame = 0, pos = 0;
            if (ps_read(ts, tsp, L->ts_read) != 0)
                break;
            if (ps_thread_top_frame(&G.py, ts, &frame) == 0 && frame != 0)
                ps_read(&pos, frame + L->fr_pos, sizeof pos);
            h = (h ^ tsp) * 1099511628211ull;
            h = (h ^ frame) * 1099511628211ull;
            h = (h ^ pos) * 1099511628211ull;
            memcpy(&tsp, ts + L->ts_next, sizeof tsp);
        }
        interp = next;
    }
    return h;
}

int ps_lifecycle_owner(void)
{
    return G.pid != 0 && getpid() == G.pid;
}

/* The end of this process: the final profile, written once. */
static void write_final(void)
{
    if (!G.auto_output || !ps_lifecycle_owner())
        return;
    if (atomic_load(&G.final_state) == FINAL_DONE)
        return;
    sigset_t old;
    fatal_block(&old);
    if (ps_sampler_alive()) {
        atomic_store(&G.final_request, 1);
        ps_sampler_request_flush(1);
        if (wait_final(PS_FINAL_WAIT_MS, 1)) {
            fatal_restore(&old);
            return;
        }
    }
    ps_sampler_stop();
    if (!final_write())
        wait_final(PS_FINAL_WAIT_MS, 0);
    fatal_restore(&old);
}

static void finish(void)
{
    write_final();
    /* The sampler stays up for a signal arriving during exit, but with
     * PYSAMPLE_STATS it is joined so that it writes its final statistics
     * (the benchmarks read them after every run). */
    if (G.auto_output && ps_lifecycle_owner() && ps_sampler_stats_wanted())
        ps_sampler_stop();
}

void ps_lifecycle_process_exit(void)
{
    finish();
}

void ps_lifecycle_before_exec(void)
{
    if (!G.auto_output || !ps_lifecycle_owner() ||
        atomic_load(&G.final_state) != FINAL_NONE)
        return;
    /* An image that never got sampled, or a forked child that ran no
     * Python of its own (subprocess forks and execs in C), leaves nothing:
     * the new image writes its own profile. */
    sigset_t old;
    fatal_block(&old);
    struct ps_stats st;
    ps_sampler_stats(&st);
    if (st.samples > 0 && (!G.forked || python_position() != G.fork_position))
        write_profile(0);
    fatal_restore(&old);
}

/*
 * Gets the profile as it is now onto disk, without ending profiling: after
 * a fatal signal the process normally dies at once, but one the kernel then
 * drops (a default-action signal to a container's PID 1) leaves it running
 * and sampling as before, to be written again later.  The sampler thread
 * writes; in_handler: the caller interrupted arbitrary code, so it neither
 * wakes the sampler (a lock) nor writes itself.
 */
static void write_now(int in_handler)
{
    int st = atomic_load(&G.final_state);
    if (st == FINAL_DONE)
        return;
    if (st == FINAL_WRITING) {
        wait_final(PS_FINAL_WAIT_MS, 0);
        return;
    }
    if (!ps_sampler_alive()) {
        /* Nobody to ask: ordinary code writes itself; a handler cannot
         * (the locks it interrupted), and the last flush stays. */
        if (!in_handler)
            write_profile(1);
        return;
    }
    unsigned mine = atomic_fetch_add(&G.write_asked, 1) + 1;
    ps_sampler_request_flush(!in_handler);
    wait_written(PS_FINAL_WAIT_MS, 1, mine);
}

void ps_lifecycle_fatal_signal(int sig)
{
    (void)sig;
    if (!G.auto_output || !ps_lifecycle_owner())
        return;
    /* Sent by kill()/raise() from this process, which wrote just before. */
    if (atomic_exchange(&G.just_written, 0))
        return;
    write_now(1);
}

void ps_lifecycle_self_signal(void)
{
    /* Ordinary code (not a handler): write here, woken at once, rather than
     * in our handler, which could only ask the sampler and wait for its
     * next tick.  Python exits this way after an unhandled
     * KeyboardInterrupt. */
    if (!G.auto_output || !ps_lifecycle_owner())
        return;
    sigset_t old;
    fatal_block(&old);
    write_now(0);
    atomic_store(&G.just_written, 1);
    fatal_restore(&old);
}

int ps_lifecycle_pause_sampler(void)
{
    if (!ps_lifecycle_owner())
        return 0;
    sigset_t old;
    fatal_block(&old);
    pthread_mutex_lock(&G.lock);
    int paused = 0;
    if (!G.paused && ps_sampler_running() && atomic_load(&G.final_state) == FINAL_NONE) {
        ps_sampler_stop();
        G.paused = paused = 1;
    }
    pthread_mutex_unlock(&G.lock);
    fatal_restore(&old);
    return paused;
}

void ps_lifecycle_resume_sampler(void)
{
    sigset_t old;
    fatal_block(&old);
    pthread_mutex_lock(&G.lock);
    if (G.paused) {
        G.paused = 0;
        if (atomic_load(&G.final_state) == FINAL_NONE)
            ps_sampler_start(0);
    }
    pthread_mutex_unlock(&G.lock);
    fatal_restore(&old);
}

static void at_exit(void)
{
    finish();
}

static void fork_prepare(void)
{
#ifdef __linux__
    ps_fork_window_before_fork();
#endif
    ps_sampler_prepare_fork();
}

static void fork_parent(void)
{
    ps_sampler_parent_after_fork();
#ifdef __linux__
    /* CPython 3.12+ counts threads next (see linux/interpose.c). */
    if (G.py.L.hexversion >= 0x030C0000 && ps_sampler_running())
        ps_fork_window_open();
#endif
}

static void fork_child(void)
{
    /* A new process: its own profile (empty), its own file, its own final
     * write, its own sampler thread. */
    G.pid = getpid();
    ps_mem_after_fork();
    ps_output_after_fork();
    atomic_store(&G.final_state, FINAL_NONE);
    atomic_store(&G.final_request, 0);
    atomic_store(&G.just_written, 0);
    G.paused = 0;
    pthread_mutex_init(&G.lock, NULL);
    pthread_mutex_init(&G.write_lock, NULL);
    if (G.setup) {
        G.forked = 1;
        G.fork_position = python_position();
    }
    ps_sampler_child_after_fork();
}

/*
 * Profiling to PYSAMPLE_OUTPUT, from now to the end of the process: the
 * constructor's work in a Python executable, or the same when a libpython
 * is loaded later (lookup: its symbols).
 */
static void start_auto(ps_sym_lookup lookup, void *ctx)
{
    ps_interpose_init();
    ps_config_parse(&G.cfg, env_get, NULL, env_warn);
    if (G.cfg.output[0] == '\0')
        return;

    char why[512];
    if (ps_output_init(G.cfg.output, G.cfg.file_mode, output_note, why, sizeof why) != 0) {
        say("%s; profiling is off", why);
        return;
    }
    pthread_mutex_lock(&G.lock);
    int rc = G.auto_output ? -EALREADY : setup_locked(lookup, ctx);
    if (rc == 0) {
        G.auto_output = 1;
        atexit(at_exit);
#ifdef __linux__
        ps_signals_take_over();
#endif
        rc = ps_sampler_start(0);
        if (rc != 0)
            say("cannot start the sampler thread: %s; profiling is off", strerror(-rc));
    }
    pthread_mutex_unlock(&G.lock);
}

__attribute__((constructor)) static void pysample_init(void)
{
    const char *out = env_get("PYSAMPLE_OUTPUT", NULL);
    if (out == NULL || *out == '\0')
        return;
    /* Not Python (yet): watch for a libpython being loaded (uWSGI,
     * embedders).  Nothing else happens unless one is. */
    if (!ps_python_present()) {
        ps_dlwatch_arm();
        return;
    }
    start_auto(NULL, NULL);
}

void ps_lifecycle_python_loaded(ps_sym_lookup lookup, void *ctx, const char *path)
{
    snprintf(G.python_path, sizeof G.python_path, "%s", path);
    start_auto(lookup, ctx);
}

const char *ps_lifecycle_python_path(void)
{
    return G.python_path[0] ? G.python_path : "the program";
}

/* ---- public API ---------------------------------------------------------- */

int pysample_start(int rate_hz)
{
    if (rate_hz < 0 || rate_hz > PS_MAX_RATE)
        return -EINVAL;
    sigset_t old;
    fatal_block(&old);
    pthread_mutex_lock(&G.lock);
    if (!G.setup && !G.setup_failed) {
        ps_interpose_init();
        if (G.cfg.rate_hz == 0)
            ps_config_parse(&G.cfg, env_get, NULL, env_warn);
    }
    int rc = setup_locked(NULL, NULL);
    if (rc == 0)
        rc = ps_sampler_start(rate_hz);
    pthread_mutex_unlock(&G.lock);
    fatal_restore(&old);
    return rc;
}

int pysample_stop(void)
{
    sigset_t old;
    fatal_block(&old);
    pthread_mutex_lock(&G.lock);
    if (G.setup)
        ps_sampler_stop();
    pthread_mutex_unlock(&G.lock);
    fatal_restore(&old);
    return 0;
}

int pysample_write(const char *path)
{
    if (path == NULL || *path == '\0')
        return -EINVAL;
    if (!G.setup)
        return -ENOENT;
    char *data;
    size_t len;
    sigset_t old;
    fatal_block(&old);
    int rc = ps_sampler_render(&data, &len) != 0 ? -ENOMEM : 0;
    if (rc == 0) {
        rc = ps_output_write(path, data, len, NULL, 0);
        free(data);
    }
    fatal_restore(&old);
    return rc;
}

int pysample_reset(void)
{
    if (G.setup) {
        sigset_t old;
        fatal_block(&old);
        ps_sampler_reset();
        fatal_restore(&old);
    }
    return 0;
}

int pysample_status(struct pysample_status *st, unsigned size)
{
    if (st == NULL || size != sizeof *st)
        return -EINVAL;
    memset(st, 0, sizeof *st);
    if (!G.setup)
        return 0;
    struct ps_stats s;
    sigset_t old;
    fatal_block(&old);
    ps_sampler_stats(&s);
    fatal_restore(&old);
    st->running = ps_sampler_running();
    st->python_hexversion = (int)G.py.L.hexversion;
    st->free_threaded = G.py.L.free_threaded;
    st->rate_hz = ps_sampler_rate();
    st->ticks = s.ticks;
    st->samples = s.samples;
    st->errors = s.errors;
    st->distinct_stacks = s.distinct_stacks;
    return 0;
}

int pysample_is_running(void)
{
    return G.setup && ps_sampler_running();
}

uint64_t pysample_samples(void)
{
    struct pysample_status st;
    pysample_status(&st, sizeof st);
    return st.samples;
}

int pysample_python_version(void)
{
    return G.setup ? (int)G.py.L.hexversion : 0;
}
