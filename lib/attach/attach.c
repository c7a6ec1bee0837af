/*
 * attach.c - pysample-attach: a CPython process that was not started with
 * the library, read from outside (docs/attach.md).
 *
 *   pysample-attach dump PID
 *   pysample-attach record PID RATE_HZ DURATION_MS [INTERVAL_MS]
 *
 * The same walker as inside (tick.c and below), the same tables and the
 * same rendering; only the bottom differs: the symbols come from the
 * target's files (lib/platform/linux/target.c) and every read is a
 * process_vm_readv of the target (ps_plat_read_target), which the kernel
 * allows to whoever may trace it.  The target is never stopped: no
 * ptrace, no signal; a torn read is retried or dropped as inside.
 *
 * Its answer on stdout is the control protocol's frames (ctlproto.h:
 * "kind LEN\n" then LEN bytes), so the tool reads it as it reads an armed
 * process: started (record), meta and data (every INTERVAL_MS for top,
 * and at the end), then ok or err.  A refusal is one err frame and exit
 * status 1; the tool prints it as one line.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "memory/memread.h"
#include "platform/platform.h"
#include "platform/target.h"
#include "profile/profile.h"
#include "python/runtime.h"
#include "python/threadstates.h"
#include "sampler/quality.h"
#include "sampler/stats.h"
#include "sampler/threadinfo.h"
#include "sampler/threadsample.h"
#include "sampler/tick.h"
#include "settings.h"

#define MAX_RATE_HZ 10000
#define MAX_DURATION_MS (24 * 3600 * 1000L)

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
    (void)sig;
    stop_asked = 1;
}

/* One frame on stdout; exits quietly when the reader has gone. */
static void frame(const char *kind, const char *data, size_t len)
{
    char head[64];
    int n = snprintf(head, sizeof head, "%s %zu\n", kind, len);
    if (fwrite(head, 1, (size_t)n, stdout) != (size_t)n ||
        (len && fwrite(data, 1, len, stdout) != len) || fflush(stdout) != 0)
        exit(1);
}

static _Noreturn void refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void refuse(const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    frame("err", why, strlen(why));
    exit(1);
}

/* The kernel's ptrace policy, for the line that says why we may not. */
static int ptrace_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    int v = -1;
    if (f != NULL) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* Why reading pid was refused (err from /proc/PID/maps or process_vm_readv). */
static _Noreturn void refuse_access(pid_t pid, int err, const char *what)
{
    int scope = ptrace_scope();
    char policy[160] = "";
    if (scope >= 1)
        snprintf(policy, sizeof policy, "; kernel.yama.ptrace_scope is %d%s", scope,
                 scope == 1 ? " (only a parent may trace: run as root, or with CAP_SYS_PTRACE, "
                              "or `sysctl kernel.yama.ptrace_scope=0`)" :
                 " (only CAP_SYS_PTRACE may trace)");
    refuse("cannot %s (%s): reading a process from outside needs the right to trace it: "
           "the same uid as process %ld, or CAP_SYS_PTRACE%s; without it, start the program "
           "with LD_PRELOAD=<libpysample.so> PYSAMPLE_ARM=1 (docs/attach.md)",
           what, strerror(err), (long)pid, policy);
}

static void no_env_warn(void *ctx, const char *msg)
{
    (void)ctx;
    (void)msg;
}

static const char *no_env(const char *name, void *ctx)
{
    (void)name;
    (void)ctx;
    return NULL;
}

/* The library's defaults, wall mode, every thread: the settings a tick reads. */
static void settings(int rate_hz)
{
    struct ps_config *c = ps_settings_edit();
    ps_config_parse(c, no_env, NULL, no_env_warn);
    c->mode = PS_MODE_WALL;
    c->native = PS_NATIVE_OFF;
    c->async_tasks = 0;
    c->rate_hz = rate_hz;
    ps_settings_freeze();
}

/* The target's CPython found and its memory made ours to read, or a
 * refusal. */
static void open_target(pid_t pid, struct ps_target *t, struct ps_python *py)
{
    char why[512] = "";
    if (kill(pid, 0) != 0 && errno == ESRCH)
        refuse("no such process");
    if (ps_target_open(t, pid, why, sizeof why) != 0) {
        if (errno == EACCES || errno == EPERM)
            refuse_access(pid, errno, "read its /proc/PID/maps");
        refuse("%s", why);
    }
    if (ps_mem_init() != 0)
        refuse("no way to read memory here");
    void *rt = ps_target_lookup("_PyRuntime", t);
    if (rt != NULL && ps_plat_read_target(pid, (uintptr_t)rt) != 0) {
        if (errno == EPERM || errno == EACCES)
            refuse_access(pid, errno, "read its memory");
        refuse("cannot read its memory: %s", strerror(errno));
    }
    switch (ps_python_detect_with(py, ps_target_lookup, t, why, sizeof why)) {
    case PS_DETECT_OK:
        break;
    case PS_DETECT_NOT_PYTHON:
        refuse("no CPython found in it (no _PyRuntime in its executable or a libpython)");
    default:
        refuse("%s", why);
    }
    ps_threads_target(pid);
}

#define TID_SCAN 512        /* 32-bit words of a struct pthread searched */
#define TID_THREADS 64      /* thread states checked against a candidate */

/* 1 if tid is a thread of pid now. */
static int is_task(pid_t pid, long tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld", (long)pid, tid);
    return tid > 0 && access(path, F_OK) == 0;
}

/* 1 if, at word w, every thread's struct pthread holds a tid of pid and
 * one of them (the main thread's) holds pid itself. */
static int tid_offset_fits(pid_t pid, int32_t (*words)[TID_SCAN], size_t n, size_t w)
{
    int main_seen = 0;
    for (size_t k = 0; k < n; k++) {
        if (!is_task(pid, words[k][w]))
            return 0;
        main_seen |= words[k][w] == pid;
    }
    return main_seen;
}

/* 3.9/3.10 keep no tid in a thread state, and the tid table inside is
 * filled by our pthread_create stand-in, which this process never ran:
 * the tid is read from the C library's struct pthread instead, at the
 * offset where every thread's holds a tid of the process and the main
 * thread's the pid.  Not found: threads print as "thread ?". */
static void find_tid_offset(pid_t pid, const struct ps_python *py)
{
    static int32_t words[TID_THREADS][TID_SCAN];
    struct ps_tstate_iter it;
    uint8_t ts[PS_TS_MAX];
    uintptr_t tsp;
    size_t n = 0;
    if (py->L.ts_native_id != PS_NOFIELD || ps_tstates_begin(&it, py) != 0)
        return;
    while (n < TID_THREADS && (tsp = ps_tstates_next(&it, ts)) != 0) {
        uintptr_t pth;
        memcpy(&pth, ts + py->L.ts_thread_id, sizeof pth);
        if (pth != 0 && ps_read(words[n], pth, sizeof words[n]) == 0)
            n++;
    }
    for (size_t w = 0; n > 0 && w < TID_SCAN; w++)
        if (tid_offset_fits(pid, words, n, w)) {
            ps_threads_target_tid_at((long)(w * sizeof words[0][0]));
            return;
        }
}

static void setup_walk(pid_t pid, struct ps_sampler_ctx *ctx, int rate_hz)
{
    settings(rate_hz);
    if (ps_profile_setup((size_t)ps_settings()->max_stacks) != 0 ||
        ps_threadsample_setup(ctx) != 0 || ps_tick_setup(ctx) != 0)
        refuse("out of memory");
    ps_threadinfo_target(&ctx->threads, pid);
    find_tid_offset(pid, &ctx->py);
}

/* The meta frame: the quality figures over the ticks so far. */
static void send_meta(const struct ps_python *py, const char *how, int rate_hz, uint64_t since)
{
    struct ps_stats zero = { 0 }, now;
    struct ps_quality q = { .how = how, .mode = "wall", .hexversion = py->L.hexversion,
                            .free_threaded = py->L.free_threaded, .requested_hz = rate_hz };
    char buf[2048];
    ps_stats_read(&now);
    struct ps_profile_counts pc;
    ps_profile_counts(&pc);
    now.distinct_stacks = pc.distinct_stacks;
    now.requested_hz = now.rate_now_hz = rate_hz;
    ps_quality_between(&q, &zero, &now, ps_now_ns() - since);
    size_t n = ps_quality_format(&q, buf, sizeof buf);
    frame("meta", buf, n);
}

static void send_data(void)
{
    char *data = NULL;
    size_t len = 0;
    if (ps_profile_render(&data, &len) != 0)
        refuse("out of memory");
    frame("data", data, len);
    free(data);
}

static void do_dump(pid_t pid, struct ps_sampler_ctx *ctx)
{
    uint64_t start = ps_now_ns();
    if (ps_python_ready(&ctx->py))
        ps_tick(ctx, 1, 0, 1, ps_now_ns());
    send_meta(&ctx->py, "outside dump (process_vm_readv)", 0, start);
    send_data();
    frame("ok", "", 0);
    (void)pid;
}

static void sleep_until(uint64_t deadline)
{
    struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !stop_asked)
        ;
}

/* Ticks at rate_hz for duration_ms (or until asked to stop, or the
 * target is gone), a meta and data frame every interval_ms (0: at the
 * end only).  Ticks the machine was too busy for are skipped, never
 * caught up in a burst, as the sampler's schedule does. */
static void do_record(pid_t pid, struct ps_sampler_ctx *ctx, int rate_hz, long duration_ms,
                      long interval_ms)
{
    const struct ps_python *py = &ctx->py;
    const char *how = "outside record (process_vm_readv)";
    uint64_t period = 1000000000u / (unsigned)rate_hz, start = ps_now_ns();
    uint64_t end = start + (uint64_t)duration_ms * 1000000u, next = start;
    uint64_t show = interval_ms > 0 ? start + (uint64_t)interval_ms * 1000000u : UINT64_MAX;
    frame("started", how, strlen(how));
    ps_stats_run_begin(start);
    while (!stop_asked) {
        uint64_t now = ps_now_ns();
        if (now >= end || (kill(pid, 0) != 0 && errno == ESRCH))
            break;
        if (ps_python_ready(py) && ps_tick(ctx, 0, period, 1, ps_now_ns()) != 0)
            break;  /* the runtime is finalizing: nothing more to read */
        if (now >= show) {
            send_meta(py, how, rate_hz, start);
            send_data();
            show += (uint64_t)interval_ms * 1000000u;
        }
        next += period;
        now = ps_now_ns();
        if (next < now) {
            ps_count(PS_COUNT_LATE_TICKS, (now - next) / period);
            next += (now - next) / period * period + period;
        }
        sleep_until(next < end ? next : end);
    }
    ps_stats_run_end(ps_now_ns());
    send_meta(py, how, rate_hz, start);
    send_data();
    frame("ok", "", 0);
}

static long number(const char *s, long lo, long hi, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        refuse("%s must be a number from %ld to %ld, not '%s'", what, lo, hi, s);
    return v;
}

static void usage(void)
{
    fprintf(stderr, "usage: pysample-attach dump PID\n"
                    "       pysample-attach record PID RATE_HZ DURATION_MS [INTERVAL_MS]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct ps_target t;
    struct ps_sampler_ctx ctx = { 0 };  /* the walk's context (sampler/context.h) */
    if (argc < 3 || (strcmp(argv[1], "dump") != 0 && strcmp(argv[1], "record") != 0))
        usage();
    int record = strcmp(argv[1], "record") == 0;
    if (record && argc != 5 && argc != 6)
        usage();
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    pid_t pid = (pid_t)number(argv[2], 1, 0x7fffffff, "PID");
    int rate = record ? (int)number(argv[3], 1, MAX_RATE_HZ, "RATE_HZ") : 0;
    long duration = record ? number(argv[4], 1, MAX_DURATION_MS, "DURATION_MS") : 0;
    long interval = argc == 6 ? number(argv[5], 0, MAX_DURATION_MS, "INTERVAL_MS") : 0;
    open_target(pid, &t, &ctx.py);
    setup_walk(pid, &ctx, record ? rate : 1);
    if (record)
        do_record(pid, &ctx, rate, duration, interval);
    else
        do_dump(pid, &ctx);
    ps_target_close(&t);
    return 0;
}
