/*
 * sessions.h - armed mode's commands (`pysample record|dump|top|start|
 * stop|status --pid`) and the sessions that borrow the sampler, run on the
 * sampler thread between its waits (loop.c): the control server
 * (control.h) queues the requests, this drains them.
 */
#ifndef PS_SESSIONS_H
#define PS_SESSIONS_H

#include <stdint.h>

#include "sampler/state.h"

struct ps_sampler_ctx;  /* context.h */

enum ps_session_kind { SES_NONE = 0, SES_RECORD, SES_TOP, SES_STARTED };

/* The session under way (one at a time): a member of the sampler's
 * context (context.h), on its thread only.  conn -1 when none is held. */
struct ps_session {
    enum ps_session_kind ses;
    int conn;                 /* its connection (-1: start/stop, none held) */
    int rate;
    int cpu, native, async_tasks;  /* as asked (-1: the process's) */
    uint64_t start, end, next, interval;
    struct ps_stats base;
    char why[160];            /* the last "busy" answer */
};

/* A context's session before any: none, no connection. */
#define PS_SESSION_NONE { .ses = SES_NONE, .conn = -1 }

/* Answers the queued commands and the session's moments that are due, on
 * the sampler thread of ctx (a dump ticks it). */
void ps_sessions_serve(struct ps_sampler_ctx *ctx);

/* The session's next moment (monotonic ns; UINT64_MAX: none). */
uint64_t ps_sessions_deadline(const struct ps_session *s);

/* fork() child: the parent's session is not ours. */
void ps_sessions_child_after_fork(struct ps_session *s);

#endif
