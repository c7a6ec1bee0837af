/*
 * pysample.c - the library's entry points: the constructor that switches
 * profiling on from the environment, the public API of include/pysample.h,
 * and the moments the profile is written (exit, _exit, fork, flush).
 *
 * Inert unless wanted.  The constructor runs in every process that has us
 * in LD_PRELOAD -- shells, compilers, git.  There its whole cost is one
 * dlsym("_PyRuntime"); without PYSAMPLE_OUTPUT it also stops at once.  No
 * thread, no file, no output in either case.
 *
 * The environment is read from environ as the process received it, not
 * through getenv(): some hosts (bash among them) replace getenv with their
 * own, and the constructor runs before they have set up what it reads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pysample.h"

#include "config.h"
#include "lifecycle.h"
#include "memread.h"
#include "output.h"
#include "platform.h"
#include "python.h"
#include "sampler.h"

extern char **environ;

static struct {
    pthread_mutex_t lock;   /* serialises start/stop/write from the API */
    int setup;              /* python detected and tables ready */
    int setup_failed;       /* said why once; do not try again */
    int auto_output;        /* PYSAMPLE_OUTPUT given: write at exit */
    _Atomic int written;    /* final profile written by this process */
    struct ps_python py;
    struct ps_config cfg;
} G = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* One line on stderr, prefixed so the user knows who speaks. */
static void say(const char *fmt, ...)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "pysample: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(msg);
    msg[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, msg, len);
    (void)w;
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

static void flush_now(void);

/* Detects the interpreter and prepares the sampler.  Caller holds G.lock. */
static int setup_locked(void)
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
    switch (ps_python_detect(&G.py, why, sizeof why)) {
    case PS_DETECT_NOT_PYTHON:
        G.setup_failed = 1;
        return -ENOENT;
    case PS_DETECT_UNSUPPORTED:
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
    G.setup = 1;
    return 0;
}

/* Writes this process's profile to PYSAMPLE_OUTPUT; says so if it fails. */
static void write_profile(int final)
{
    char *data;
    size_t len;
    char path[4096];
    if (ps_sampler_render(&data, &len) != 0) {
        say("out of memory while writing the profile");
        return;
    }
    int rc = ps_output_write(NULL, data, len, path, sizeof path);
    free(data);
    if (rc != 0 && final)
        say("cannot write the profile for %s: %s", G.cfg.output, strerror(-rc));
}

static void flush_now(void)
{
    write_profile(0);
}

/* The end of this process: stop sampling and write, once. */
static void finish(void)
{
    if (!G.auto_output || atomic_exchange(&G.written, 1))
        return;
    ps_sampler_stop();
    write_profile(1);
}

void ps_lifecycle_process_exit(void)
{
    finish();
}

static void at_exit(void)
{
    finish();
}

static void fork_prepare(void)
{
    ps_sampler_prepare_fork();
}

static void fork_parent(void)
{
    ps_sampler_parent_after_fork();
}

static void fork_child(void)
{
    /* A new process: its own profile (empty), its own file, its own final
     * write, its own sampler thread. */
    ps_mem_after_fork();
    ps_output_after_fork();
    atomic_store(&G.written, 0);
    pthread_mutex_init(&G.lock, NULL);
    ps_sampler_child_after_fork();
}

__attribute__((constructor)) static void pysample_init(void)
{
    if (!ps_python_present())
        return;
    const char *out = env_get("PYSAMPLE_OUTPUT", NULL);
    if (out == NULL || *out == '\0')
        return;

    ps_interpose_init();
    ps_config_parse(&G.cfg, env_get, NULL, env_warn);
    if (G.cfg.output[0] == '\0')
        return;

    char why[512];
    if (ps_output_init(G.cfg.output, G.cfg.file_mode, why, sizeof why) != 0) {
        say("%s; profiling is off", why);
        return;
    }
    pthread_mutex_lock(&G.lock);
    int rc = setup_locked();
    if (rc == 0) {
        G.auto_output = 1;
        atexit(at_exit);
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        rc = ps_sampler_start(0);
        if (rc != 0)
            say("cannot start the sampler thread: %s; profiling is off", strerror(-rc));
    }
    pthread_mutex_unlock(&G.lock);
}

/* ---- public API ---------------------------------------------------------- */

int pysample_start(int rate_hz)
{
    if (rate_hz < 0 || rate_hz > PS_MAX_RATE)
        return -EINVAL;
    pthread_mutex_lock(&G.lock);
    if (!G.setup && !G.setup_failed) {
        ps_interpose_init();
        if (G.cfg.rate_hz == 0)
            ps_config_parse(&G.cfg, env_get, NULL, env_warn);
    }
    int rc = setup_locked();
    if (rc == 0)
        rc = ps_sampler_start(rate_hz);
    pthread_mutex_unlock(&G.lock);
    return rc;
}

int pysample_stop(void)
{
    pthread_mutex_lock(&G.lock);
    if (G.setup)
        ps_sampler_stop();
    pthread_mutex_unlock(&G.lock);
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
    if (ps_sampler_render(&data, &len) != 0)
        return -ENOMEM;
    int rc = ps_output_write(path, data, len, NULL, 0);
    free(data);
    return rc;
}

int pysample_reset(void)
{
    if (G.setup)
        ps_sampler_reset();
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
    ps_sampler_stats(&s);
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
