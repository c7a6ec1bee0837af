/*
 * memread.h - the one way the sampler reads interpreter memory.
 *
 * Every byte the sampler takes from the profiled program goes through
 * ps_read(), which copies or fails: it never faults, whatever the address
 * (NULL, unmapped, PROT_NONE, a truncated file mapping, freed and unmapped a
 * moment ago), and it never blocks or signals the thread that owns the
 * memory.
 *
 * Two ways to copy, chosen at run time (see memread.c and docs/safety.md):
 *   direct   memcpy guarded by our SIGSEGV/SIGBUS handler + siglongjmp;
 *            ~10 ns, used only while we verifiably own those handlers;
 *   syscall  the platform's checked copy (process_vm_readv, else a pipe,
 *            else a memfd/temp file; mach_vm_read_overwrite on macOS:
 *            ps_plat_read, platform.h), about 1-2 us, used otherwise.
 *
 * ps_read() is meant for one thread at a time (the sampler thread, or a
 * unit test's main thread); a second concurrent reader is safe but is sent
 * to the syscall path, or refused on the pipe/file paths.
 *
 * PYSAMPLE_READ_MODE (for tests and benchmarks only, not a user setting):
 *   auto|direct  the default: syscall first, direct once our handlers are in
 *   syscall      never direct; process_vm_readv, else pipe, else file
 *   pipe, file   never direct, and that syscall method only
 */
#ifndef PS_MEMREAD_H
#define PS_MEMREAD_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

enum ps_read_mode {
    PS_READ_SYSCALL = 0,
    PS_READ_DIRECT,
};

/* Sets up the syscall path (and reads PYSAMPLE_READ_MODE).  Returns 0, or
 * -1 if no safe way to read exists. */
int ps_mem_init(void);

/*
 * Installs our fault handlers in front of whatever is installed (which
 * becomes the program's view, which we deliver its faults to), and
 * switches to the direct path.  Does nothing if the direct path was given
 * up for good or PYSAMPLE_READ_MODE forbids it.
 */
void ps_mem_enable_direct(void);

/*
 * Called once per sampler tick: keeps the direct path only while our
 * handlers are still the installed ones (one sigaction query per signal,
 * at most once a millisecond): a raw rt_sigaction system call replaces
 * them behind the interposers.  ps_mem_tick_at: the same, with the
 * monotonic time the caller read already (the tick's: one clock read
 * less on every tick).
 */
void ps_mem_tick(void);
void ps_mem_tick_at(uint64_t now);

/*
 * The program's sigaction() of SIGSEGV or SIGBUS, from our sigaction and
 * signal interposers; returns what sigaction() returns.  While our handler
 * is in front (after ps_mem_enable_direct), the program's action is
 * recorded in its view, which our handler delivers every fault that is not
 * ours to, and *old is answered from the view as the kernel would have
 * answered it.  Otherwise (before, or once ours was replaced behind the
 * interposers' back) the call goes to the C library.  Async-signal-safe
 * and lock-free (programs call it from their handlers).
 */
struct sigaction;
int ps_mem_fault_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/*
 * Where the program's handlers cannot be chained to (macOS, where the
 * direct path is never used): switch to the syscall path for good and wait
 * until no direct read is in flight.
 */
void ps_mem_yield_fault_handlers(void);

/* In a forked child: forget a read that was in flight in another thread at
 * fork time (the syscall path's own pipe/file and pid are
 * ps_plat_read_after_fork's, the next step of lifecycle.c's table). */
void ps_mem_after_fork(void);

/*
 * Brackets a batch of reads by the calling thread (the sampler's tick) so
 * the direct path's guard is taken once rather than per read.  begin
 * returns whether the batch holds the guard; pass that to end.  Reads of
 * other threads meanwhile go the syscall way; a program installing a fault
 * handler waits for the batch to end.
 */
int ps_mem_batch_begin(void);
void ps_mem_batch_end(int held);

/* Copies n bytes at address src into dst.  0 on success, -1 if unreadable. */
int ps_read(void *dst, uintptr_t src, size_t n);

/*
 * A read scope (memread.c, "Reads without a recovery point of their own"):
 * the caller sets env with sigsetjmp(env, 0) == 0, calls ps_read_scope(&env),
 * and ps_read_in_scope() reads then jump there on a fault instead of
 * returning -1; ps_read_scope_end() ends the scope before the caller's
 * frame does, and is the first call after such a jump.  Only for code that
 * changes nothing shared between the scope's start and any of its reads.
 * Sampler thread only; outside a batch the reads are ps_read().
 */
void ps_read_scope(sigjmp_buf *env);
void ps_read_scope_end(void);
int ps_read_in_scope(void *dst, uintptr_t src, size_t n);

/*
 * A chain of records read in one go (3.9/3.10's frame objects,
 * framebatch.h): PS_CHAIN_WORDS words of the record at src (at offsets
 * word[], each word within its len bytes) into dst, then those of the
 * record the word[link] word leads to into dst + PS_CHAIN_WORDS words,
 * and so on, at most max records, while that pointer is not 0, not the
 * record itself, 8-aligned, and its len bytes readable by
 * range_worth_reading's rule.  at[k] gets record k's address.  Each
 * record is one of the scope's reads (ps_read_in_scope) of bytes of
 * [record, record + len): a fault jumps to the scope's point, and in_copy
 * is set around each record's loads alone, so our own code between them
 * is never jumped out of; outside a scope each record is a ps_read() of
 * its len bytes (one system call on the syscall path, as before).  What
 * it saves is a call and its checks per record, and the copy of bytes
 * nobody looks at (a 3.9 frame object is 112 bytes read for 4 words).
 * The records read: 0 if the first is not readable.
 */
#define PS_CHAIN_WORDS 4
#define PS_CHAIN_MAX_LEN 512         /* a frame's read bytes at most (walkplan.c) */
struct ps_chain {
    uintptr_t *dst;
    uintptr_t *at;
    uint32_t word[PS_CHAIN_WORDS];   /* each + 8 <= len */
    uint32_t len;                    /* a record's bytes, at most PS_CHAIN_MAX_LEN */
    int link;                        /* index in word[] */
    int max;
};
int ps_read_chain_in_scope(const struct ps_chain *c, uintptr_t src);

/*
 * Words of one record read in one go (the walk's code objects,
 * framecode.c): the 8 bytes at src + off[i] into dst[i], for each of the
 * PS_WORDS offsets, each off[i] + 8 <= len (the caller's to keep: the
 * range checked is [src, src + len)).  In a scope, one of the scope's
 * reads: a fault jumps to the scope's point, in_copy is set around the
 * loads alone, and only the words wanted are loaded, with no call to
 * memcpy and no buffer of len bytes (a 3.13 code object's read was 144
 * bytes copied for 9 words, then taken out of the copy one by one).
 * Outside a scope, one ps_read() of the record's len bytes (at most
 * PS_WORDS_MAX_LEN), the words taken from that copy.  0, or -1 if the
 * record is not readable (len out of bounds as well).
 *
 * scope: ps_read_scope_held()'s answer, taken once by the caller inside
 * its scope (the walk: once a walk, not once a read); the read is a
 * scoped one only while that scope is still the one set.  What the check
 * saves is the thread's id on every read (a call, and the registers kept
 * across it: a third of the read); it is as safe, because only the
 * scope's own thread ever has it: any other gets NULL.
 *
 * A fixed count: its one user reads 9 words (framecode.c, CW_COUNT), and
 * a count given at run time cost a jump table and its check on every
 * read.
 */
#define PS_WORDS 9
#define PS_WORDS_MAX_LEN 1024
int ps_read_words_in_scope(uint64_t *dst, uintptr_t src, size_t len, const uint32_t *off,
                           sigjmp_buf *scope);

/* The calling thread's read scope, where ps_read_in_scope would read in
 * it (ps_read_scope set it in this thread's batch), else NULL. */
sigjmp_buf *ps_read_scope_held(void);

/* Convenience: one pointer-sized word. */
static inline int ps_read_ptr(uintptr_t src, uintptr_t *out)
{
    return ps_read(out, src, sizeof *out);
}

enum ps_read_mode ps_mem_mode(void);
const char *ps_mem_mode_name(void);

/* 1 while our SIGSEGV and SIGBUS handlers are installed by us (they may
 * have been replaced since; ps_mem_tick notices). */
int ps_mem_handlers_installed(void);

/* Force a mode (tests and benchmarks).  Direct is only honoured while our
 * handlers are installed and the direct path has not been given up. */
void ps_mem_force_mode(enum ps_read_mode m);

#endif
