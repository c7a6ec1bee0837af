/*
 * linux/interpose_threads.c - the stand-ins for pthread_create and
 * pthread_exit: entry points, like interpose.c's.
 *
 * While profiling is on (ps_threads_tracking), each new thread runs a
 * small trampoline that records its pthread_t -> kernel tid (threads.c's
 * registry) and then the real start routine.  A thread about to end --
 * its start routine returned, or it called pthread_exit -- is reported to
 * the sampler (orphan.h): an armed, idle sampler sleeps until woken, and
 * must look whether the program has any thread left (a child forked by a
 * thread).  Not for threads cancelled or made by a raw clone.  The thread
 * still exists when it reports: the report only notes it (an atomic, a
 * wake-up).
 *
 * Calls go down: to threads.c (the registry) and orphan.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "platform/linux/linux.h"
#include "sampler/orphan.h"

#define PS_EXPORT __attribute__((visibility("default")))

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

struct tramp {
    void *(*fn)(void *);
    void *arg;
};

static void *trampoline(void *p)
{
    struct tramp t = *(struct tramp *)p;
    free(p);
    ps_threads_record_self();
    /* A new thread, its mask its creator's, perhaps on a reused tid:
     * what sigmask.c remembers of that tid is read again. */
    ps_sigmask_changed();
    void *ret = t.fn(t.arg);
    ps_orphan_thread_ending();
    return ret;
}

/* pthread_exit: a thread ends without returning through the trampoline
 * (CPython 3.9-3.11's PyThread_exit_thread, a main thread that leaves the
 * others running).  Resolved when first called: by a thread, not a signal
 * handler (pthread_exit is not async-signal-safe either). */
typedef void (*exit_fn)(void *);

PS_EXPORT _Noreturn void pthread_exit(void *ret)
{
    static _Atomic(exit_fn) real;
    exit_fn f = atomic_load(&real);
    if (f == NULL) {
        f = (exit_fn)ps_libc_sym("pthread_exit");
        atomic_store(&real, f);
    }
    ps_orphan_thread_ending();
    if (f != NULL)
        f(ret);
    /* No C library's pthread_exit behind us (cannot happen with glibc):
     * end this thread alone, as the kernel ends a thread. */
    for (;;)
        syscall(SYS_exit, 0);
}

static create_fn real_create(void)
{
    static _Atomic(create_fn) fn;
    create_fn f = atomic_load(&fn);
    if (f == NULL) {
        f = (create_fn)ps_libc_sym("pthread_create");
        atomic_store(&fn, f);
    }
    return f;
}

PS_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                             void *(*start)(void *), void *arg)
{
    create_fn create = real_create();
    if (create == NULL)
        return EAGAIN;
    /* Profiling off (or not Python): no trampoline, no allocation. */
    if (!ps_threads_tracking())
        return create(thread, attr, start, arg);
    struct tramp *t = malloc(sizeof *t);
    if (t == NULL)
        return create(thread, attr, start, arg);
    t->fn = start;
    t->arg = arg;
    int rc = create(thread, attr, trampoline, t);
    if (rc != 0)
        free(t);
    return rc;
}
