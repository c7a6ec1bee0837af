/*
 * smallstack.c - the library's paths that run on a program thread's own
 * stack, run with only a small part of that stack left (issue #37: a musl
 * thread has 128 KiB by default), for test_core.py's
 * test_small_thread_stack through ctypes.
 *
 * ss_near_end(margin) uses up this thread's stack until about margin bytes
 * are left above its lowest address, then, until ss_stop(), spins (where
 * the sampler's SIGURG for native stacks lands, PYSAMPLE_NATIVE=1) and
 * makes the calls the library stands in front of or hooks: pthread_create
 * (interpose_threads.c), sigaction, signal, raise, kill, pthread_sigmask,
 * sigprocmask, fopen/fclose, dlopen, fork (our pthread_atfork handlers
 * run on this stack) with _exit in the child.  A path that needs more than
 * what is left runs into the guard page: the process dies of SIGSEGV.
 * Returns the rounds made, or -1 if the stack could not be found.
 *
 * A guard page is not enough of a witness: musl has one, and a path that
 * needs more than a page past it lands in whatever is mapped below.  So
 * what is left is painted before the spinning starts and read back after
 * it: ss_deepest() is the most stack, in bytes below the spinning frame,
 * that any of it used (the library's handlers and stand-ins included).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* pthread_getattr_np */
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

void ss_stop(void);
size_t ss_stack_size(void);
long ss_near_end(size_t margin);
long ss_raised(void);
size_t ss_deepest(void);

#define PAINT 0xa5

static atomic_int stop;
static atomic_long raised;
static atomic_size_t deepest;
/* The calls change process-wide dispositions: one thread at a time. */
static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;

void ss_stop(void)
{
    atomic_store(&stop, 1);
}

/* This thread's stack: its lowest address and its size. */
static int stack_of(uintptr_t *low, size_t *size)
{
    pthread_attr_t a;
    void *addr;
    if (pthread_getattr_np(pthread_self(), &a) != 0)
        return -1;
    int rc = pthread_attr_getstack(&a, &addr, size);
    pthread_attr_destroy(&a);
    *low = (uintptr_t)addr;
    return rc == 0 ? 0 : -1;
}

size_t ss_stack_size(void)
{
    uintptr_t low;
    size_t size;
    return stack_of(&low, &size) == 0 ? size : 0;
}

static void on_usr2(int sig)
{
    (void)sig;
    atomic_fetch_add(&raised, 1);
}

static void *nothing(void *arg)
{
    return arg;
}

/* One round of the calls the library is in front of; 0 or -1. */
static __attribute__((noinline)) int calls(void)
{
    struct sigaction sa = { .sa_handler = on_usr2 }, old;
    sigset_t set, prev;
    pthread_t t;
    int ok = sigaction(SIGUSR2, &sa, &old) == 0 && raise(SIGUSR2) == 0 &&
             kill(getpid(), 0) == 0 && signal(SIGUSR2, SIG_IGN) != SIG_ERR &&
             sigaction(SIGUSR2, &old, NULL) == 0;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    ok = ok && pthread_sigmask(SIG_BLOCK, &set, &prev) == 0 &&
         pthread_sigmask(SIG_SETMASK, &prev, NULL) == 0 &&
         sigprocmask(SIG_BLOCK, &set, &prev) == 0 && sigprocmask(SIG_SETMASK, &prev, NULL) == 0;
    ok = ok && pthread_create(&t, NULL, nothing, NULL) == 0 && pthread_join(t, NULL) == 0;
    FILE *f = fopen("/proc/self/stat", "r");
    ok = ok && f != NULL && fclose(f) == 0;
    void *h = dlopen(NULL, RTLD_NOW);
    ok = ok && h != NULL && dlclose(h) == 0;
    pid_t pid = fork();
    if (pid == 0)
        _exit(3);
    int status;
    ok = ok && pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 3;
    return ok ? 0 : -1;
}

/* Spins between rounds of calls until ss_stop(). */
static __attribute__((noinline)) long ss_busy(void)
{
    long rounds = 0;
    while (!atomic_load(&stop)) {
        for (volatile unsigned i = 0; i < 2000000; i++)
            ;
        pthread_mutex_lock(&one_at_a_time);
        int rc = calls();
        pthread_mutex_unlock(&one_at_a_time);
        if (rc != 0)
            return -2;
        rounds++;
    }
    return rounds;
}

/* Records that the stack below spin, down to low, was used from its
 * lowest unpainted byte up. */
static void measure(uintptr_t low, uintptr_t spin)
{
    uintptr_t first = low;
    while (first < spin && *(volatile unsigned char *)first == PAINT)
        first++;
    size_t used = spin - first, seen = atomic_load(&deepest);
    while (used > seen && !atomic_compare_exchange_weak(&deepest, &seen, used))
        ;
}

/* Takes n bytes of stack, touching each page from the top down (the
 * order the stack grows in), paints the rest down to low, then runs
 * ss_busy on it.  The paint stops a red zone's worth (128 bytes on
 * x86-64) plus slack below this frame, and is a plain loop: a call's own
 * frame would land in the paint. */
static __attribute__((noinline)) long at_depth(size_t n, uintptr_t low)
{
    volatile char *p = __builtin_alloca(n);
    for (size_t i = n; i >= 4096; i -= 4096)
        p[i - 1] = 0;
    p[0] = 0;
    uintptr_t spin = (uintptr_t)p - 512;
    for (volatile unsigned char *q = (volatile unsigned char *)low; (uintptr_t)q < spin; q++)
        *q = PAINT;
    long rounds = ss_busy();
    measure(low, spin);
    return rounds;
}

long ss_near_end(size_t margin)
{
    uintptr_t low;
    size_t size;
    char here;
    if (stack_of(&low, &size) != 0 || (uintptr_t)&here < low + margin + 4096)
        return -1;
    return at_depth((uintptr_t)&here - low - margin, low);
}

size_t ss_deepest(void)
{
    return atomic_load(&deepest);
}

long ss_raised(void)
{
    return atomic_load(&raised);
}
