/*
 * linux/linux.h - what the files of lib/platform/linux/ share: the C library's own
 * definitions of the functions interpose*.c stand in front of (libc.c),
 * what it asks of our fatal-signal handling (fatal.c), and the one reader
 * of small /proc files (threads.c).
 */
#ifndef PS_LINUX_H
#define PS_LINUX_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The C library's definition of name (not ours), or NULL. */
void *ps_libc_sym(const char *name);
sighandler_t ps_real_signal(int sig, sighandler_t handler);
sighandler_t ps_real_sysv_signal(int sig, sighandler_t handler);
sighandler_t ps_real_sigset(int sig, sighandler_t handler);
int ps_real_sigignore(int sig);
FILE *ps_real_fopen(const char *path, const char *mode, int large);
int ps_real_fclose(FILE *f);
int ps_real_execve(const char *path, char *const argv[], char *const envp[]);
int ps_real_execvpe(const char *file, char *const argv[], char *const envp[]);
int ps_real_execv(const char *path, char *const argv[]);
int ps_real_execvp(const char *file, char *const argv[]);
int ps_real_fexecve(int fd, char *const argv[], char *const envp[]);
int ps_real_kill(pid_t pid, int sig);
int ps_real_raise(int sig);
int ps_real_sigprocmask(int how, const sigset_t *set, sigset_t *old);

/*
 * Reads the small file path (a /proc/self/task/TID/... entry: one read()
 * returns it whole) into buf, NUL-terminated, without the trailing newlines
 * and NULs the kernel ends some of them with.  Returns the length kept, or
 * -1 when the file cannot be opened or reads empty.  No allocation, no
 * stdio: it runs in the sampler thread, which must not take the program's
 * stdio locks.
 */
ssize_t ps_linux_read_small(const char *path, char *buf, size_t len);

/*
 * Whether a thread blocks the native-stack signal (sigmask.c):
 *   ps_thread_blocks_signal  1 if thread tid blocks sig now (its status,
 *                            or a "no" remembered since nothing that can
 *                            change a mask happened), else 0; the sampler
 *                            thread's, now its monotonic time
 *   ps_sigmask_changed       a thread's mask changed, or a thread started:
 *                            what is remembered is read again (any thread,
 *                            async-signal-safe)
 */
int ps_thread_blocks_signal(long tid, int sig, uint64_t now);
void ps_sigmask_changed(void);

/*
 * Fatal signals at default disposition (fatal.c), for the stand-ins:
 *   ps_fatal_signal_managed   1 if sig is one we took over (SIGTERM,
 *                             SIGHUP, SIGQUIT, SIGINT) and taking over is on
 *   ps_fatal_sigaction        sigaction() of such a signal as the program
 *                             should see it: 0 or -1 (errno set); the
 *                             kernel's action while sig is not managed
 *   ps_fatal_signal_kills_us  1 if sending sig to ourselves would kill the
 *                             process as things stand (our handler or the
 *                             plain default installed)
 */
int ps_fatal_signal_managed(int sig);
int ps_fatal_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
int ps_fatal_signal_kills_us(int sig);

/* threads.c's registry of pthread_t -> kernel tid, for the pthread_create
 * stand-in (interpose_threads.c): whether threads are tracked
 * (ps_threads_track, platform.h) and the calling thread recorded, from its
 * trampoline. */
int ps_threads_tracking(void);
void ps_threads_record_self(void);

#endif
