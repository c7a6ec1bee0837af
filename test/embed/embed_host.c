/*
 * embed_host - a C program that is not Python when it starts and embeds
 * CPython later through dlopen(), as uWSGI's python plugin, mod_wsgi or a
 * game engine do (issue #13; test/integration/test_embed.py runs it).
 *
 *   embed_host LIBPYTHON SCRIPT main       one interpreter runs SCRIPT main
 *   embed_host LIBPYTHON SCRIPT subinterp  the main interpreter runs
 *                                          SCRIPT main, then two
 *                                          sub-interpreters SCRIPT sub1/sub2
 *   embed_host LIBPYTHON SCRIPT second OTHERLIB
 *                                          as main, with a second, different
 *                                          libpython loaded (RTLD_LOCAL) while
 *                                          the first runs
 *   embed_host LIB - plain                 dlopen/dlclose LIB (not Python) a
 *                                          few times, print "threads N" (the
 *                                          process's thread count) and exit
 *
 * No Python headers: the few functions needed are looked up with dlsym()
 * and have plain C signatures.  Between loading libpython and initialising
 * it the host waits 300 ms, as uWSGI does between loading its plugin and
 * Py_Initialize: the profiler must wait for the interpreter, not give up.
 * Each role runs SCRIPT's stated time, and again until the sampler has
 * woken WANT_TICKS times while that role ran (see sampled_enough below).
 * EMBED_END=_exit ends with _exit() after finalizing; EMBED_END=sigterm
 * sends itself SIGTERM (default action) before finalizing, while the
 * interpreter is still up.  Otherwise: exit status 0, or 2 with a message
 * on stderr.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pysample.h"

typedef void (*init_fn)(int);
typedef int (*fini_fn)(void);
typedef int (*run_fn)(const char *, void *);
typedef void *(*newinterp_fn)(void);
typedef void *(*swap_fn)(void *);
typedef void (*endinterp_fn)(void *);
typedef void *(*get_fn)(void);

static void *need(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (p == NULL) {
        fprintf(stderr, "embed_host: %s: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

static void nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static int run(run_fn runstr, const char *script, const char *role)
{
    char code[8192];
    snprintf(code, sizeof code,
             "import sys\n"
             "sys.argv = [%s%s%s, '%s']\n"
             "with open(sys.argv[0]) as f:\n"
             "    src = f.read()\n"
             "exec(compile(src, sys.argv[0], 'exec'), {'__name__': '__main__'})\n",
             "'", script, "'", role);
    return runstr(code, NULL);
}

/* ---- running a role until it has been sampled ----------------------------
 *
 * On a loaded machine the sampler thread gets the CPU late and takes fewer
 * samples per second than its rate, so a role that ran a fixed time could
 * leave fewer samples than test_embed.py asks for (40 of each role).  The
 * host therefore runs a role again, each run SCRIPT's stated time, until
 * the sampler has woken WANT_TICKS times during that role's runs, as
 * test/integration/programs/sampled.py does for the Python programs.  The
 * tick count comes from pysample_status() of the preloaded library, looked
 * up here, in C: the script could only ask through ctypes, which a
 * sub-interpreter may refuse to import (an isolated one refuses
 * single-phase extension modules, 3.12's _ctypes among them), and the
 * script stays the same plain loop in every interpreter.  Each run adds
 * to the same stacks: same file, function and lines.  Without the
 * library, or when it does not sample
 * (a refused Python), one run is all; a sampler that never gets there is
 * given up on after GIVE_UP_S, and the test's assertions say so.
 */
#define WANT_TICKS 80
#define GIVE_UP_S 60

typedef int (*status_fn)(struct pysample_status *, unsigned);

struct role {
    const char *name;
    uint64_t ticks;    /* sampler wake-ups while it ran */
    int runs;
};

static status_fn status_of(void)
{
    /* Preloaded, so in the global scope.  A miss leaves a dlerror()
     * message that nobody reads. */
    return (status_fn)dlsym(RTLD_DEFAULT, "pysample_status");
}

/* The sampler's wake-ups so far; 0 if it does not sample (now). */
static int sampler_ticks(status_fn status, uint64_t *ticks)
{
    struct pysample_status st;
    if (status == NULL || status(&st, sizeof st) != 0 || !st.running)
        return 0;
    *ticks = st.ticks;
    return 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs the role once and counts the ticks it got.  Ticks are counted only
 * when the sampler ran both before and after; a run it started during
 * counts none (the next run does). */
static int run_counted(run_fn runstr, status_fn status, const char *script, struct role *r)
{
    uint64_t before = 0, after = 0;
    int had = sampler_ticks(status, &before);
    int rc = run(runstr, script, r->name);
    if (sampler_ticks(status, &after) && had && after >= before)
        r->ticks += after - before;
    r->runs++;
    return rc;
}

/* What it took, for whoever reads a failing test's output. */
static void report(const struct role *r)
{
    printf("embed_host: %s ran %d times, %llu sampler ticks\n", r->name, r->runs,
           (unsigned long long)r->ticks);
}

/* 1 while the role should run again: the sampler samples and has not yet
 * woken WANT_TICKS times during the role, and the time is not up. */
static int more(status_fn status, const struct role *r, double give_up)
{
    uint64_t ticks;
    return sampler_ticks(status, &ticks) && r->ticks < WANT_TICKS && now_s() < give_up;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: embed_host LIBPYTHON SCRIPT main|subinterp|second OTHER|plain\n");
        return 2;
    }
    const char *mode = argv[3];
    if (strcmp(mode, "plain") == 0) {
        for (int i = 0; i < 20; i++) {
            void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
            if (h == NULL) {
                fprintf(stderr, "embed_host: %s\n", dlerror());
                return 2;
            }
            dlclose(h);
        }
        nap_ms(200);
        /* The test checks that the library started no thread here. */
        int threads = 0;
        DIR *d = opendir("/proc/self/task");
        for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
            threads += e->d_name[0] != '.';
        if (d != NULL)
            closedir(d);
        printf("threads %d\n", threads);
        return 0;
    }
    /* RTLD_GLOBAL, as embedders do: extension modules take their Py*
     * symbols from the global scope. */
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        fprintf(stderr, "embed_host: %s\n", dlerror());
        return 2;
    }
    init_fn init = (init_fn)need(lib, "Py_InitializeEx");
    fini_fn fini = (fini_fn)need(lib, "Py_FinalizeEx");
    run_fn runstr = (run_fn)need(lib, "PyRun_SimpleStringFlags");
    nap_ms(300);
    init(0);

    int rc = 0;
    if (strcmp(mode, "second") == 0) {
        if (argc < 5) {
            fprintf(stderr, "embed_host: second needs another libpython\n");
            return 2;
        }
        /* Loaded, never initialised: RTLD_LOCAL keeps its symbols apart. */
        if (dlopen(argv[4], RTLD_NOW | RTLD_LOCAL) == NULL) {
            fprintf(stderr, "embed_host: %s\n", dlerror());
            return 2;
        }
    }
    status_fn status = status_of();
    double give_up = now_s() + GIVE_UP_S;
    struct role main_role = { "main", 0, 0 };
    do
        rc |= run_counted(runstr, status, argv[2], &main_role);
    while (rc == 0 && more(status, &main_role, give_up));
    report(&main_role);
    if (strcmp(mode, "subinterp") == 0) {
        newinterp_fn newinterp = (newinterp_fn)need(lib, "Py_NewInterpreter");
        endinterp_fn endinterp = (endinterp_fn)need(lib, "Py_EndInterpreter");
        swap_fn swap = (swap_fn)need(lib, "PyThreadState_Swap");
        get_fn get = (get_fn)need(lib, "PyThreadState_Get");
        void *main_ts = get();
        void *sub1 = newinterp();
        void *sub2 = newinterp();
        if (sub1 == NULL || sub2 == NULL) {
            fprintf(stderr, "embed_host: Py_NewInterpreter failed\n");
            return 2;
        }
        /* Taken in turns, at least twice each, so both live at the same
         * time; more rounds while either has not been sampled enough. */
        struct role one = { "sub1", 0, 0 }, two = { "sub2", 0, 0 };
        give_up = now_s() + GIVE_UP_S;
        while (one.runs < 2 ||
               (rc == 0 && (more(status, &one, give_up) || more(status, &two, give_up)))) {
            swap(sub1);
            rc |= run_counted(runstr, status, argv[2], &one);
            swap(sub2);
            rc |= run_counted(runstr, status, argv[2], &two);
        }
        report(&one);
        report(&two);
        swap(sub1);
        endinterp(sub1);
        swap(sub2);
        endinterp(sub2);
        swap(main_ts);
    }
    const char *end = getenv("EMBED_END");
    if (end != NULL && strcmp(end, "sigterm") == 0) {
        fflush(stdout);
        kill(getpid(), SIGTERM);
        nap_ms(10000);
        return 3;
    }
    if (fini() != 0)
        rc = 1;
    printf("embed_host: done\n");
    fflush(stdout);
    if (end != NULL && strcmp(end, "_exit") == 0)
        _exit(rc ? 1 : 0);
    return rc ? 1 : 0;
}
