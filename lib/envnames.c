/*
 * envnames.c - PYSAMPLE_* names in the environment that are no setting
 * (config.h ps_config_unknown_names).
 *
 * A misspelt setting (PYSAMPLE_OUPUT) used to be ignored without a word:
 * the program ran unprofiled and the user learnt it at the end, from a
 * missing file (issue #35).  Each unknown name now gets one line, with the
 * closest setting when one is close enough to be the one meant.
 *
 * Not every PYSAMPLE_ name is the library's: the tool reads some from a
 * profiled process's environment (PYSAMPLE_SERVICE ...), and the
 * project's builds, benchmarks and tests pass their own switches through
 * the environment of programs that run profiled.  Those are known too, and
 * quiet.  A test's own name begins with PYSAMPLE_TEST_.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config.h"

extern char **environ;

#define PREFIX "PYSAMPLE_"
#define PREFIX_LEN 9

/* The library's settings (config.c; faultview.c reads READ_MODE): the
 * names a misspelling is compared with. */
static const char *const settings[] = {
    "OUTPUT", "RATE", "MODE", "LINES", "ASYNC", "GIL", "NATIVE", "MAX_DEPTH",
    "FLUSH_INTERVAL", "MAX_STACKS", "FILE_MODE", "ARM", "CONTROL_DIR", "CPU_BUDGET",
    "MAX_THREADS_PER_TICK", "QUALITY", "VERBOSE", "TIMELINE", "TIMELINE_MAX", "SIGNAL",
    "STATS", "FORMAT", "READ_MODE",
};

/* Names others read (the tool: docs/tools.md, docs/kubernetes.md; the
 * project's builds and tests): known, so never reported, and never
 * suggested. */
static const char *const others[] = {
    "LIB", "SERVICE", "NAMESPACE", "POD", "CONTAINER", "VERSION", "ATTACH",
    "TOOL_DIR", "TOOL_SCRIPT_DIR", "PYROSCOPE", "PYTHON", "PYTHONS_CACHE", "ZIG",
    "GOCACHE", "DEPS_EXTRA", "STRESS_ITERATIONS", "EMBED_HOST", "DEMO_SECONDS",
    "FAKE_SAMPLES", "BACKEND_CACHE",
};

/* Families of the project's build and test switches (PYSAMPLE_TEST_PREFIX,
 * PYSAMPLE_ARM64_ROOT, PYSAMPLE_SKIP_CROSS ...). */
static const char *const families[] = {
    "TEST_", "BENCH_", "SKIP_", "ARM64_", "CROSS_", "MUSL_", "WHEEL_", "BUILD_",
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_NAME 64

static int in_list(const char *s, size_t n, const char *const *list, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strlen(list[i]) == n && strncmp(list[i], s, n) == 0)
            return 1;
    return 0;
}

static int in_family(const char *s)
{
    for (size_t i = 0; i < COUNT(families); i++)
        if (strncmp(s, families[i], strlen(families[i])) == 0)
            return 1;
    return 0;
}

static int min3(int a, int b, int c)
{
    int m = a < b ? a : b;
    return m < c ? m : c;
}

static char upper(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/* Edit distance of a[0..n) and b, without regard to case, where swapping
 * two neighbours counts one (optimal string alignment: RAET is one from
 * RATE).  Both are at most MAX_NAME bytes. */
static int distance(const char *a, size_t n, const char *b)
{
    int d[MAX_NAME + 1][MAX_NAME + 1];
    size_t m = strlen(b);
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int same = upper(a[i - 1]) == upper(b[j - 1]);
            d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + !same);
            if (i > 1 && j > 1 && upper(a[i - 1]) == upper(b[j - 2]) &&
                upper(a[i - 2]) == upper(b[j - 1]) && d[i - 2][j - 2] + 1 < d[i][j])
                d[i][j] = d[i - 2][j - 2] + 1;
        }
    }
    return d[n][m];
}

/* The setting name (after PYSAMPLE_) closest to s[0..n), if close enough
 * to be the one meant: one edit for short names, two from five letters
 * on.  NULL if none is. */
static const char *closest(const char *s, size_t n)
{
    const char *best = NULL;
    int best_d = n >= 5 ? 3 : 2;
    if (n > MAX_NAME)
        return NULL;
    for (size_t i = 0; i < COUNT(settings); i++) {
        if (strlen(settings[i]) > MAX_NAME)
            continue;
        int d = distance(s, n, settings[i]);
        if (d < best_d) {
            best_d = d;
            best = settings[i];
        }
    }
    return best;
}

int ps_config_name_check(const char *entry, char *msg, size_t msglen)
{
    if (strncasecmp(entry, PREFIX, PREFIX_LEN) != 0)
        return 0;
    const char *eq = strchr(entry, '=');
    size_t n = eq != NULL ? (size_t)(eq - entry) : strlen(entry);
    const char *s = entry + PREFIX_LEN;
    size_t sn = n - PREFIX_LEN;
    int exact = strncmp(entry, PREFIX, PREFIX_LEN) == 0;
    if (exact && (in_list(s, sn, settings, COUNT(settings)) ||
                  in_list(s, sn, others, COUNT(others)) || in_family(s)))
        return 0;
    const char *near = closest(s, sn);
    int shown = n > 100 ? 100 : (int)n;
    if (near != NULL)
        snprintf(msg, msglen, "unknown setting %.*s (did you mean " PREFIX "%s?)", shown, entry,
                 near);
    else
        snprintf(msg, msglen, "unknown setting %.*s", shown, entry);
    return 1;
}

int ps_config_unknown_names(void (*say)(void *ctx, const char *msg), void *ctx,
                            const char *tail)
{
    int found = 0;
    if (ps_env_secure())
        return 0;
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        char msg[400], line[512];
        if (!ps_config_name_check(*e, msg, sizeof msg))
            continue;
        found++;
        if (say == NULL)
            continue;
        snprintf(line, sizeof line, "%s%s", msg, tail != NULL ? tail : "");
        say(ctx, line);
    }
    return found;
}
