/*
 * test_darwin_copy.c - runs the macOS suspend-copy-resume logic on Linux.
 *
 * lib/darwin/suspend.c and lib/darwin/read.c are compiled against a fake
 * <mach/mach.h> (fake_darwin/); the Mach calls are played by this file:
 *   thread_suspend  asks a real "Python" thread to park at its next safe
 *                   point and waits until it has (as the kernel's
 *                   thread_suspend returns once the thread is off the CPU);
 *   thread_resume   lets it go on;
 *   mach_vm_read_overwrite
 *                   process_vm_readv on our own pid (a plain copy where a
 *                   seccomp policy refuses it).
 * The "Python" thread keeps rewriting a fake thread state and frame chain
 * (depth and a generation stamp in every frame) whenever it is not parked.
 *
 * What it asserts, for 3.11+-style contiguous frames (span reads) and
 * 3.9-style scattered frames:
 *   - after ps_thread_copy_begin, every frame the walk reads through
 *     ps_read is the one of the moment the thread was parked: the chain's
 *     depth and every frame's stamp agree with the thread state, although
 *     the thread has since rewritten them (it has, in most rounds: checked);
 *   - nothing calls malloc, calloc, realloc or free while the thread is
 *     parked (they are wrapped here and counted);
 *   - reads outside the copy see live memory; after ps_thread_copy_end all
 *     reads are live again;
 *   - an unknown thread is read live (0), an ended one is refused (-1);
 *   - a chain longer than the walk may go is copied as far as it may go.
 * Prints "PASS name" / "FAIL name: why" lines; exit status 0 if all passed.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../lib/darwin/darwin.h"
#include "../../lib/frames.h"
#include "../../lib/memread.h"
#include "../../lib/platform.h"

#define TARGET_TID 4242
#define MAX_DEPTH 300
#define FR_STRIDE 64

/* --- malloc counting ------------------------------------------------------ */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static _Atomic int parked_now;     /* set while the target is parked */
static _Atomic int alloc_in_window;

static void note_alloc(void)
{
    if (atomic_load(&parked_now))
        atomic_fetch_add(&alloc_in_window, 1);
}

void *malloc(size_t n) { note_alloc(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { note_alloc(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { note_alloc(); return __libc_realloc(p, n); }
void free(void *p) { note_alloc(); __libc_free(p); }

/* --- the fake Mach layer ---------------------------------------------------- */

uintptr_t vm_page_size = 4096;
static _Atomic int want_park, parked, target_ended;
static pid_t self_pid;

mach_port_t mach_task_self(void)
{
    return 1;
}

kern_return_t mach_vm_read_overwrite(vm_map_t task, mach_vm_address_t address,
                                     mach_vm_size_t size, mach_vm_address_t data,
                                     mach_vm_size_t *outsize)
{
    (void)task;
    struct iovec l = { (void *)(uintptr_t)data, size }, r = { (void *)(uintptr_t)address, size };
    ssize_t got = process_vm_readv(self_pid, &l, 1, &r, 1, 0);
    if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
        /* Refused by a seccomp policy: every address this test reads is
         * valid, so a plain copy plays the part. */
        memcpy(l.iov_base, r.iov_base, size);
        got = (ssize_t)size;
    }
    *outsize = got > 0 ? (mach_vm_size_t)got : 0;
    return got == (ssize_t)size ? KERN_SUCCESS : KERN_INVALID_ADDRESS;
}

kern_return_t thread_suspend(thread_act_t thread)
{
    if (thread != TARGET_TID || atomic_load(&target_ended))
        return KERN_TERMINATED;
    atomic_store(&want_park, 1);
    while (!atomic_load(&parked))
        sched_yield();
    atomic_store(&parked_now, 1);
    return KERN_SUCCESS;
}

kern_return_t thread_resume(thread_act_t thread)
{
    if (thread == TARGET_TID && atomic_load(&parked_now)) {
        atomic_store(&parked_now, 0);
        atomic_store(&want_park, 0);
        while (atomic_load(&parked))
            sched_yield();
    }
    return KERN_SUCCESS;
}

/* The registry and the rest of the platform, as suspend.c sees them. */
mach_port_t ps_darwin_thread_port(long tid)
{
    return tid == TARGET_TID ? (mach_port_t)TARGET_TID : MACH_PORT_NULL;
}
void ps_darwin_thread_gone(long tid) { (void)tid; }
void ps_darwin_threads_after_fork(void) {}
long ps_gettid(void) { return 1; }

/* What suspend.c uses from memread.c and frames.c, minus what does not
 * concern it (direct reads, versions). */
int ps_read(void *dst, uintptr_t src, size_t n)
{
    if (src < 4096 || src + n < src)
        return -1;
    return n == 0 ? 0 : ps_plat_read(dst, src, n);
}

int ps_thread_top_frame(const struct ps_python *py, const uint8_t *ts, uintptr_t *frame)
{
    memcpy(frame, ts + py->L.ts_frame, sizeof *frame);
    return 0;
}

/* --- the "Python" thread ---------------------------------------------------- */

/* Thread state: [0] stamp, [1] top frame, [2] depth.  Frame: [0] back,
 * [1] stamp, [2] depth below it (0 for the root), [3..5] filler. */
struct fake_ts {
    _Atomic uint64_t stamp;
    _Atomic uintptr_t top;
    _Atomic uint64_t depth;
    uint64_t pad[5];
};

static struct fake_ts ts_live;
static unsigned char *frames;        /* MAX_DEPTH frames */
static uintptr_t frame_addr[MAX_DEPTH];
static _Atomic int stop_target;

static void park_if_asked(void)
{
    if (atomic_load(&want_park)) {
        atomic_store(&parked, 1);
        while (atomic_load(&want_park))
            sched_yield();
        atomic_store(&parked, 0);
    }
}

static void build_chain(uint64_t stamp, uint64_t depth)
{
    for (uint64_t i = 0; i < depth; i++) {
        uint64_t *f = (uint64_t *)frame_addr[i];
        f[0] = i == 0 ? 0 : frame_addr[i - 1];
        f[1] = stamp;
        f[2] = i;
    }
    atomic_store(&ts_live.top, depth ? frame_addr[depth - 1] : 0);
    atomic_store(&ts_live.depth, depth);
    atomic_store(&ts_live.stamp, stamp);
}

static void *target_main(void *arg)
{
    (void)arg;
    uint64_t stamp = 1;
    while (!atomic_load(&stop_target)) {
        /* Only between complete updates is the state consistent: the one
         * safe point, like an instruction boundary for the real thing. */
        park_if_asked();
        stamp++;
        build_chain(stamp, 1 + stamp % (MAX_DEPTH - 1));
    }
    park_if_asked();
    return NULL;
}

/* Parks once when asked, then ends. */
static void *park_once(void *arg)
{
    (void)arg;
    while (!atomic_load(&want_park))
        sched_yield();
    park_if_asked();
    return NULL;
}

/* --- checks ------------------------------------------------------------------ */

static int failures;

static void report(const char *name, int ok, const char *why)
{
    if (ok)
        printf("PASS %s\n", name);
    else
        printf("FAIL %s: %s\n", name, why);
    failures += !ok;
}

/* Walks the copy through ps_read as frames.c would; returns a message or NULL. */
static const char *walk_consistent(const struct ps_python *py, const uint8_t *ts, int *differs)
{
    uint64_t stamp, depth;
    uintptr_t frame;
    memcpy(&stamp, ts, 8);
    memcpy(&depth, ts + 16, 8);
    ps_thread_top_frame(py, ts, &frame);
    uint64_t n = 0;
    while (frame != 0) {
        uint64_t f[6];
        if (ps_read(f, frame, py->L.fr_read) != 0)
            return "a copied frame could not be read";
        if (f[1] != stamp)
            return "a frame's stamp differs from the thread state's: torn copy";
        if (f[2] != depth - 1 - n)
            return "a frame's position differs from the thread state's depth";
        if (__atomic_load_n(&((uint64_t *)frame)[1], __ATOMIC_RELAXED) != stamp)
            *differs = 1;
        frame = f[0];
        if (++n > depth)
            return "the chain is longer than the thread state says";
    }
    return n == depth ? NULL : "the chain is shorter than the thread state says";
}

static void run_kind(const char *label, enum ps_frame_kind kind, int scattered)
{
    struct ps_python py;
    memset(&py, 0, sizeof py);
    py.L.ts_read = sizeof(struct fake_ts);
    py.L.ts_frame = 8;
    py.L.ts_cframe = PS_NOFIELD;
    py.L.fr_read = 48;
    py.L.fr_back = 0;
    py.L.frame_kind = kind;

    for (int i = 0; i < MAX_DEPTH; i++) {
        /* 3.11+: contiguous on a data stack, older below; 3.9: anywhere. */
        size_t slot = scattered ? (size_t)((i * 37) % MAX_DEPTH) : (size_t)i;
        frame_addr[i] = (uintptr_t)(frames + slot * FR_STRIDE);
    }
    atomic_store(&stop_target, 0);
    atomic_store(&alloc_in_window, 0);
    build_chain(1, 1);
    pthread_t t;
    pthread_create(&t, NULL, target_main, NULL);

    char name[128], why[256];
    const char *err = NULL;
    int rounds = 300, moved = 0;
    uint8_t ts[sizeof(struct fake_ts)];
    for (int r = 0; r < rounds && err == NULL; r++) {
        int differs = 0;
        if (ps_thread_copy_begin(&py, TARGET_TID, (uintptr_t)&ts_live, ts, 4096) != 0) {
            err = "ps_thread_copy_begin refused a live thread";
            break;
        }
        /* Let the thread move on before we look at the copy. */
        for (int spin = 0; spin < 20; spin++)
            sched_yield();
        err = walk_consistent(&py, ts, &differs);
        moved += differs;
        uint64_t live_stamp = atomic_load(&ts_live.stamp), got;
        ps_thread_copy_end();
        if (err == NULL && ps_read(&got, (uintptr_t)&ts_live.stamp, 8) == 0 && got < live_stamp)
            err = "after ps_thread_copy_end a read still came from the copy";
    }
    atomic_store(&stop_target, 1);
    pthread_join(t, NULL);

    snprintf(name, sizeof name, "%s/copy-is-consistent", label);
    snprintf(why, sizeof why, "%s", err ? err : "");
    report(name, err == NULL, why);
    snprintf(name, sizeof name, "%s/thread-moved-on", label);
    snprintf(why, sizeof why, "in %d of %d rounds live frames differed from the copy "
             "(want some, or the test proves nothing)", moved, rounds);
    report(name, moved > 0, why);
    snprintf(name, sizeof name, "%s/no-allocation-while-suspended", label);
    snprintf(why, sizeof why, "%d allocator calls while the thread was parked",
             atomic_load(&alloc_in_window));
    report(name, atomic_load(&alloc_in_window) == 0, why);
}

int main(void)
{
    self_pid = getpid();
    if (ps_plat_read_init() != 0) {
        printf("FAIL read-init: the probe read failed\n");
        return 1;
    }
    if (posix_memalign((void **)&frames, 4096, MAX_DEPTH * FR_STRIDE) != 0)
        return 2;

    run_kind("interp-frames", PS_FRAMES_INTERP, 0);
    run_kind("object-frames", PS_FRAMES_OBJECT, 1);

    /* Unknown thread: read live, no copy.  Ended thread: refused. */
    struct ps_python py;
    memset(&py, 0, sizeof py);
    py.L.ts_read = sizeof(struct fake_ts);
    py.L.ts_frame = 8;
    py.L.fr_read = 48;
    py.L.frame_kind = PS_FRAMES_INTERP;
    uint8_t ts[sizeof(struct fake_ts)];
    build_chain(7, 3);
    int rc = ps_thread_copy_begin(&py, 99, (uintptr_t)&ts_live, ts, 4096);
    atomic_store(&ts_live.stamp, 8);
    uint64_t got = 0;
    ps_read(&got, (uintptr_t)&ts_live.stamp, 8);
    ps_thread_copy_end();
    report("unknown-thread-read-live", rc == 0 && got == 8, "rc or value wrong");
    atomic_store(&target_ended, 1);
    rc = ps_thread_copy_begin(&py, TARGET_TID, (uintptr_t)&ts_live, ts, 4096);
    report("ended-thread-refused", rc == -1, "want -1 when thread_suspend fails");
    atomic_store(&target_ended, 0);

    /* A chain deeper than a walk of max_frames may go: copied that far
     * (ps_walk_budget(max) frames, the walk's own budget), no further, no
     * error.  (This said max + 256 while frames.c walked 2 * max + 256: the
     * copy now follows the walk's rule, frames.h.) */
    build_chain(9, MAX_DEPTH);
    py.L.frame_kind = PS_FRAMES_OBJECT;  /* one record per frame */
    pthread_t t;
    pthread_create(&t, NULL, park_once, NULL);
    rc = ps_thread_copy_begin(&py, TARGET_TID, (uintptr_t)&ts_live, ts, 10);
    pthread_join(t, NULL);
    build_chain(10, MAX_DEPTH);          /* live frames change; the copy must not */
    uintptr_t frame;
    memcpy(&frame, ts + 8, sizeof frame);
    int copied = 0;
    for (; frame != 0; copied++) {
        uint64_t f[6];
        ps_read(f, frame, 48);
        if (f[1] != 9)
            break;
        frame = f[0];
    }
    ps_thread_copy_end();
    char why[128];
    snprintf(why, sizeof why, "rc %d, %d frames served from the copy, want %d", rc, copied,
             ps_walk_budget(10));
    report("deep-chain-copied-to-the-walk-budget", rc == 0 && copied == ps_walk_budget(10), why);

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
