/*
 * forkpause.h - CPython 3.12+ counts the process's threads right after
 * os.fork() (reading /proc/self/stat) and warns if there is more than one;
 * the sampler thread steps out for that moment (forkpause.c says how).
 *
 * lifecycle.c calls these: init once profiling is set up, with the lock
 * that serialises starting and stopping the sampler; the fork handlers;
 * and, for the fopen()/fclose() stand-ins, fopen_begin before the real
 * fopen of path -- if it returns 1, fopen_end with the stream (NULL if the
 * open failed) -- and fclosed after the real fclose of f.
 */
#ifndef PS_FORKPAUSE_H
#define PS_FORKPAUSE_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "util/statem.h"

/* The window after fork() (forkpause.c draws it; so does docs/design.md). */
enum ps_forkpause_phase {
    PS_FORKPAUSE_CLOSED = 0,  /* nothing under way */
    PS_FORKPAUSE_OPEN,        /* the forking thread's next fopen may be the count */
    PS_FORKPAUSE_OUT,         /* it is: the sampler joined (PAUSED), the open under way */
    PS_FORKPAUSE_STREAM,      /* the count's stream is open: the sampler back at its fclose */
};
#define PS_FORKPAUSE_PHASES (PS_FORKPAUSE_STREAM + 1)

/* Its moves (checked against docs/design.md by test/unit/test_statem.c). */
extern const struct ps_move ps_forkpause_moves[];
extern const size_t ps_forkpause_nmoves;
const char *ps_forkpause_phase_name(enum ps_forkpause_phase p);
enum ps_forkpause_phase ps_forkpause_phase(void);

void ps_forkpause_init(pthread_mutex_t *lock);

void ps_forkpause_prepare(void);
/* In the parent after fork(): a CPython 3.12+ is about to count. */
void ps_forkpause_parent(void);
void ps_forkpause_child(void);

int ps_forkpause_fopen_begin(const char *path);
void ps_forkpause_fopen_end(FILE *f);
void ps_forkpause_fclosed(FILE *f);

#endif
