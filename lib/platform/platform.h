/*
 * platform.h - the small interface between the Python-specific core and the
 * operating system.  lib/platform/linux/ and lib/platform/darwin/ implement
 * it and its siblings (stacks.h: native stacks; ctlsock.h: the control
 * socket; dlwatch.h: a libpython loaded late); nothing else in lib/ tests
 * which OS it is built for.
 */
#ifndef PS_PLATFORM_H
#define PS_PLATFORM_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/* --- memory -------------------------------------------------------------- */

/*
 * The syscall copy behind ps_read() (memory/memread.h), which checks what it
 * copies instead of faulting (no signals involved): linux/read.c,
 * darwin/read.c.  Each returns 0 or -1.
 */
int ps_plat_read_init(void);
int ps_plat_read(void *dst, uintptr_t src, size_t n);
const char *ps_plat_read_name(void);
/* 0 where the guarded direct path must never be used (macOS: see
 * lib/platform/darwin/read.c), 1 where ps_mem_enable_direct() may take it. */
int ps_plat_read_direct_ok(void);
/* In a forked child: refresh what depends on the pid, and stop sharing the
 * pipe or file with the parent. */
void ps_plat_read_after_fork(void);
/*
 * Use one method only ("process_vm_readv", "pipe", "file"; NULL or "auto"
 * for the automatic choice).  For tests, benchmarks and PYSAMPLE_READ_MODE.
 * Returns 0, or -1 if that method cannot work here.
 */
int ps_plat_read_force(const char *method);

/* --- signals ------------------------------------------------------------ */

/* Resolves the C library functions behind our stand-ins (interpose*.c).
 * Called by the constructor, so that no signal handler looks them up. */
void ps_interpose_init(void);

/* The C library's sigaction, bypassing our own interposer. */
int ps_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* The C library's pthread_sigmask, bypassing our own stand-in: for the
 * library's own mask changes (util/section.c), which must not count as the
 * program's (Linux's stand-in tells linux/sigmask.c, which then reads every
 * thread's mask again). */
int ps_real_pthread_sigmask(int how, const sigset_t *set, sigset_t *old);

/*
 * For the program's view of SIGSEGV/SIGBUS (memread.c), which must read
 * back exactly as the kernel would have stored the action:
 *   ps_sigaction_learn     given an action the C library installed for us
 *                          with asked_flags, learns what it adds to every
 *                          action (glibc on x86-64: SA_RESTORER and its
 *                          restorer);
 *   ps_sigaction_as_kernel act as the kernel would report it back;
 *   ps_sigaction_carried_flags
 *                          the flags of the program's handler that decide
 *                          how the kernel delivers to *our* handler
 *                          (alternate stack, restart, ...), which ours must
 *                          therefore carry for it.
 * Async-signal-safe.
 */
void ps_sigaction_learn(const struct sigaction *installed, int asked_flags);
void ps_sigaction_as_kernel(const struct sigaction *act, struct sigaction *out);
int ps_sigaction_carried_flags(void);

/*
 * Installs our handler for SIGTERM, SIGHUP, SIGQUIT and SIGINT wherever their
 * disposition is the default, while the program keeps seeing the default
 * (lib/platform/linux/fatal.c explains how).  The handler calls write_first(sig)
 * (lifecycle.c: get the profile written, bounded), then dies of the signal
 * as the default action would.  Not on macOS yet (docs/macos.md).
 */
void ps_fatal_signals_take_over(void (*write_first)(int sig));

/* --- threads ------------------------------------------------------------ */

/* Kernel id of the calling thread. */
long ps_gettid(void);

/*
 * 1 once the kernel has released thread tid of this process (it is no
 * longer in the process's thread count or /proc/self/task), 0 while it
 * still holds it.  A joined thread may still be held for a moment: the
 * join returns when the kernel clears the thread's tid, before it takes
 * the thread out of the count (sampler.c, forkpause.c).  1 as well
 * where that cannot be known.
 */
int ps_thread_released(long tid);

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
 * Whether thread tid is on a CPU: 1 running, or runnable and waiting only
 * for a CPU; 0 waiting for anything else (asleep, blocked in a system
 * call, on a lock, stopped); -1 if the OS cannot tell (no /proc, the
 * thread gone).
 */
int ps_thread_on_cpu(long tid);

/*
 * The same, for a thread asked on most ticks (cpu mode): *kept holds its
 * state file open between calls where the platform has one (a few are
 * kept at most; beyond that, or whenever the kept one is no longer ours,
 * this is ps_thread_on_cpu).  *kept starts as PS_FD_NONE and goes back
 * with ps_thread_on_cpu_forget when the thread's memory is dropped.
 * *ks says who holds the few: its caller's, zeroed to begin with (the
 * sampler's thread memory, threadinfo.h), one for every kept file.
 * now: the monotonic clock (ps_now_ns) as the caller last read it, when
 * the kept file was last used (a place unused for a second is given up).
 */
#define PS_STAT_KEPT 8
struct ps_fd;
struct ps_stat_kept {
    struct {
        struct ps_fd *owner;   /* NULL: free */
        uint64_t used_ns;      /* last read */
    } at[PS_STAT_KEPT];
};
int ps_thread_on_cpu_kept(struct ps_stat_kept *ks, long tid, struct ps_fd *kept, uint64_t now);
void ps_thread_on_cpu_forget(struct ps_stat_kept *ks, struct ps_fd *kept);

/*
 * The OS name of thread tid (empty when it has none of its own, i.e. it
 * still carries the process name).  Returns 0 or -1.
 */
int ps_thread_os_name(long tid, char *buf, size_t len);

/*
 * A thread stopped to be read.  Where a running thread cannot be read
 * consistently enough (macOS), the sampler stops it, reads what its walk
 * will need, and resumes it before walking; what is read is chosen above
 * (lib/python/framecopy.c), this is the mechanism only:
 *   ps_thread_suspend   stops thread tid with room reserved for `reads`
 *                       reads of `bytes` in all (allocated before the
 *                       stop), and records every ps_read() the caller
 *                       makes from now on.  0: stopped, recording; 1: not
 *                       stopped (an unknown thread, the caller itself, no
 *                       memory), read it live; -1: it has ended.  A thread
 *                       held for its native stack (stacks.h) stays stopped:
 *                       one stop for both stacks.
 *   ps_thread_resume    lets it run on.  keep 1: until ps_thread_copy_end,
 *                       ps_read() serves what was recorded, so the walk,
 *                       which may allocate, sees the thread as it was while
 *                       stopped; keep 0: reads are live again.
 *   ps_thread_copy_end  reads are live again, and a thread still held is
 *                       resumed: the sample is over.
 * Between suspend and resume the caller may take no lock and allocate
 * nothing (the thread may hold malloc's lock): darwin/suspend.c's header
 * says what may run.
 * ps_plat_walk_reads_copy is 1 where this is done (macOS): the walk then
 * reads the copy, whose reads are already batched, and its own wider reads
 * (frames.c's data-stack spans) would reach past what was copied and read
 * the running thread instead.  0 where running threads are read (Linux,
 * where ps_read() cannot fault and the walk checks what it reads): the
 * three above are then never called.
 */
extern const int ps_plat_walk_reads_copy;
int ps_thread_suspend(long tid, size_t reads, size_t bytes);
void ps_thread_resume(int keep);
void ps_thread_copy_end(void);

/*
 * 1 if no thread of the program is left: every thread of this process but
 * the caller (the sampler) has ended, the leader included (a leader that
 * ended with pthread_exit stays a zombie until the process ends).  0 when
 * one is alive or when the system cannot tell (an error is never "gone").
 * No allocation, no lock, and no new descriptor unless may_open (a program
 * thread said it is ending): the program may be at its descriptor limit.
 * (Linux: /proc/self, held open; macOS: always 0, docs/macos.md.)
 */
int ps_program_threads_gone(int may_open);

/* --- time --------------------------------------------------------------- */

uint64_t ps_now_ns(void);                 /* monotonic clock */
/* Asks for the calling thread's timed waits to end as close to their
 * deadline as the platform can (Linux: the 50 us default timer slack down
 * to 1 ns; docs/performance.md has the figures). */
void ps_thread_precise_timers(void);
int64_t ps_self_cpu_ns(void);             /* CPU time of the calling thread */

/*
 * A wait that another thread, or a signal handler, can end at once (the
 * sampler's nap, state.c).  The waiter reads ps_wake_seq(), then looks at
 * what it waits for, then calls ps_wake_wait_until() with what it read:
 * that returns at once if ps_wake_post() was called since the read, else
 * when it is, at deadline (monotonic ns, as ps_now_ns(); UINT64_MAX:
 * none) or spuriously: 0, or ETIMEDOUT at the deadline.  ps_wake_post() is
 * async-signal-safe and keeps errno.  Linux (linux/wake.c): a futex word,
 * one system call a wait, no post lost.  macOS (darwin/wake.c): a
 * condition variable (lock, cond) whose mutex a post only tries, so a post
 * that finds it busy is seen at the deadline.
 */
struct ps_wake {
    _Atomic uint32_t seq;   /* bumped by every post */
    pthread_mutex_t lock;   /* macOS only */
    pthread_cond_t cond;    /* macOS only */
};
void ps_wake_init(struct ps_wake *w);
uint32_t ps_wake_seq(struct ps_wake *w);
int ps_wake_wait_until(struct ps_wake *w, uint32_t seen, uint64_t deadline);
void ps_wake_post(struct ps_wake *w);

/* --- files -------------------------------------------------------------- */

/* Modification time of st (st_mtim on Linux, st_mtimespec on macOS). */
struct timespec ps_stat_mtime(const struct stat *st);

/* --- process ------------------------------------------------------------ */

/* When this process started, on the wall clock, rounded early; an exec
 * keeps it (Linux: /proc; macOS: proc_pidinfo).  Where it cannot be
 * known (Linux without a readable /proc): the epoch, before every file,
 * never a time after an exec (output.c would take the previous image's
 * profile for one left over). */
void ps_process_start_time(struct timespec *out);

/* 1 if this process runs with privileges its invoker lacks (secure
 * execution: setuid, setgid, file capabilities; the kernel's AT_SECURE on
 * Linux, issetugid() on macOS), or its real and effective ids differ.
 * Its environment then comes from someone it must not trust. */
int ps_secure_execution(void);

/* 1 if this process's parent is a Python process profiling with this
 * library to the same PYSAMPLE_OUTPUT template tmpl; 0 if not or unknown. */
int ps_parent_profiles_to(const char *tmpl);

/* 1 if a SIGSEGV/SIGBUS was raised by the instruction that ran (a fault),
 * 0 if it was sent (kill, raise, sigqueue, tgkill). */
int ps_signal_from_fault(const siginfo_t *si);

/* The C library's _exit, bypassing our interposer. */
_Noreturn void ps_real_exit(int status);

/* --- loaded images -------------------------------------------------------- */

/*
 * Where the section named section of a loaded image is in memory: the image
 * is the file path (as mapped) or, path NULL, the image that contains the
 * address inside.  CPython 3.14+ describes asyncio's objects in such a
 * section (".AsyncioDebug"; tasks_search.c).  Reads the file and the process's
 * map, takes no lock: callable from the sampler thread.  0, or -1.
 */
int ps_image_section(const char *path, uintptr_t inside, const char *section, uintptr_t *addr,
                     size_t *size);

#endif
