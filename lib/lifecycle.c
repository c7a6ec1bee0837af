/*
 * lifecycle.c - when profiling starts and when the profile is written
 * (lifecycle.h): the constructor, exit, _exit, exec, fork, fatal signals,
 * and the moment CPython 3.12+ counts threads after fork (forkpause.h).
 * docs/processes.md tells users what happens in each case.
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
 * Who writes.  The sampler thread whenever it is alive: _exit() may be
 * called from a signal handler, and a fatal signal interrupts a thread that
 * may hold any lock (malloc's included), so those threads only ask
 * (writer.h tickets, ps_sampler_request_write) and wait, bounded.  Only when
 * the sampler is not alive (the runtime finished, so the program is in
 * ordinary exit code: atexit, Python's SIGINT exit) does the thread that
 * wants the write do it itself.  request_write() below is the one path for
 * both "write now" and "write final".
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "control/control.h"
#include "forks.h"
#include "platform/dlwatch.h"
#include "lifecycle.h"
#include "settings.h"
#include "memory/memread.h"
#include "util/message.h"
#include "util/owner.h"
#include "profile/output.h"
#include "platform/platform.h"
#include "sampler/forkpause.h"
#include "sampler/sampler.h"
#include "sampler/state.h"
#include "python/threadstates.h"
#include "sampler/writer.h"

/* How long a thread that asked for a write waits for it: enough for a very
 * large profile on a slow disk, short next to the 30 s a Kubernetes pod
 * gets between SIGTERM and SIGKILL. */
#define PS_WRITE_WAIT_MS 5000

static struct {
    pthread_mutex_t lock;         /* serialises start, stop, pause, resume */
    _Atomic int state;            /* enum ps_life */
    int atfork, atexit;           /* handlers registered */
    _Atomic int self_signal_written; /* kill()/raise() to ourselves wrote already */
    int forked;                   /* this process is a fork() child ... */
    uint64_t fork_position;       /* ... and this was ps_python_position() then */
    char python_path[512];        /* the libpython loaded late, for messages */
} life = { .lock = PTHREAD_MUTEX_INITIALIZER };

static enum ps_life state(void)
{
    return (enum ps_life)atomic_load(&life.state);
}

/* 1 if this process writes PYSAMPLE_OUTPUT and the caller runs in it.
 * Atomics and getpid() only: signal handlers ask too. */
static int profiling_here(void)
{
    return state() == PS_LIFE_PROFILING && ps_owner_here();
}

/* ---- set-up ----------------------------------------------------------------- */

static void env_warn(void *ctx, const char *msg)
{
    (void)ctx;
    ps_say("%s", msg);
}

static void fork_parent(void);
static void fork_child(void);

/* Memory reads, the interpreter and the sampler's tables: 0, or -errno
 * with the reason said (nothing to say where there is no CPython). */
static int find_python(ps_sym_lookup lookup, void *ctx)
{
    char why[512];
    enum ps_detect det;
    /* Read here, kept by the sampler (its context's one copy): the
     * lifecycle asks ps_sampler_python() for it from then on. */
    struct ps_python py;
    if (ps_mem_init() != 0) {
        ps_say("no safe way to read memory in this process; profiling is off");
        return -ENOSYS;
    }
    det = lookup != NULL ? ps_python_detect_with(&py, lookup, ctx, why, sizeof why)
                         : ps_python_detect(&py, why, sizeof why);
    if (det != PS_DETECT_OK) {
        if (det == PS_DETECT_UNSUPPORTED && life.python_path[0])
            ps_say("%s (%s); profiling is off", why, life.python_path);
        else if (det == PS_DETECT_UNSUPPORTED)
            ps_say("%s; profiling is off", why);
        return det == PS_DETECT_UNSUPPORTED ? -ENOTSUP : -ENOENT;
    }
    ps_threads_track();
    if (ps_sampler_setup(&py) != 0) {
        ps_say("out of memory; profiling is off");
        return -ENOMEM;
    }
    return 0;
}

/* Detects the interpreter (through lookup when given: the symbols of a
 * libpython loaded late, lib/platform/linux/dlwatch.c) and prepares the sampler.
 * Caller holds the lock. */
static int setup_locked(ps_sym_lookup lookup, void *ctx)
{
    if (state() >= PS_LIFE_READY)
        return 0;
    if (state() == PS_LIFE_FAILED)
        return -ENOTSUP;
    /* No CPython (yet): stay OFF, a later call may find one. */
    if (lookup == NULL && !ps_python_present())
        return -ENOENT;
    int rc = find_python(lookup, ctx);
    if (rc != 0) {
        atomic_store(&life.state, PS_LIFE_FAILED);
        return rc;
    }
    ps_owner_claim();
    ps_forkpause_init(&life.lock);
    if (!life.atfork) {
        pthread_atfork(ps_fork_prepare, fork_parent, fork_child);
        life.atfork = 1;
    }
    atomic_store(&life.state, PS_LIFE_READY);
    return 0;
}

static void at_exit(void);
static void on_fatal_signal(int sig);

/*
 * PYSAMPLE_SIGNAL: the profile is written now, by the sampler thread.  The
 * handler only asks (atomics and, armed, one write() to a pipe: all
 * async-signal-safe) and returns at once: the interrupted thread neither
 * writes nor waits.  errno is kept for the code it interrupted.
 */
static void on_write_signal(int sig)
{
    (void)sig;
    int saved = errno;
    if (profiling_here()) {
        ps_writer_ask(PS_WRITE_NOW);
        ps_sampler_request_write();
    }
    errno = saved;
}

static void take_write_signal(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_write_signal;
    sa.sa_flags = SA_RESTART;   /* the program's system calls go on */
    sigemptyset(&sa.sa_mask);
    if (ps_real_sigaction(sig, &sa, NULL) != 0)
        ps_say("cannot handle PYSAMPLE_SIGNAL: %s", strerror(errno));
}

/* 1 if PYSAMPLE_OUTPUT asks for a profile. */
static int output_wanted(void)
{
    const char *out = ps_env_initial("PYSAMPLE_OUTPUT", NULL);
    /* /dev/null is "off" (config.c get_output): no thread for it. */
    return out != NULL && *out != '\0' && strcmp(out, "/dev/null") != 0;
}

/* 1 if PYSAMPLE_ARM may ask for armed mode (config.c has the last word). */
static int arm_wanted(void)
{
    const char *arm = ps_env_initial("PYSAMPLE_ARM", NULL);
    return arm != NULL && *arm != '\0' && strcmp(arm, "0") != 0;
}

/* PYSAMPLE_OUTPUT: the name proved writable now (a user should learn at
 * start-up that nothing will be written).  0, or -EINVAL, said. */
static int prepare_output(void)
{
    const struct ps_config *cfg = ps_settings_process();
    char why[512];
    if (ps_output_init(cfg->output, cfg->file_mode, why, sizeof why) != 0) {
        ps_say("%s; profiling is off", why);
        return -EINVAL;
    }
    return 0;
}

/* The interpreter found: armed if asked, the profile written at exit, and
 * the sampler thread started, profiling (output) or idle and answering
 * the control socket.  0, or -errno. */
static int begin(int output)
{
    const struct ps_config *cfg = ps_settings_process();
    int rc = 0;
    /* Whether it is armed is control.c's to hold (ps_sampler_armed). */
    int armed = cfg->arm && ps_control_setup(cfg) == 0;
    if (!life.atexit) {
        atexit(at_exit);
        life.atexit = 1;
    }
    if (output) {
        atomic_store(&life.state, PS_LIFE_PROFILING);
        ps_fatal_signals_take_over(on_fatal_signal);
        if (cfg->write_signal)
            take_write_signal(cfg->write_signal);
        rc = ps_sampler_start(0);
    } else if (armed) {
        rc = ps_sampler_start_thread();
    }
    if (rc != 0)
        ps_say("cannot start the sampler thread: %s; profiling is off", strerror(-rc));
    return rc;
}

/* start_auto, the lock held. */
static int start_auto_locked(ps_sym_lookup lookup, void *ctx)
{
    if (state() == PS_LIFE_PROFILING || state() == PS_LIFE_FAILED || ps_sampler_armed())
        return state() == PS_LIFE_FAILED ? -ENOTSUP : 0;
    ps_interpose_init();
    ps_config_parse(ps_settings_edit(), ps_env_initial, NULL, env_warn);
    ps_config_unknown_names(env_warn, NULL, NULL);
    const struct ps_config *cfg = ps_settings_process();
    int output = cfg->output[0] != '\0';
    if (!output && !cfg->arm)
        return -EINVAL;
    int rc = output ? prepare_output() : 0;
    if (rc == 0)
        rc = setup_locked(lookup, ctx);
    return rc == 0 ? begin(output) : rc;
}

/*
 * Profiling to PYSAMPLE_OUTPUT, from now to the end of the process, and/or
 * armed (PYSAMPLE_ARM: the sampler thread idles and answers the control
 * socket): the constructor's work in a Python executable, or the same when
 * a libpython is loaded later (lookup: its symbols).
 */
static int start_auto(ps_sym_lookup lookup, void *ctx)
{
    struct ps_section sec;
    ps_section_enter(&sec, &life.lock);
    int rc = start_auto_locked(lookup, ctx);
    ps_section_leave(&sec);
    return rc;
}

/* The dlopen watch's report (dlwatch.h): a libpython was loaded late.
 * Profiling starts as the constructor starts it for a Python executable;
 * the sampler thread waits until the interpreter is initialised. */
static void python_loaded(ps_sym_lookup lookup, void *ctx, const char *path)
{
    snprintf(life.python_path, sizeof life.python_path, "%s", path);
    start_auto(lookup, ctx);
}

/*
 * Neither PYSAMPLE_OUTPUT nor PYSAMPLE_ARM is in the environment, but
 * another PYSAMPLE_ name is: most likely one of them misspelt
 * (PYSAMPLE_OUPUT=/tmp/p), and the user expects a profile.  Said in a
 * Python process only: in every other one (the shell, the compiler) the
 * library stays silent (docs/configuration.md).  Not when either is set,
 * even to "off" (PYSAMPLE_OUTPUT=/dev/null): the user chose.
 */
static void say_unknown_names_unprofiled(void)
{
    if (ps_env_initial("PYSAMPLE_OUTPUT", NULL) != NULL ||
        ps_env_initial("PYSAMPLE_ARM", NULL) != NULL)
        return;
    if (ps_config_unknown_names(NULL, NULL, NULL) == 0 || !ps_python_present())
        return;
    ps_config_unknown_names(env_warn, NULL,
                            "; neither PYSAMPLE_OUTPUT nor PYSAMPLE_ARM is set, so nothing "
                            "is profiled");
}

__attribute__((constructor)) static void pysample_init(void)
{
    if (!output_wanted() && !arm_wanted()) {
        say_unknown_names_unprofiled();
        return;
    }
    /* Not Python (yet): watch for a libpython being loaded (uWSGI,
     * embedders).  Nothing else happens unless one is. */
    if (!ps_python_present()) {
        ps_dlwatch_arm(python_loaded);
        return;
    }
    start_auto(NULL, NULL);
}

int ps_lifecycle_start_sampling(int rate_hz)
{
    struct ps_section sec;
    ps_section_enter(&sec, &life.lock);
    if (state() == PS_LIFE_OFF) {
        ps_interpose_init();
        if (ps_settings_process()->rate_hz == 0) {
            ps_config_parse(ps_settings_edit(), ps_env_initial, NULL, env_warn);
            ps_config_unknown_names(env_warn, NULL, NULL);
        }
        ps_settings_edit()->arm = 0;  /* armed only from the start (start_auto) */
    }
    int rc = setup_locked(NULL, NULL);
    if (rc == 0)
        rc = ps_sampler_start(rate_hz);
    ps_section_leave(&sec);
    return rc;
}

void ps_lifecycle_stop_sampling(void)
{
    struct ps_section sec;
    ps_section_enter(&sec, &life.lock);
    /* Armed, the thread stays to answer; it only stops ticking. */
    if (state() >= PS_LIFE_READY && ps_sampler_armed())
        ps_sampler_set_active(0);
    else if (state() >= PS_LIFE_READY)
        ps_sampler_stop();
    ps_section_leave(&sec);
}

const struct ps_python *ps_lifecycle_python(void)
{
    return state() >= PS_LIFE_READY ? ps_sampler_python() : NULL;
}

/* ---- writing: the one path ------------------------------------------------- */

/*
 * Waits (naps: nanosleep and atomics only, so a signal handler may wait
 * too) until the final profile is written or, for a ticket, until a write
 * covers it.  Returns 1 once it is, 0 after PS_WRITE_WAIT_MS, or at once if
 * nobody is going to write (no final write under way and no sampler thread
 * to do it) when any_writer is set.
 */
static int wait_written(enum ps_write_kind kind, unsigned ticket, int any_writer)
{
    /* Naps from 20 us up to 1 ms: a small profile is written in well under
     * a millisecond, and every exiting process waits here. */
    long nap_ns = 20000, waited_ns = 0;
    for (;;) {
        enum ps_write_state st = ps_writer_state();
        if (st == PS_WRITE_FINAL_DONE || (kind == PS_WRITE_NOW && ps_writer_covered(ticket)))
            return 1;
        if (any_writer && st == PS_WRITE_OPEN && !ps_sampler_alive())
            return 0;
        if (waited_ns > (long)PS_WRITE_WAIT_MS * 1000000)
            return 0;
        struct timespec nap = { 0, nap_ns };
        nanosleep(&nap, NULL);
        waited_ns += nap_ns;
        if (nap_ns < 1000000)
            nap_ns *= 2;
    }
}

/*
 * Gets the profile onto disk: PS_WRITE_NOW as it is, profiling going on
 * (after a fatal signal the process normally dies at once, but one the
 * kernel then drops -- a default-action signal to a container's PID 1 --
 * leaves it running and sampling, to be written again later); or
 * PS_WRITE_FINAL, once per process.  The sampler thread writes if it is
 * alive; else the caller writes itself, unless in_handler (our
 * fatal-signal handler: it interrupted arbitrary code).
 *
 * Every caller may be a signal handler (_exit, kill and raise may be called
 * from one), so nothing here waits without a bound, joins, or allocates
 * with malloc (render.h): when the sampler does not write in time it is
 * left alone -- it may be stuck on a lock the interrupted code holds -- and
 * the last periodic flush stays.  docs/safety.md.
 */
static void request_write(enum ps_write_kind kind, int in_handler)
{
    enum ps_write_state st = ps_writer_state();
    if (st == PS_WRITE_FINAL_DONE)
        return;
    if (st == PS_WRITE_FINAL_WRITING) {
        wait_written(PS_WRITE_FINAL, 0, 0);
        return;
    }
    if (ps_sampler_alive()) {
        unsigned ticket = ps_writer_ask(kind);
        ps_sampler_request_write();
        /* Written, or the sampler is still there and did not write in
         * time: stuck, or very slow; either way not this thread's to do. */
        if (wait_written(kind, ticket, 1) || ps_sampler_alive())
            return;
        /* It was stopped meanwhile (pysample_stop): write here. */
    }
    if (in_handler)
        return;  /* the last periodic flush stays */
    if (kind == PS_WRITE_NOW) {
        ps_writer_write_now(1);
        return;
    }
    if (!ps_writer_write_final())
        wait_written(PS_WRITE_FINAL, 0, 0);
}

/*
 * A profile whose achieved rate fell below half the requested one says so
 * at exit: far fewer samples than the user asked for, because
 * the sampler woke late (a loaded machine, a rate too high for it) or the
 * CPU budget lowered it.  A smaller shortfall is in the quality figures
 * and the tool's summary, and on stderr only with PYSAMPLE_VERBOSE: the
 * program's stderr is its own (a loaded machine put a line in every
 * gunicorn worker's log, and tests that want a child's stderr empty
 * failed).  Not for runs too short to measure a rate.
 */
static void say_low_rate(void)
{
    struct ps_stats st;
    ps_sampler_stats(&st);
    if (st.sampled_ns < 1000000000ull || st.ticks < 10 || st.requested_hz <= 0)
        return;
    double achieved = (double)st.ticks * 1e9 / (double)st.sampled_ns;
    if (achieved >= (ps_settings_process()->verbose ? 0.9 : 0.5) * st.requested_hz)
        return;
    ps_say("the profile of process %ld was sampled %.1f times a second, not the %d requested "
           "(%s); %llu ticks were skipped", (long)getpid(), achieved, st.requested_hz,
           st.budget_adjustments
               ? "PYSAMPLE_CPU_BUDGET lowered the rate"
               : "the sampler woke late: a loaded machine, or a rate too high for it",
           (unsigned long long)st.late_ticks);
}

/* The end of this process: the final profile, written once. */
static void finish(void)
{
    ps_control_process_exit();
    if (!profiling_here())
        return;
    struct ps_section sec;
    ps_section_enter(&sec, NULL);
    request_write(PS_WRITE_FINAL, 0);
    ps_section_leave(&sec);
    say_low_rate();
    /* The sampler stays up for a signal arriving during exit, but with
     * PYSAMPLE_STATS it is asked to end, and waited for (bounded, never
     * joined: this may be a signal handler), so that it writes its final
     * statistics (the benchmarks read them after every run). */
    if (ps_sampler_stats_wanted())
        ps_sampler_end_bounded(PS_WRITE_WAIT_MS);
}

static void at_exit(void)
{
    finish();
}

_Noreturn void ps_lifecycle_exit(int status)
{
    finish();
    ps_real_exit(status);
}

void ps_lifecycle_before_exec(void)
{
    ps_control_process_exit();
    if (!profiling_here() || ps_writer_state() != PS_WRITE_OPEN)
        return;
    /* An image that never got sampled, or a forked child that ran no
     * Python of its own (subprocess forks and execs in C), leaves nothing:
     * the new image writes its own profile. */
    struct ps_section sec;
    ps_section_enter(&sec, NULL);
    struct ps_stats st;
    ps_sampler_stats(&st);
    if (st.samples > 0 &&
        (!life.forked || ps_python_position(ps_sampler_python()) != life.fork_position))
        ps_writer_write_now(0);
    ps_section_leave(&sec);
}

/* Our handler of a fatal signal at default disposition (platform.h) calls
 * this, then dies of the signal. */
static void on_fatal_signal(int sig)
{
    (void)sig;
    if (!profiling_here())
        return;
    /* Sent by kill()/raise() from this process, which wrote just before. */
    if (atomic_exchange(&life.self_signal_written, 0))
        return;
    request_write(PS_WRITE_NOW, 1);
}

void ps_lifecycle_self_signal(void)
{
    /* Ordinary code (not a handler): write here, woken at once, rather than
     * in our handler, which could only ask the sampler and wait for its
     * next tick.  Python exits this way after an unhandled
     * KeyboardInterrupt. */
    if (!profiling_here())
        return;
    struct ps_section sec;
    ps_section_enter(&sec, NULL);
    request_write(PS_WRITE_NOW, 0);
    atomic_store(&life.self_signal_written, 1);
    ps_section_leave(&sec);
}

/* ---- fork (every step, in order: forks.c) ---------------------------------- */

static void fork_parent(void)
{
    ps_fork_parent(ps_sampler_python()->L.hexversion >= 0x030C0000);
}

/* The lifecycle's own part of the child, where forks.c's order puts it. */
static void child_lifecycle(void)
{
    atomic_store(&life.self_signal_written, 0);
    pthread_mutex_init(&life.lock, NULL);
    if (state() >= PS_LIFE_READY) {
        life.forked = 1;
        life.fork_position = ps_python_position(ps_sampler_python());
    }
}

static void fork_child(void)
{
    ps_fork_child(child_lifecycle);
}
