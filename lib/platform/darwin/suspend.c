/*
 * darwin/suspend.c - suspend, copy, resume: how the sampler reads a thread
 * on macOS (ps_thread_copy_begin/end of platform.h).
 *
 * For each Python thread, each tick:
 *   1. thread_suspend() on the thread's port (from the registry of
 *      threads.c).  It returns once the thread is off the CPU, stopped at
 *      an instruction boundary in user space (or parked in the kernel), so
 *      its stores are complete and nothing it owns changes while we look.
 *   2. With recording on (read.c), copy its thread state, the frame pointer
 *      it leads to, and each frame of the chain, following the back links
 *      by the walk's own rules and exactly as far as it may go
 *      (frames.h: ps_walk_budget, ps_frame_back).  On 3.11+ frames sit next to each other on the thread's
 *      data stack, so each read also takes up to SPAN bytes below the frame
 *      (never below its page, which is readable if the frame is): the
 *      older frames are then usually already in the copy and a 20-frame
 *      stack costs two or three reads instead of twenty.
 *   3. thread_resume().
 * With PYSAMPLE_NATIVE the suspension begins earlier, in ps_native_capture
 * (regs.c), which reads the registers; the sampler unwinds the native
 * stack while the thread is still suspended, and step 1 here is skipped:
 * one suspension for both stacks (darwin.h, "the native hold").
 *   4. The ordinary walk (frames.c) runs with replay on, reading the frames
 *      from the copy; resolving a new code object may allocate, which is
 *      now safe.  ps_thread_copy_end() turns replay off.
 *
 * Between 1 and 3 nothing may take a lock that the suspended thread might
 * hold, or we wait for it forever: no malloc, no printf, no dyld (a lazy
 * symbol bind), no pthread call that locks.  What runs there is this file,
 * ps_read() (atomics), read.c (memcpy and the mach_vm_read_overwrite trap,
 * whose MIG reply port is per-thread), walkplan.c's ps_thread_top_frame (pure
 * code) and thread_resume; with native stacks also thread_get_state,
 * regs.c's frame-0 rule, unwind.c and machosyms.c's lookups (tables built
 * before the tick).  The symbols they use are bound before the first
 * suspension (probes in ps_plat_read_init and ps_threads_track, and the
 * dylib is linked to bind at load where the linker allows it).
 *
 * The target is < 50 us suspended per thread, which is a few
 * mach_vm_read_overwrite calls.  It has not been measured on a Mac yet
 * (docs/macos.md).
 */
#include <string.h>

#include "python/frames.h"
#include "memory/memread.h"
#include "platform/platform.h"
#include "platform/darwin/darwin.h"

#define SPAN 4096           /* bytes read below a 3.11+ frame, same page */
#define SPAN_ROOM (64 * 1024)

static unsigned char scratch[SPAN + 1024];

/* The native hold (darwin.h): a thread that ps_native_capture suspended. */
enum { HOLD_NONE = 0, HOLD_SUSPENDED, HOLD_COPIED };
static struct {
    int state;
    long tid;
    mach_port_t port;
} hold;
/* What the last copy reserved: a hold reserves as much before suspending,
 * so that the copy made inside it needs no allocation. */
static size_t last_records, last_bytes;

int ps_darwin_hold_begin(long tid, mach_port_t port)
{
    (void)ps_darwin_hold_end();
    if (last_records != 0 && ps_darwin_copy_reserve(last_records, last_bytes) != 0)
        return -1;
    if (thread_suspend(port) != KERN_SUCCESS) {
        ps_darwin_thread_gone(tid);
        return -1;
    }
    hold.state = HOLD_SUSPENDED;
    hold.tid = tid;
    hold.port = port;
    return 0;
}

mach_port_t ps_darwin_held(long tid)
{
    return hold.state == HOLD_SUSPENDED && hold.tid == tid ? hold.port : MACH_PORT_NULL;
}

void ps_darwin_hold_copied(void)
{
    if (hold.state == HOLD_SUSPENDED) {
        thread_resume(hold.port);
        hold.state = HOLD_COPIED;
    }
}

int ps_darwin_hold_end(void)
{
    int rc = hold.state == HOLD_COPIED ? 0 : -1;
    if (hold.state == HOLD_SUSPENDED)
        thread_resume(hold.port);
    hold.state = HOLD_NONE;
    return rc;
}

void ps_darwin_hold_forget(void)
{
    hold.state = HOLD_NONE;
}

/* A thread still held when the copy cannot be made inside the hold: it
 * is resumed now (the walk after this may allocate), and the native part
 * of this sample is dropped (ps_darwin_hold_end says -1). */
static void drop_hold(void)
{
    if (hold.state == HOLD_SUSPENDED) {
        thread_resume(hold.port);
        hold.state = HOLD_NONE;
    }
}

/* Records [lo, frame + n) in one read, lo as far down as SPAN within the
 * frame's page.  Failure is fine: the caller reads the frame alone. */
static void read_span(uintptr_t frame, size_t n)
{
    uintptr_t page = frame & ~((uintptr_t)vm_page_size - 1);
    uintptr_t lo = frame - page > SPAN ? frame - SPAN : page;
    if (frame - lo + n <= sizeof scratch)
        ps_read(scratch, lo, (size_t)(frame - lo) + n);
}

int ps_thread_copy_begin(const struct ps_python *py, long tid, uintptr_t tsp, uint8_t *ts,
                         int max_frames)
{
    const struct ps_layout *L = &py->L;
    uint8_t fr[512];

    ps_darwin_copy_off();
    /* Held by ps_native_capture: already suspended, with its registers
     * taken; the copy below joins that suspension (darwin.h). */
    mach_port_t port = ps_darwin_held(tid);
    int held = port != MACH_PORT_NULL;
    if (tid <= 0 || tid == ps_gettid() || L->fr_read > sizeof fr || max_frames < 0) {
        drop_hold();
        return 0;  /* unknown thread, or ourselves: read it live */
    }
    if (!held)
        port = ps_darwin_thread_port(tid);
    if (port == MACH_PORT_NULL)
        return 0;

    /* Room for every read the loop below may make; allocating is allowed
     * here, before the suspension (a held thread: only if the room is
     * already there, else it is resumed first). */
    size_t frames = (size_t)ps_walk_budget(max_frames);
    int span = L->frame_kind == PS_FRAMES_INTERP;
    size_t records = frames + SPAN_ROOM / SPAN + 8;
    size_t bytes = frames * L->fr_read + L->ts_read + 64 + (span ? SPAN_ROOM : 0);
    last_records = records;
    last_bytes = bytes;
    if (held && !ps_darwin_copy_fits(records, bytes)) {
        drop_hold();
        held = 0;
    }
    if (!held && ps_darwin_copy_reserve(records, bytes) != 0)
        return 0;

    ps_darwin_copy_record();
    if (!held && thread_suspend(port) != KERN_SUCCESS) {
        ps_darwin_copy_off();
        ps_darwin_thread_gone(tid);
        return -1;  /* the thread has ended */
    }

    /* --- suspended: nothing below may allocate or lock ----------------- */
    size_t spanned = 0;
    uintptr_t frame = 0;
    int ts_ok = ps_read(ts, tsp, L->ts_read) == 0;
    if (!ts_ok || ps_thread_top_frame(py, ts, &frame) != 0)
        frame = 0;
    for (size_t budget = frames; frame != 0 && budget > 0; budget--) {
        if (!ps_frame_addr_ok(frame))
            break;
        if (ps_darwin_copy_get(fr, frame, L->fr_read) != 0) {
            if (span && spanned + SPAN + L->fr_read <= SPAN_ROOM) {
                read_span(frame, L->fr_read);
                spanned += SPAN + L->fr_read;
            }
            if (ps_darwin_copy_get(fr, frame, L->fr_read) != 0 &&
                ps_read(fr, frame, L->fr_read) != 0)
                break;
        }
        uintptr_t back = ps_frame_back(L, fr);
        if (back == frame)
            break;
        frame = back;
    }
    if (held)
        ps_darwin_hold_copied();   /* resumes it */
    else
        thread_resume(port);
    /* --- resumed ------------------------------------------------------- */

    if (!ts_ok) {
        ps_darwin_copy_off();
        return -1;  /* its thread state is gone: nothing to walk */
    }
    ps_darwin_copy_replay();
    return 0;
}

/* The walk reads the copy; its own span reads would go past it. */
const int ps_plat_walk_reads_copy = 1;

void ps_thread_copy_end(void)
{
    /* Never leave a thread suspended past the sample (a safety net: the
     * sampler ends every hold with ps_native_release). */
    drop_hold();
    ps_darwin_copy_off();
}
