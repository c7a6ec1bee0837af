/*
 * memread.h - the one way the sampler reads interpreter memory.
 *
 * Every byte the sampler takes from the profiled program goes through
 * ps_read(), which copies or fails: it never faults, whatever the address
 * (NULL, unmapped, PROT_NONE, freed and unmapped a moment ago), and it never
 * blocks or signals the thread that owns the memory.
 *
 * Two ways to copy, chosen at run time (see memread.c for the reasoning):
 *   direct   memcpy guarded by our SIGSEGV/SIGBUS handler + siglongjmp;
 *            about 10 ns, used only while we verifiably own those handlers;
 *   syscall  the platform's checked copy (process_vm_readv, a pipe, or
 *            mach_vm_read_overwrite), about 1-2 us, used otherwise.
 *
 * ps_read() is called from one thread at a time: the sampler thread (or a
 * unit test's main thread).
 */
#ifndef PS_MEMREAD_H
#define PS_MEMREAD_H

#include <stddef.h>
#include <stdint.h>

enum ps_read_mode {
    PS_READ_SYSCALL = 0,
    PS_READ_DIRECT,
};

/* Sets up the syscall path.  Returns 0, or -1 if no safe way to read exists. */
int ps_mem_init(void);

/* Installs our fault handlers so the direct path can be used.  Idempotent. */
void ps_mem_enable_direct(void);

/*
 * Called once per sampler tick: keeps the direct path only while our
 * handlers are still the installed ones.
 */
void ps_mem_tick(void);

/*
 * Called when the program is about to install its own SIGSEGV/SIGBUS
 * handler (from our sigaction interposer): switch to the syscall path for
 * good and wait until no direct read is in flight.
 */
void ps_mem_yield_fault_handlers(void);

/* Copies n bytes at address src into dst.  0 on success, -1 if unreadable. */
int ps_read(void *dst, uintptr_t src, size_t n);

/* Convenience: one pointer-sized word. */
static inline int ps_read_ptr(uintptr_t src, uintptr_t *out)
{
    return ps_read(out, src, sizeof *out);
}

enum ps_read_mode ps_mem_mode(void);
const char *ps_mem_mode_name(void);

/* Force a mode (tests and benchmarks).  Direct is only honoured if our
 * handlers are installed. */
void ps_mem_force_mode(enum ps_read_mode m);

/*
 * Platform syscall copy, implemented in lib/<os>/ (no signals involved).
 * Returns 0 or -1.
 */
int ps_plat_read_init(void);
int ps_plat_read(void *dst, uintptr_t src, size_t n);
const char *ps_plat_read_name(void);
/* In a forked child: refresh what depends on the pid. */
void ps_plat_read_after_fork(void);

#endif
