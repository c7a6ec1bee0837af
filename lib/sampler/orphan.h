/*
 * orphan.h - the sampler thread as the last one of its process.
 *
 * A child forked by a thread other than the main one has the forking
 * thread as its only program thread.  When that returns (or calls
 * pthread_exit), glibc would end the process with exit(0), as the last
 * thread to end does -- but ours is still there, so the child would stay
 * for ever as a zombie leader and its parent's waitpid would never return.
 * So the sampler thread looks, now and then, and does what the last
 * thread would have done.
 */
#ifndef PS_SAMPLER_ORPHAN_H
#define PS_SAMPLER_ORPHAN_H

#include <stdint.h>

struct ps_sampler_ctx;  /* context.h */

/* A program thread is about to end (the pthread_create and pthread_exit
 * stand-ins: linux/interpose_threads.c): the armed, idle wait, which has
 * no deadline, is woken to look.  Atomics and one write(). */
void ps_orphan_thread_ending(void);

/* On the sampler thread, at now (monotonic ns): if the program's threads
 * are all gone, writes the final profile and PYSAMPLE_STATS and calls
 * exit(0).  Looks every 100 ms at most, but for the moments just after a
 * program thread said it is ending (orphan.c). */
void ps_orphan_check(const struct ps_sampler_ctx *ctx, uint64_t now);

/* When ps_orphan_check will look next (monotonic ns): an idle wait ends
 * then at the latest. */
uint64_t ps_orphan_next_check(void);

/* 1 if a program thread said it is ending since the last check: a wait
 * without a deadline should end, to look. */
int ps_orphan_news(void);

/* 1 while the thread should wake by itself to look (for a second after a
 * program thread ended): an armed, idle wait must not be endless then. */
int ps_orphan_watching(uint64_t now);

#endif
