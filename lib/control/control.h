/*
 * control.h - armed mode: the process answers `pysample record|dump|top|
 * start|stop|status --pid PID` from another process of the same user
 * (docs/configuration.md, PYSAMPLE_ARM; docs/kubernetes.md).
 *
 * All of it runs on the sampler thread: the sampler's waits become a poll
 * of the control socket (ps_control_wait), which accepts, reads, answers
 * and runs the sessions that need samples by switching the sampler's
 * ticking on and off (ps_sampler_set_active).  No program thread ever does
 * control I/O; an armed idle process has one thread blocked in poll(),
 * with no timeout: no wake-up at all until someone connects.
 */
#ifndef PS_CONTROL_H
#define PS_CONTROL_H

#include <stdint.h>

#include "config.h"

/* Armed: remembers the settings and makes the wake-up pipe (the socket is
 * opened by the sampler thread).  0, or a negative errno (said). */
int ps_control_setup(const struct ps_config *cfg, unsigned hexversion, int free_threaded);

/* 1 once ps_control_setup succeeded in this process. */
int ps_control_enabled(void);

/*
 * On the sampler thread: waits until deadline (monotonic ns, UINT64_MAX:
 * none) or until something happened (a wake-up, a connection, a session's
 * moment), and serves whatever is ready.  Returns early; the caller loops.
 */
void ps_control_wait(uint64_t deadline);

/* Ends a ps_control_wait at once.  Any thread; async-signal-safe. */
void ps_control_wake(void);

/* The process ends or execs: its socket file (directory variant) goes.
 * Only in the process that made it. */
void ps_control_process_exit(void);

/* fork() child: the parent's socket, connections and session are not
 * ours; the child listens on its own pid.  Returns 1 if a session of the
 * parent was sampling (the child must not). */
int ps_control_child_after_fork(void);

#endif
