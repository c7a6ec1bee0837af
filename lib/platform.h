/*
 * platform.h - the small interface between the Python-specific core and the
 * operating system.  lib/linux/ and lib/darwin/ implement it; nothing else
 * in lib/ contains OS-specific code.
 */
#ifndef PS_PLATFORM_H
#define PS_PLATFORM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* --- signals ------------------------------------------------------------ */

/* The C library's sigaction, bypassing our own interposer. */
int ps_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
#ifdef __linux__
/* The C library's signal(), bypassing our own interposer. */
sighandler_t ps_real_signal(int sig, sighandler_t handler);
#endif

/* --- threads ------------------------------------------------------------ */

/* Kernel id of the calling thread. */
long ps_gettid(void);

/*
 * Starts recording (pthread_t -> kernel tid) for threads created from now
 * on, and records the calling thread.  Called once when profiling starts.
 */
void ps_threads_track(void);

/* Kernel tid of a thread given its pthread_t, or -1 if unknown. */
long ps_thread_tid(uintptr_t pthread_id);

/*
 * CPU time consumed by thread tid in nanoseconds, or -1 if the thread is
 * gone.  Cheap enough to call once per thread per tick.
 */
int64_t ps_thread_cpu_ns(long tid);

/*
 * The OS name of thread tid (empty when it has none of its own, i.e. it
 * still carries the process name).  Returns 0 or -1.
 */
int ps_thread_os_name(long tid, char *buf, size_t len);

/* --- time --------------------------------------------------------------- */

uint64_t ps_now_ns(void);                 /* monotonic clock */
void ps_sleep_until_ns(uint64_t deadline); /* absolute, monotonic */
int64_t ps_self_cpu_ns(void);             /* CPU time of the calling thread */

/* --- process ------------------------------------------------------------ */

/* The C library's _exit, bypassing our interposer. */
_Noreturn void ps_real_exit(int status);

#endif
