/*
 * bench_dlopen - the cost of the dlopen watch (lib/platform/linux/dlwatch.c) in a
 * program that is not Python (test/bench/dlwatch.py runs it bare,
 * preloaded, and preloaded with PYSAMPLE_OUTPUT, i.e. watching).
 *
 *   bench_dlopen LIB N
 *
 * Prints two lines, nanoseconds of the process's CPU time per call (the
 * wall time of a loaded shared machine mostly measures waiting):
 *   fresh <ns>   N x dlopen(LIB) + dlclose: the object is loaded and
 *                unloaded every time (the watch scans every loaded object)
 *   loaded <ns>  N x dlopen(LIB) + dlclose while another handle keeps it
 *                loaded (nothing new: the watch only reads a counter)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double loop(const char *lib, long n)
{
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            fprintf(stderr, "bench_dlopen: %s\n", dlerror());
            exit(2);
        }
        dlclose(h);
    }
    return (now_ns() - t0) / (double)n;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_dlopen LIB N\n");
        return 2;
    }
    long n = atol(argv[2]);
    printf("fresh %.0f\n", loop(argv[1], n));
    void *keep = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    printf("loaded %.0f\n", loop(argv[1], n));
    if (keep != NULL)
        dlclose(keep);
    return 0;
}
