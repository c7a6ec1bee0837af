/*
 * quality.c - the profile's own quality figures (quality.h).
 */
#include <stdio.h>
#include <string.h>

#include "sampler/quality.h"

void ps_quality_between(struct ps_quality *q, const struct ps_stats *base,
                        const struct ps_stats *now, uint64_t duration_ns)
{
    q->duration_ns = duration_ns;
    q->d = *now;
#define SUB(f) q->d.f = now->f >= base->f ? now->f - base->f : 0
    SUB(ticks);
    SUB(samples);
    SUB(errors);
    SUB(errors_unreadable);
    SUB(errors_inconsistent);
    SUB(late_ticks);
    SUB(truncated);
    SUB(budget_adjustments);
    SUB(native_masked);
#undef SUB
    q->d.sampler_cpu_ns = now->sampler_cpu_ns - base->sampler_cpu_ns;
}

double ps_quality_achieved_hz(const struct ps_quality *q)
{
    if (q->duration_ns == 0)
        return 0.0;
    return (double)q->d.ticks * 1e9 / (double)q->duration_ns;
}

/* "3.11", "3.13.2", "3.14.0t": 3.9-3.12 are known by their minor version
 * only (layout tables per minor), so "3.11", not a made-up "3.11.0". */
static void python_name(const struct ps_quality *q, char *buf, size_t len)
{
    unsigned v = q->hexversion;
    char micro[16] = "";
    if (v >= 0x030D0000)
        snprintf(micro, sizeof micro, ".%u", (v >> 8) & 0xff);
    snprintf(buf, len, "%u.%u%s%s", (v >> 24) & 0xff, (v >> 16) & 0xff, micro,
             q->free_threaded ? "t" : "");
}

/* Samples dropped for a reason other than unreadable or inconsistent
 * memory. */
static uint64_t dropped_other(const struct ps_quality *q)
{
    if (q->d.errors < q->d.errors_unreadable + q->d.errors_inconsistent)
        return 0;
    return q->d.errors - q->d.errors_unreadable - q->d.errors_inconsistent;
}

/* Text that did not fit buf (len bytes) is cut at the last whole line
 * that does: a reader never sees half a "key value" line.  Its length. */
static size_t whole_lines(char *buf, size_t len)
{
    size_t keep = len - 1;
    while (keep > 0 && buf[keep - 1] != '\n')
        keep--;
    buf[keep] = '\0';
    return keep;
}

size_t ps_quality_format(const struct ps_quality *q, char *buf, size_t len)
{
    char python[48];
    if (len == 0)
        return 0;
    python_name(q, python, sizeof python);
    int n = snprintf(buf, len,
                     "how %s\n"
                     "mode %s\n"
                     "python %s\n"
                     "requested_rate_hz %d\n"
                     "achieved_rate_hz %.1f\n"
                     "duration_s %.3f\n"
                     "ticks %llu\n"
                     "samples %llu\n"
                     "late_ticks %llu\n"
                     "dropped_unreadable %llu\n"
                     "dropped_inconsistent %llu\n"
                     "dropped_other %llu\n"
                     "truncated_stacks %llu\n"
                     "sampler_cpu_s %.3f\n"
                     "budget_pct %.2f\n"
                     "budget_adjustments %llu\n"
                     "rate_now_hz %d\n"
                     "native_masked %llu\n"
                     "library %s\n",
                     q->how, q->mode, python, q->requested_hz, ps_quality_achieved_hz(q),
                     (double)q->duration_ns / 1e9, (unsigned long long)q->d.ticks,
                     (unsigned long long)q->d.samples, (unsigned long long)q->d.late_ticks,
                     (unsigned long long)q->d.errors_unreadable,
                     (unsigned long long)q->d.errors_inconsistent,
                     (unsigned long long)dropped_other(q), (unsigned long long)q->d.truncated,
                     (double)q->d.sampler_cpu_ns / 1e9, q->d.budget_pct,
                     (unsigned long long)q->d.budget_adjustments, q->d.rate_now_hz,
                     (unsigned long long)q->d.native_masked, PS_VERSION_STRING);
    if (n < 0)
        return 0;
    return (size_t)n >= len ? whole_lines(buf, len) : (size_t)n;
}

/* The keys whose values are words (strings in JSON), not numbers. */
static int string_key(const char *key, size_t klen)
{
    static const char *const words[] = { "how", "mode", "python", "library" };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (klen == strlen(words[i]) && memcmp(key, words[i], klen) == 0)
            return 1;
    }
    return 0;
}

size_t ps_quality_json(const struct ps_quality *q, long pid, char *buf, size_t len)
{
    char lines[1024];
    size_t n = ps_quality_format(q, lines, sizeof lines);
    size_t o = 0;
    int w = snprintf(buf, len, "{\n \"pid\": %ld", pid);
    if (w < 0 || (size_t)w >= len)
        return 0;
    o = (size_t)w;
    /* "key value" lines; the values are ours: numbers, or words without
     * quotes or backslashes (string_key: always strings). */
    for (size_t i = 0; i < n;) {
        char *nl = memchr(lines + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - lines) : n;
        char *sp = memchr(lines + i, ' ', end - i);
        if (sp != NULL) {
            size_t klen = (size_t)(sp - (lines + i));
            const char *v = sp + 1;
            int vlen = (int)(end - (size_t)(v - lines));
            int str = string_key(lines + i, klen);
            w = snprintf(buf + o, len - o, ",\n \"%.*s\": %s%.*s%s", (int)klen, lines + i,
                         str ? "\"" : "", vlen, v, str ? "\"" : "");
            if (w < 0 || (size_t)w >= len - o)
                return 0;
            o += (size_t)w;
        }
        i = end + 1;
    }
    w = snprintf(buf + o, len - o, "\n}\n");
    if (w < 0 || (size_t)w >= len - o)
        return 0;
    return o + (size_t)w;
}
