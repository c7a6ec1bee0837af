/*
 * threadinfo.h - which OS thread a thread state is, and what the sampler
 * remembers of each: its CPU time at the last look and what of it is not
 * counted yet (PYSAMPLE_MODE=cpu)
 * and its name, refreshed now and then, from which its label is made.
 *
 * Sampler thread only, under the profile's lock (the per-thread table is
 * the tick's); the fork handlers run with that lock held.  The memory is
 * the sampler context's (struct ps_threads, context.h), not this file's.
 */
#ifndef PS_THREADINFO_H
#define PS_THREADINFO_H

#include <stdint.h>
#include <sys/types.h>

#include "platform/platform.h"
#include "python/runtime.h"
#include "sampler/weight.h"
#include "util/ownfd.h"
#include "util/symtab.h"

#define PS_FORKERS 8      /* forking ancestors remembered (forker_tids) */
#define PS_TIDCACHE 1024  /* power of two */

/* One thread's memory (ps_threadinfo_find). */
struct ps_thread_info {
    long tid;
    struct ps_cpu_clock clock;  /* PYSAMPLE_MODE=cpu (weight.h) */
    struct ps_fd state_fd;      /* cpu mode: its state file, kept open (platform.h) */
    uint64_t name_at;           /* when to read the name again */
    uint8_t had_boot;           /* last refresh saw Thread._bootstrap_inner */
    uint8_t name_misses;        /* reads of the Thread's name that failed */
    char name[64];              /* longer names are cut at a character */
};

/* The sampler's memory of every thread: a member of its context
 * (context.h), passed to each function here as its first argument. */
struct ps_threads {
    pid_t pid;
    /* Kernel tids that, in this process, mean its main thread: the thread
     * that forked us (and our ancestors), as recorded in thread states
     * that a fork() without PyOS_AfterFork_Child() never updated (uWSGI's
     * workers unless --py-call-osafterfork).  Filled at fork. */
    long forker_tids[PS_FORKERS];
    long forking_tid;           /* set in the prepare handler (the forking thread) */
    struct ps_stat_kept kept;   /* cpu mode: which tids[].state_fd are open (platform.h) */
    /* Last, after the fields every sample reads (pid, forker_tids): 150 KiB
     * of which a sample reads one slot. */
    struct ps_thread_info tids[PS_TIDCACHE];
};

/* Notes this process's pid (its main thread's tid). */
void ps_threadinfo_setup(struct ps_threads *th);

/* The process whose threads these are, when it is not ours (pysample-attach):
 * its main thread's tid is its pid. */
void ps_threadinfo_target(struct ps_threads *th, long pid);

/*
 * The OS thread of thread state ts (a copy, layout L): *pth its pthread id
 * (0 if none), *tid its kernel tid, or -1 where neither the thread state
 * nor the thread table knows it.  A thread that forked us (or an
 * ancestor) stands for our main thread.  -1 if the thread state is not
 * yet bound to any OS thread.
 */
int ps_threadinfo_ids(const struct ps_threads *th, const struct ps_layout *L, const uint8_t *ts,
                      long *tid, uintptr_t *pth);

/* The sampler's memory of thread tid (new, or reclaimed from a thread long
 * gone, when it has none). */
struct ps_thread_info *ps_threadinfo_find(struct ps_threads *th, long tid);

/*
 * PYSAMPLE_MODE=cpu: how many samples of period_ns this look at the
 * thread stands for (weight.h): if it is on a CPU, the time since
 * its previous look in whole periods, the rest carried to its next
 * charge, within the CPU time it used and was not charged yet (its CPU
 * clock); 0 if it waits for anything but a CPU, so that a stack's count
 * is the CPU time spent in it / period_ns, never the CPU of the burst
 * before a wait charged to the wait.  0 also on the first look at it in
 * sampling run `run` (a new run starts from the CPU the thread has then:
 * what it used while not sampled is not counted), or when its clock
 * cannot be read (it has exited: the kernel refuses a tid that is no
 * thread of ours, so the read never touches freed memory).
 */
uint64_t ps_threadinfo_cpu_weight(struct ps_threads *th, struct ps_thread_info *ti,
                                  uint64_t period_ns, unsigned run);

/* The thread's label (symtab.h), its name read again about once a second.
 * boot: the Thread._bootstrap_inner frame of this sample's walk, or 0. */
uint32_t ps_threadinfo_label(const struct ps_threads *th, const struct ps_python *py,
                             struct ps_symtab *syms, struct ps_thread_info *ti, uint64_t now,
                             uintptr_t boot);

/* fork(): prepare notes the forking thread; the child forgets every
 * thread and counts the forking one as its main thread from then on. */
void ps_threadinfo_prepare_fork(struct ps_threads *th);
void ps_threadinfo_child_after_fork(struct ps_threads *th);

#endif
