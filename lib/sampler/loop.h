/*
 * loop.h - what the sampler thread does from its start to its end: waits
 * for the interpreter, then samples or idles as asked (state.h), serving
 * the writer (writer.h) and, armed, the control sessions (sessions.h).
 */
#ifndef PS_SAMPLER_LOOP_H
#define PS_SAMPLER_LOOP_H

#include "sampler/context.h"

/* The thread's work, on the sampler thread, until it is asked to stop:
 * ctx (context.h) is its context, ctx->py the interpreter whose
 * initialisation it waits for. */
void ps_sampler_loop(struct ps_sampler_ctx *ctx);

#endif
