/*
 * quality.h - what a profile is worth, said in every profile: requested
 * and achieved rate, ticks, samples, walks dropped by cause, truncated
 * stacks, CPU-budget adjustments, interpreter version, mode.
 *
 * One text form, "key value" lines (docs/format.md lists the keys): sent
 * as the control channel's meta frame, and turned by the tool into the
 * sidecar .json, the pprof comments and the speedscope metadata.
 */
#ifndef PS_QUALITY_H
#define PS_QUALITY_H

#include <stddef.h>
#include <stdint.h>

#include "sampler/state.h"

struct ps_quality {
    const char *how;          /* "armed record", "armed top", "PYSAMPLE_OUTPUT", ... */
    const char *mode;         /* "wall" or "cpu" */
    unsigned hexversion;      /* the interpreter's PY_VERSION_HEX */
    int free_threaded;
    int requested_hz;
    uint64_t duration_ns;     /* wall time the numbers below cover */
    struct ps_stats d;        /* counters over that time */
};

/*
 * The counters between base and now (both from ps_sampler_stats) over
 * duration_ns.
 */
void ps_quality_between(struct ps_quality *q, const struct ps_stats *base,
                        const struct ps_stats *now, uint64_t duration_ns);

/* Achieved ticks per second (0 when nothing was measured). */
double ps_quality_achieved_hz(const struct ps_quality *q);

/* Writes the "key value\n" lines into buf.  Returns the length (the text
 * is cut short, still ending in a newline, if buf is too small). */
size_t ps_quality_format(const struct ps_quality *q, char *buf, size_t len);

/* The same figures as a JSON object (with "pid"), for the sidecar file. */
size_t ps_quality_json(const struct ps_quality *q, long pid, char *buf, size_t len);

#endif
