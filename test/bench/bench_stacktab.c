/*
 * bench_stacktab.c - memory and output cost of the aggregated profile.
 *
 *     bench_stacktab SAMPLES DISTINCT DIR [timeline]
 *
 * Fills a stack table (lib/profile/stacktab.c, the very code the library uses) with
 * SAMPLES samples spread over DISTINCT distinct stacks, then renders it and
 * writes it atomically into DIR the way the library does at exit.  Prints
 * one line of JSON: resident memory added by the table (and at the peak of
 * writing), time per added sample, render and write times (wall and this
 * process's CPU: the machine is shared), output size.
 *
 * The stacks look like real ones: 4 threads; depth 8 to 40 (mean 24);
 * frames drawn from 3000 functions with package-style qualified names and
 * site-packages paths, the outer frames shared between many stacks as
 * real call trees share their roots.  The frames are made before the
 * memory baseline is taken, so only the table's own memory counts.
 *
 * With "timeline" the table keeps a timeline too (PYSAMPLE_TIMELINE,
 * bounded at SAMPLES records, so none is dropped), its ticks 1 ms apart
 * with one sample per thread each, and the timeline file is written after
 * the profile: the memory and time per sample include it, and its write
 * time and size are reported.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "profile/output.h"
#include "profile/render.h"
#include "profile/stacktab.h"
#include "util/symtab.h"
#include "profile/timeline.h"
#include "util/arena.h"

#define NFUNCS 3000
#define NTHREADS 4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static long peak_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int fill(void *ctx, ps_output_put_fn put, void *put_ctx)
{
    return ps_rendered_emit(ctx, put, put_ctx);
}

/* The library's write path (output.c) with this process's pid as name. */
static int write_rendered(const char *path, struct ps_rendered *rd)
{
    char why[256];
    if (ps_output_init(path, 0600, why, sizeof why) != 0)
        return -1;
    return ps_output_write_with(path, fill, rd, NULL, 0);
}

struct tl_fill {
    const struct ps_timeline *tl;
    const struct ps_rendered *rd;
    struct ps_arena *mem;
};

static int fill_tl(void *ctx, ps_output_put_fn put, void *put_ctx)
{
    const struct tl_fill *f = ctx;
    return ps_timeline_emit(f->tl, f->rd, put, put_ctx, f->mem);
}

int main(int argc, char **argv)
{
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "timeline") == 0)) {
        fprintf(stderr, "usage: %s SAMPLES DISTINCT DIR [timeline]\n", argv[0]);
        return 2;
    }
    int with_tl = argc == 5;
    long samples = atol(argv[1]), distinct = atol(argv[2]);
    const char *dir = argv[3];
    if (distinct > samples)
        distinct = samples;
    if (samples <= 0 || distinct <= 0)
        return 2;

    /* The stacks, made up front: distinct * (up to 40) frames plus a depth
     * and thread each.  Built before the baseline. */
    uint32_t *depth = malloc((size_t)distinct * sizeof *depth);
    uint64_t *frames = malloc((size_t)distinct * 40 * sizeof *frames);
    uint32_t *funcs = malloc(NFUNCS * sizeof *funcs);
    if (depth == NULL || frames == NULL || funcs == NULL)
        return 1;
    memset(depth, 1, (size_t)distinct * sizeof *depth);  /* touched now: not counted */
    memset(frames, 1, (size_t)distinct * 40 * sizeof *frames);

    struct ps_stacktab t;
    struct ps_symtab syms;
    if (ps_symtab_init(&syms, 200000) != 0 ||
        ps_stacktab_init(&t, 200000, ps_frame(PS_SYM_STACKS_FULL, PS_LINE_NONE)) != 0)
        return 1;
    struct ps_timeline tl;
    ps_timeline_init(&tl, with_tl ? (size_t)samples : 0, 1000, 0, 0);
    t.tl = with_tl ? &tl : NULL;
    long rss0 = rss_kib();

    char name[128], file[160];
    for (int i = 0; i < NFUNCS; i++) {
        snprintf(name, sizeof name, "Handler%d.process_item_%d", i % 97, i);
        snprintf(file, sizeof file, "/usr/lib/python3/dist-packages/app/module_%d/impl.py",
                 i % 211);
        funcs[i] = ps_sym_python(&syms, name, file);
    }
    uint32_t labels[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        snprintf(name, sizeof name, "worker-%d", i);
        labels[i] = ps_sym_label(&syms, 1000 + i, i == 0 ? "MainThread" : name);
    }
    for (long k = 0; k < distinct; k++) {
        uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(k + 1);
        depth[k] = 8 + (uint32_t)(rng(&s) % 33);
        uint64_t *f = frames + k * 40;
        for (uint32_t d = 0; d < depth[k]; d++) {
            /* Roots come from a few functions, leaves from many. */
            uint32_t pool = d < 3 ? 4 : d < 8 ? 60 : NFUNCS;
            uint32_t fn = (uint32_t)(rng(&s) % pool);
            /* A function calls out from a handful of lines. */
            f[d] = ps_frame(funcs[fn], 10 + 7 * (int32_t)(fn % 50) + (int32_t)(rng(&s) % 6));
        }
        /* Distinct by construction: the leaf encodes k. */
        f[depth[k] - 1] = ps_frame(funcs[k % NFUNCS], 1000 + (int32_t)(k / NFUNCS));
    }
    long rss_interned = rss_kib();

    double t0 = now_s();
    uint64_t s = 12345;
    for (long i = 0; i < samples; i++) {
        /* Every stack at least once, then a skewed spread (hot stacks get
         * most samples, as in real profiles). */
        long k = i < distinct ? i : (long)(rng(&s) % (uint64_t)distinct) / (1 + (long)(rng(&s) % 4));
        ps_timeline_tick(&tl, (uint64_t)(i / NTHREADS) * 1000000u);
        if (ps_stacktab_add(&t, labels[k % NTHREADS], frames + k * 40, depth[k], 1) != 0)
            return 1;
    }
    double t_add = now_s() - t0;
    long rss_filled = rss_kib();
    long peak_before = peak_kib();

    /* What the library does at exit (profile.c, ps_profile_write): the
     * lines sorted (under the profile's lock there), then made and written
     * a chunk at a time.  "render" is the sort, "write" the rest. */
    struct ps_rendered *rd;
    t0 = now_s();
    double c0 = cpu_s();
    if (ps_render_prepare(&t, &syms, &rd) != 0)
        return 1;
    double t_render = now_s() - t0, c_render = cpu_s() - c0;
    char path[4096];
    snprintf(path, sizeof path, "%s/bench-profile.txt", dir);
    t0 = now_s();
    c0 = cpu_s();
    if (write_rendered(path, rd) != 0)
        return 1;
    double t_write = now_s() - t0, c_write = cpu_s() - c0;
    double t_tl = 0;
    size_t tl_len = 0;
    struct stat st;
    if (with_tl) {
        struct ps_arena mem = { 0 };
        t0 = now_s();
        struct tl_fill f = { ps_timeline_copy(&tl, &mem), rd, &mem };
        if (f.tl == NULL || ps_output_write_beside(path, ".timeline", fill_tl, &f) != 0)
            return 1;
        t_tl = now_s() - t0;
        ps_arena_free(&mem);
        char side[4200];
        snprintf(side, sizeof side, "%s.timeline", path);
        tl_len = stat(side, &st) == 0 ? (size_t)st.st_size : 0;
        unlink(side);
    }
    long peak_after = peak_kib();
    size_t len = stat(path, &st) == 0 ? (size_t)st.st_size : 0;
    ps_rendered_free(rd);
    unlink(path);

    printf("{\"samples\": %ld, \"distinct\": %ld, \"stacks_in_table\": %zu, "
           "\"rss_table_kib\": %ld, \"rss_strings_kib\": %ld, \"peak_write_extra_kib\": %ld, "
           "\"add_ns_per_sample\": %.1f, \"render_s\": %.4f, \"write_s\": %.4f, "
           "\"render_cpu_s\": %.4f, \"write_cpu_s\": %.4f, "
           "\"output_bytes\": %zu, \"timeline_records\": %zu, \"timeline_write_s\": %.4f, "
           "\"timeline_bytes\": %zu}\n",
           samples, distinct, t.used, rss_filled - rss_interned, rss_interned - rss0,
           peak_after > peak_before ? peak_after - peak_before : 0,
           t_add * 1e9 / (double)samples, t_render, t_write, c_render, c_write, len, tl.n, t_tl,
           tl_len);
    ps_timeline_free(&tl);
    ps_stacktab_free(&t);
    ps_symtab_free(&syms);
    return 0;
}
