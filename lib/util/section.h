/*
 * section.h - a critical section of the library (lib/util/section.c).
 */
#ifndef PS_SECTION_H
#define PS_SECTION_H

#include <pthread.h>
#include <signal.h>

/*
 * A critical section of the library: our fatal-signal handler is held off
 * this thread (SIGTERM, SIGHUP, SIGQUIT, SIGINT blocked) and, if lock is not NULL,
 * the lock is held.  The handler waits for the sampler thread, which may
 * need the very lock this thread holds (seen: SIGTERM from
 * Pool.terminate() landing in a worker's own os._exit); the signal stays
 * pending and is delivered when the section ends.
 */
struct ps_section {
    sigset_t old;
    pthread_mutex_t *lock;
};
void ps_section_enter(struct ps_section *s, pthread_mutex_t *lock);
void ps_section_leave(struct ps_section *s);

#endif
