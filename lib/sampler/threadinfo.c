/*
 * threadinfo.c - the OS thread behind a thread state, and the sampler's
 * memory of each thread (threadinfo.h).
 *
 * The memory is a small open-addressing table keyed by kernel tid, never
 * freed: a thread that ended leaves its slot to be reclaimed by a new one
 * (a probe of 8 slots; past that the last probed slot is taken over), so
 * a long-running process with churning threads stays within the table.
 * A label is interned per sample (symtab.h's ids need no caching here).
 */
#include <string.h>
#include <unistd.h>

#include "platform/platform.h"
#include "sampler/threadinfo.h"
#include "sampler/weight.h"
#include "python/threadnames.h"
#include "util/tickpath.h"

#define PS_NAME_RETRIES 8
#define PS_NAME_REFRESH_NS 1000000000ull

void ps_threadinfo_setup(struct ps_threads *th)
{
    th->pid = getpid();
}

void ps_threadinfo_target(struct ps_threads *th, long pid)
{
    th->pid = (pid_t)pid;
}

PS_TICK_PATH int ps_threadinfo_ids(const struct ps_threads *th, const struct ps_layout *L, const uint8_t *ts,
                      long *tid, uintptr_t *pth)
{
    *tid = -1;
    if (L->ts_native_id != PS_NOFIELD) {
        unsigned long nid;
        memcpy(&nid, ts + L->ts_native_id, sizeof nid);
        *tid = nid != 0 ? (long)nid : -1;
    }
    memcpy(pth, ts + L->ts_thread_id, sizeof *pth);
    if (*tid < 0)
        *tid = ps_thread_tid(*pth);
    if (*tid < 0 && *pth == 0)
        return -1;
    for (size_t i = 0; i < PS_FORKERS && th->forker_tids[i]; i++)
        if (*tid == th->forker_tids[i])
            *tid = th->pid;
    return 0;
}

PS_TICK_PATH struct ps_thread_info *ps_threadinfo_find(struct ps_threads *th, long tid)
{
    size_t i = (size_t)tid & (PS_TIDCACHE - 1);
    for (size_t n = 0; n < 8; n++, i = (i + 1) & (PS_TIDCACHE - 1))
        if (th->tids[i].tid == tid || th->tids[i].tid == 0)
            break;
    struct ps_thread_info *ti = &th->tids[i];
    if (ti->tid != tid) {
        /* New thread, or a slot reclaimed from a thread long gone (its
         * kept state file goes with it; a slot never used has none). */
        if (ti->tid != 0)
            ps_thread_on_cpu_forget(&th->kept, &ti->state_fd);
        memset(ti, 0, sizeof *ti);
        ti->tid = tid;
        ti->clock.last_cpu = -1;
        ti->state_fd.fd = -1;
    }
    return ti;
}

uint64_t ps_threadinfo_cpu_weight(struct ps_threads *th, struct ps_thread_info *ti,
                                  uint64_t period_ns, unsigned run)
{
    /* A tid that is no thread of ours any more is refused by the kernel:
     * the read never touches freed memory.  The monotonic clock around
     * it (vDSO, ~20 ns a read) bounds when it was taken (weight.h). */
    struct ps_cpu_reading r = { .before = ps_now_ns() };
    r.cpu = ti->tid > 0 ? ps_thread_cpu_ns(ti->tid) : -1;
    r.after = ps_now_ns();
    uint64_t n = ps_cpu_clock_due(&ti->clock, &r, period_ns, run);
    if (n == 0)
        return 0;
    /* Charged only where it runs (weight.h): a thread waiting for
     * anything but a CPU is not where its CPU time went.  Where the OS
     * cannot tell (no /proc), the CPU time goes where it is found. */
    int on_cpu = ti->clock.busy ||
                 ps_thread_on_cpu_kept(&th->kept, ti->tid, &ti->state_fd, r.after) != 0;
    return ps_cpu_clock_settle(&ti->clock, n, on_cpu, period_ns);
}

/* The thread's name now: the OS's, else (3.9-3.13 give threads none of
 * their own) the threading.Thread's, read from its object. */
static void read_name(const struct ps_threads *th, const struct ps_python *py, long tid,
                      uintptr_t boot, char *name, size_t size)
{
    if (tid == th->pid)
        strcpy(name, "MainThread");
    else if (tid <= 0 || ps_thread_os_name(tid, name, size) != 0)
        name[0] = '\0';
    if (name[0] == '\0' && tid > 0 && boot != 0)
        ps_thread_py_name(py, boot, name, size);
}

PS_TICK_PATH uint32_t ps_threadinfo_label(const struct ps_threads *th, const struct ps_python *py,
                             struct ps_symtab *syms, struct ps_thread_info *ti, uint64_t now,
                             uintptr_t boot)
{
    /* Names change at any time (3.14+, and programs that name threads):
     * read again now and then.  A thread first seen before it reached
     * _bootstrap_inner is looked at again as soon as it has, not a second
     * later. */
    int boot_new = boot != 0 && !ti->had_boot;
    if (now >= ti->name_at || boot_new) {
        char name[sizeof ti->name];
        read_name(th, py, ti->tid, boot, name, sizeof name);
        /* A read of the name that failed (the thread was moving under us)
         * is tried again on the next sample rather than a second later,
         * so a short-lived thread does not spend its life unnamed; a few
         * misses in a row mean this object has no readable name. */
        if (boot != 0 && name[0] == '\0' && ti->name_misses < PS_NAME_RETRIES) {
            ti->name_misses++;
            ti->had_boot = 0;
        } else {
            ti->had_boot = boot != 0;
        }
        strcpy(ti->name, name);
        ti->name_at = now + PS_NAME_REFRESH_NS;
    }
    return ps_sym_label(syms, ti->tid, ti->name[0] ? ti->name : NULL);
}

void ps_threadinfo_prepare_fork(struct ps_threads *th)
{
    th->forking_tid = ps_gettid();
}

void ps_threadinfo_child_after_fork(struct ps_threads *th)
{
    th->pid = getpid();
    /* Newest first; the oldest ancestor falls off a full list. */
    memmove(th->forker_tids + 1, th->forker_tids,
            (PS_FORKERS - 1) * sizeof th->forker_tids[0]);
    th->forker_tids[0] = th->forking_tid != th->pid ? th->forking_tid : 0;
    /* The kept state files name the parent's threads: closed here. */
    for (size_t i = 0; i < PS_TIDCACHE; i++)
        if (th->tids[i].tid != 0)
            ps_thread_on_cpu_forget(&th->kept, &th->tids[i].state_fd);
    memset(th->tids, 0, sizeof th->tids);
}
