/*
 * dlwatch.h - Python that arrives late (issue #13): a process that is not
 * Python when the constructor runs but loads libpython later (uWSGI's
 * python plugin, mod_wsgi, any program that embeds Python through
 * dlopen).  lib/linux/dlwatch.c and lib/darwin/dlwatch.c watch the loads;
 * lifecycle starts profiling when a libpython shows up.  docs/processes.md
 * tells users what happens.
 */
#ifndef PS_DLWATCH_H
#define PS_DLWATCH_H

/*
 * Starts watching loads of shared objects for one that defines
 * _PyRuntime.  Called once by the constructor of a process that has
 * PYSAMPLE_OUTPUT but no Python yet; cheap and silent until one appears.
 */
void ps_dlwatch_arm(void);

/* A symbol of the libpython that was found, or NULL (runtime.c's lookup). */
typedef void *(*ps_sym_lookup)(const char *name, void *ctx);

/* ---- lifecycle (lib/lifecycle.c) ------------------------------------------ */

/*
 * A libpython was loaded (path names it, for messages): detect its
 * version through lookup and start profiling as the constructor does for
 * a Python executable.  The sampler thread waits until the interpreter is
 * initialised.  Called at most once per process with a new runtime.
 */
void ps_lifecycle_python_loaded(ps_sym_lookup lookup, void *ctx, const char *path);

/* The libpython being profiled, for messages ("the program" when it is
 * the executable). */
const char *ps_lifecycle_python_path(void);

#endif
