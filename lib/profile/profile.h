/*
 * profile.h - the profile of this process: the symbols and the code cache
 * that refers to them, and the stack table the sampler fills, behind the
 * one lock that serialises the sampler thread's tick with whoever renders,
 * resets or forks.
 *
 * Ownership.  A reset (pysample_reset, a fork child) empties the stack
 * table only: symbols keep their ids, so nothing that holds one (the code
 * cache, the sampler) needs to know a reset happened.  Only when the
 * symbol table has refused a new name for its limit does the reset also
 * rebuild it, with the code cache, at the one moment no stack refers to
 * a symbol (ps_profile_reset below).
 *
 * The data path runs one way: the sampler's tick (tick.c) locks the
 * profile for a tick and adds stacks to it; the writer (sampler/writer.c) and the
 * API (api.c) render it.  Nothing here calls back up.
 */
#ifndef PS_PROFILE_H
#define PS_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "python/codecache.h"
#include "profile/stacktab.h"
#include "util/symtab.h"
#include "profile/timeline.h"

struct ps_profile {
    struct ps_symtab syms;
    struct ps_codecache cc;   /* its entries hold ids of syms */
    struct ps_stacktab tab;   /* its stacks hold ids of syms */
    struct ps_timeline tl;    /* PYSAMPLE_TIMELINE: tab's samples in time order */
};

/* Allocates the tables.  0, or -1 (out of memory). */
int ps_profile_setup(size_t max_stacks);

/* PYSAMPLE_TIMELINE: the samples from now on are also kept in time order
 * (timeline.h), at most max_records of them, and every write of the
 * profile writes <file>.timeline beside it.  After ps_profile_setup. */
void ps_profile_setup_timeline(size_t max_records, int rate_hz);

/* The profile, locked for the caller (the sampler, for one tick). */
struct ps_profile *ps_profile_lock(void);
void ps_profile_unlock(void);

/* Renders the collapsed lines into a malloc'ed buffer.  0 or -1. */
int ps_profile_render(char **out, size_t *len);

/* Writes the collapsed lines atomically to tmpl (NULL: this process's own
 * name; output.h), the path written to written, and then, with a
 * timeline, <that path>.timeline, made from the same moment's tables (a
 * failure of that one is said on stderr).  The lock is held only
 * while the lines are sorted, not while they are made and written, and
 * the text is never whole in memory (render.h).  No malloc, and the lock
 * is waited for 5 s at most, so that a thread that interrupted its holder
 * (a signal handler calling _exit) gets on.  0, -ENOMEM, -ETIMEDOUT (the
 * lock stayed held), or a negative errno of the write. */
int ps_profile_write(const char *tmpl, char *written, size_t writtenlen);

/* Discards every sample, the timeline's too (it starts again now).  0, or
 * -1 (out of memory: nothing discarded). */
int ps_profile_reset(void);

/* ps_profile_reset for a session of armed mode taking the profile
 * (lent 1) or giving it back (lent 0).  A session's profile goes to its
 * client, which never gets a timeline: while lent, no timeline is kept
 * and its records are freed (a session of many threads at a high rate
 * filled PYSAMPLE_TIMELINE_MAX, gigabytes, that nobody would ever read,
 * and the process's exit waited seconds for the kernel to free them). */
int ps_profile_lend(int lent);

struct ps_profile_counts {
    uint64_t distinct_stacks;
    uint64_t codecache_hits, codecache_misses;
};
void ps_profile_counts(struct ps_profile_counts *c);

/* fork(): the lock is held across it; the child starts with an empty
 * profile and a fresh lock. */
void ps_profile_prepare_fork(void);
void ps_profile_parent_after_fork(void);
void ps_profile_child_after_fork(void);

#endif
