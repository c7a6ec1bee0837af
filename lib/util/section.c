/*
 * section.c - our critical sections (section.h): the signals our
 * fatal-signal handler takes (lib/platform/linux/fatal.c; which ones is
 * platform/sigview.c's table) held off the calling thread, and a lock
 * held.
 *
 * The mask is changed with the C library's own pthread_sigmask, not the
 * program's (our stand-in on Linux): these are the library's changes, of
 * signals the native path never sends, so they must not make the sampler
 * read every thread's mask again (linux/sigmask.c), as they did once for
 * each pysample_status() call, lifecycle step and fork.
 */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>

#include "platform/platform.h"
#include "platform/sigview.h"
#include "util/section.h"

void ps_section_enter(struct ps_section *s, pthread_mutex_t *lock)
{
    /* the signals our handler writes the profile on: the table's */
    sigset_t set;
    sigemptyset(&set);
    ps_sig_fatal_add(&set);
    ps_real_pthread_sigmask(SIG_BLOCK, &set, &s->old);
    s->lock = lock;
    if (lock != NULL)
        pthread_mutex_lock(lock);
}

void ps_section_leave(struct ps_section *s)
{
    if (s->lock != NULL)
        pthread_mutex_unlock(s->lock);
    ps_real_pthread_sigmask(SIG_SETMASK, &s->old, NULL);
}
