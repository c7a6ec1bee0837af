/*
 * settings.h - the one configuration object of the process.
 *
 * The process's configuration is parsed from the environment into it
 * (lifecycle.c, on its lock, before the sampler is set up; config.c does
 * the parsing).  From the sampler's set-up on it does not change, save for
 * what a control session overrides for its duration (sessions.c: mode,
 * native frames, asyncio tasks).  Every module reads the settings here,
 * where it needs them: nothing keeps a copy.
 */
#ifndef PS_SETTINGS_H
#define PS_SETTINGS_H

#include "config.h"

/* The process's configuration, to be filled or changed before
 * ps_settings_freeze() (lifecycle.c only). */
struct ps_config *ps_settings_edit(void);

/* As the process was configured (a session's overrides left out). */
const struct ps_config *ps_settings_process(void);

/* What ticks follow now: the process's, with a session's overrides.  Its
 * strings are empty: output, stats_path and control_dir are read from
 * ps_settings_process(), their one copy. */
const struct ps_config *ps_settings(void);

/* The sampler is being set up: what ticks follow starts as the process's
 * configuration. */
void ps_settings_freeze(void);

/* Native frames cannot be captured here after all (set-up found no way):
 * off for the process, and for every session. */
void ps_settings_no_native(void);

/*
 * A session's settings, on the sampler thread (the only reader of what
 * they change, between ticks): cpu (0 wall, 1 cpu), native (0, 1, 2 =
 * all) and async_tasks, each -1 for the process's own (so (-1, -1, -1)
 * restores them).  NULL, or why they cannot be had (nothing changed then):
 * native frames need the handler set up at start, asyncio tasks the
 * tick's tables, so those can be left off, not switched on.
 */
const char *ps_settings_use(int cpu, int native, int async_tasks);

#endif
