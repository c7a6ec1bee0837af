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
#include <stdio.h>

void ps_forkpause_init(pthread_mutex_t *lock);

void ps_forkpause_prepare(void);
/* In the parent after fork(): a CPython 3.12+ is about to count. */
void ps_forkpause_parent(void);
void ps_forkpause_child(void);

int ps_forkpause_fopen_begin(const char *path);
void ps_forkpause_fopen_end(FILE *f);
void ps_forkpause_fclosed(FILE *f);

#endif
