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
 * EMBED_END=_exit ends with _exit() after finalizing; EMBED_END=sigterm
 * sends itself SIGTERM (default action) before finalizing, while the
 * interpreter is still up.  Otherwise: exit status 0, or 2 with a message
 * on stderr.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    rc |= run(runstr, argv[2], "main");
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
        /* Taken in turns, twice each, so both live at the same time. */
        for (int round = 0; round < 2; round++) {
            swap(sub1);
            rc |= run(runstr, argv[2], "sub1");
            swap(sub2);
            rc |= run(runstr, argv[2], "sub2");
        }
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
