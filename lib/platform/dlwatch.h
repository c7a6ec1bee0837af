/*
 * dlwatch.h - Python that arrives late: a process that is not
 * Python when the constructor runs but loads libpython later (uWSGI's
 * python plugin, mod_wsgi, any program that embeds Python through
 * dlopen).  lib/platform/linux/dlwatch.c and lib/platform/darwin/dlwatch.c watch the loads
 * and report a libpython to the callback lifecycle.c gave them, which
 * starts profiling: the watch knows nothing of the lifecycle, and calls go
 * one way (lifecycle -> dlwatch; the report is the callback's).
 * docs/processes.md tells users what happens.
 */
#ifndef PS_DLWATCH_H
#define PS_DLWATCH_H

/* A symbol of the libpython that was found, or NULL (runtime.c's lookup). */
typedef void *(*ps_sym_lookup)(const char *name, void *ctx);

/*
 * What the watch reports: a libpython was loaded (path names it, for
 * messages); its symbols are found through lookup(name, ctx), valid during
 * the call.  Called at most once per process, with the first runtime; a
 * second one is refused with a message by the watch itself.
 */
typedef void (*ps_python_loaded_fn)(ps_sym_lookup lookup, void *ctx, const char *path);

/*
 * Starts watching loads of shared objects for one that defines
 * _PyRuntime, to be reported to loaded.  Called once by the constructor
 * of a process that has PYSAMPLE_OUTPUT but no Python yet; cheap and
 * silent until one appears.
 */
void ps_dlwatch_arm(ps_python_loaded_fn loaded);

#endif
