/*
 * linux/threads.c - thread identity, CPU clocks, names and time on Linux.
 *
 * Python 3.9 and 3.10 record only the pthread_t of a thread state, but the
 * profile names threads by kernel tid and cpu mode needs the tid for the
 * thread's CPU clock.  So we interpose pthread_create (interpose_threads.c):
 * the new thread runs a trampoline that records (pthread_self(), gettid())
 * here before calling the real start routine.  The registry is a fixed, lock-free open-addressing
 * table: the trampoline must not take a lock the sampler might hold and vice
 * versa, and a fixed table has no allocation that fork could catch half done.
 * A pthread_t reused for a new thread (glibc caches stacks) simply gets its
 * entry overwritten with the new tid.  Threads made by raw clone() never
 * appear here; the sampler then falls back to showing the pthread id.
 *
 * Whether a thread is on a CPU (cpu mode charges only such a thread: its
 * state letter in /proc/self/task/TID/stat) and whether the program has
 * any thread left (ps_program_threads_gone: a fork from a thread,
 * orphan.c) /proc/self says, the latter through two descriptors held open
 * (below).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/ownfd.h"
#include "platform/platform.h"
#include "platform/target.h"
#include "platform/linux/linux.h"
#include "util/tickpath.h"

#define REG_SLOTS 8192  /* power of two */

struct reg_slot {
    _Atomic uintptr_t key;  /* pthread_t, 0 = free */
    _Atomic long tid;
};

static struct reg_slot reg[REG_SLOTS];
static _Atomic int tracking;

long ps_gettid(void)
{
    return (long)syscall(SYS_gettid);
}

int ps_thread_released(long tid)
{
    if (tid <= 0)
        return 1;
    /* Signal 0 only looks the thread up: an exited thread that is not
     * yet released (its tracer has not waited for it, or its exit is not
     * final yet) is still found.  Any error (ESRCH: gone; or a seccomp
     * filter refusing the call) answers "released": nobody waits for what
     * cannot be known. */
    return syscall(SYS_tgkill, (long)getpid(), tid, 0) != 0;
}

static size_t slot_of(uintptr_t key)
{
    /* pthread_t values are addresses; mix the high bits down. */
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 40) & (REG_SLOTS - 1);
}

static void reg_put(uintptr_t key, long tid)
{
    size_t i = slot_of(key);
    for (size_t n = 0; n < REG_SLOTS; n++, i = (i + 1) & (REG_SLOTS - 1)) {
        uintptr_t k = atomic_load(&reg[i].key);
        if (k == key || (k == 0 && atomic_compare_exchange_strong(&reg[i].key, &k, key)) ||
            k == key) {
            atomic_store(&reg[i].tid, tid);
            return;
        }
    }
    /* Full: the thread stays unnamed rather than evicting anyone. */
}

/* pysample-attach on 3.9/3.10 (target.h): where the C library keeps a
 * thread's tid in the struct its pthread_t points to, or -1. */
static long target_tid_at = -1;

void ps_threads_target_tid_at(long offset)
{
    target_tid_at = offset;
}

/* Another process's thread: its tid read from its struct pthread. */
static long target_tid(uintptr_t pthread_id)
{
    int32_t tid;
    if (target_tid_at < 0 || pthread_id == 0 ||
        ps_plat_read(&tid, pthread_id + (uintptr_t)target_tid_at, sizeof tid) != 0 || tid <= 0)
        return -1;
    return tid;
}

long ps_thread_tid(uintptr_t pthread_id)
{
    if (target_tid_at >= 0)
        return target_tid(pthread_id);
    size_t i = slot_of(pthread_id);
    for (size_t n = 0; n < REG_SLOTS; n++, i = (i + 1) & (REG_SLOTS - 1)) {
        uintptr_t k = atomic_load(&reg[i].key);
        if (k == pthread_id)
            return atomic_load(&reg[i].tid);
        if (k == 0)
            return -1;
    }
    return -1;
}

static void procfds_start(void);

void ps_threads_track(void)
{
    reg_put((uintptr_t)pthread_self(), ps_gettid());
    atomic_store(&tracking, 1);
    procfds_start();
}

/* Called by the pthread_create trampoline (interpose_threads.c) in each
 * new thread: records it. */
void ps_threads_record_self(void)
{
    reg_put((uintptr_t)pthread_self(), ps_gettid());
}

int ps_threads_tracking(void)
{
    return atomic_load(&tracking);
}

/* --- CPU clocks and names ----------------------------------------------- */

int64_t ps_thread_cpu_ns(long tid)
{
    /* The kernel's per-thread CPU clock id (what pthread_getcpuclockid
     * computes): ~tid << 3 | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED.  Going by
     * tid rather than pthread_t means a thread that just exited yields
     * EINVAL instead of a read of freed thread memory. */
    clockid_t clk = (clockid_t)((~(unsigned long)tid << 3) | 6);
    struct timespec ts;
    if (clock_gettime(clk, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ps_self_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

ssize_t ps_linux_read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return -1;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
        n--;
    buf[n] = '\0';
    return n;
}

/* Whose threads are named: ours, or the attached process's (target.h). */
static char names_of[32] = "/proc/self";

void ps_threads_target(pid_t pid)
{
    snprintf(names_of, sizeof names_of, "/proc/%ld", (long)pid);
}

int ps_thread_os_name(long tid, char *buf, size_t len)
{
    char path[80], proc[32];
    buf[0] = '\0';
    snprintf(path, sizeof path, "%s/task/%ld/comm", names_of, tid);
    if (ps_linux_read_small(path, buf, len) < 0)
        return -1;
    /* A thread nobody named carries the process name: not a name of its own. */
    snprintf(path, sizeof path, "%s/comm", names_of);
    if (ps_linux_read_small(path, proc, sizeof proc) >= 0 && strcmp(proc, buf) == 0)
        buf[0] = '\0';
    return 0;
}

/* --- a thread's state: on a CPU (cpu mode), and is any thread left? ------- */

/*
 * Only a positive reading may end a process (orphan.c calls exit(0) on it),
 * so every failure here means "cannot tell", never "gone": an open that
 * fails with EMFILE, ENFILE or ENOMEM says nothing about the leader.
 *
 * And the look must not take a descriptor from the program: a program
 * working at its RLIMIT_NOFILE would get EMFILE from an open() that
 * happened to run while we held its last free number.  So the two files
 * are opened once, when profiling starts and in a forked child's atfork
 * handler (one thread only: nobody opens meanwhile), moved to high numbers
 * (ownfd.h), and read again with pread/lseek: a look opens nothing.  A
 * program that closes them (closerange) gets them made again only after
 * one of its threads said it is ending (may_open): the one moment the
 * look matters.
 */
static struct {
    struct ps_fd stat, task;    /* /proc/self/stat, /proc/self/task */
    pid_t pid;                  /* whose: 0 = never opened */
} procfds = { PS_FD_NONE, PS_FD_NONE, 0 };

static void proc_own(struct ps_fd *o, const char *path, int flags)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
    if (fd >= 0)
        ps_fd_own(o, fd);
}

/* 1 if both descriptors are this process's and still ours. */
static int procfds_ok(void)
{
    return procfds.pid == getpid() && ps_fd_ours(&procfds.stat) && ps_fd_ours(&procfds.task);
}

static void procfds_open(void)
{
    /* A forked child's copies name the parent's /proc/PID: ours to close. */
    ps_fd_release(&procfds.stat);
    ps_fd_release(&procfds.task);
    procfds.pid = getpid();
    proc_own(&procfds.stat, "/proc/self/stat", 0);
    proc_own(&procfds.task, "/proc/self/task", O_DIRECTORY);
}

static void procfds_after_fork(void)
{
    if (procfds.pid != 0)
        procfds_open();
}

static void procfds_start(void)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&once))
        return;
    procfds_open();
    pthread_atfork(NULL, NULL, procfds_after_fork);
}

/* The leader's state letter from /proc/self/stat: after the command name
 * in parentheses, which may hold anything, so found from the last ')'.
 * 0 if it cannot be read.  The number is checked again after the read: a
 * program's file put there meanwhile gave us its bytes, thrown away. */
static char leader_state(void)
{
    char buf[512];
    ssize_t n = pread(procfds.stat.fd, buf, sizeof buf - 1, 0);
    if (n <= 0 || !ps_fd_ours(&procfds.stat))
        return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/* The state letter of a /proc .../stat file: after the command name in
 * parentheses, which may hold anything, so found from the last ')'.
 * 0 if it cannot be read (the thread is gone, or no descriptor free). */
static char stat_state(const char *path)
{
    char buf[512];
    if (ps_linux_read_small(path, buf, sizeof buf) < 0)
        return 0;
    const char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

int ps_thread_on_cpu(long tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    char state = stat_state(path);
    /* R: running or runnable, waiting for nothing but a CPU. */
    return state == 0 ? -1 : state == 'R';
}

/*
 * Kept state files.  cpu mode asks a thread's state whenever it has a
 * period of CPU to charge and did not run throughout, most ticks for a
 * thread that shares a CPU or the GIL: open, read and close cost 2.4 us
 * and three system calls, of which the read (the kernel formatting the
 * line) is 1 us.  So the file stays open, and each look is an fstat and a
 * pread, as the read path's descriptors are (util/ownfd.h): moved to a
 * high number, compared with what we opened *before* the read (a
 * program's file put on the number is never read: some reads take
 * something, /dev/kmsg's do), and the line read must begin with the
 * thread's own "TID (" (a file dup2()ed on between the fstat and the
 * pread gives its bytes, thrown away; only this very thread's stat line
 * would pass, and that is the answer anyway).  Never more than
 * PS_STAT_KEPT at once, so the program's descriptor count grows by that
 * at most (in cpu mode only), and only while it is far from its limit
 * (stat_open); other threads are read as before, and a thread that ended
 * or went a second without a look gives its place up (kept_place).  A thread
 * that ended fails the read (ESRCH): forgotten, and a tid used again is
 * opened afresh.
 */
#define PS_STAT_STALE_NS 1000000000ull

/* Who holds the kept ones (*ks: the sampler's thread memory, sampler
 * thread only), and when each was last read: a thread that ended, or has
 * not been looked at for PS_STAT_STALE_NS, gives its place to one that
 * needs it.  A busier one never does: taking turns would reopen on every
 * look. */
static int kept_index(const struct ps_stat_kept *ks, const struct ps_fd *kept)
{
    for (int i = 0; i < PS_STAT_KEPT; i++)
        if (ks->at[i].owner == kept)
            return i;
    return -1;
}

/* A free place, or a stale one's (closed, its owner told), or -1. */
static int kept_place(struct ps_stat_kept *ks, uint64_t now)
{
    int stalest = -1;
    for (int i = 0; i < PS_STAT_KEPT; i++) {
        if (ks->at[i].owner == NULL)
            return i;
        if (now - ks->at[i].used_ns >= PS_STAT_STALE_NS &&
            (stalest < 0 || ks->at[i].used_ns < ks->at[stalest].used_ns))
            stalest = i;
    }
    if (stalest >= 0) {
        ps_fd_release(ks->at[stalest].owner);
        ks->at[stalest].owner = NULL;
    }
    return stalest;
}

/* Kept only by a program far from its descriptor limit: the number open()
 * gave (the lowest free) is below a quarter of the soft limit, and the
 * descriptor could be moved to a high number.  Otherwise each look opens
 * and closes as before rather than hold numbers the program may need
 * (docs/safety.md, the library's descriptors). */
static int stat_open(struct ps_stat_kept *ks, long tid, struct ps_fd *kept, uint64_t now)
{
    int at = kept_place(ks, now);
    if (at < 0)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 ||
        (rl.rlim_cur != RLIM_INFINITY && (rlim_t)fd >= rl.rlim_cur / 4)) {
        close(fd);
        return -1;
    }
    if (ps_fd_own(kept, fd) != 0)
        return -1;
    if (kept->fd == fd) {     /* no high number free: not kept low */
        close(fd);
        kept->fd = -1;
        return -1;
    }
    ks->at[at].owner = kept;
    ks->at[at].used_ns = now;
    return 0;
}

/* Its state letter, if buf is thread tid's stat line; 0 if not. */
static char state_of_line(const char *buf, long tid)
{
    char head[32];
    int n = snprintf(head, sizeof head, "%ld (", tid);
    if (n <= 0 || strncmp(buf, head, (size_t)n) != 0)
        return 0;
    const char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

void ps_thread_on_cpu_forget(struct ps_stat_kept *ks, struct ps_fd *kept)
{
    if (kept->fd < 0)
        return;
    ps_fd_release(kept);   /* closed only if still ours */
    int i = kept_index(ks, kept);
    if (i >= 0)
        ks->at[i].owner = NULL;
}

int ps_thread_on_cpu_kept(struct ps_stat_kept *ks, long tid, struct ps_fd *kept, uint64_t now)
{
    if (kept->fd >= 0 && !ps_fd_ours(kept)) {
        kept->fd = -1;     /* the program's number now: never read, never closed */
        int i = kept_index(ks, kept);
        if (i >= 0)
            ks->at[i].owner = NULL;
    }
    if (kept->fd < 0 && stat_open(ks, tid, kept, now) != 0)
        return ps_thread_on_cpu(tid);
    char buf[512];
    ssize_t n = pread(kept->fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    char state = state_of_line(buf, tid);
    if (state == 0) {
        ps_thread_on_cpu_forget(ks, kept);   /* ended, or not this thread's line */
        return ps_thread_on_cpu(tid);
    }
    int i = kept_index(ks, kept);
    if (i >= 0)
        ks->at[i].used_ns = now;
    return state == 'R';
}

static int ended(char state)
{
    return state == 'Z' || state == 'X' || state == 'x';
}

/* 1 if /proc/self/task lists no thread but the caller and the leader; 0 if
 * it lists another or cannot be read.  A thread that ended is dropped from
 * the list by the kernel at once (unless it is traced: then it counts as
 * alive, and the look is made again 100 ms later).  getdents64: no opendir,
 * so no malloc and no descriptor. */
static int only_self_and_leader(long self, long leader)
{
    int fd = procfds.task.fd;
    if (lseek(fd, 0, SEEK_SET) != 0)
        return 0;
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct dirent64 *d = (struct dirent64 *)(void *)(buf + off);
            off += d->d_reclen;
            char *end;
            long tid = strtol(d->d_name, &end, 10);
            if (end != d->d_name && *end == '\0' && tid != self && tid != leader)
                return 0;
        }
    }
    return n == 0 && ps_fd_ours(&procfds.task);
}

int ps_program_threads_gone(int may_open)
{
    if (!procfds_ok()) {
        if (!may_open || procfds.pid == 0)
            return 0;
        procfds_open();
        if (!procfds_ok())
            return 0;
    }
    /* The cheap test first, and nearly always the last: the leader (the
     * thread the process began with, or the one that forked it) still
     * runs.  One that ended with pthread_exit stays a zombie until the
     * whole process ends, which is what "ps" shows as Zl. */
    if (!ended(leader_state()))
        return 0;
    return only_self_and_leader(ps_gettid(), (long)getpid());
}

/* --- time --------------------------------------------------------------- */

PS_TICK_PATH uint64_t ps_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ps_signal_from_fault(const siginfo_t *si)
{
    return si != NULL && si->si_code > 0;
}

/* A thread's timed waits may end up to its timer slack late (50 us by
 * default), so that the kernel can batch wake-ups.  For the sampler that is
 * lateness on every tick: the median tick came ~100 us late at 10 kHz
 * rather than ~55 us with a slack of 1 ns (test/bench/bench_wake.c), at
 * no measurable CPU cost.  Per thread, so the program's own is untouched. */
void ps_thread_precise_timers(void)
{
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

/* --- walking a thread, files ------------------------------------------- */

/* Linux walks threads while they run (ps_read() cannot fault, and the walk
 * checks what it reads): nothing is stopped or copied (platform.h), and
 * with ps_plat_walk_reads_copy 0 nobody asks. */
int ps_thread_suspend(long tid, size_t reads, size_t bytes)
{
    (void)tid, (void)reads, (void)bytes;
    return 1;
}

void ps_thread_resume(int keep)
{
    (void)keep;
}

void ps_thread_copy_end(void)
{
}

const int ps_plat_walk_reads_copy = 0;

struct timespec ps_stat_mtime(const struct stat *st)
{
    return st->st_mtim;
}
