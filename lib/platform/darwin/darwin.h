/*
 * darwin/darwin.h - what the files of lib/platform/darwin/ share: the thread registry
 * (threads.c), the recording of a suspended thread's memory that
 * ps_plat_read() serves afterwards (read.c, suspend.c), the native hold
 * (regs.c, suspend.c), and the few declarations that the macOS headers
 * bundled with zig lack.
 *
 * Everything here runs on macOS 11+ (arm64 and x86_64).  None of it has run
 * on a Mac yet: it is built and linked for both architectures on Linux by
 * scripts/cross-macos; docs/macos.md lists what was verified only by
 * compilation.
 */
#ifndef PS_DARWIN_H
#define PS_DARWIN_H

#include <mach/mach.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Xcode's SDK has these headers; the libc headers zig ships do not, though
 * libSystem exports the functions.  The declarations below are copied from
 * the SDK's prototypes (an SDK build uses the SDK's own). */
#if __has_include(<mach/mach_vm.h>)
#include <mach/mach_vm.h>
#else
kern_return_t mach_vm_read_overwrite(vm_map_t target_task, mach_vm_address_t address,
                                     mach_vm_size_t size, mach_vm_address_t data,
                                     mach_vm_size_t *outsize);
#endif

#if __has_include(<pthread/introspection.h>)
#include <pthread/introspection.h>
#else
typedef void (*pthread_introspection_hook_t)(unsigned int event, pthread_t thread,
                                             void *addr, size_t size);
enum {
    PTHREAD_INTROSPECTION_THREAD_CREATE = 1,
    PTHREAD_INTROSPECTION_THREAD_START,
    PTHREAD_INTROSPECTION_THREAD_TERMINATE,
    PTHREAD_INTROSPECTION_THREAD_DESTROY,
};
pthread_introspection_hook_t pthread_introspection_hook_install(pthread_introspection_hook_t hook);
#endif

/* --- thread registry (threads.c) ----------------------------------------- */

/*
 * A send right to the Mach port of thread tid (the 64-bit id of
 * pthread_threadid_np, which macOS never reuses while it runs), or
 * MACH_PORT_NULL if the thread is unknown or has ended.  The right belongs to
 * the registry and stays valid until the next registry call on this thread:
 * only the sampler thread (one caller at a time) looks ports up, and only
 * lookups release the rights of threads that have ended, so a port in use is
 * never deallocated under its user.
 */
mach_port_t ps_darwin_thread_port(long tid);

/* Thread tid was found to have ended (its port refuses thread_suspend):
 * its entry is released like one whose thread reported its end. */
void ps_darwin_thread_gone(long tid);

/* Forgets every thread (the child of fork has only the forking thread and
 * none of the parent's port names) and records the calling thread. */
void ps_darwin_threads_after_fork(void);

/* --- the copy of a suspended thread (read.c) ------------------------------ */

/*
 * Recording: while on, every successful ps_plat_read() made by the calling
 * thread is also appended to a preallocated buffer (no allocation: the
 * thread being read is suspended and may hold the malloc lock).  Replay:
 * reads by the same thread that fall inside a recorded range are served
 * from the copy; others read live memory.  Off: plain reads.
 *
 * ps_darwin_copy_reserve() sizes the buffer for `records` reads totalling at
 * most `bytes`; it may allocate, so it is called before suspending.
 * Returns 0 or -1 (out of memory: no copy, reads stay live).
 */
int ps_darwin_copy_reserve(size_t records, size_t bytes);
/* 1 if the buffer already has that room (no allocation needed), else 0. */
int ps_darwin_copy_fits(size_t records, size_t bytes);
void ps_darwin_copy_record(void);
void ps_darwin_copy_replay(void);
void ps_darwin_copy_off(void);
/* Copies [addr, addr + n) out of the recording: 0, or -1 if not recorded. */
int ps_darwin_copy_get(void *dst, uintptr_t addr, size_t n);

/* --- the native hold (regs.c, suspend.c) ----------------------------------
 *
 * With PYSAMPLE_NATIVE, ps_native_capture (regs.c) suspends the thread,
 * reads its registers with thread_get_state and leaves it suspended: the
 * sampler unwinds it right away, then ps_thread_suspend (suspend.c) joins
 * that suspension for the copy of its Python frames, and ps_thread_resume
 * ends it.  One window for both, so the native and the Python stack
 * describe the same instant.  Whatever happens, the thread is resumed
 * before anything that may allocate runs: ps_thread_suspend resumes it on
 * every path that does not copy, ps_thread_resume, ps_thread_copy_end and
 * ps_darwin_hold_end on theirs.
 *
 *   ps_darwin_hold_begin  reserves the copy's room as the last copy needed
 *                         it, then suspends; 0, or -1 (the thread ended)
 *   ps_darwin_held        the port of tid if it is held now, else
 *                         MACH_PORT_NULL (ps_thread_suspend's question)
 *   ps_darwin_hold_copied the copy was taken inside the hold; resumed
 *   ps_darwin_hold_end    resumes a thread still held; 0 if its copy was
 *                         taken inside the hold, -1 if not
 *   ps_darwin_hold_forget the child of fork: the held thread is not there
 */
int ps_darwin_hold_begin(long tid, mach_port_t port);
mach_port_t ps_darwin_held(long tid);
void ps_darwin_hold_copied(void);
int ps_darwin_hold_end(void);
void ps_darwin_hold_forget(void);

/* --- the stand-ins (interpose.c, interpose_sigaction.c) --------------------
 *
 * One {replacement, original} pair per function, in __DATA,__interpose,
 * where dyld reads them; each file's array, named after it, adds its own
 * (the linker concatenates the section).  Used, since nothing refers to
 * them. */
struct ps_interpose {
    const void *replacement;
    const void *original;
};
#define PS_DARWIN_INTERPOSE(name) \
    __attribute__((used, section("__DATA,__interpose"))) \
    static const struct ps_interpose ps_interposers_##name[]

/* --- images (machosyms.c) ---------------------------------------------------- */

/*
 * 1 if a and b lie in the same function of the same image, 0 if not (other
 * images, or two functions), -1 if that is not known yet (the image's
 * function starts are read with its symbols, the first time one of its
 * addresses is named).  No allocation, no lock: it runs while a thread is
 * suspended (regs.c's frame-0 rule).
 */
int ps_darwin_same_function(uintptr_t a, uintptr_t b);

#endif
