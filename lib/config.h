/*
 * config.h - profiler settings, read from the environment once at start-up.
 */
#ifndef PS_CONFIG_H
#define PS_CONFIG_H

#include <stddef.h>

enum ps_mode { PS_MODE_WALL = 0, PS_MODE_CPU };

/* PYSAMPLE_NATIVE (native.h, docs/native.md): on leaves out the C frames
 * of thread and interpreter start-up and those of the interpreter between
 * two Python frames; all keeps every one. */
enum ps_native_mode { PS_NATIVE_OFF = 0, PS_NATIVE_ON, PS_NATIVE_ALL };

#define PS_DEFAULT_RATE 100
#define PS_MAX_RATE 100000
#define PS_DEFAULT_MAX_DEPTH 4096
#define PS_LIMIT_MAX_DEPTH 65536
#define PS_DEFAULT_FLUSH_S 30
#define PS_DEFAULT_MAX_STACKS 200000
#define PS_DEFAULT_FILE_MODE 0600
#define PS_DEFAULT_TIMELINE_MAX 1000000   /* records of 16 bytes: 16 MB */

struct ps_config {
    char output[4096];    /* template from PYSAMPLE_OUTPUT; "" = profiling off */
    char stats_path[1024]; /* PYSAMPLE_STATS (stats.c): "" = none; a measuring aid */
    char control_dir[256]; /* PYSAMPLE_CONTROL_DIR: socket directory; "" = abstract name */
    /* The numbers last, after the strings (which settings.c's copy for
     * the ticks, `now`, keeps empty): a tick reads only these, and they
     * end the object, right before the tick's other globals in their
     * section (util/tickpath.h; issue #36). */
    int rate_hz;
    enum ps_mode mode;
    int lines;            /* 0: aggregate per function */
    int gil_only;         /* PYSAMPLE_GIL: only the thread holding the GIL (tick.c) */
    int async_tasks;      /* PYSAMPLE_ASYNC: attribute samples to asyncio tasks (tasks.h) */
    enum ps_native_mode native; /* PYSAMPLE_NATIVE (native.h) */
    int max_depth;
    int flush_interval_s; /* 0: only at exit */
    int max_stacks;
    int file_mode;
    int arm;              /* PYSAMPLE_ARM: answer `pysample ... --pid` (control.c) */
    double cpu_budget;    /* PYSAMPLE_CPU_BUDGET as a share of one core; 0 = none */
    int max_threads_per_tick; /* PYSAMPLE_MAX_THREADS_PER_TICK; 0 = all */
    int verbose;          /* PYSAMPLE_VERBOSE: also note a smaller shortfall of the rate */
    int quality_sidecar;  /* PYSAMPLE_QUALITY: <output>.quality.json beside each profile */
    int write_signal;     /* PYSAMPLE_SIGNAL: SIGUSR1/SIGUSR2 writes the profile; 0 = none */
    int timeline;         /* PYSAMPLE_TIMELINE: <output>.timeline, samples in time order */
    int timeline_max;     /* PYSAMPLE_TIMELINE_MAX: its bound, in records */
};

/*
 * How the parser reaches the environment: get returns the value of name or
 * NULL.  (The library passes a reader of the process's initial environ, not
 * getenv: some hosts, bash among them, replace getenv with their own.)
 */
typedef const char *(*ps_env_get)(const char *name, void *ctx);

/*
 * The reader the library passes: name's value in the environment the
 * process received (environ as it was when we looked), or NULL.  ctx is
 * unused.  Safe in a constructor.  In a setuid or setgid process: always
 * NULL (config.c says why).
 */
const char *ps_env_initial(const char *name, void *ctx);

/* 1 in a setuid or setgid process (secure execution), where no PYSAMPLE_*
 * variable is read: decided at the first call, the constructor's. */
int ps_env_secure(void);

/*
 * entry ("NAME=value" or a bare name) begins PYSAMPLE_ (in any case) but is
 * neither a setting nor a name the project's tool, builds or tests use
 * (envnames.c): 1, with the line to say in msg ("unknown setting NAME",
 * with "(did you mean PYSAMPLE_X?)" when a setting is close).  Else 0.
 */
int ps_config_name_check(const char *entry, char *msg, size_t msglen);

/*
 * Each unknown PYSAMPLE_ name in the environment the process received
 * (none in secure execution): say(ctx, line) once for it, tail appended,
 * unless say is NULL.  Returns how many there are.
 */
int ps_config_unknown_names(void (*say)(void *ctx, const char *msg), void *ctx,
                            const char *tail);

/*
 * Fills *c.  For each invalid value, warn(ctx, message) is called once with a
 * complete message (without the "pysample: " prefix and newline) and the
 * default is used.
 */
void ps_config_parse(struct ps_config *c, ps_env_get get, void *ctx,
                     void (*warn)(void *ctx, const char *msg));

/*
 * Expands %p (pid), %h (host name), %t (start time, seconds since the
 * epoch) and %% in tmpl.  Returns 0, or -1 if the result does not fit or
 * the template has an unknown placeholder.
 */
int ps_expand_path(const char *tmpl, long pid, const char *host, long start_time,
                   char *out, size_t outlen);

/* 1 if the template contains %p. */
int ps_template_has_pid(const char *tmpl);

#endif
