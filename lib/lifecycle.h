/*
 * lifecycle.h - start-up, exit, exec, fork and fatal signals: when
 * profiling starts and when the profile is written.  lib/pysample.c keeps
 * the state; lib/linux/interpose.c stands in front of the C library
 * functions that mark those moments and calls in here.  docs/processes.md
 * says what the user sees.
 */
#ifndef PS_LIFECYCLE_H
#define PS_LIFECYCLE_H

#include <stdio.h>
#include <sys/types.h>

/* ---- lib/pysample.c ------------------------------------------------------ */

/*
 * 1 if this process profiles to PYSAMPLE_OUTPUT and the caller runs in it.
 * 0 in a vfork() child (posix_spawn, subprocess): it shares our memory
 * until it execs or _exits, and must neither write a profile nor change
 * our state in the parent's stead.
 */
int ps_lifecycle_owner(void);

/* The process is ending without atexit (_exit): write the profile now. */
void ps_lifecycle_process_exit(void);

/* The image is about to be replaced (exec*): write what it has, if any. */
void ps_lifecycle_before_exec(void);

/*
 * From our handler of a fatal signal at default disposition: get the final
 * profile written (by the sampler thread, never by the interrupted one) and
 * wait for it, bounded.  The caller then dies of the signal.
 */
void ps_lifecycle_fatal_signal(int sig);

/*
 * kill()/raise() of a fatal signal at default disposition to this process
 * itself, from ordinary code (Python's exit after an unhandled
 * KeyboardInterrupt does this once the sampler has stopped): write first.
 */
void ps_lifecycle_self_signal(void);

/*
 * The sampler thread leaves the process for a moment and comes back: used
 * while CPython 3.12+ counts the process's threads after os.fork() (see
 * interpose.c).  resume is a no-op unless pause stopped it.
 */
int ps_lifecycle_pause_sampler(void);
void ps_lifecycle_resume_sampler(void);

/* ---- lib/linux/interpose.c ----------------------------------------------- */

/*
 * Installs our handler for SIGTERM, SIGHUP and SIGINT wherever their
 * disposition is the default, while the program keeps seeing the default
 * (interpose.c explains how).  Called once by the constructor.
 */
void ps_signals_take_over(void);

/* The parent side of fork() on CPython 3.12+: the next fopen of
 * /proc/self/stat by this thread is CPython counting threads. */
void ps_fork_window_open(void);

/* The prepare side of fork(): a pause of the sampler left open ends. */
void ps_fork_window_before_fork(void);

/* ---- lib/linux/libc.c: the C library behind our stand-ins ---------------- */

/* Resolves the real libc functions behind our interposers. */
void ps_interpose_init(void);

FILE *ps_real_fopen(const char *path, const char *mode, int large);
int ps_real_fclose(FILE *f);
int ps_real_execve(const char *path, char *const argv[], char *const envp[]);
int ps_real_execvpe(const char *file, char *const argv[], char *const envp[]);
int ps_real_execv(const char *path, char *const argv[]);
int ps_real_execvp(const char *file, char *const argv[]);
int ps_real_fexecve(int fd, char *const argv[], char *const envp[]);
int ps_real_kill(pid_t pid, int sig);
int ps_real_raise(int sig);

#endif
