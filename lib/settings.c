/*
 * settings.c - the one configuration object (settings.h).
 *
 * Two copies of struct ps_config live here and nowhere else: the process's
 * (written by lifecycle.c before the sampler exists, under its lock) and
 * the one ticks follow (the process's plus a session's overrides, written
 * by the sampler thread between ticks and read by the same thread during
 * them).  So no lock: each has one writer, and readers on other threads
 * read fields that thread does not change (output, stats path, rate asked
 * at start, file mode).
 */
#include <stddef.h>

#include "settings.h"
#include "util/tickpath.h"

static struct ps_config process;
/* Read by every tick: its numbers last (config.h), right before the
 * tick's other globals (tickpath.h). */
PS_TICK_DATA static struct ps_config now;

struct ps_config *ps_settings_edit(void)
{
    return &process;
}

const struct ps_config *ps_settings_process(void)
{
    return &process;
}

PS_TICK_PATH const struct ps_config *ps_settings(void)
{
    return &now;
}

void ps_settings_freeze(void)
{
    now = process;
    /* The strings are read from the process's settings only (settings.h):
     * no session changes them, and a second copy is one to fall behind. */
    now.output[0] = '\0';
    now.stats_path[0] = '\0';
    now.control_dir[0] = '\0';
}

void ps_settings_no_native(void)
{
    process.native = PS_NATIVE_OFF;
    now.native = PS_NATIVE_OFF;
}

const char *ps_settings_use(int cpu, int native, int async_tasks)
{
    if (native > 0 && !process.native)
        return "this process was started without PYSAMPLE_NATIVE: native frames need it from the "
               "start (start it with PYSAMPLE_NATIVE=1), or leave out --native";
    if (async_tasks > 0 && !process.async_tasks)
        return "this process was started without PYSAMPLE_ASYNC: asyncio tasks need it from the "
               "start (start it with PYSAMPLE_ASYNC=1), or leave out --async";
    now.mode = cpu < 0 ? process.mode : cpu ? PS_MODE_CPU : PS_MODE_WALL;
    now.native = native < 0 ? process.native : (enum ps_native_mode)native;
    now.async_tasks = async_tasks < 0 ? process.async_tasks : async_tasks;
    return NULL;
}
