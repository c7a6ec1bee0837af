/*
 * timeline.c - the samples in time order (timeline.h, docs/format.md).
 *
 * The records grow by doubling up to the bound, on the sampler thread,
 * under the profile's lock and outside any guarded read (the stack table
 * grows at the same place), so malloc is fine here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/render.h"
#include "profile/timeline.h"
#include "util/arena.h"
#include "util/tickpath.h"

void ps_timeline_init(struct ps_timeline *tl, size_t max, int rate_hz, uint64_t start_mono,
                      uint64_t start_real)
{
    memset(tl, 0, sizeof *tl);
    tl->max = max;
    tl->rate_hz = rate_hz;
    tl->start_mono = tl->now = start_mono;
    tl->start_real = start_real;
}

void ps_timeline_free(struct ps_timeline *tl)
{
    free(tl->rec);
    tl->rec = NULL;
    tl->n = tl->cap = 0;
}

void ps_timeline_restart(struct ps_timeline *tl, uint64_t start_mono, uint64_t start_real)
{
    tl->n = 0;
    tl->start_mono = tl->now = start_mono;
    tl->start_real = start_real;
    tl->last_ns = 0;
    tl->dropped_records = tl->dropped_samples = tl->first_dropped_ns = 0;
}

/* Room for one more record: 0, or -1 (the bound, or out of memory). */
static int make_room(struct ps_timeline *tl)
{
    if (tl->n < tl->cap)
        return 0;
    if (tl->cap >= tl->max)
        return -1;
    size_t ncap = tl->cap ? tl->cap * 2 : 4096;
    if (ncap > tl->max || ncap < tl->cap)
        ncap = tl->max;
    struct ps_tl_record *nr = realloc(tl->rec, ncap * sizeof *nr);
    if (nr == NULL)
        return -1;
    tl->rec = nr;
    tl->cap = ncap;
    return 0;
}

PS_TICK_PATH void ps_timeline_add(struct ps_timeline *tl, uint32_t stack, uint64_t weight)
{
    if (!ps_timeline_on(tl) || weight == 0)
        return;
    uint64_t t = tl->now > tl->start_mono ? tl->now - tl->start_mono : 0;
    tl->last_ns = t;
    while (weight > 0) {
        uint32_t w = weight > UINT32_MAX ? UINT32_MAX : (uint32_t)weight;
        struct ps_tl_record *prev = tl->n ? &tl->rec[tl->n - 1] : NULL;
        if (prev != NULL && prev->t_ns == t && prev->stack == stack &&
            prev->weight <= UINT32_MAX - w) {
            prev->weight += w;
        } else if (tl->dropped_records == 0 && make_room(tl) == 0) {
            tl->rec[tl->n++] = (struct ps_tl_record){ t, stack, w };
        } else {
            /* Once one sample is dropped, every later one is too: the
             * timeline is then whole up to first_dropped_ns and empty
             * after, never full of holes. */
            if (tl->dropped_records++ == 0)
                tl->first_dropped_ns = t;
            tl->dropped_samples += weight;
            return;
        }
        weight -= w;
    }
}

struct ps_timeline *ps_timeline_copy(const struct ps_timeline *tl, struct ps_arena *mem)
{
    if (!ps_timeline_on(tl))
        return NULL;
    struct ps_timeline *c = ps_arena_alloc(mem, sizeof *c);
    struct ps_tl_record *rec = ps_arena_array(mem, tl->n + 1, sizeof *rec);
    if (c == NULL || rec == NULL)
        return NULL;
    *c = *tl;
    c->rec = rec;
    c->cap = tl->n;
    if (tl->n)
        memcpy(c->rec, tl->rec, tl->n * sizeof *c->rec);
    return c;
}

/* Lines into a buffer handed to put when it fills. */
struct out {
    char buf[64 * 1024];
    size_t used;
    ps_output_put_fn put;
    void *ctx;
};

static int flush(struct out *o)
{
    int rc = o->used ? o->put(o->ctx, o->buf, o->used) : 0;
    o->used = 0;
    return rc;
}

/* Appends one formatted line (at most 255 bytes). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int line(struct out *o, const char *fmt, ...)
{
    if (sizeof o->buf - o->used < 256) {
        int rc = flush(o);
        if (rc != 0)
            return rc;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->used, 256, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= 256)
        return -EINVAL;
    o->used += (size_t)n;
    return 0;
}

static int header(struct out *o, const struct ps_timeline *c, size_t stacks)
{
    uint64_t samples = 0;
    for (size_t i = 0; i < c->n; i++)
        samples += c->rec[i].weight;
    int rc = line(o, "# pysample timeline 1\n");
    if (rc == 0)
        rc = line(o, "rate_hz %d\nstart_unix_ns %" PRIu64 "\nend_us %" PRIu64 "\n", c->rate_hz,
                  c->start_real, c->last_ns / 1000);
    if (rc == 0)
        rc = line(o, "samples %" PRIu64 "\nmax_records %zu\n", samples, c->max);
    if (rc == 0)
        rc = line(o, "dropped_records %" PRIu64 "\ndropped_samples %" PRIu64 "\n",
                  c->dropped_records, c->dropped_samples);
    if (rc == 0 && c->dropped_records)
        rc = line(o, "first_dropped_us %" PRIu64 "\n", c->first_dropped_ns / 1000);
    if (rc == 0)
        rc = line(o, "stacks %zu\n", stacks);
    return rc;
}

int ps_timeline_emit(const struct ps_timeline *c, const struct ps_rendered *rd,
                     ps_output_put_fn put, void *put_ctx, struct ps_arena *mem)
{
    struct out *o = ps_arena_alloc(mem, sizeof *o);
    if (o == NULL)
        return -ENOMEM;
    o->used = 0;
    o->put = put;
    o->ctx = put_ctx;
    int rc = header(o, c, ps_rendered_lines(rd));
    if (rc == 0)
        rc = flush(o);
    if (rc == 0)
        rc = ps_rendered_emit(rd, put, put_ctx);
    if (rc == 0)
        rc = line(o, "records %zu\n", c->n);
    for (size_t i = 0; rc == 0 && i < c->n; i++) {
        /* Every record's stack has a line: both were copied under the
         * same lock, and the table never forgets a stack but all at once
         * (a reset, which restarts the timeline too). */
        uint32_t ln = ps_rendered_line(rd, c->rec[i].stack);
        if (ln == UINT32_MAX) {
            rc = -EINVAL;
            break;
        }
        rc = line(o, "%" PRIu64 " %" PRIu32 " %" PRIu32 "\n", c->rec[i].t_ns / 1000, ln,
                  c->rec[i].weight);
    }
    if (rc == 0)
        rc = flush(o);
    return rc;
}
