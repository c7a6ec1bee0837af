/*
 * darwin/regs.c - a thread's registers on macOS, for native stacks
 * (platform/stacks.h; docs/native.md, docs/macos.md).
 *
 * No signal: the thread is suspended.  ps_native_capture suspends it
 * (suspend.c's hold: thread_suspend, returning once the thread is off the
 * CPU) and reads its registers with thread_get_state, arm64
 * ARM_THREAD_STATE64 (pc, sp, fp, lr) or x86_64 x86_THREAD_STATE64 (rip,
 * rsp, rbp), and leaves it suspended.  The sampler then unwinds it
 * (unwind.c: macOS code keeps frame pointers on both architectures, so the
 * frame-pointer walk is the method; every load through ps_read, here
 * mach_vm_read_overwrite), and the frame copy (lib/python/framecopy.c)
 * joins the hold through ps_thread_suspend, copies its Python frames
 * inside the same suspension, and ps_thread_resume ends it.  ps_native_release
 * says whether both were taken in that one window.
 *
 * While the thread is suspended (from thread_suspend here to the resume in
 * suspend.c) nothing may allocate or take a lock it could hold (malloc's,
 * dyld's): what runs is thread_get_state, ps_read, this file's frame-0 rule,
 * unwind.c, and lookups in the image table that machosyms.c built before
 * the tick.  thread_get_state is called once at start-up, so that its lazy
 * binding (a trip into dyld) is done before any thread is suspended.
 *
 * The frame-0 rule (platform/stacks.h's contract) is here: frame 0 is the
 * interrupted pc; whether the function running there has pushed its frame
 * record decides whether its caller is in the frame-pointer chain (see
 * leaf_caller below).
 *
 * What differs per CPU (the thread state, the call instructions, where the
 * interrupted function's return address is, signed addresses) is in
 * regs_aarch64.c and regs_x86_64.c (regs_arch.h), chosen by
 * lib/meson.build.
 *
 * Compile-checked in the cross build; the logic runs on Linux against the
 * fake Mach layer (test/cross/test_darwin_copy.c, both architectures'
 * thread states).  Not run on a Mac (docs/macos.md).
 */
#include <stdatomic.h>
#include <string.h>

#include "memory/memread.h"
#include "platform/stacks.h"
#include "platform/platform.h"
#include "platform/darwin/darwin.h"
#include "platform/darwin/regs_arch.h"

static struct {
    _Atomic uint64_t held, failed, gone;
} counts;

/*
 * The frame-0 rule.  The interrupted function may not have pushed its
 * frame record: a leaf that never does (arm64 leaf functions; the system
 * call stubs of libsystem_kernel, where blocked threads sit, on both
 * architectures), or any function in its prologue or epilogue.  fp then
 * still points at its caller's record, and the walk would go from there to
 * the caller's caller, skipping the caller.  The interrupted function's
 * return address is still where the call left it: lr on arm64, [sp] on
 * x86_64.  It is taken as frame 1 when all of these hold:
 *   - it differs from the return address in fp's record (if they are equal,
 *     the function pushed its record and has not called anything since:
 *     the chain has its caller already);
 *   - it returns into a loaded image's code, right after a call
 *     instruction (a stale lr, a local at [sp]: not if no call precedes);
 *   - it is not in the function at pc (a framed function's lr still holds
 *     the return address of the last call it made, inside itself).
 * The last test needs the image's function starts (machosyms.c), which are
 * there once an address of that image was named: for the first sample of
 * an image it is skipped (at worst that one sample shows one extra frame of
 * the function at pc).  Returns the return address, or 0.
 */
static uint64_t leaf_caller(const struct ps_darwin_regs *r)
{
    uint64_t ret = ps_ret_addr(ps_darwin_call_return(r));
    if (ret < 4 || ret == r->pc)
        return 0;
    uint64_t rec[2];
    if (r->fp >= r->sp && r->fp - r->sp < (16u << 20) && (r->fp & 7) == 0 &&
        ps_read(rec, (uintptr_t)r->fp, sizeof rec) == 0 && ps_ret_addr(rec[1]) == ret)
        return 0;
    if (ps_objs_find((uintptr_t)ret - 1) == NULL || !ps_darwin_call_before(ret))
        return 0;
    if (ps_darwin_same_function((uintptr_t)r->pc, (uintptr_t)ret - 1) == 1)
        return 0;
    return ret;
}

int ps_native_platform_init(char *why, size_t whylen)
{
    /* Binds thread_get_state (and the Mach calls under it) now, while no
     * thread is suspended: a first call inside the window would enter
     * dyld.  Our own thread's state is refused or stale; either is fine. */
    mach_port_t self = mach_thread_self();
    struct ps_darwin_regs r;
    (void)ps_darwin_get_state(self, &r);
    mach_port_deallocate(mach_task_self(), self);
    (void)why;
    (void)whylen;
    return 0;
}

int ps_native_capture(long tid, struct ps_regs *regs)
{
    regs->valid = 0;
    mach_port_t port = tid > 0 && tid != ps_gettid() ? ps_darwin_thread_port(tid) : MACH_PORT_NULL;
    if (port == MACH_PORT_NULL || ps_darwin_hold_begin(tid, port) != 0) {
        atomic_fetch_add(&counts.failed, 1);
        return PS_CAPTURE_FAILED;
    }
    /* --- suspended: no allocation, no lock, until suspend.c resumes it -- */
    struct ps_darwin_regs r;
    if (ps_darwin_get_state(port, &r) != 0 || r.pc == 0 || r.sp == 0) {
        (void)ps_darwin_hold_end();
        atomic_fetch_add(&counts.failed, 1);
        return PS_CAPTURE_FAILED;
    }
    ps_regs_set(regs, PS_REG_PC, r.pc);
    ps_regs_set(regs, PS_REG_SP, r.sp);
    ps_regs_set(regs, PS_REG_FP, r.fp);
    uint64_t ret = leaf_caller(&r);
    if (ret != 0) {
        regs->leaf_ret = ret;
        regs->valid |= PS_REGS_LEAF_RET;
    }
    atomic_fetch_add(&counts.held, 1);
    return PS_CAPTURE_HELD;
}

int ps_native_release(void)
{
    int rc = ps_darwin_hold_end();
    if (rc != 0)
        atomic_fetch_add(&counts.gone, 1);
    return rc;
}

/*
 * Signal frames are not crossed on macOS: threads are unwound by frame
 * pointers from where thread_get_state found them (Mach-O images have no
 * .eh_frame_hdr here: machosyms.c), so no CFI marks a trampoline as a
 * signal frame; and libSystem's _sigtramp lies inside an image, so no
 * trampoline needs recognising by its code either.  A handler's frames
 * are followed as far as the frame-pointer chain leads.
 */
int ps_is_sigreturn(uint64_t pc)
{
    (void)pc;
    return 0;
}

int ps_sigframe_regs(uint64_t sp, struct ps_regs *rs)
{
    (void)sp;
    rs->valid = 0;
    return -1;
}

int ps_native_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    /* No signal is used on macOS: the kernel's action is the program's.
     * A plain call reaches libSystem's (dyld does not apply our own
     * __interpose section to us: darwin/libc.c), and keeps this file
     * linkable alone in scripts/cross-macos's logic checks. */
    return sigaction(sig, act, old);
}

void ps_native_after_fork(void)
{
    ps_darwin_hold_forget();
}

void ps_native_counts(struct ps_native_counts *c)
{
    *c = (struct ps_native_counts){ 0 };
    c->n[PS_NATIVE_HELD] = atomic_load(&counts.held);
    c->n[PS_NATIVE_FAILED] = atomic_load(&counts.failed);
    c->n[PS_NATIVE_GONE] = atomic_load(&counts.gone);
}
