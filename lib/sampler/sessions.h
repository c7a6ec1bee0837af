/*
 * sessions.h - armed mode's commands (`pysample record|dump|top|start|
 * stop|status --pid`) and the sessions that borrow the sampler, run on the
 * sampler thread between its waits (loop.c): the control server
 * (control.h) queues the requests, this drains them.
 */
#ifndef PS_SESSIONS_H
#define PS_SESSIONS_H

#include <stdint.h>

struct ps_sampler_ctx;  /* context.h */

/* Answers the queued commands and the session's moments that are due, on
 * the sampler thread of ctx (a dump ticks it). */
void ps_sessions_serve(struct ps_sampler_ctx *ctx);

/* The session's next moment (monotonic ns; UINT64_MAX: none). */
uint64_t ps_sessions_deadline(void);

/* fork() child: the parent's session is not ours. */
void ps_sessions_child_after_fork(void);

#endif
