/*
 * stats.c - the sampler's own counts (stats.h), and the PYSAMPLE_STATS
 * file.
 *
 * PYSAMPLE_STATS=<path> (%p expands to the pid) makes the sampler thread
 * write a small "key value" text file each time it stops (pysample_stop,
 * exit, runtime finalizing): ticks, samples, errors (and by cause:
 * unreadable, inconsistent), skipped ticks, the sampler thread's own CPU
 * time, how long it sampled, tick lateness (wake-up time minus the
 * deadline the tick serves, schedule.h) at p50/p90/p99/max and the duration of a tick's own work at
 * p50/p99, from log-linear histograms (buckets 1/16 of a power of two
 * wide; a percentile is its bucket's floor).  Counts are cumulative over
 * the process's start/stop cycles.  Nothing is printed, and an unwritable
 * path is silently ignored: it is a measuring aid for test/bench/, not a
 * user feature.
 *
 * Ownership.  The counters are atomics (any thread reads them: stats.h
 * says why they are this file's); the histograms belong to the sampler
 * thread, which alone fills them (in its context, struct ps_tick_times)
 * and writes the file.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/counters.h"
#include "memory/memread.h"
#include "native/native.h"
#include "platform/platform.h"
#include "profile/output.h"
#include "profile/profile.h"
#include "sampler/context.h"
#include "sampler/stats.h"
#include "util/message.h"
#include "util/tickpath.h"

PS_TICK_DATA static struct {
    _Atomic uint64_t count[PS_COUNT_N];
    _Atomic int64_t cpu_ns;
    _Atomic uint64_t active_ns; /* wall time spent sampling, all runs ... */
    _Atomic uint64_t run_began; /* ... but the one under way, begun then (0: none) */
} stats;

PS_TICK_PATH void ps_count(enum ps_count c, uint64_t n)
{
    atomic_fetch_add(&stats.count[c], n);
}

void ps_count_dropped(enum ps_count cause, uint64_t n)
{
    atomic_fetch_add(&stats.count[PS_COUNT_ERRORS], n);
    atomic_fetch_add(&stats.count[cause], n);
}

void ps_stats_run_begin(uint64_t now)
{
    atomic_store(&stats.run_began, now);
}

void ps_stats_run_end(uint64_t now)
{
    uint64_t began = atomic_load(&stats.run_began);
    atomic_fetch_add(&stats.active_ns, now - began);
    atomic_store(&stats.run_began, 0);
}

void ps_stats_cpu(int64_t ns)
{
    atomic_store(&stats.cpu_ns, ns);
}

/* --- histograms ----------------------------------------------------------- */

/* Bucket of v: exact below 16, then 16 buckets per power of two. */
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

static uint64_t late_max(const uint64_t *hist)
{
    uint64_t max = 0;
    for (unsigned b = 0; b < PS_LATE_BUCKETS; b++)
        if (hist[b])
            max = late_value(b);
    return max;
}

PS_TICK_PATH void ps_stats_late(struct ps_tick_times *t, uint64_t ns)
{
    t->late_hist[late_bucket(ns)]++;
}

PS_TICK_PATH void ps_stats_tick_took(struct ps_tick_times *t, uint64_t ns)
{
    t->tick_hist[late_bucket(ns)]++;
}

/* --- reading ----------------------------------------------------------------- */

void ps_stats_read(struct ps_stats *st)
{
    uint64_t c[PS_COUNT_N];
    ps_counters_read(stats.count, c, PS_COUNT_N);
    memset(st, 0, sizeof *st);
    st->ticks = c[PS_COUNT_TICKS];
    st->samples = c[PS_COUNT_SAMPLES];
    st->errors = c[PS_COUNT_ERRORS];
    st->errors_unreadable = c[PS_COUNT_ERRORS_UNREADABLE];
    st->errors_inconsistent = c[PS_COUNT_ERRORS_INCONSISTENT];
    st->late_ticks = c[PS_COUNT_LATE_TICKS];
    st->truncated = c[PS_COUNT_TRUNCATED];
    st->budget_adjustments = c[PS_COUNT_BUDGET_ADJUSTMENTS];
    st->sampler_cpu_ns = atomic_load(&stats.cpu_ns);
    uint64_t began = atomic_load(&stats.run_began), now = ps_now_ns();
    st->sampled_ns = atomic_load(&stats.active_ns) + (began && now > began ? now - began : 0);
    struct ps_profile_counts pc;
    ps_profile_counts(&pc);
    st->distinct_stacks = pc.distinct_stacks;
    struct ps_native_counts nc;
    ps_native_counts(&nc);
    st->native_masked = nc.n[PS_NATIVE_MASKED];
}

/* --- the PYSAMPLE_STATS file ------------------------------------------------- */

/* One "key value" line of the file.  Every value fits in 63 bits, and the
 * CPU time may be -1 (unreadable clock): all of them print as signed. */
struct stat_line {
    const char *key;
    int64_t value;
};

/* Appends the lines to buf (holding *n bytes of size).  0, or -1 when
 * they do not fit (the file is then not written: a cut file would be read
 * as a complete one). */
static int put_lines(char *buf, size_t size, int *n, const struct stat_line *l, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        int m = snprintf(buf + *n, size - (size_t)*n, "%s %lld\n", l[i].key,
                         (long long)l[i].value);
        if (m < 0 || (size_t)m >= size - (size_t)*n)
            return -1;
        *n += m;
    }
    return 0;
}

/* The file's name: the pattern with its first %p as the pid. */
static void stats_path(const char *pattern, char *path, size_t size)
{
    const char *p = strstr(pattern, "%p");
    if (p != NULL)
        snprintf(path, size, "%.*s%ld%s", (int)(p - pattern), pattern, (long)getpid(), p + 2);
    else
        snprintf(path, size, "%s", pattern);
}

/* The native capture counts (PYSAMPLE_NATIVE), named as the file has them. */
static int put_native(char *buf, size_t size, int *n)
{
    static const char *const names[PS_NATIVE_COUNTS] = {
        [PS_NATIVE_BLOCKED] = "native_blocked",     [PS_NATIVE_HELD] = "native_held",
        [PS_NATIVE_FAILED] = "native_failed",       [PS_NATIVE_LOST] = "native_lost",
        [PS_NATIVE_GONE] = "native_gone",           [PS_NATIVE_RESTARTED] = "native_restarted",
        [PS_NATIVE_EINTR_LEFT] = "native_eintr_left",       [PS_NATIVE_MASKED] = "native_masked",
    };
    struct ps_native_counts nc;
    struct stat_line l[PS_NATIVE_COUNTS];
    ps_native_counts(&nc);
    for (size_t i = 0; i < PS_NATIVE_COUNTS; i++)
        l[i] = (struct stat_line){ names[i], (int64_t)nc.n[i] };
    return put_lines(buf, size, n, l, PS_NATIVE_COUNTS);
}

/* The sampler's counts, its timings and the profile's, one a line. */
static int put_counts(const struct ps_tick_times *t, char *buf, size_t size, int *n,
                      int rate_hz)
{
    uint64_t c[PS_COUNT_N];
    struct ps_profile_counts pc;
    ps_counters_read(stats.count, c, PS_COUNT_N);
    ps_profile_counts(&pc);
    const struct stat_line lines[] = {
        { "rate_hz", rate_hz },
        { "ticks", (int64_t)c[PS_COUNT_TICKS] },
        { "samples", (int64_t)c[PS_COUNT_SAMPLES] },
        { "errors", (int64_t)c[PS_COUNT_ERRORS] },
        { "errors_unreadable", (int64_t)c[PS_COUNT_ERRORS_UNREADABLE] },
        { "errors_inconsistent", (int64_t)c[PS_COUNT_ERRORS_INCONSISTENT] },
        { "skipped_ticks", (int64_t)c[PS_COUNT_LATE_TICKS] },
        { "distinct_stacks", (int64_t)pc.distinct_stacks },
        { "sampler_cpu_ns", atomic_load(&stats.cpu_ns) },
        { "active_ns", (int64_t)atomic_load(&stats.active_ns) },
        { "late_p50_ns", (int64_t)late_percentile(t->late_hist, 0.50) },
        { "late_p90_ns", (int64_t)late_percentile(t->late_hist, 0.90) },
        { "late_p99_ns", (int64_t)late_percentile(t->late_hist, 0.99) },
        { "late_max_ns", (int64_t)late_max(t->late_hist) },
        { "tick_p50_ns", (int64_t)late_percentile(t->tick_hist, 0.50) },
        { "tick_p99_ns", (int64_t)late_percentile(t->tick_hist, 0.99) },
        { "codecache_hits", (int64_t)pc.codecache_hits },
        { "codecache_misses", (int64_t)pc.codecache_misses },
        { "messages_dropped", (int64_t)ps_say_dropped() },
    };
    return put_lines(buf, size, n, lines, sizeof lines / sizeof lines[0]);
}

/* How memory is read (memread.h): a word, not a count. */
static int put_read_mode(char *buf, size_t size, int *n)
{
    int m = snprintf(buf + *n, size - (size_t)*n, "read_mode %s\n", ps_mem_mode_name());
    if (m < 0 || (size_t)m >= size - (size_t)*n)
        return -1;
    *n += m;
    return 0;
}

void ps_stats_write(const struct ps_sampler_ctx *ctx, const char *path_pattern, int rate_hz,
                    int native, int file_mode)
{
    const struct ps_tick_times *t = &ctx->times;
    char path[1100], buf[4096];
    int n = 0;
    if (put_counts(t, buf, sizeof buf, &n, rate_hz) != 0 || put_read_mode(buf, sizeof buf, &n) != 0)
        return;
    /* The native counts are extra: without room for them the rest is
     * still written.  Then how the native samples came out and what
     * unwinding cost (merge.c). */
    if (native) {
        int before = n;
        if (put_native(buf, sizeof buf, &n) != 0)
            n = before;
        if (ctx->buf.rules != NULL && ctx->buf.names != NULL)
            n += ps_native_stats(ctx->buf.rules, ctx->buf.names, buf + n, sizeof buf - (size_t)n);
    }
    stats_path(path_pattern, path, sizeof path);
    /* As the profile is written (output.c): atomically, in the user's
     * file mode, never through a link.  A measuring aid: a failure is
     * not worth a word on the program's stderr. */
    (void)ps_write_atomic(path, buf, (size_t)n, file_mode);
}

void ps_stats_child_after_fork(void)
{
    ps_counters_zero(stats.count, PS_COUNT_N);
    atomic_store(&stats.cpu_ns, 0);
    atomic_store(&stats.active_ns, 0);
    atomic_store(&stats.run_began, 0);
}
