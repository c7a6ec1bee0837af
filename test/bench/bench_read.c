/*
 * bench_read.c - what one fault-safe read costs on each path.
 *
 *     bench_read [--json]
 *
 * Times ps_read() (lib/memory/memread.c, the very code the library uses) on each
 * path it can take -- direct (guarded memcpy), process_vm_readv, file
 * (pwrite into a mapped memfd) and pipe -- for 8-byte reads (one pointer),
 * 80-byte reads (a frame or thread-state slice) and 16 KiB copies (a whole
 * data-stack chunk), plus a read that fails (unmapped address: for the
 * direct path that is a SIGSEGV delivered and jumped out of) and the
 * per-tick ownership check.  An unguarded memcpy is the floor.
 *
 * Each figure is the minimum over 7 batches of ns per read (the median is
 * printed beside it): on a shared machine the minimum is the cost, the
 * rest is other processes.  docs/safety.md quotes the numbers and draws
 * the conclusions.  Prints a table, or with --json one line of JSON.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "memory/memread.h"
#include "../unit/read_path.h"

#define BATCHES 7

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static unsigned char *src, *hole;
static unsigned char dst[16384];
static volatile int sink;

enum op { OP_READ, OP_MEMCPY, OP_TICK };

/* ns per operation: min and median over BATCHES batches of ~5 ms each. */
static void measure(enum op op, uintptr_t from, size_t n, double *min, double *med)
{
    double per[BATCHES];
    long reps = 16;
    for (;;) {  /* size a batch to about 5 ms */
        uint64_t t0 = now_ns();
        for (long i = 0; i < reps; i++) {
            if (op == OP_READ)
                sink += ps_read(dst, from, n);
            else if (op == OP_MEMCPY)
                memcpy(dst, (const void *)from, n);
            else
                ps_mem_tick();
        }
        if (now_ns() - t0 > 5000000 || reps > (1L << 26))
            break;
        reps *= 2;
    }
    for (int b = 0; b < BATCHES; b++) {
        uint64_t t0 = now_ns();
        for (long i = 0; i < reps; i++) {
            if (op == OP_READ)
                sink += ps_read(dst, from, n);
            else if (op == OP_MEMCPY) {
                memcpy(dst, (const void *)from, n);
                __asm__ volatile("" ::: "memory");
            } else
                ps_mem_tick();
        }
        per[b] = (double)(now_ns() - t0) / (double)reps;
    }
    qsort(per, BATCHES, sizeof per[0], cmp_double);
    *min = per[0];
    *med = per[BATCHES / 2];
}


int main(int argc, char **argv)
{
    int json = argc > 1 && strcmp(argv[1], "--json") == 0;
    src = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED || hole == MAP_FAILED)
        return 1;
    memset(src, 0xab, 65536);
    if (ps_mem_init() != 0)
        return 1;
    ps_mem_enable_direct();

    static const char *const paths[] = { "memcpy", "direct", "process_vm_readv", "procmem", "file",
                                         "pipe" };
    static const size_t sizes[] = { 8, 80, 16384 };
    int first = 1;

    if (json)
        printf("{\"bench\":\"read\",\"unit\":\"ns_per_read_min\",\"paths\":{");
    else
        printf("%-17s %14s %14s %16s %14s\n", "path", "8 B", "80 B", "16 KiB", "failed 8 B");
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        int is_memcpy = strcmp(paths[p], "memcpy") == 0;
        if (!is_memcpy && use_path(paths[p]) != 0) {
            if (!json)
                printf("%-17s not available here\n", paths[p]);
            continue;
        }
        double mn[4], md[4];
        for (size_t s = 0; s < 3; s++)
            measure(is_memcpy ? OP_MEMCPY : OP_READ, (uintptr_t)src + 64, sizes[s], &mn[s], &md[s]);
        if (is_memcpy)
            mn[3] = md[3] = -1;
        else
            measure(OP_READ, (uintptr_t)hole, 8, &mn[3], &md[3]);
        if (json) {
            printf("%s\"%s\":{\"8\":%.1f,\"80\":%.1f,\"16384\":%.1f,\"failed_8\":%.1f}",
                   first ? "" : ",", paths[p], mn[0], mn[1], mn[2], mn[3]);
            first = 0;
        } else {
            char cells[4][32];
            for (int i = 0; i < 4; i++) {
                if (mn[i] < 0)
                    snprintf(cells[i], sizeof cells[i], "-");
                else
                    snprintf(cells[i], sizeof cells[i], "%.1f (%.1f)", mn[i], md[i]);
            }
            printf("%-17s %14s %14s %16s %14s\n", paths[p], cells[0], cells[1], cells[2], cells[3]);
        }
    }
    /* The ownership check done once per tick on the direct path. */
    double tmin = -1, tmed = -1;
    if (use_path("direct") == 0)
        measure(OP_TICK, 0, 0, &tmin, &tmed);
    if (json)
        printf("},\"tick_check\":%.1f}\n", tmin);
    else
        printf("\nper-tick ownership check (2 sigaction queries): %.1f ns (median %.1f)\n"
               "ns per read, minimum of %d batches (median in parentheses)\n",
               tmin, tmed, BATCHES);
    return 0;
}
