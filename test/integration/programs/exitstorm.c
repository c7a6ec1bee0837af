/*
 * exitstorm.c - a C library for test_process.py's _exit storm (loaded
 * through ctypes): a SIGTERM handler that calls _exit(status), which POSIX
 * allows in a signal handler, and a loop that spends nearly all its time
 * inside malloc and free, so that the signal nearly always lands while
 * the main thread holds the allocator's lock (with MALLOC_ARENA_MAX=1
 * every thread shares that one arena, the profiler's included).  Also a
 * handler that raise()s another signal, for the same storm through the
 * library's raise() stand-in.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int es_install(int status);
int es_install_raise(int from, int to);
long es_churn(void);

static volatile sig_atomic_t exit_status, raised;

static void on_term(int sig)
{
    (void)sig;
    _exit(exit_status);
}

/* 0, or -1 if the handler could not be installed. */
int es_install(int status)
{
    exit_status = status;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGTERM, &sa, NULL);
}

static void on_raise(int sig)
{
    (void)sig;
    raise(raised);
}

/* When from arrives, raise(to) in the handler.  0 or -1. */
int es_install_raise(int from, int to)
{
    raised = to;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_raise;
    sigemptyset(&sa.sa_mask);
    return sigaction(from, &sa, NULL);
}

/* Allocates and frees for ever (sizes that take the arena's lock rather
 * than a thread cache's, and keep it busy merging and splitting). */
long es_churn(void)
{
    enum { KEEP = 64 };
    void *keep[KEEP] = { 0 };
    for (unsigned long i = 0;; i++) {
        size_t k = i % KEEP;
        free(keep[k]);
        keep[k] = malloc(2048 + (i * 7919) % 65536);
        if (keep[k] != NULL)
            ((volatile char *)keep[k])[0] = 1;
    }
    return 0;
}
