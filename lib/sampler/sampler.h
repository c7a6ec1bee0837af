/*
 * sampler.h - the sampler thread: started, stopped, set up, and what it
 * does around a fork.  It fills the profile (profile.h) and, while it is
 * alive, is the one that writes it (writer.h).  Its state, and what it
 * can be asked while it runs: state.h.
 */
#ifndef PS_SAMPLER_H
#define PS_SAMPLER_H

#include "python/runtime.h"

/* Prepares the profile and the thread's buffers for py and the process's
 * settings (settings.h), which ticks follow from now on.  0 or -1 (out of
 * memory). */
int ps_sampler_setup(const struct ps_python *py);

/* The interpreter the sampler reads: the process's one copy (the
 * context's, context.h), filled by ps_sampler_setup and never changed
 * after it; all zero before it.  Any thread. */
const struct ps_python *ps_sampler_python(void);

/*
 * Starts sampling (and the thread, if it is not there); rate_hz 0 keeps
 * the current rate.  ps_sampler_start_thread starts the thread only, with
 * sampling as it was (armed: off).  ps_sampler_stop ends the thread.
 */
int ps_sampler_start(int rate_hz);
int ps_sampler_start_thread(void);
void ps_sampler_stop(void);

/*
 * For exit paths, which may run in a signal handler: asks the thread to end
 * (it writes PYSAMPLE_STATS on its way out) and waits for it ms at most,
 * never joining it -- it may be stuck on a lock the caller's interrupted
 * code holds, and the process is ending anyway.  1 if it ended in time.
 */
int ps_sampler_end_bounded(long ms);

/*
 * The fork pause (forkpause.c), its caller serialising starts and stops:
 * pause joins a thread that may read (WAITING, SAMPLING, IDLE) and leaves
 * it PAUSED, 1 if it did; resume starts a PAUSED one again if restart,
 * else (or if it cannot be started) leaves it OFF.  A stop meanwhile
 * leaves it OFF, and resume then does nothing.
 */
int ps_sampler_pause(void);
void ps_sampler_resume(int restart);

/* fork(), in the child (steps of lifecycle.c's table): forked() says
 * whether a sampler thread ran in the parent, before the state is reset;
 * restart() starts one again then, on counters of its own. */
int ps_sampler_child_forked(void);
/* The loop's part of the context (context.h): the periodic flush anew. */
void ps_sampler_child_loop(void);
/* The threads' memory (threadinfo.h, in the context): prepare notes the
 * forking thread; the child forgets every thread but it. */
void ps_sampler_prepare_fork(void);
void ps_sampler_child_threads(void);
/* The armed session's (sessions.h): the parent's is not the child's. */
void ps_sampler_child_sessions(void);
/* The native capture's part, if it was set up (native.h). */
void ps_sampler_child_native(void);
void ps_sampler_child_restart(int was_running);

#endif
