/*
 * config.c - parsing and validation of the PYSAMPLE_* environment variables.
 *
 * Each variable is checked on its own: a bad value produces one message and
 * falls back to that variable's default, so a typo in one setting never
 * costs the user the whole profile.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "platform/platform.h"
#include "config.h"

extern char **environ;

/*
 * A setuid or setgid program (secure execution) got its environment from a
 * user it must not trust: there PYSAMPLE_OUTPUT, _FILE_MODE or _STATS
 * would have the program's privileges create or replace files where that
 * user says.  Such a process reads no PYSAMPLE_* variable, so the library
 * stays inert (docs/safety.md).  Decided at the first call, which is the
 * constructor's, so a program that later changes its ids changes nothing.
 */
int ps_env_secure(void)
{
    static _Atomic int secure = -1;
    if (atomic_load(&secure) < 0)
        atomic_store(&secure, ps_secure_execution());
    return atomic_load(&secure);
}

const char *ps_env_initial(const char *name, void *ctx)
{
    (void)ctx;
    if (ps_env_secure())
        return NULL;
    size_t n = strlen(name);
    for (char **e = environ; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* Parses a whole decimal integer in [lo, hi]; 0 on success. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    while (*end == ' ' || *end == '\t')
        end++;
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static void warnf(void (*warn)(void *, const char *), void *ctx, const char *fmt,
                  const char *name, const char *val, const char *tail)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, name, val, tail);
    warn(ctx, msg);
}

/* Where variables are read from and where their complaints go: the three
 * travel together through every reader below. */
struct env_src {
    ps_env_get get;
    void *ctx;
    void (*warn)(void *, const char *);
};

static int get_int(const struct env_src *e, const char *name, long lo, long hi, long def,
                   const char *range)
{
    const char *s = e->get(name, e->ctx);
    long v;
    if (s == NULL)
        return (int)def;
    if (parse_int(s, lo, hi, &v) != 0) {
        char tail[128];
        snprintf(tail, sizeof tail, "%s; using %ld", range, def);
        warnf(e->warn, e->ctx, "%s='%.64s' is not %s", name, s, tail);
        return (int)def;
    }
    return (int)v;
}

/* Words of an enumerated value compare without regard to case: CPU, cpu
 * and Cpu all mean cpu (an environment variable is typed by hand). */
static int is(const char *s, const char *word)
{
    return strcasecmp(s, word) == 0;
}

static int is_yes(const char *s)
{
    return is(s, "1") || is(s, "yes") || is(s, "true") || is(s, "on");
}

static int is_no(const char *s)
{
    return is(s, "0") || is(s, "no") || is(s, "false") || is(s, "off");
}

/* 1 or 0 for a yes or no word, -1 for anything else. */
static int parse_bool(const char *s)
{
    return is_yes(s) ? 1 : is_no(s) ? 0 : -1;
}

/*
 * A yes/no variable: 1/yes/true/on or 0/no/false/off, in any case;
 * anything else is said in one line ending in otherwise ("using 0", "not
 * armed") and def is kept.  An empty value means def, quietly, only where
 * empty_is_def (an empty PYSAMPLE_LINES is reported).
 */

static int get_bool(const struct env_src *e, const char *name, int def, int empty_is_def,
                    const char *otherwise)
{
    const char *s = e->get(name, e->ctx);
    if (s == NULL || (empty_is_def && *s == '\0'))
        return def;
    int b = parse_bool(s);
    if (b >= 0)
        return b;
    warnf(e->warn, e->ctx, "%s='%.64s' is neither 1/yes/true/on nor 0/no/false/off; %s", name, s,
          otherwise);
    return def;
}

/*
 * PYSAMPLE_FILE_MODE: an octal mode that lets the owner read the profile
 * (the tool reads it back, and a profile nobody can read is lost).  A
 * value that is octal but lacks owner-read is refused for that reason,
 * not as if it were not a mode.
 */
static int get_file_mode(ps_env_get get, void *ctx, void (*warn)(void *, const char *))
{
    const char *s = get("PYSAMPLE_FILE_MODE", ctx);
    if (s == NULL)
        return PS_DEFAULT_FILE_MODE;
    char *end;
    errno = 0;
    long m = strtol(s, &end, 8);
    if (errno != 0 || *s == '\0' || *end != '\0' || m < 0 || m > 0777) {
        warnf(warn, ctx, "%s='%.64s' is not an octal file mode such as 0600 or 0644%s; using 0600",
              "PYSAMPLE_FILE_MODE", s, "");
        return PS_DEFAULT_FILE_MODE;
    }
    if (!(m & 0400)) {
        warnf(warn, ctx, "%s='%.64s' does not let the owner read the profile (it needs the "
              "owner's read bit 0400%s, as 0600 and 0644 have); using 0600",
              "PYSAMPLE_FILE_MODE", s, "");
        return PS_DEFAULT_FILE_MODE;
    }
    return (int)m;
}

typedef void (*warn_fn)(void *ctx, const char *msg);

/* PYSAMPLE_OUTPUT: too long a template leaves profiling off. */
static void get_output(struct ps_config *c, ps_env_get get, void *ctx, warn_fn warn)
{
    const char *s = get("PYSAMPLE_OUTPUT", ctx);
    if (s == NULL || *s == '\0')
        return;
    /* The usual "off" idiom: off, as if unset.  Written as a profile it
     * put temporary files and /dev/null.<pid> into /dev (issue #39). */
    if (strcmp(s, "/dev/null") == 0)
        return;
    if (strlen(s) >= sizeof c->output)
        warnf(warn, ctx, "%s is longer than %s bytes%s; profiling is off", "PYSAMPLE_OUTPUT",
              "4095", "");
    else
        strcpy(c->output, s);
}

static enum ps_mode get_mode(ps_env_get get, void *ctx, warn_fn warn)
{
    const char *s = get("PYSAMPLE_MODE", ctx);
    if (s == NULL || is(s, "wall"))
        return PS_MODE_WALL;
    if (is(s, "cpu"))
        return PS_MODE_CPU;
    warnf(warn, ctx, "%s='%.64s' is not 'wall' or 'cpu'%s; using wall", "PYSAMPLE_MODE", s, "");
    return PS_MODE_WALL;
}

/* PYSAMPLE_NATIVE (docs/native.md): a yes/no word, or all; off unless
 * asked for. */
static enum ps_native_mode get_native(ps_env_get get, void *ctx, warn_fn warn)
{
    const char *s = get("PYSAMPLE_NATIVE", ctx);
    if (s == NULL || s[0] == '\0')
        return PS_NATIVE_OFF;
    if (is(s, "all"))
        return PS_NATIVE_ALL;
    int b = parse_bool(s);
    if (b >= 0)
        return b ? PS_NATIVE_ON : PS_NATIVE_OFF;
    warnf(warn, ctx, "%s='%.64s' is not 0, 1 or all%s; using 0", "PYSAMPLE_NATIVE", s, "");
    return PS_NATIVE_OFF;
}

/* The socket's directory.  A socket path holds at most 107 bytes
 * (sun_path), and the name we add is up to 40: a longer directory could
 * never work, so it is refused here, once, in words. */
static void get_control_dir(struct ps_config *c, ps_env_get get, void *ctx, warn_fn warn)
{
    const char *s = get("PYSAMPLE_CONTROL_DIR", ctx);
    if (s == NULL || *s == '\0')
        return;
    if (s[0] != '/' || strlen(s) > 64)
        warnf(warn, ctx, "%s='%.64s' is not %s", "PYSAMPLE_CONTROL_DIR", s,
              "an absolute directory path of at most 64 bytes; using the abstract socket name");
    else
        strcpy(c->control_dir, s);
}

/* "1%", "0.5%", "2.5": percent of one core, 0.01..100, as a share
 * (fraction) in *share; -1 if it is none of these.  Here rather than in
 * sampler/budget.c, which uses the share: a setting is read in the
 * settings' layer, and that layer includes nothing of the sampler's. */
static int parse_share(const char *s, double *share)
{
    char *end;
    double pct = strtod(s, &end);
    if (end == s)
        return -1;
    if (*end == '%')
        end++;
    if (*end != '\0' || !(pct >= 0.01 && pct <= 100.0))
        return -1;
    *share = pct / 100.0;
    return 0;
}

static double get_cpu_budget(ps_env_get get, void *ctx, warn_fn warn)
{
    double budget = 0;
    const char *s = get("PYSAMPLE_CPU_BUDGET", ctx);
    if (s != NULL && *s != '\0' && parse_share(s, &budget) != 0) {
        warnf(warn, ctx, "%s='%.64s' is not %s", "PYSAMPLE_CPU_BUDGET", s,
              "a share of one core from 0.01% to 100%, such as 1%; no budget");
        return 0;
    }
    return budget;
}

/* Opt-in only, and only the two signals no runtime or C library uses for
 * itself: a program that has a handler of its own for it must not set
 * this.  0: none. */
static int get_write_signal(ps_env_get get, void *ctx, warn_fn warn)
{
    const char *s = get("PYSAMPLE_SIGNAL", ctx);
    if (s == NULL || *s == '\0')
        return 0;
    const char *n = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
    if (is(n, "USR1"))
        return SIGUSR1;
    if (is(n, "USR2"))
        return SIGUSR2;
    warnf(warn, ctx, "%s='%.64s' is not %s", "PYSAMPLE_SIGNAL", s,
          "USR1 or USR2; no signal writes the profile");
    return 0;
}

/* Not a user setting (test/bench/ reads it): an unusable path is ignored
 * without a word. */
static void get_stats_path(struct ps_config *c, ps_env_get get, void *ctx)
{
    const char *s = get("PYSAMPLE_STATS", ctx);
    if (s != NULL && strlen(s) < sizeof c->stats_path)
        strcpy(c->stats_path, s);
}

/* PYSAMPLE_FORMAT is the tool's: the library writes collapsed stacks. */
static void check_format(ps_env_get get, void *ctx, warn_fn warn)
{
    const char *s = get("PYSAMPLE_FORMAT", ctx);
    if (s != NULL && !is(s, "collapsed"))
        warnf(warn, ctx, "%s='%.64s' is not supported by the library (only 'collapsed')%s; "
              "writing collapsed stacks (convert them with 'pysample convert')",
              "PYSAMPLE_FORMAT", s, "");
}

/* Fills c in the order the variables have always been read, which is the
 * order of their messages. */
void ps_config_parse(struct ps_config *c, ps_env_get get, void *ctx, warn_fn warn)
{
    const struct env_src e = {get, ctx, warn};
    memset(c, 0, sizeof *c);
    get_output(c, get, ctx, warn);
    c->rate_hz = get_int(&e, "PYSAMPLE_RATE", 1, PS_MAX_RATE, PS_DEFAULT_RATE,
                         "a whole number of samples per second from 1 to 100000");
    c->max_depth = get_int(&e, "PYSAMPLE_MAX_DEPTH", 1, PS_LIMIT_MAX_DEPTH,
                           PS_DEFAULT_MAX_DEPTH, "a frame count from 1 to 65536");
    c->flush_interval_s = get_int(&e, "PYSAMPLE_FLUSH_INTERVAL", 0, 86400,
                                  PS_DEFAULT_FLUSH_S,
                                  "a number of seconds from 0 (only at exit) to 86400");
    c->max_stacks = get_int(&e, "PYSAMPLE_MAX_STACKS", 100, 10000000,
                            PS_DEFAULT_MAX_STACKS, "a count from 100 to 10000000");
    c->mode = get_mode(get, ctx, warn);
    c->lines = get_bool(&e, "PYSAMPLE_LINES", 1, 0, "using 1");
    c->async_tasks = get_bool(&e, "PYSAMPLE_ASYNC", 0, 1, "using 0");
    c->gil_only = get_bool(&e, "PYSAMPLE_GIL", 0, 1, "using 0");
    c->native = get_native(get, ctx, warn);
    c->file_mode = get_file_mode(get, ctx, warn);
    c->arm = get_bool(&e, "PYSAMPLE_ARM", 0, 1, "not armed");
    get_control_dir(c, get, ctx, warn);
    c->cpu_budget = get_cpu_budget(get, ctx, warn);
    c->max_threads_per_tick = get_int(&e, "PYSAMPLE_MAX_THREADS_PER_TICK", 0, 1000000, 0,
                                      "a thread count from 1 to 1000000, or 0 for all");
    c->quality_sidecar = get_bool(&e, "PYSAMPLE_QUALITY", 0, 1, "using 0");
    c->verbose = get_bool(&e, "PYSAMPLE_VERBOSE", 0, 1, "using 0");
    c->timeline = get_bool(&e, "PYSAMPLE_TIMELINE", 0, 1, "no timeline");
    c->timeline_max = get_int(&e, "PYSAMPLE_TIMELINE_MAX", 1, 100000000,
                              PS_DEFAULT_TIMELINE_MAX, "a record count from 1 to 100000000");
    c->write_signal = get_write_signal(get, ctx, warn);
    get_stats_path(c, get, ctx);
    check_format(get, ctx, warn);
}

int ps_template_has_pid(const char *tmpl)
{
    for (const char *p = tmpl; *p; p++) {
        if (p[0] == '%' && p[1] == '%')
            p++;
        else if (p[0] == '%' && p[1] == 'p')
            return 1;
    }
    return 0;
}

int ps_expand_path(const char *tmpl, long pid, const char *host, long start_time,
                   char *out, size_t outlen)
{
    size_t o = 0;
    char num[32];
    for (const char *p = tmpl; *p; p++) {
        const char *add = NULL;
        char one[2] = { *p, '\0' };
        if (*p != '%') {
            add = one;
        } else {
            switch (p[1]) {
            case 'p': snprintf(num, sizeof num, "%ld", pid); add = num; break;
            case 't': snprintf(num, sizeof num, "%ld", start_time); add = num; break;
            case 'h': add = host; break;
            case '%': add = "%"; break;
            default: return -1;
            }
            p++;
        }
        size_t n = strlen(add);
        if (o + n + 1 > outlen)
            return -1;
        memcpy(out + o, add, n);
        o += n;
    }
    if (outlen == 0)
        return -1;
    out[o] = '\0';
    return 0;
}
