/*
 * darwin/threads.c - thread identity, CPU clocks, names and time on macOS.
 *
 * Thread ids.  A thread is named by its 64-bit system id (pthread_threadid_np,
 * what CPython 3.11+ stores as native_thread_id, and what Activity Monitor,
 * lldb and sample(1) show).  macOS never reuses these ids while it runs, so
 * an id can never come to mean a different thread.
 *
 * Thread discovery.  The sampler needs, for every thread that may run Python,
 * its Mach thread port (to suspend it and to read its CPU time and name) and
 * its pthread_t (3.9 and 3.10 record only that).  pthread_introspection_hook_install
 * gives us a callback on each thread itself when it starts and just before it
 * terminates; threads that existed before are found once with task_threads().
 * The hook chains to the one installed before it (sanitizers, Xcode's queue
 * debugging, another profiler).
 *
 * The registry is a fixed array, lock-free: the hook runs on threads the
 * sampler may have suspended a moment later, so neither side may wait for
 * the other, and nothing here allocates.  Each entry owns one send right to
 * the thread's port (mach_thread_self() adds a user reference), so the port
 * name cannot be recycled for another thread while the entry exists, even
 * after the thread has died: thread_suspend() on it then fails cleanly
 * instead of stopping a stranger.  An ending thread only marks its entry
 * dead; the sampler thread, the only user of the ports, releases the right
 * and frees the entry during its next lookup.
 *
 * Time.  mach_absolute_time() is the clock mach_wait_until() sleeps against,
 * so deadlines are converted to its units and slept to exactly.
 */
#include <errno.h>
#include <mach/mach_time.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "platform/platform.h"
#include "platform/darwin/darwin.h"

#define REG_SLOTS 4096
#define HINTS 1024  /* power of two */

enum { SLOT_FREE = 0, SLOT_CLAIMED, SLOT_LIVE, SLOT_DEAD };

struct slot {
    _Atomic int state;
    _Atomic uint64_t tid;
    _Atomic uintptr_t pth;
    _Atomic mach_port_t port;
};

static struct slot reg[REG_SLOTS];
static _Atomic size_t reg_top;       /* slots [0, reg_top) have been used */
static uint32_t hint[HINTS];         /* tid -> slot, sampler thread only */
static _Atomic int hook_installed;
static pthread_introspection_hook_t prev_hook;
static _Atomic uint64_t main_tid;

static uint64_t self_tid(void)
{
    uint64_t tid = 0;
    pthread_threadid_np(NULL, &tid);
    return tid;
}

long ps_gettid(void)
{
    return (long)self_tid();
}

int ps_thread_released(long tid)
{
    /* Only forkpause.c asks, and it has no work on macOS (no fopen
     * stand-in: docs/macos.md). */
    (void)tid;
    return 1;
}

/* Takes ownership of one send right to port. */
static void reg_add(uint64_t tid, uintptr_t pth, mach_port_t port)
{
    for (size_t i = 0; i < REG_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&reg[i].state, &expect, SLOT_CLAIMED))
            continue;
        atomic_store(&reg[i].tid, tid);
        atomic_store(&reg[i].pth, pth);
        atomic_store(&reg[i].port, port);
        atomic_store(&reg[i].state, SLOT_LIVE);
        size_t top = atomic_load(&reg_top);
        while (top < i + 1 && !atomic_compare_exchange_weak(&reg_top, &top, i + 1))
            ;
        return;
    }
    /* Full: this thread is sampled without being suspended (as on Linux). */
    mach_port_deallocate(mach_task_self(), port);
}

static int reg_has(uint64_t tid)
{
    size_t top = atomic_load(&reg_top);
    for (size_t i = 0; i < top; i++)
        if (atomic_load(&reg[i].state) == SLOT_LIVE && atomic_load(&reg[i].tid) == tid)
            return 1;
    return 0;
}

/* On the ending thread itself: its entries are marked, not freed. */
static void reg_mark_dead(uint64_t tid)
{
    size_t top = atomic_load(&reg_top);
    for (size_t i = 0; i < top; i++) {
        int expect = SLOT_LIVE;
        if (atomic_load(&reg[i].tid) == tid)
            atomic_compare_exchange_strong(&reg[i].state, &expect, SLOT_DEAD);
    }
}

/* Sampler thread only: gives back the right of a dead thread's entry. */
static void reclaim(struct slot *s)
{
    mach_port_t port = atomic_load(&s->port);
    atomic_store(&s->port, MACH_PORT_NULL);
    atomic_store(&s->tid, 0);
    atomic_store(&s->pth, 0);
    if (port != MACH_PORT_NULL)
        mach_port_deallocate(mach_task_self(), port);
    atomic_store(&s->state, SLOT_FREE);
}

/* Sampler thread only: the live entry of tid, reclaiming dead ones seen. */
static struct slot *find_tid(uint64_t tid)
{
    size_t top = atomic_load(&reg_top);
    uint32_t h = (uint32_t)(tid & (HINTS - 1));
    size_t i = hint[h];
    if (i < top && atomic_load(&reg[i].state) == SLOT_LIVE && atomic_load(&reg[i].tid) == tid)
        return &reg[i];
    for (i = 0; i < top; i++) {
        int st = atomic_load(&reg[i].state);
        if (st == SLOT_DEAD) {
            reclaim(&reg[i]);
        } else if (st == SLOT_LIVE && atomic_load(&reg[i].tid) == tid) {
            hint[h] = (uint32_t)i;
            return &reg[i];
        }
    }
    return NULL;
}

mach_port_t ps_darwin_thread_port(long tid)
{
    if (tid <= 0)
        return MACH_PORT_NULL;
    struct slot *s = find_tid((uint64_t)tid);
    return s != NULL ? atomic_load(&s->port) : MACH_PORT_NULL;
}

void ps_darwin_thread_gone(long tid)
{
    /* An entry added by enumerate() for a thread that ended before it was
     * added never gets a TERMINATE event: this is how it goes. */
    if (tid > 0)
        reg_mark_dead((uint64_t)tid);
}

long ps_thread_tid(uintptr_t pthread_id)
{
    size_t top = atomic_load(&reg_top);
    for (size_t i = 0; i < top; i++)
        if (atomic_load(&reg[i].state) == SLOT_LIVE && atomic_load(&reg[i].pth) == pthread_id)
            return (long)atomic_load(&reg[i].tid);
    return -1;
}

/* Runs on the thread named by the event for START and TERMINATE (Apple's
 * <pthread/introspection.h> guarantees it).  Only traps and atomics here. */
static void hook(unsigned int event, pthread_t thread, void *addr, size_t size)
{
    if (event == PTHREAD_INTROSPECTION_THREAD_START) {
        uint64_t tid = self_tid();
        if (tid != 0)
            reg_add(tid, (uintptr_t)thread, mach_thread_self());
    } else if (event == PTHREAD_INTROSPECTION_THREAD_TERMINATE) {
        reg_mark_dead(self_tid());
    }
    if (prev_hook != NULL)
        prev_hook(event, thread, addr, size);
}

/* Records the threads that exist now (those that started before the hook). */
static void enumerate(void)
{
    thread_act_array_t list = NULL;
    mach_msg_type_number_t n = 0;
    if (task_threads(mach_task_self(), &list, &n) != KERN_SUCCESS)
        return;
    for (mach_msg_type_number_t i = 0; i < n; i++) {
        thread_identifier_info_data_t id;
        mach_msg_type_number_t cnt = THREAD_IDENTIFIER_INFO_COUNT;
        kern_return_t kr = thread_info(list[i], THREAD_IDENTIFIER_INFO, (thread_info_t)&id, &cnt);
        if (kr != KERN_SUCCESS || id.thread_id == 0) {
            mach_port_deallocate(mach_task_self(), list[i]);
            continue;
        }
        /* task_threads lists threads in creation order: the first is the
         * main thread (used when we were loaded by dlopen on another one). */
        if (i == 0 && atomic_load(&main_tid) == 0)
            atomic_store(&main_tid, id.thread_id);
        if (reg_has(id.thread_id)) {
            mach_port_deallocate(mach_task_self(), list[i]);
            continue;
        }
        pthread_t pth = pthread_from_mach_thread_np(list[i]);
        reg_add(id.thread_id, (uintptr_t)pth, list[i]);
    }
    vm_deallocate(mach_task_self(), (vm_address_t)list, n * sizeof *list);
}

void ps_threads_track(void)
{
    if (pthread_main_np())
        atomic_store(&main_tid, self_tid());
    if (!atomic_exchange(&hook_installed, 1)) {
        /* Hook first, then list: a thread starting in between is seen twice
         * (reg_has drops the second) rather than not at all. */
        prev_hook = pthread_introspection_hook_install(hook);
        enumerate();
        /* Our own fork handler, not only the library's (which exists only
         * when PYSAMPLE_OUTPUT started us): a child must never use the
         * parent's port names, which may name other rights there. */
        pthread_atfork(NULL, NULL, ps_darwin_threads_after_fork);
    }
    /* Binds thread_resume now (see ps_plat_read_init on lazy binding):
     * on a null port it only returns an error. */
    thread_resume(MACH_PORT_NULL);
}

void ps_darwin_threads_after_fork(void)
{
    /* The child's port namespace is new: the parent's names mean nothing
     * here and must not be deallocated.  The hook stays installed. */
    for (size_t i = 0; i < REG_SLOTS; i++) {
        atomic_store(&reg[i].port, MACH_PORT_NULL);
        atomic_store(&reg[i].tid, 0);
        atomic_store(&reg[i].pth, 0);
        atomic_store(&reg[i].state, SLOT_FREE);
    }
    atomic_store(&reg_top, 0);
    memset(hint, 0, sizeof hint);
    /* The forking thread is the child's only thread, and its main thread
     * (pthread_main_np() says so, as the tid equals the pid on Linux). */
    atomic_store(&main_tid, self_tid());
    reg_add(self_tid(), (uintptr_t)pthread_self(), mach_thread_self());
}

/* --- CPU clocks and names ------------------------------------------------- */

/* thread_info() of flavor for thread tid into info (cnt words): 0, or -1
 * for a thread we do not know or that has ended. */
static int info_of(long tid, thread_flavor_t flavor, thread_info_t info,
                   mach_msg_type_number_t cnt)
{
    mach_port_t port = ps_darwin_thread_port(tid);
    if (port == MACH_PORT_NULL)
        return -1;
    return thread_info(port, flavor, info, &cnt) == KERN_SUCCESS ? 0 : -1;
}

int64_t ps_thread_cpu_ns(long tid)
{
    thread_basic_info_data_t info;
    if (info_of(tid, THREAD_BASIC_INFO, (thread_info_t)&info, THREAD_BASIC_INFO_COUNT) != 0)
        return -1;
    return ((int64_t)info.user_time.seconds + info.system_time.seconds) * 1000000000 +
           ((int64_t)info.user_time.microseconds + info.system_time.microseconds) * 1000;
}

int ps_thread_on_cpu(long tid)
{
    thread_basic_info_data_t info;
    if (info_of(tid, THREAD_BASIC_INFO, (thread_info_t)&info, THREAD_BASIC_INFO_COUNT) != 0)
        return -1;
    /* TH_STATE_RUNNING: running or runnable, as Linux's R. */
    return info.run_state == TH_STATE_RUNNING;
}

/* thread_info answers without a descriptor: nothing to keep. */
int ps_thread_on_cpu_kept(struct ps_stat_kept *ks, long tid, struct ps_fd *kept, uint64_t now)
{
    (void)ks;
    (void)kept;
    (void)now;
    return ps_thread_on_cpu(tid);
}

void ps_thread_on_cpu_forget(struct ps_stat_kept *ks, struct ps_fd *kept)
{
    (void)ks;
    (void)kept;
}

int64_t ps_self_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int ps_thread_os_name(long tid, char *buf, size_t len)
{
    buf[0] = '\0';
    if (len == 0)
        return -1;
    /* On Linux the sampler knows the main thread because its tid is the
     * pid; macOS thread ids never are, so the name says it instead. */
    if (tid > 0 && (uint64_t)tid == atomic_load(&main_tid)) {
        strncpy(buf, "MainThread", len - 1);
        buf[len - 1] = '\0';
        return 0;
    }
    thread_extended_info_data_t info;
    if (info_of(tid, THREAD_EXTENDED_INFO, (thread_info_t)&info, THREAD_EXTENDED_INFO_COUNT) != 0)
        return -1;
    /* Unnamed threads have an empty name on macOS (never the process name). */
    size_t n = strnlen(info.pth_name, sizeof info.pth_name);
    if (n >= len)
        n = len - 1;
    memcpy(buf, info.pth_name, n);
    buf[n] = '\0';
    return 0;
}

/* --- time ------------------------------------------------------------------ */

static mach_timebase_info_data_t timebase(void)
{
    static mach_timebase_info_data_t tb;
    if (tb.denom == 0)
        mach_timebase_info(&tb);
    return tb;
}

uint64_t ps_now_ns(void)
{
    mach_timebase_info_data_t tb = timebase();
    uint64_t t = mach_absolute_time();
    /* 1/1 on Intel, 125/3 on Apple silicon: split to avoid overflow. */
    return t / tb.denom * tb.numer + t % tb.denom * tb.numer / tb.denom;
}

/* macOS has no per-thread timer slack to lower (its timer coalescing is
 * per process and QoS-driven). */
void ps_thread_precise_timers(void)
{
}

int ps_signal_from_fault(const siginfo_t *si)
{
    return si != NULL && si->si_code > 0 && si->si_code < SI_USER;
}

/* Not on macOS yet (docs/macos.md): a fork child whose last program thread
 * ends with pthread_exit stays alive with the sampler thread.  The Mach
 * task's thread list (task_threads) would tell, and a thread's run state
 * whether it has ended. */
int ps_program_threads_gone(int may_open)
{
    (void)may_open;
    return 0;
}
