/*
 * lifecycle.h - when profiling starts and when the profile is written:
 * start-up, exit, _exit, exec, fork and fatal signals (lib/lifecycle.c).
 *
 * Callers: the public API (api.c) and the C library stand-ins
 * (lib/platform/linux/interpose.c, lib/platform/darwin/interpose.c), which report the moments
 * the program reaches.  The lifecycle calls only down (sampler, writer,
 * output, platform.h), never back into them.  docs/processes.md says what
 * the user sees.
 */
#ifndef PS_LIFECYCLE_H
#define PS_LIFECYCLE_H

#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include "python/runtime.h"
#include "util/section.h"

/*
 * The library's state in this process.  Only ever moves down the list,
 * except in a forked child, which keeps its parent's state:
 *   OFF        nothing set up: not asked yet, or no CPython found (yet)
 *   FAILED     set-up failed and said why once: never tried again
 *   READY      interpreter found and tables ready: the API may start/stop
 *   PROFILING  READY, and PYSAMPLE_OUTPUT is written at the end
 * When and how often the file is written is the writer's state (writer.h).
 */
enum ps_life { PS_LIFE_OFF = 0, PS_LIFE_FAILED, PS_LIFE_READY, PS_LIFE_PROFILING };

/* pysample_start()/pysample_stop() (api.c). */
int ps_lifecycle_start_sampling(int rate_hz);
void ps_lifecycle_stop_sampling(void);

/* The interpreter found, or NULL before READY. */
const struct ps_python *ps_lifecycle_python(void);

/* The program calls _exit() or _Exit(): the process ends without atexit,
 * so the profile is written now; then the C library's _exit. */
_Noreturn void ps_lifecycle_exit(int status);

/* The image is about to be replaced (exec*): write what it has, if any. */
void ps_lifecycle_before_exec(void);

/*
 * kill()/raise() of a fatal signal at default disposition to this process
 * itself, from ordinary code (Python's exit after an unhandled
 * KeyboardInterrupt does this once the sampler has stopped): write first.
 */
void ps_lifecycle_self_signal(void);

#endif
