/*
 * native_lib.c - a C library for the native-stack tests (test_native.py),
 * loaded with ctypes.  Built twice by test/meson.build: with frame
 * pointers and without (-fomit-frame-pointer), so the unwinder is tested
 * on both kinds of code.
 *
 *   c_outer -> c_middle -> c_leaf      spin for a given time
 *   c_call_back(cb, n)                 C calling back into Python
 *   c_loop_*(seconds, each_ms, &eintr) a blocking call in a loop that does
 *                                      not retry on EINTR: counts them
 *   c_urg_probe(flags, out)            the program's own SIGURG handler:
 *                                      what it sees (mask, calls, reset)
 *   c_urg_raw_install(), _calls(), _seen()
 *                                      a SIGURG handler installed with a
 *                                      raw rt_sigaction, as Go's runtime
 *                                      installs its own
 *
 * The chain's functions are noinline and do work after each call, so that
 * no optimisation turns a call into a jump and hides a frame.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

typedef int (*callback)(int);

/* The entry points (ctypes finds them by name). */
uint64_t c_leaf(double seconds);
uint64_t c_middle(double seconds);
uint64_t c_outer(double seconds);
int c_call_back(callback cb, int n);
long c_loop_select(double seconds, int each_ms, int *eintr);
long c_loop_poll(double seconds, int each_ms, int *eintr);
long c_loop_epoll(double seconds, int each_ms, int *eintr);
long c_loop_nanosleep(double seconds, int each_ms, int *eintr);
long c_loop_sem(double seconds, int each_ms, int *eintr);
long c_loop_futex(double seconds, int each_ms, int *eintr);
long c_loop_read(double seconds, int fd, int *eintr);
int c_urg_probe(int flags, int *out);
int c_urg_raw_install(void);
long c_urg_raw_calls(void);
int c_urg_raw_seen(void);

volatile uint64_t native_lib_sink;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

NOINLINE uint64_t c_leaf(double seconds)
{
    double end = now_s() + seconds;
    uint64_t x = 0;
    while (now_s() < end)
        for (int i = 0; i < 20000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
    native_lib_sink += x;
    return x;
}

NOINLINE uint64_t c_middle(double seconds)
{
    uint64_t r = c_leaf(seconds);
    native_lib_sink += r;
    return r + 1;
}

NOINLINE uint64_t c_outer(double seconds)
{
    uint64_t r = c_middle(seconds);
    native_lib_sink += r;
    return r + 1;
}

NOINLINE int c_call_back(callback cb, int n)
{
    int r = cb(n);
    native_lib_sink += (uint64_t)r;
    return r + 1;
}

/* ---- blocking calls that report EINTR instead of retrying ---------------- */

static struct timespec ms_ts(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    return ts;
}

#define LOOP(...)                                               \
    double end = now_s() + seconds;                             \
    long calls = 0;                                             \
    while (now_s() < end) {                                     \
        int rc;                                                 \
        __VA_ARGS__;                                                 \
        calls++;                                                \
        if (rc < 0 && errno == EINTR)                           \
            (*eintr)++;                                         \
    }                                                           \
    return calls;

NOINLINE long c_loop_select(double seconds, int each_ms, int *eintr)
{
    LOOP({
        struct timeval tv = { 0, each_ms * 1000 };
        rc = select(0, NULL, NULL, NULL, &tv);
    })
}

NOINLINE long c_loop_poll(double seconds, int each_ms, int *eintr)
{
    LOOP({ rc = poll(NULL, 0, each_ms); })
}

NOINLINE long c_loop_epoll(double seconds, int each_ms, int *eintr)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev;
    LOOP({ rc = epoll_wait(ep, &ev, 1, each_ms); })
}

NOINLINE long c_loop_nanosleep(double seconds, int each_ms, int *eintr)
{
    LOOP({
        struct timespec ts = ms_ts(each_ms);
        rc = nanosleep(&ts, NULL);
    })
}

NOINLINE long c_loop_sem(double seconds, int each_ms, int *eintr)
{
    sem_t sem;
    sem_init(&sem, 0, 0);
    LOOP({
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += each_ms * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        rc = sem_timedwait(&sem, &ts);
    })
}

/* A futex wait issued the way the C library's own lock and semaphore
 * waits issue it (x86-64: the number loaded into eax right before
 * `syscall`; aarch64: below); a wait through the generic syscall(2)
 * function is the documented case that cannot be restarted
 * (docs/native.md). */
static long futex_wait(int *word, int val, const struct timespec *ts)
{
    long ret;
#if defined(__aarch64__)
    /* x0 loaded from another register right before `svc`, the number in
     * x8: glibc 2.36's own shape, which is what lets the handler recover
     * the first argument the call's return overwrote. */
    register long x1 __asm__("x1") = (long)FUTEX_WAIT_PRIVATE;
    register long x2 __asm__("x2") = (long)val;
    register long x3 __asm__("x3") = (long)ts;
    register long x0 __asm__("x0");
    __asm__ volatile("mov x0, %1\n\tmov x8, #98\n\tsvc #0"
                     : "=&r"(x0)
                     : "r"(word), "r"(x1), "r"(x2), "r"(x3)
                     : "x8", "memory");
    ret = x0;
#else
    register long r10 __asm__("r10") = (long)ts;
    __asm__ volatile("mov $202, %%eax\n\tsyscall"
                     : "=a"(ret)
                     : "D"(word), "S"((long)FUTEX_WAIT_PRIVATE), "d"((long)val), "r"(r10)
                     : "rcx", "r11", "memory");
#endif
    if (ret < 0) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

NOINLINE long c_loop_futex(double seconds, int each_ms, int *eintr)
{
    static int word;
    LOOP({
        struct timespec ts = ms_ts(each_ms);
        rc = (int)futex_wait(&word, 0, &ts);
    })
}

/* read() on a pipe that a writer feeds every few milliseconds. */
NOINLINE long c_loop_read(double seconds, int fd, int *eintr)
{
    char b;
    LOOP({ rc = (int)read(fd, &b, 1); })
}

/* ---- SIGURG handlers of the program's own -------------------------------- */

static volatile sig_atomic_t probe_calls;
static int probe_seen[3];

static void probe_handler(int sig)
{
    (void)sig;
    if (probe_calls == 0) {
        sigset_t cur;
        sigprocmask(SIG_BLOCK, NULL, &cur);
        probe_seen[0] = sigismember(&cur, SIGURG);
        probe_seen[1] = sigismember(&cur, SIGUSR1);
        probe_seen[2] = sigismember(&cur, SIGUSR2);
    }
    probe_calls++;
}

static void urg_self(void)
{
    syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid), SIGURG);
}

/*
 * Installs a SIGURG handler with sa_flags flags and sa_mask {SIGUSR1},
 * sends this thread SIGURG twice, and puts back what was there.  out[0..2]:
 * whether SIGURG, SIGUSR1, SIGUSR2 were blocked inside the first call;
 * out[3]: how many calls; out[4]: 1 if sigaction() then says SIG_DFL.
 */
int c_urg_probe(int flags, int *out)
{
    struct sigaction sa, old, now;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = probe_handler;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR1);
    if (sigaction(SIGURG, &sa, &old) != 0)
        return -1;
    probe_calls = 0;
    urg_self();
    urg_self();
    sigaction(SIGURG, NULL, &now);
    out[0] = probe_seen[0];
    out[1] = probe_seen[1];
    out[2] = probe_seen[2];
    out[3] = probe_calls;
    out[4] = now.sa_handler == SIG_DFL;
    sigaction(SIGURG, &old, NULL);
    return 0;
}

#if defined(__x86_64__)
/* The kernel's struct sigaction, and the return trampoline every x86-64
 * handler needs (SA_RESTORER): what a runtime with its own system calls
 * (Go) sets up itself. */
struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};
void native_lib_restorer(void);
__asm__(".text\n"
        ".globl native_lib_restorer\n"
        "native_lib_restorer:\n"
        "    mov $15, %eax\n"   /* rt_sigreturn */
        "    syscall\n");

static volatile long raw_calls;

static void raw_handler(int sig)
{
    (void)sig;
    raw_calls++;
}

int c_urg_raw_install(void)
{
    struct kernel_sigaction ka;
    memset(&ka, 0, sizeof ka);
    ka.handler = raw_handler;
    ka.flags = 0x04000000ul | SA_RESTART;   /* SA_RESTORER */
    ka.restorer = native_lib_restorer;
    return (int)syscall(SYS_rt_sigaction, SIGURG, &ka, NULL, sizeof ka.mask);
}

long c_urg_raw_calls(void)
{
    return raw_calls;
}

/* 1 if sigaction() says the raw handler is installed (the kernel's truth). */
int c_urg_raw_seen(void)
{
    struct sigaction cur;
    if (sigaction(SIGURG, NULL, &cur) != 0)
        return -1;
    return cur.sa_handler == raw_handler;
}
#else
int c_urg_raw_install(void)
{
    return -1;
}

long c_urg_raw_calls(void)
{
    return 0;
}

int c_urg_raw_seen(void)
{
    return -1;
}
#endif
