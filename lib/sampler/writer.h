/*
 * writer.h - getting this process's profile into its PYSAMPLE_OUTPUT file:
 * the one path every write takes, periodic, "now" or final.
 *
 * A write renders the profile (profile.h) and replaces the file atomically
 * (output.h).  It needs locks and malloc, so only ordinary code writes: the
 * sampler thread whenever it is alive, the exiting thread when it is not
 * (lifecycle.c decides who).  A thread that cannot write (a signal handler)
 * records a request (async-signal-safe: atomics only) and waits until a
 * finished write covers it.
 *
 * The final profile is written once per process:
 *
 *     OPEN --final write starts--> FINAL_WRITING --done--> FINAL_DONE
 *
 * After it, nothing is written again (a forked child starts OPEN).
 */
#ifndef PS_WRITER_H
#define PS_WRITER_H

enum ps_write_state { PS_WRITE_OPEN = 0, PS_WRITE_FINAL_WRITING, PS_WRITE_FINAL_DONE };

enum ps_write_kind {
    PS_WRITE_NOW,    /* the profile as it is, profiling goes on */
    PS_WRITE_FINAL,  /* the last one of this process */
};

/*
 * Records a request (async-signal-safe) and returns its ticket for
 * ps_writer_covered().  The writing thread serves it with ps_writer_serve().
 */
unsigned ps_writer_ask(enum ps_write_kind kind);

/*
 * On the writing thread: serves what was asked.  The final profile if it
 * was asked for (and returns 1: the writer's work is over), else the
 * profile as it is, unless the final one is written or being written
 * (returns 0).  Also the periodic flush.
 */
int ps_writer_serve(void);

/* Writes the profile as it is on the calling thread; a failure is said if
 * say_errors. */
void ps_writer_write_now(int say_errors);

/* Writes the final profile on the calling thread if nobody has started
 * it.  1 if this call wrote it, 0 if another thread did or does. */
int ps_writer_write_final(void);

enum ps_write_state ps_writer_state(void);

/* 1 once a finished write covers ticket (or the final one is written). */
int ps_writer_covered(unsigned ticket);

/*
 * The unit tests' seam (test_writer.c): fn is called after each profile
 * written to PYSAMPLE_OUTPUT, with the path it went to, on the writing
 * thread, with the write's lock held.  The library sets none.  NULL:
 * nothing.
 */
void ps_writer_after_write(void (*fn)(const char *path));

/* fork(): the child is a new process with its own final write. */
void ps_writer_child_after_fork(void);

#endif
