/*
 * darwin/suspend.c - stopping a thread to read it on macOS: suspend,
 * record, resume (ps_thread_suspend, ps_thread_resume, ps_thread_copy_end
 * of platform.h), and the native hold that regs.c begins (darwin.h).
 * Which addresses are read while the thread is stopped is the Python
 * layer's business (lib/python/framecopy.c); this file knows threads and
 * reads only.
 *
 *   1. ps_thread_suspend: the room for the copy is reserved (read.c; it may
 *      allocate, so before anything stops), recording is switched on, and
 *      thread_suspend() is called on the thread's port (from the registry
 *      of threads.c).  It returns once the thread is off the CPU, stopped
 *      at an instruction boundary in user space (or parked in the kernel),
 *      so its stores are complete and nothing it owns changes while we
 *      look.
 *   2. The caller reads what it wants; read.c records each read.
 *   3. ps_thread_resume: thread_resume(), and read.c serves the recording
 *      to the caller's reads until ps_thread_copy_end.
 * With PYSAMPLE_NATIVE the suspension begins earlier, in ps_native_capture
 * (regs.c), which reads the registers; the sampler unwinds the native
 * stack while the thread is still suspended, and step 1 only joins that
 * suspension: one for both stacks (darwin.h, "the native hold").
 *
 * Between 1 and 3 nothing may take a lock that the suspended thread might
 * hold, or we wait for it forever: no malloc, no printf, no dyld (a lazy
 * symbol bind), no pthread call that locks.  What the platform runs there
 * is ps_read()'s path (memread.c's atomics; read.c: memcpy, pthread_self,
 * pthread_equal and the mach_vm_read_overwrite trap, whose MIG reply port
 * is per-thread), then this file's resume (thread_resume); with native
 * stacks also thread_get_state, regs.c's frame-0 rule, unwind.c and
 * machosyms.c's lookups (tables built before the tick).  What the caller
 * runs there is its own to keep to the same rules (framecopy.c's header).
 * The symbols used are bound before the first suspension (probes in
 * ps_plat_read_init and ps_threads_track, and the dylib is linked to bind
 * at load where the linker allows it).
 *
 * The target is < 50 us suspended per thread, which is a few
 * mach_vm_read_overwrite calls.  It has not been measured on a Mac yet
 * (docs/macos.md).
 */
#include "platform/platform.h"
#include "platform/darwin/darwin.h"

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

/* The thread stopped for a copy, from ps_thread_suspend to
 * ps_thread_resume: MACH_PORT_NULL when none; held when it is the native
 * hold's, which ends inside that hold (ps_darwin_hold_copied). */
static struct {
    mach_port_t port;
    int held;
} stopped;

/* The port tid is suspended by: its hold's if ps_native_capture holds it
 * (*held 1), else the registry's; MACH_PORT_NULL if it is unknown. */
static mach_port_t port_of(long tid, int *held)
{
    mach_port_t port = ps_darwin_held(tid);
    *held = port != MACH_PORT_NULL;
    return *held ? port : ps_darwin_thread_port(tid);
}

/* Room for the copy.  A held thread gets only room that is there already
 * (allocating while it is suspended could wait forever for malloc's lock);
 * without it, it is let go now and suspended again once the room is made
 * (*held 0).  0, or -1 out of memory. */
static int make_room(size_t reads, size_t bytes, int *held)
{
    last_records = reads;
    last_bytes = bytes;
    if (*held && !ps_darwin_copy_fits(reads, bytes)) {
        drop_hold();
        *held = 0;
    }
    return *held ? 0 : ps_darwin_copy_reserve(reads, bytes);
}

int ps_thread_suspend(long tid, size_t reads, size_t bytes)
{
    int held;
    ps_darwin_copy_off();
    if (tid <= 0 || tid == ps_gettid()) {
        drop_hold();
        return 1;   /* unknown thread, or ourselves: read it live */
    }
    mach_port_t port = port_of(tid, &held);
    if (port == MACH_PORT_NULL || make_room(reads, bytes, &held) != 0)
        return 1;
    ps_darwin_copy_record();
    if (!held && thread_suspend(port) != KERN_SUCCESS) {
        ps_darwin_copy_off();
        ps_darwin_thread_gone(tid);
        return -1;  /* the thread has ended */
    }
    /* --- suspended: nothing may allocate or lock until resumed -------- */
    stopped.port = port;
    stopped.held = held;
    return 0;
}

void ps_thread_resume(int keep)
{
    if (stopped.held)
        ps_darwin_hold_copied();   /* resumes it */
    else if (stopped.port != MACH_PORT_NULL)
        thread_resume(stopped.port);
    stopped.port = MACH_PORT_NULL;
    stopped.held = 0;
    /* --- resumed: the replay's sort may call into libc --------------- */
    if (keep)
        ps_darwin_copy_replay();
    else
        ps_darwin_copy_off();
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
