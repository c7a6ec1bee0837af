/*
 * test_darwin_copy.c - runs the macOS suspend-copy-resume logic on Linux.
 *
 * lib/platform/darwin/suspend.c and lib/platform/darwin/read.c (the
 * mechanism) and lib/python/framecopy.c (what is copied) are compiled
 * against a fake <mach/mach.h> (fake_darwin/); the Mach calls are played
 * by this file:
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
 *   - after ps_framecopy_begin, every frame the walk reads through
 *     ps_read is the one of the moment the thread was parked: the chain's
 *     depth and every frame's stamp agree with the thread state, although
 *     the thread has since rewritten them (it has, in most rounds: checked);
 *   - nothing calls malloc, calloc, realloc or free while the thread is
 *     parked (they are wrapped here and counted);
 *   - reads outside the copy see live memory; after ps_framecopy_end all
 *     reads are live again;
 *   - an unknown thread is read live (0), an ended one is refused (-1);
 *   - a chain longer than the walk may go is copied as far as it may go;
 *   - the platform's part alone, with no Python (platform.h): what was
 *     read while the thread was stopped is served after it changed, only
 *     when kept and only until ps_thread_copy_end.
 * Prints "PASS name" / "FAIL name: why" lines; exit status 0 if all passed.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <mach-o/dyld.h>
#include <mach-o/loader.h>
#include <mach-o/nlist.h>

#include "platform/darwin/darwin.h"
#include "python/framecopy.h"
#include "python/frames.h"
#include "memory/memread.h"
#include "native/native.h"
#include "platform/platform.h"
#include "util/symtab.h"

/* Which thread state the fake Mach layer serves: scripts/cross-macos builds
 * this file twice, with -DPS_DARWIN_ARM64=1 and 0, each with the matching
 * lib/platform/darwin/regs_<arch>.c. */
#ifndef PS_DARWIN_ARM64
#define PS_DARWIN_ARM64 0
#endif

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
static _Atomic int suspends, resumes;
static _Atomic int reads_stopped;  /* mach_vm_read_overwrite calls while parked */
static pid_t self_pid;

mach_port_t mach_task_self(void)
{
    return 1;
}

/* Where a seccomp policy refuses process_vm_readv: through a pipe, which
 * fails with EFAULT on an unreadable source as the kernel's copy does
 * (the native checks read an unmapped stack on purpose). */
static int copy_pipe[2] = { -1, -1 };

static ssize_t pipe_copy(void *dst, const void *src, size_t n)
{
    if (copy_pipe[0] < 0 && pipe(copy_pipe) != 0)
        return -1;
    size_t done = 0;
    while (done < n) {
        size_t k = n - done < 4096 ? n - done : 4096;
        ssize_t w = write(copy_pipe[1], (const char *)src + done, k);
        if (w <= 0)
            return done ? (ssize_t)done : -1;
        if (read(copy_pipe[0], (char *)dst + done, (size_t)w) != w)
            return -1;
        done += (size_t)w;
    }
    return (ssize_t)done;
}

kern_return_t mach_vm_read_overwrite(vm_map_t task, mach_vm_address_t address,
                                     mach_vm_size_t size, mach_vm_address_t data,
                                     mach_vm_size_t *outsize)
{
    (void)task;
    if (atomic_load(&parked_now))
        atomic_fetch_add(&reads_stopped, 1);
    struct iovec l = { (void *)(uintptr_t)data, size }, r = { (void *)(uintptr_t)address, size };
    ssize_t got = process_vm_readv(self_pid, &l, 1, &r, 1, 0);
    if (got < 0 && (errno == ENOSYS || errno == EPERM))
        got = pipe_copy(l.iov_base, r.iov_base, size);
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
    atomic_fetch_add(&suspends, 1);
    return KERN_SUCCESS;
}

kern_return_t thread_resume(thread_act_t thread)
{
    if (thread == TARGET_TID && atomic_load(&parked_now)) {
        atomic_fetch_add(&resumes, 1);
        atomic_store(&parked_now, 0);
        atomic_store(&want_park, 0);
        while (atomic_load(&parked))
            sched_yield();
    }
    return KERN_SUCCESS;
}

/* The registry and the rest of the platform, as suspend.c and read.c see
 * them. */
mach_port_t ps_darwin_thread_port(long tid)
{
    return tid == TARGET_TID ? (mach_port_t)TARGET_TID : MACH_PORT_NULL;
}
void ps_darwin_thread_gone(long tid) { (void)tid; }
void ps_darwin_threads_after_fork(void) {}
long ps_gettid(void) { return 1; }

/* The platform's monotonic clock (lib/platform/darwin/threads.c in the
 * library), which unwind.c times its walks with. */
uint64_t ps_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What framecopy.c and read.c use from memread.c and walkplan.c, minus
 * what does not concern them (direct reads, versions). */
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

/* The layout of the fake thread state and frames, as the walk sees it. */
static void fake_python(struct ps_python *py, enum ps_frame_kind kind)
{
    memset(py, 0, sizeof *py);
    py->L.ts_read = sizeof(struct fake_ts);
    py->L.ts_frame = 8;
    py->L.ts_cframe = PS_NOFIELD;
    py->L.fr_read = 48;
    py->L.fr_back = 0;
    py->L.frame_kind = kind;
}

static void run_kind(const char *label, enum ps_frame_kind kind, int scattered)
{
    struct ps_python py;
    fake_python(&py, kind);

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
    int rounds = 300, moved = 0, batched = 1;
    uint64_t worst_depth = 0;
    int worst_reads = 0;
    uint8_t ts[sizeof(struct fake_ts)];
    for (int r = 0; r < rounds && err == NULL; r++) {
        int differs = 0;
        atomic_store(&reads_stopped, 0);
        if (ps_framecopy_begin(&py, TARGET_TID, (uintptr_t)&ts_live, ts, 4096) != 0) {
            err = "ps_framecopy_begin refused a live thread";
            break;
        }
        /* Contiguous frames: one span read covers 4096 / FR_STRIDE of
         * them, so the copy takes a few reads, not one per frame. */
        uint64_t depth;
        memcpy(&depth, ts + 16, sizeof depth);
        int reads = atomic_load(&reads_stopped);
        if (!scattered && (uint64_t)reads > depth * FR_STRIDE / 4096 + 4 && reads > worst_reads) {
            batched = 0;
            worst_reads = reads;
            worst_depth = depth;
        }
        /* Let the thread move on before we look at the copy. */
        for (int spin = 0; spin < 20; spin++)
            sched_yield();
        err = walk_consistent(&py, ts, &differs);
        moved += differs;
        uint64_t live_stamp = atomic_load(&ts_live.stamp), got;
        ps_framecopy_end();
        if (err == NULL && ps_read(&got, (uintptr_t)&ts_live.stamp, 8) == 0 && got < live_stamp)
            err = "after ps_framecopy_end a read still came from the copy";
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
    if (!scattered) {
        snprintf(name, sizeof name, "%s/span-reads-batch-frames", label);
        snprintf(why, sizeof why, "%d reads while stopped for %llu frames (want at most "
                 "%llu: one per 4 KiB of frames, and the thread state)", worst_reads,
                 (unsigned long long)worst_depth,
                 (unsigned long long)(worst_depth * FR_STRIDE / 4096 + 4));
        report(name, batched, why);
    }
    snprintf(name, sizeof name, "%s/no-allocation-while-suspended", label);
    snprintf(why, sizeof why, "%d allocator calls while the thread was parked",
             atomic_load(&alloc_in_window));
    report(name, atomic_load(&alloc_in_window) == 0, why);
}

/* --- native stacks: fake images, registers and frame chains ----------------
 *
 * lib/platform/darwin/regs.c (capture, the frame-0 rule), machosyms.c (images and
 * symbols), suspend.c (the hold the Python copy joins), unwind.c and
 * merge.c (the merge), against:
 *   thread_get_state  the registers the check chose, as ARM_THREAD_STATE64
 *                     or x86_THREAD_STATE64 (PS_DARWIN_ARM64 picks which:
 *                     scripts/cross-macos builds this file both ways);
 *   dyld's image list two fake Mach-O images built below (header, load
 *                     commands, code with call instructions, a __LINKEDIT
 *                     with nlist_64 symbols, strings and function starts);
 *   a stack           frame records in a buffer, followed by a page that
 *                     is not readable.
 */

#if PS_DARWIN_ARM64
#define FLAVOUR "arm64"
#else
#define FLAVOUR "x86_64"
#endif

static struct {
    uint64_t pc, sp, fp, lr;
} fake_regs;
static _Atomic int state_read_running, dyld_in_window;

mach_port_t mach_thread_self(void)
{
    return 7;
}

kern_return_t mach_port_deallocate(mach_port_t task, mach_port_t name)
{
    (void)task;
    (void)name;
    return KERN_SUCCESS;
}

kern_return_t thread_get_state(thread_act_t thread, thread_state_flavor_t flavor,
                               thread_state_t state, mach_msg_type_number_t *count)
{
    if (thread != TARGET_TID)
        return KERN_FAILURE;   /* the start-up probe on the sampler itself */
    if (!atomic_load(&parked_now))
        atomic_fetch_add(&state_read_running, 1);
#if PS_DARWIN_ARM64
    arm_thread_state64_t st = { .__pc = fake_regs.pc, .__sp = fake_regs.sp, .__fp = fake_regs.fp,
                                .__lr = fake_regs.lr };
    const thread_state_flavor_t want = ARM_THREAD_STATE64;
    const mach_msg_type_number_t words = ARM_THREAD_STATE64_COUNT;
#else
    x86_thread_state64_t st = { .__rip = fake_regs.pc, .__rsp = fake_regs.sp,
                                .__rbp = fake_regs.fp };
    const thread_state_flavor_t want = x86_THREAD_STATE64;
    const mach_msg_type_number_t words = x86_THREAD_STATE64_COUNT;
#endif
    if (flavor != want || *count < words)
        return KERN_FAILURE;
    *count = words;
    memcpy(state, &st, sizeof st);
    return KERN_SUCCESS;
}

/* Two images: libfake.dylib (the C code) and libpython3.12.dylib (the
 * evaluation loop, and _PyRuntime in its __DATA). */
#define IMG_SIZE 0x10000
#define UNSLID 0x100000000ull
#define LE_VM 0x8000       /* __LINKEDIT's place in memory, from the header */
#define LE_FILE 0x5000     /* ... and in the "file": symoff etc. count from there */

struct fake_image {
    uint8_t *mem;
    const char *path;
};
static struct fake_image images[3];
static _Atomic uint32_t nimages;
static void (*on_add)(const struct mach_header *, intptr_t);

static void note_dyld(void)
{
    if (atomic_load(&parked_now))
        atomic_fetch_add(&dyld_in_window, 1);
}

uint32_t _dyld_image_count(void)
{
    note_dyld();
    return atomic_load(&nimages);
}

const struct mach_header *_dyld_get_image_header(uint32_t i)
{
    note_dyld();
    return i < atomic_load(&nimages) ? (const struct mach_header *)(void *)images[i].mem : NULL;
}

intptr_t _dyld_get_image_vmaddr_slide(uint32_t i)
{
    note_dyld();
    return i < atomic_load(&nimages) ? (intptr_t)((uintptr_t)images[i].mem - UNSLID) : 0;
}

const char *_dyld_get_image_name(uint32_t i)
{
    note_dyld();
    return i < atomic_load(&nimages) ? images[i].path : NULL;
}

void _dyld_register_func_for_add_image(void (*fn)(const struct mach_header *, intptr_t))
{
    note_dyld();
    on_add = fn;
    for (uint32_t i = 0; i < atomic_load(&nimages); i++)
        fn((const struct mach_header *)(void *)images[i].mem,
           _dyld_get_image_vmaddr_slide(i));
}

void _dyld_register_func_for_remove_image(void (*fn)(const struct mach_header *, intptr_t))
{
    note_dyld();
    (void)fn;
}

struct fsym {
    const char *name;
    uint8_t type;
    uint32_t off;   /* from the header */
};

static void put_cmd(uint8_t *mem, size_t *at, const void *cmd, size_t n, uint32_t *ncmds)
{
    memcpy(mem + *at, cmd, n);
    *at += n;
    (*ncmds)++;
}

static void segment(uint8_t *mem, size_t *at, uint32_t *ncmds, const char *name, uint64_t vmoff,
                    uint64_t size, uint64_t fileoff)
{
    struct segment_command_64 sc;
    memset(&sc, 0, sizeof sc);
    sc.cmd = LC_SEGMENT_64;
    sc.cmdsize = sizeof sc;
    memcpy(sc.segname, name, strlen(name));   /* all shorter than 16 */
    sc.vmaddr = UNSLID + vmoff;
    sc.vmsize = size;
    sc.fileoff = fileoff;
    sc.filesize = size;
    put_cmd(mem, at, &sc, sizeof sc, ncmds);
}

/* A Mach-O image in memory: __TEXT [0, 0x6000) with the header, __DATA
 * [0x6000, 0x7000), __LINKEDIT at LE_VM (file offset LE_FILE) holding the
 * symbols, their strings and the function starts. */
static void build_image(struct fake_image *im, const char *path, const struct fsym *syms, int n,
                        const uint32_t *starts, int nstarts)
{
    uint8_t *mem = im->mem;
    memset(mem, 0, IMG_SIZE);
    size_t at = sizeof(struct mach_header_64);
    uint32_t ncmds = 0;
    segment(mem, &at, &ncmds, "__PAGEZERO", 0 - UNSLID, UNSLID, 0);
    segment(mem, &at, &ncmds, "__TEXT", 0, 0x6000, 0);
    segment(mem, &at, &ncmds, "__DATA", 0x6000, 0x1000, 0x6000);
    segment(mem, &at, &ncmds, "__LINKEDIT", LE_VM, IMG_SIZE - LE_VM, LE_FILE);

    uint8_t *le = mem + LE_VM;
    struct nlist_64 *nl = (struct nlist_64 *)(void *)le;
    size_t strs = (size_t)n * sizeof *nl, sp = strs + 1;   /* offset 0: "" */
    for (int i = 0; i < n; i++) {
        memset(&nl[i], 0, sizeof nl[i]);
        nl[i].n_un.n_strx = (uint32_t)(sp - strs);
        nl[i].n_type = syms[i].type;
        nl[i].n_sect = (syms[i].type & N_TYPE) == N_SECT ? 1 : 0;
        nl[i].n_value = syms[i].type == (N_UNDF | N_EXT) ? 0 : UNSLID + syms[i].off;
        strcpy((char *)le + sp, syms[i].name);
        sp += strlen(syms[i].name) + 1;
    }
    struct symtab_command st = { LC_SYMTAB, sizeof st, LE_FILE, (uint32_t)n,
                                 (uint32_t)(LE_FILE + strs), (uint32_t)(sp - strs) };
    put_cmd(mem, &at, &st, sizeof st, &ncmds);

    size_t fs = (sp + 7) & ~(size_t)7, fe = fs;
    uint32_t prev = 0;
    for (int i = 0; i < nstarts; i++) {
        uint32_t d = starts[i] - prev;
        prev = starts[i];
        do {
            uint8_t b = d & 0x7f;
            d >>= 7;
            le[fe++] = (uint8_t)(b | (d ? 0x80 : 0));
        } while (d);
    }
    le[fe++] = 0;
    struct linkedit_data_command lf = { LC_FUNCTION_STARTS, sizeof lf, (uint32_t)(LE_FILE + fs),
                                        (uint32_t)(fe - fs) };
    put_cmd(mem, &at, &lf, sizeof lf, &ncmds);

    struct mach_header_64 h = { MH_MAGIC_64, 0, 0, MH_DYLIB, ncmds,
                                (uint32_t)(at - sizeof h), 0, 0 };
    memcpy(mem, &h, sizeof h);
    im->path = path;
}

/* A call instruction that ends at off (the return address), in both
 * architectures' encodings at once: x86_64 "call rel32" is e8 and four
 * bytes, and those four bytes are an arm64 "bl". */
static void call_at(uint8_t *mem, uint32_t off)
{
    uint32_t bl = 0x94000010u;
    mem[off - 5] = 0xe8;
    memcpy(mem + off - 4, &bl, 4);
}

static uint8_t *fake, *py_img, *stk, *guard;
#define T(off) ((uint64_t)(uintptr_t)(fake + (off)))
#define P(off) ((uint64_t)(uintptr_t)(py_img + (off)))
#define S(off) ((uint64_t)(uintptr_t)(stk + (off)))

static void record(uint32_t at, uint64_t next_fp, uint64_t ret)
{
    memcpy(stk + at, &next_fp, 8);
    memcpy(stk + at + 8, &ret, 8);
}

/* The chain thread_start -> _PyEval_EvalFrameDefault -> c_outer -> c_middle
 * -> c_leaf: each record {caller's record, return address}. */
static void good_chain(void)
{
    memset(stk, 0, 0x1000);
    record(0x700, 0, 0);                  /* thread_start's: the root */
    record(0x600, S(0x700), T(0x1424));   /* eval loop's, called by thread_start */
    record(0x500, S(0x600), P(0x1044));   /* c_outer's, called by the eval loop */
    record(0x400, S(0x500), T(0x1044));   /* c_middle's, called by c_outer */
    record(0x300, S(0x400), T(0x1144));   /* c_leaf's, called by c_middle */
}

static void regs(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t ret)
{
    fake_regs.pc = pc;
    fake_regs.sp = sp;
    fake_regs.fp = fp;
    fake_regs.lr = ret;
#if !PS_DARWIN_ARM64
    /* x86_64: the return address of a function without its record is at
     * [sp]; a framed one has whatever local lives there. */
    if (sp >= S(0) && sp + 8 <= S(0x1000))
        memcpy((void *)(uintptr_t)sp, &ret, 8);
#endif
}

static struct ps_symtab syms_tab;
/* The caches a sampler context holds (made in main). */
static struct ps_unwind_rules *rules;
static struct ps_native_names *names;

/* Renders a merged stack: "a;b;c", root first, as a collapsed line. */
static void render(const uint64_t *fr, int n, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < n && at < cap; i++) {
        struct ps_sym sy;
        ps_sym_get(&syms_tab, ps_frame_sym(fr[i]), &sy);
        int k;
        if (sy.kind == PS_SYM_MARKER)
            k = snprintf(out + at, cap - at, "%s%s", i ? ";" : "", sy.name);
        else
            k = snprintf(out + at, cap - at, "%s%s (%s)", i ? ";" : "", sy.name, sy.file);
        if (k < 0)
            break;
        at += (size_t)k;
    }
}

/* Parks whenever asked, until told to stop: the native checks' thread. */
static void *idle_target(void *arg)
{
    for (; !atomic_load(&stop_target); sched_yield())
        park_if_asked();
    park_if_asked();
    return arg;
}

struct nsample {
    int cap, release, n, trunc, copy_rc, parked_after_copy, walk_ok;
    int suspended, resumed;   /* by the last try */
    uintptr_t pcs[64];
    char text[1024];
};

/* One sample in the sampler's order (sampler.c): capture, unwind while
 * held, the thread state again, the copy inside the same suspension, the
 * walk of the copy, release.  py_frames: Python frames for the merge. */
static void sample(struct nsample *o, int npy)
{
    struct ps_python py;
    fake_python(&py, PS_FRAMES_OBJECT);
    memset(o, 0, sizeof *o);

    /* Tried again when the release says the two stacks were not taken in
     * one suspension, as sampler.c does (the first hold has no room
     * reserved for the copy yet). */
    for (int tries = 0; tries < 2; tries++) {
        struct ps_regs r;
        int sus = atomic_load(&suspends), res = atomic_load(&resumes);
        ps_framecopy_end();
        o->n = o->trunc = 0;
        o->cap = ps_native_capture(TARGET_TID, &r);
        if (o->cap >= 0)
            o->n = ps_unwind(rules, &r, o->pcs, 64, &o->trunc);
        uint8_t ts[sizeof(struct fake_ts)];
        o->copy_rc = ps_read(ts, (uintptr_t)&ts_live, sizeof ts) == 0
                         ? ps_framecopy_begin(&py, TARGET_TID, (uintptr_t)&ts_live, ts, 16)
                         : -2;
        o->parked_after_copy = atomic_load(&parked_now);
        int differs = 0;
        o->walk_ok = o->copy_rc == 0 && walk_consistent(&py, ts, &differs) == NULL;
        o->release = o->cap >= 0 ? ps_native_release() : -9;
        o->suspended = atomic_load(&suspends) - sus;
        o->resumed = atomic_load(&resumes) - res;
        if (o->release == 0)
            break;
    }
    ps_framecopy_end();

    struct ps_pyframe pf[1] = { { ps_frame(ps_sym_python(&syms_tab, "py_caller", "app.py"), 7), 1 } };
    uint64_t out[128];
    int d = ps_native_merge(&(struct ps_native_merge_req){
        .names = names, .syms = &syms_tab, .mode = PS_NATIVE_ON, .py = pf, .npy = npy,
        .pcs = o->pcs,
        .npcs = o->release == 0 ? o->n : 0, .stop = o->trunc, .out = out, .cap = 128 });
    render(out, d, o->text, sizeof o->text);
}

static int pcs_are(const struct nsample *o, const uint64_t *want, int n)
{
    if (o->n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (o->pcs[i] != (uintptr_t)want[i])
            return 0;
    return 1;
}

static void check_sample(const char *name, const struct nsample *o, const uint64_t *want, int n,
                         int trunc, const char *text)
{
    char full[160], why[2048];
    snprintf(full, sizeof full, FLAVOUR "/native/%s", name);
    int ok = o->cap == PS_CAPTURE_HELD && o->release == 0 && o->copy_rc == 0 && o->walk_ok &&
             !o->parked_after_copy && pcs_are(o, want, n) && (o->trunc != 0) == trunc &&
             (text == NULL || strcmp(o->text, text) == 0);
    snprintf(why, sizeof why,
             "capture %d release %d copy %d walk %d parked %d; %d pcs (want %d), truncated %d "
             "(want %d); stack '%s' (want '%s')",
             o->cap, o->release, o->copy_rc, o->walk_ok, o->parked_after_copy, o->n, n, o->trunc,
             trunc, o->text, text ? text : "(not checked)");
    report(full, ok, why);
}

static void run_native(void)
{
    char name[160], why[512];
    if (posix_memalign((void **)&fake, 4096, IMG_SIZE) != 0 ||
        posix_memalign((void **)&py_img, 4096, IMG_SIZE) != 0)
        exit(2);
    /* The stack: one page of records, then a page nobody may read. */
    stk = mmap(NULL, 0x2000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stk == MAP_FAILED || mprotect(stk + 0x1000, 0x1000, PROT_NONE) != 0)
        exit(2);
    guard = stk + 0x1000;

    static const struct fsym fake_syms[] = {
        { "_c_outer", N_SECT | N_EXT, 0x1000 },
        { "_c_middle", N_SECT | N_EXT, 0x1100 },
        { "_c_leaf", N_SECT, 0x1200 },
        { "_thread_start", N_SECT | N_EXT, 0x1400 },
        { "_malloc", N_UNDF | N_EXT, 0 },        /* undefined: not a function here */
        { "_stab_junk", 0x2e, 0x1300 },          /* N_BNSYM debug entry: ignored */
        { "_some_data", N_SECT | N_EXT, 0x6010 },/* in __DATA: not code */
    };
    /* 0x1300 is a function without a symbol (a stripped static one). */
    static const uint32_t fake_starts[] = { 0x1000, 0x1100, 0x1200, 0x1300, 0x1400 };
    static const struct fsym py_syms[] = {
        { "__PyEval_EvalFrameDefault", N_SECT | N_EXT, 0x1000 },
        { "__PyRuntime", N_SECT | N_EXT, 0x6100 },
    };
    static const uint32_t py_starts[] = { 0x1000, 0x2000 };
    images[0].mem = fake;
    images[1].mem = py_img;
    build_image(&images[0], "/usr/local/lib/libfake.dylib", fake_syms, 7, fake_starts, 5);
    build_image(&images[1], "/opt/py/lib/libpython3.12.dylib", py_syms, 2, py_starts, 2);
    call_at(fake, 0x1044);   /* c_outer calls c_middle */
    call_at(fake, 0x1144);   /* c_middle calls c_leaf */
    call_at(fake, 0x1214);   /* c_leaf calls the static helper */
    call_at(fake, 0x1424);   /* thread_start calls the eval loop */
    call_at(py_img, 0x1044); /* the eval loop calls c_outer */
    atomic_store(&nimages, 1);

    ps_symtab_init(&syms_tab, 1000);
    char why0[64];
    report(FLAVOUR "/native/platform-init", ps_native_platform_init(why0, sizeof why0) == 0,
           "ps_native_platform_init refused");

    /* The image list: read once, then only when dyld counted a change. */
    uintptr_t runtime = (uintptr_t)(py_img + 0x6100);
    int r1 = ps_objs_refresh(runtime), r2 = ps_objs_refresh(runtime);
    const struct ps_obj *o_py_before = ps_objs_find((uintptr_t)P(0x1010));
    atomic_store(&nimages, 2);
    on_add((const struct mach_header *)(void *)py_img, 0);   /* "dlopen" */
    int r3 = ps_objs_refresh(runtime), r4 = ps_objs_refresh(runtime);
    const struct ps_obj *of = ps_objs_find((uintptr_t)T(0x1210));
    const struct ps_obj *op = ps_objs_find((uintptr_t)P(0x1010));
    snprintf(why, sizeof why, "refresh said %d %d (want 1 0), after a load %d %d (want 1 0); "
             "python found before its load %d", r1, r2, r3, r4, o_py_before != NULL);
    report(FLAVOUR "/native/image-list-follows-dyld", r1 == 1 && r2 == 0 && r3 == 1 && r4 == 0 &&
           o_py_before == NULL && of != NULL && op != NULL, why);
    int ok = of != NULL && op != NULL && strcmp(ps_obj_name(of), "libfake.dylib") == 0 &&
             !ps_obj_is_interp(of) && ps_obj_is_interp(op) &&
             ps_obj_offset(of, (uintptr_t)T(0x1210)) == 0x1210 &&
             ps_objs_find((uintptr_t)(fake + LE_VM + 8)) == NULL &&       /* __LINKEDIT */
             ps_objs_find((uintptr_t)(fake + 0x6010)) == NULL &&          /* __DATA */
             ps_obj_eh_frame_hdr(of) == 0;
    report(FLAVOUR "/native/image-ranges-and-interpreter", ok,
           "name, interpreter mark, offset or code range wrong");
    const char *s_mid = of ? ps_obj_symbol(of, (uintptr_t)T(0x1150)) : NULL;
    const char *s_leaf = of ? ps_obj_symbol(of, (uintptr_t)T(0x1204)) : NULL;
    const char *s_static = of ? ps_obj_symbol(of, (uintptr_t)T(0x1310)) : NULL;
    const char *s_eval = op ? ps_obj_symbol(op, (uintptr_t)P(0x1044)) : NULL;
    snprintf(why, sizeof why, "c_middle+0x50 -> %s, c_leaf+4 -> %s, static+0x10 -> %s, "
             "eval -> %s", s_mid ? s_mid : "NULL", s_leaf ? s_leaf : "NULL",
             s_static ? s_static : "NULL", s_eval ? s_eval : "NULL");
    report(FLAVOUR "/native/symbols-from-linkedit",
           s_mid && strcmp(s_mid, "c_middle") == 0 && s_leaf && strcmp(s_leaf, "c_leaf") == 0 &&
           s_static == NULL && s_eval && strcmp(s_eval, "_PyEval_EvalFrameDefault") == 0, why);
    snprintf(why, sizeof why, "same(c_leaf, c_leaf) %d (want 1), same(c_leaf, static) %d, "
             "same(c_leaf, c_middle) %d (want 0)",
             ps_darwin_same_function((uintptr_t)T(0x1204), (uintptr_t)T(0x1210)),
             ps_darwin_same_function((uintptr_t)T(0x1204), (uintptr_t)T(0x1310)),
             ps_darwin_same_function((uintptr_t)T(0x1204), (uintptr_t)T(0x1150)));
    report(FLAVOUR "/native/function-bounds",
           ps_darwin_same_function((uintptr_t)T(0x1204), (uintptr_t)T(0x1210)) == 1 &&
           ps_darwin_same_function((uintptr_t)T(0x1204), (uintptr_t)T(0x1310)) == 0 &&
           ps_darwin_same_function((uintptr_t)T(0x1204), (uintptr_t)T(0x1150)) == 0, why);

    /* Samples of a parked thread. */
    atomic_store(&stop_target, 0);
    atomic_store(&alloc_in_window, 0);
    build_chain(3, 3);
    pthread_t t;
    pthread_create(&t, NULL, idle_target, NULL);
    struct nsample o;
    const char *mixed = "py_caller (app.py);c_outer (libfake.dylib);c_middle (libfake.dylib);"
                        "c_leaf (libfake.dylib)";

    /* c_leaf has pushed its record; its lr (arm64) is stale, from its own
     * call at 0x1210; x86_64: [sp] holds a local. */
    good_chain();
    regs(T(0x1220), S(0x2e0), S(0x300), T(0x1214));
#if !PS_DARWIN_ARM64
    { uint64_t junk = 0x1111; memcpy(stk + 0x2e0, &junk, 8); }
#endif
    sample(&o, 1);
    uint64_t want1[] = { T(0x1220), T(0x1144), T(0x1044), P(0x1044), T(0x1424) };
    check_sample("framed-leaf", &o, want1, 5, 0, mixed);
    snprintf(why, sizeof why, "%d suspensions and %d resumes for one sample (want 1 and 1)",
             o.suspended, o.resumed);
    report(FLAVOUR "/native/one-suspension-for-both-stacks", o.suspended == 1 && o.resumed == 1,
           why);

    /* c_leaf has not pushed a record (a leaf, or its prologue): fp is
     * c_middle's record; its return address is in lr / at [sp]. */
    good_chain();
    regs(T(0x1208), S(0x3f0), S(0x400), T(0x1144));
    sample(&o, 1);
    uint64_t want2[] = { T(0x1208), T(0x1144), T(0x1044), P(0x1044), T(0x1424) };
    check_sample("leaf-without-frame-record", &o, want2, 5, 0, mixed);

    /* Pushed its record, called nothing since: the return address in lr
     * is the one in the record, and must not appear twice. */
    good_chain();
    regs(T(0x1204), S(0x2f0), S(0x300), T(0x1144));
    sample(&o, 1);
    uint64_t want3[] = { T(0x1204), T(0x1144), T(0x1044), P(0x1044), T(0x1424) };
    check_sample("return-address-already-in-record", &o, want3, 5, 0, mixed);

    /* A framed function whose lr (a register reused after it was saved) or
     * [sp] (a local) holds a code address that no call precedes (here a
     * function pointer to c_middle): not a return address. */
    good_chain();
    regs(T(0x1220), S(0x2e0), S(0x300), T(0x1100));
    sample(&o, 1);
    check_sample("code-pointer-is-not-a-caller", &o, want1, 5, 0, mixed);

#if PS_DARWIN_ARM64
    /* arm64e code signs lr in place: the signature bits go. */
    good_chain();
    regs(T(0x1208), S(0x3f0), S(0x400), T(0x1144) | 0x002a000000000000ull);
    sample(&o, 1);
    check_sample("signed-lr-stripped", &o, want2, 5, 0, mixed);
#endif

    /* A stripped static function (no symbol, but a function start) called
     * by c_leaf, without its own record: named by offset, not "c_leaf". */
    good_chain();
    regs(T(0x1310), S(0x2f0), S(0x300), T(0x1214));
    sample(&o, 1);
    uint64_t want4[] = { T(0x1310), T(0x1214), T(0x1144), T(0x1044), P(0x1044), T(0x1424) };
    check_sample("unnamed-function-by-offset", &o, want4, 6, 0,
                 "py_caller (app.py);c_outer (libfake.dylib);c_middle (libfake.dylib);"
                 "c_leaf (libfake.dylib);libfake.dylib+0x1310");

    /* A corrupt chain: c_middle's record points below the stack pointer. */
    good_chain();
    record(0x400, S(0x100), T(0x1044));
    regs(T(0x1220), S(0x2e0), S(0x300), T(0x1214));
#if !PS_DARWIN_ARM64
    { uint64_t junk = 0x1111; memcpy(stk + 0x2e0, &junk, 8); }
#endif
    sample(&o, 0);
    uint64_t want5[] = { T(0x1220), T(0x1144), T(0x1044) };
    check_sample("corrupt-chain-ends-truncated", &o, want5, 3, 1,
                 "[native: truncated];c_outer (libfake.dylib);c_middle (libfake.dylib);"
                 "c_leaf (libfake.dylib)");

    /* A return address outside every image's code. */
    good_chain();
    record(0x400, S(0x500), (uint64_t)(uintptr_t)(fake + 0x6010));
    regs(T(0x1220), S(0x2e0), S(0x300), T(0x1214));
#if !PS_DARWIN_ARM64
    { uint64_t junk = 0x1111; memcpy(stk + 0x2e0, &junk, 8); }
#endif
    sample(&o, 0);
    uint64_t want6[] = { T(0x1220), T(0x1144) };
    check_sample("return-outside-code-ends-truncated", &o, want6, 2, 1, NULL);

    /* The stack is not readable at all (sp and fp in the guard page). */
    regs(T(0x1220), (uint64_t)(uintptr_t)(guard + 0x10), (uint64_t)(uintptr_t)(guard + 0x40),
         T(0x1214));
    sample(&o, 0);
    uint64_t want7[] = { T(0x1220) };
    check_sample("unreadable-stack-ends-truncated", &o, want7, 1, 1, NULL);

    /* A capture whose thread state cannot be read any more: the thread is
     * resumed by the release, and the sample has no native part. */
    good_chain();
    regs(T(0x1208), S(0x3f0), S(0x400), T(0x1144));
    struct ps_regs rr;
    int cap = ps_native_capture(TARGET_TID, &rr);
    int held = atomic_load(&parked_now);
    int rel = ps_native_release();
    snprintf(why, sizeof why, "capture %d, parked while held %d, release %d (want -1), "
             "parked after %d", cap, held, rel, atomic_load(&parked_now));
    report(FLAVOUR "/native/release-without-copy-resumes", cap == PS_CAPTURE_HELD && held &&
           rel == -1 && !atomic_load(&parked_now), why);

    atomic_store(&stop_target, 1);
    pthread_join(t, NULL);
    snprintf(name, sizeof name, FLAVOUR "/native/no-allocation-while-suspended");
    snprintf(why, sizeof why, "%d allocator calls while the thread was suspended",
             atomic_load(&alloc_in_window));
    report(name, atomic_load(&alloc_in_window) == 0, why);
    snprintf(why, sizeof why, "%d dyld calls while a thread was suspended",
             atomic_load(&dyld_in_window));
    report(FLAVOUR "/native/no-dyld-while-suspended", atomic_load(&dyld_in_window) == 0, why);
    snprintf(why, sizeof why, "%d thread_get_state calls on a running thread",
             atomic_load(&state_read_running));
    report(FLAVOUR "/native/registers-read-while-suspended",
           atomic_load(&state_read_running) == 0, why);
    ps_objs_free();
    ps_symtab_free(&syms_tab);
}

/* The platform's part alone (platform.h), with no Python: a value read
 * while the thread is stopped is served after the thread changed it when
 * the copy is kept, until ps_thread_copy_end; not when it is dropped.
 * Threads that cannot be stopped: the caller itself and an unknown one are
 * read live (1), an ended one is refused (-1). */
static void run_mechanism(void)
{
    static _Atomic uint64_t cell;
    uint64_t during = 0, kept = 0, after_end = 0, dropped = 0;
    atomic_store(&stop_target, 0);
    pthread_t t;
    pthread_create(&t, NULL, idle_target, NULL);

    atomic_store(&cell, 1);
    int rc1 = ps_thread_suspend(TARGET_TID, 4, 64);
    int parked_in = atomic_load(&parked_now);
    ps_read(&during, (uintptr_t)&cell, 8);
    ps_thread_resume(1);
    int parked_out = atomic_load(&parked_now);
    atomic_store(&cell, 2);
    ps_read(&kept, (uintptr_t)&cell, 8);
    ps_thread_copy_end();
    ps_read(&after_end, (uintptr_t)&cell, 8);

    int rc2 = ps_thread_suspend(TARGET_TID, 4, 64);
    ps_read(&during, (uintptr_t)&cell, 8);
    ps_thread_resume(0);
    atomic_store(&cell, 3);
    ps_read(&dropped, (uintptr_t)&cell, 8);
    ps_thread_copy_end();

    int rc_self = ps_thread_suspend(ps_gettid(), 4, 64);
    ps_thread_copy_end();
    int rc_unknown = ps_thread_suspend(99, 4, 64);
    ps_thread_copy_end();
    atomic_store(&stop_target, 1);
    pthread_join(t, NULL);
    atomic_store(&target_ended, 1);
    int rc_ended = ps_thread_suspend(TARGET_TID, 4, 64);
    atomic_store(&target_ended, 0);

    char why[256];
    snprintf(why, sizeof why, "suspend %d %d (want 0 0), stopped while copying %d, after "
             "resume %d; kept copy read %llu (want 1), after the end %llu (want 2), dropped "
             "copy read %llu (want 3)", rc1, rc2, parked_in, parked_out,
             (unsigned long long)kept, (unsigned long long)after_end,
             (unsigned long long)dropped);
    report("mechanism/records-then-serves-the-copy", rc1 == 0 && rc2 == 0 && parked_in &&
           !parked_out && kept == 1 && after_end == 2 && dropped == 3, why);
    snprintf(why, sizeof why, "self %d, unknown %d (want 1 1: read live), ended %d (want -1)",
             rc_self, rc_unknown, rc_ended);
    report("mechanism/threads-not-stopped", rc_self == 1 && rc_unknown == 1 && rc_ended == -1,
           why);
}

int main(int argc, char **argv)
{
    self_pid = getpid();
    rules = ps_unwind_rules_new();
    names = ps_native_names_new();
    if (rules == NULL || names == NULL)
        return 1;
    if (ps_plat_read_init() != 0) {
        printf("FAIL read-init: the probe read failed\n");
        return 1;
    }
    if (posix_memalign((void **)&frames, 4096, MAX_DEPTH * FR_STRIDE) != 0)
        return 2;
    for (int i = 0; i < MAX_DEPTH; i++)
        frame_addr[i] = (uintptr_t)(frames + (size_t)i * FR_STRIDE);

    /* "native": only the native checks (the second build, with the other
     * architecture's thread state, runs these alone). */
    int native_only = argc > 1 && strcmp(argv[1], "native") == 0;
    if (native_only) {
        run_native();
        printf("%d failed\n", failures);
        return failures ? 1 : 0;
    }
    run_kind("interp-frames", PS_FRAMES_INTERP, 0);
    run_kind("object-frames", PS_FRAMES_OBJECT, 1);

    /* Unknown thread: read live, no copy.  Ended thread: refused. */
    struct ps_python py;
    fake_python(&py, PS_FRAMES_INTERP);
    uint8_t ts[sizeof(struct fake_ts)];
    build_chain(7, 3);
    int rc = ps_framecopy_begin(&py, 99, (uintptr_t)&ts_live, ts, 4096);
    atomic_store(&ts_live.stamp, 8);
    uint64_t got = 0;
    ps_read(&got, (uintptr_t)&ts_live.stamp, 8);
    ps_framecopy_end();
    report("unknown-thread-read-live", rc == 0 && got == 8, "rc or value wrong");
    atomic_store(&target_ended, 1);
    rc = ps_framecopy_begin(&py, TARGET_TID, (uintptr_t)&ts_live, ts, 4096);
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
    rc = ps_framecopy_begin(&py, TARGET_TID, (uintptr_t)&ts_live, ts, 10);
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
    ps_framecopy_end();
    char why[128];
    snprintf(why, sizeof why, "rc %d, %d frames served from the copy, want %d", rc, copied,
             ps_walk_budget(10));
    report("deep-chain-copied-to-the-walk-budget", rc == 0 && copied == ps_walk_budget(10), why);

    run_mechanism();
    run_native();

    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
