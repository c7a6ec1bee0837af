/*
 * memread.c - fault-safe reads of interpreter memory: the one read path
 * (memread.h).  The program's view of SIGSEGV/SIGBUS, which lets our
 * handler stand first in line, is faultview.c.
 *
 * Why two paths.  The sampler reads frames that the owning thread may pop,
 * and on 3.11+ a popped data-stack chunk is munmap()ed, so a stale pointer
 * can fault.  A direct memcpy protected by a SIGSEGV/SIGBUS handler that
 * siglongjmp()s back costs about 10 ns; a checked system call costs 1-2 us
 * (docs/safety.md has the figures, test/bench/bench_read.c measures them).
 * A stack of 20 frames needs ~40 reads, so the direct path is what makes
 * high rates cheap.
 *
 * Signal mask of our own reads.  sigsetjmp(env, 0) does not save the mask
 * (saving costs a system call per read).  That is only correct because our
 * handler is installed with SA_NODEFER and an empty sa_mask: nothing is
 * blocked while it runs, so jumping out of it leaves the sampler's mask as
 * it was.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "memory/guard.h"
#include "memory/memread.h"
#include "platform/platform.h"
#include "util/tickpath.h"

/* No user mapping exists at or above 2^56 on any 64-bit platform we run on
 * (x86-64 with 5-level paging tops out there, arm64 at 2^52); refusing such
 * addresses early also keeps non-canonical pointers away from memcpy. */
#if UINTPTR_MAX > 0xffffffffu
#define PS_ADDR_LIMIT ((uintptr_t)1 << 56)
#else
#define PS_ADDR_LIMIT UINTPTR_MAX
#endif

#define PS_YIELD_WAIT_NS 2000000000ull

PS_TICK_DATA static _Atomic int read_mode = PS_READ_SYSCALL;
PS_TICK_DATA static _Atomic int direct_forbidden;     /* given up the direct path for good */

/* The read in flight: guard_owner is the reading thread's pthread_self()
 * (0: none), taken with a compare-and-swap so that two readers can never
 * share guard_env.  The handler reads both on the faulting thread. */
PS_TICK_DATA static _Atomic uintptr_t guard_owner;
PS_TICK_DATA static sigjmp_buf guard_env;
/* 1 only while the guard's owner is inside the copy itself: a fault
 * anywhere else on that thread (our own code between reads, malloc) is a
 * real crash and must not be jumped out of.  Written and read by the same
 * thread (the handler runs on the faulting thread), so compiler fences
 * are all the ordering it needs. */
PS_TICK_DATA static volatile sig_atomic_t in_copy;
/* Where the handler jumps from a fault in the copy: guard_env (the read's
 * own recovery point, copy_guarded) or the scope's (ps_read_in_scope).
 * Set by the guard's owner before it sets in_copy, read by the handler on
 * the same thread, like in_copy. */
PS_TICK_DATA static sigjmp_buf *volatile jump_to = &guard_env;
/* The guard owner's read scope (ps_read_scope), or NULL. */
PS_TICK_DATA static sigjmp_buf *scope_env;

static uintptr_t self_id(void)
{
    return (uintptr_t)pthread_self();
}

sigjmp_buf *ps_mem_fault_recovery(void)
{
    if (in_copy && atomic_load(&guard_owner) == self_id())
        return jump_to;
    return NULL;
}

void ps_mem_give_up_direct(void)
{
    atomic_store(&direct_forbidden, 1);
    atomic_store(&read_mode, PS_READ_SYSCALL);
}

/* Goes direct unless a yield has happened or happens meanwhile: the yield
 * stores direct_forbidden before read_mode, so whichever order the two
 * threads run in, read_mode ends up SYSCALL if a yield took place. */
void ps_mem_go_direct(void)
{
    if (atomic_load(&direct_forbidden))
        return;
    atomic_store(&read_mode, PS_READ_DIRECT);
    if (atomic_load(&direct_forbidden))
        atomic_store(&read_mode, PS_READ_SYSCALL);
}

int ps_mem_direct_given_up(void)
{
    return atomic_load(&direct_forbidden);
}

void ps_mem_set_mode(enum ps_read_mode m)
{
    atomic_store(&read_mode, m);
}

void ps_mem_wait_readers(void)
{
    /* A read that started before the store finishes within nanoseconds
     * once its thread runs; wait for it so the program's handler never
     * sees our fault.  The bound only matters if the reader is descheduled
     * for seconds, and then the program goes on rather than hang. */
    uintptr_t self = self_id();
    uint64_t deadline = 0;
    for (;;) {
        uintptr_t owner = atomic_load(&guard_owner);
        if (owner == 0 || owner == self)
            break;
        uint64_t now = ps_now_ns();
        if (deadline == 0)
            deadline = now + PS_YIELD_WAIT_NS;
        else if (now > deadline)
            break;
        sched_yield();
    }
}

void ps_mem_read_after_fork(void)
{
    atomic_store(&guard_owner, 0);
    scope_env = NULL;
}

PS_TICK_PATH enum ps_read_mode ps_mem_mode(void)
{
    return atomic_load(&read_mode);
}

const char *ps_mem_mode_name(void)
{
    return ps_mem_mode() == PS_READ_DIRECT ? "direct" : ps_plat_read_name();
}

/*
 * The copy itself.  Under AddressSanitizer memcpy is intercepted and checks
 * the source against its shadow memory, which is meaningless for memory
 * that is not ours; a plain loop with instrumentation off does the same
 * job (volatile keeps the compiler from turning it back into memcpy).
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PS_ASAN 1
#endif

#ifdef PS_ASAN
__attribute__((no_sanitize_address, noinline))
static void guarded_copy(void *dst, const void *src, size_t n)
{
    volatile const unsigned char *s = src;
    unsigned char *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}
#else
#define guarded_copy memcpy
#endif

/* The copy itself, with in_copy set around it and a fault's jump going
 * to env.  Inlined into the two callers below, which are out of line. */
static inline __attribute__((always_inline)) void copy_jumping_to(sigjmp_buf *env, void *dst,
                                                                  uintptr_t src, size_t n)
{
    jump_to = env;
    in_copy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    guarded_copy(dst, (const void *)src, n);
    atomic_signal_fence(memory_order_seq_cst);
    in_copy = 0;
}

/* The guarded copy, for a thread that holds guard_owner.  Kept out of line
 * so that the compiler cannot move loads of *src outside the region where
 * in_copy is set. */
PS_TICK_PATH static __attribute__((noinline)) int copy_guarded(void *dst, uintptr_t src, size_t n)
{
    if (sigsetjmp(guard_env, 0) != 0) {
        in_copy = 0;
        return -1;
    }
    copy_jumping_to(&guard_env, dst, src, n);
    return 0;
}

/*
 * Reads without a recovery point of their own (sigsetjmp is ~40
 * instructions, a third of a small read).  A fault in such a copy
 * jumps to the scope's recovery point, which the caller set with sigsetjmp
 * before ps_read_scope(): every read and every line of code between that
 * point and the fault is abandoned.  That is only sound where nothing
 * shared is being changed anywhere in between (frames.c says why the walk
 * qualifies); reads that may run in the middle of such a change (the code
 * cache's refill, interning) use ps_read, whose recovery point is the read
 * itself, and may run inside a scope.  Only within the guard owner's batch:
 * elsewhere (no batch, the syscall path) this is ps_read.
 */
PS_TICK_PATH void ps_read_scope(sigjmp_buf *env)
{
    /* Only in the calling thread's own batch.  Walks are serialised by the
     * profile lock, so no other thread reads while the scope is set; this
     * keeps it so if that ever changes: another thread's scoped reads go
     * ps_read's way, because the guard is not theirs, and a scope opened
     * outside a batch is none, so a thread that takes the guard later
     * cannot find it set. */
    scope_env = atomic_load_explicit(&guard_owner, memory_order_relaxed) == self_id() ? env
                                                                                      : NULL;
}

/* Also the first thing after a jump to the scope's point: the copy that
 * faulted left in_copy set. */
PS_TICK_PATH void ps_read_scope_end(void)
{
    in_copy = 0;
    atomic_signal_fence(memory_order_seq_cst);
    scope_env = NULL;
}

PS_TICK_PATH static __attribute__((noinline)) int copy_in_scope(void *dst, uintptr_t src, size_t n)
{
    copy_jumping_to(scope_env, dst, src, n);
    return 0;
}

/* One direct read outside a batch: take the guard, copy, release. */
static int read_direct(void *dst, uintptr_t src, size_t n)
{
    uintptr_t expected = 0;
    /* Take the guard, then look at the mode again: either a yielding
     * thread sees guard_owner and waits for us, or we see its switch to
     * the syscall path and never touch the memory directly.  A second
     * concurrent reader (the exec-time check in a forked child can read
     * while the sampler holds the guard) goes the syscall way rather than
     * share guard_env. */
    if (!atomic_compare_exchange_strong(&guard_owner, &expected, self_id()))
        return ps_plat_read(dst, src, n);
    if (atomic_load(&read_mode) != PS_READ_DIRECT) {
        atomic_store(&guard_owner, 0);
        return ps_plat_read(dst, src, n);
    }
    int rc = copy_guarded(dst, src, n);
    atomic_store_explicit(&guard_owner, 0, memory_order_release);
    return rc;
}

/*
 * Batches.  Taking the guard costs a compare-and-swap and a sequentially
 * consistent load, about as much as the copy itself; a tick makes hundreds
 * of reads.  So the sampler takes the guard once per tick
 * (ps_mem_batch_begin, under its profile lock) and its reads inside the
 * batch only set in_copy around the copy.  The yield protocol is unchanged:
 * a yielding thread waits for guard_owner to clear, i.e. for the end of the
 * tick, before the program's handler goes in.  fork() cannot split a batch:
 * the prepare handler takes the same profile lock.
 */
PS_TICK_PATH int ps_mem_batch_begin(void)
{
    uintptr_t expected = 0;
    if (atomic_load(&read_mode) != PS_READ_DIRECT)
        return 0;
    if (!atomic_compare_exchange_strong(&guard_owner, &expected, self_id()))
        return 0;
    if (atomic_load(&read_mode) != PS_READ_DIRECT) {
        atomic_store(&guard_owner, 0);
        return 0;
    }
    return 1;
}

PS_TICK_PATH void ps_mem_batch_end(int held)
{
    if (held)
        atomic_store_explicit(&guard_owner, 0, memory_order_release);
}

/* Outside a batch.  Out of line, so that ps_read itself stays a few
 * checks and a tail call (it runs once per frame). */
PS_TICK_PATH static __attribute__((noinline)) int read_unbatched(void *dst, uintptr_t src, size_t n)
{
    if (atomic_load_explicit(&read_mode, memory_order_relaxed) == PS_READ_DIRECT)
        return read_direct(dst, src, n);
    return ps_plat_read(dst, src, n);
}

/* The first page is never mapped, nothing lives above PS_ADDR_LIMIT,
 * and wrap-around is never valid: -1 for such a range, 0 for an empty
 * one (nothing to copy), 1 for one worth reading. */
static inline int range_worth_reading(uintptr_t src, size_t n)
{
    if (src < 4096 || src + n < src || src + n > PS_ADDR_LIMIT)
        return -1;
    return n != 0;
}

PS_TICK_PATH int ps_read_in_scope(void *dst, uintptr_t src, size_t n)
{
    int r = range_worth_reading(src, n);
    if (r <= 0)
        return r;
    if (scope_env != NULL && atomic_load_explicit(&guard_owner, memory_order_relaxed) == self_id())
        return copy_in_scope(dst, src, n);
    return ps_read(dst, src, n);
}

/* The record after the one at at (its words at rec): its word[link], if
 * it may be followed (ps_read_chain_in_scope), else 0.  last: the highest
 * address a record may start at (range_worth_reading's bounds in one
 * compare, chain_last). */
static inline uintptr_t chain_next(const uintptr_t *rec, uintptr_t at, int link, uintptr_t last)
{
    uintptr_t next = rec[link];
    if (next == at || (next & 7) != 0 || next - 4096 > last - 4096)
        return 0;
    return next;
}

/* For chain_next: a record of len bytes (8 <= len <= PS_CHAIN_MAX_LEN,
 * ps_read_chain_in_scope) at next is worth reading iff 4096 <= next <=
 * this. */
static inline uintptr_t chain_last(size_t len)
{
    return PS_ADDR_LIMIT - len;
}

/* One word of interpreter memory, for the chain's guarded loads (as
 * guarded_copy: not through AddressSanitizer's checks). */
#ifdef PS_ASAN
__attribute__((no_sanitize_address, noinline))
static uintptr_t guarded_word(uintptr_t src)
{
    uintptr_t v;
    guarded_copy(&v, (const void *)src, sizeof v);
    return v;
}
#else
static inline uintptr_t guarded_word(uintptr_t src)
{
    uintptr_t v;
    memcpy(&v, (const void *)src, sizeof v);
    return v;
}
#endif

/* The chain in the scope: jump_to set once, in_copy around each record's
 * loads (copy_jumping_to's order).  Out of line, like copy_in_scope, so
 * that no load of a record moves out of its window; c's fields in
 * locals. */
PS_TICK_PATH static __attribute__((noinline)) int chain_in_scope(const struct ps_chain *c,
                                                              uintptr_t src)
{
    uintptr_t *rec = c->dst, *at = c->at;
    const uintptr_t w0 = c->word[0], w1 = c->word[1], w2 = c->word[2], w3 = c->word[3];
    const uintptr_t last = chain_last(c->len);
    const int max = c->max, link = c->link;
    _Static_assert(PS_CHAIN_WORDS == 4, "chain_in_scope loads 4 words");
    int k = 0;
    jump_to = scope_env;
    for (;;) {
        at[k] = src;
        in_copy = 1;
        atomic_signal_fence(memory_order_seq_cst);
        rec[0] = guarded_word(src + w0);
        rec[1] = guarded_word(src + w1);
        rec[2] = guarded_word(src + w2);
        rec[3] = guarded_word(src + w3);
        atomic_signal_fence(memory_order_seq_cst);
        in_copy = 0;
        if (++k >= max || (src = chain_next(rec, src, link, last)) == 0)
            return k;
        rec += PS_CHAIN_WORDS;
    }
}

/* The chain outside a scope: one ps_read() of each record's len bytes
 * (on the syscall path one system call a record, as a whole-frame read
 * was, not one a word), its words taken from that copy. */
static int chain_read(const struct ps_chain *c, uintptr_t src)
{
    uint8_t one[PS_CHAIN_MAX_LEN];
    uintptr_t *rec = c->dst;
    for (int k = 0;; rec += PS_CHAIN_WORDS) {
        c->at[k] = src;
        if (ps_read(one, src, c->len) != 0)
            return k;
        for (int i = 0; i < PS_CHAIN_WORDS; i++)
            memcpy(&rec[i], one + c->word[i], sizeof rec[i]);
        if (++k >= c->max || (src = chain_next(rec, src, c->link, chain_last(c->len))) == 0)
            return k;
    }
}

PS_TICK_PATH int ps_read_chain_in_scope(const struct ps_chain *c, uintptr_t src)
{
    if (c->max <= 0 || c->link < 0 || c->link >= PS_CHAIN_WORDS ||
        c->len > PS_CHAIN_MAX_LEN || range_worth_reading(src, c->len) <= 0)
        return 0;
    for (int i = 0; i < PS_CHAIN_WORDS; i++)
        if ((uint64_t)c->word[i] + sizeof(uintptr_t) > c->len)
            return 0;
    if (scope_env != NULL && atomic_load_explicit(&guard_owner, memory_order_relaxed) == self_id())
        return chain_in_scope(c, src);
    return chain_read(c, src);
}

/* The words outside a scope: one ps_read() of the record (on the
 * syscall path one system call, as the whole-object read was). */
static __attribute__((noinline)) int words_read(uint64_t *dst, uintptr_t src, size_t len,
                                                const uint32_t *off)
{
    uint8_t one[PS_WORDS_MAX_LEN];
    if (ps_read(one, src, len) != 0)
        return -1;
    for (unsigned i = 0; i < PS_WORDS; i++)
        memcpy(&dst[i], one + off[i], sizeof dst[i]);
    return 0;
}

PS_TICK_PATH sigjmp_buf *ps_read_scope_held(void)
{
    if (scope_env != NULL && atomic_load_explicit(&guard_owner, memory_order_relaxed) == self_id())
        return scope_env;
    return NULL;
}

/* In the scope: jump_to and in_copy set once around all the loads
 * (copy_jumping_to's order), no call between the checks and the loads.
 * Out of line (noinline, like copy_in_scope and chain_in_scope), so that
 * no load moves out of its window into a caller. */
PS_TICK_PATH __attribute__((noinline)) int ps_read_words_in_scope(uint64_t *dst, uintptr_t src,
                                                                size_t len, const uint32_t *off,
                                                                sigjmp_buf *scope)
{
    /* 8 <= len <= PS_WORDS_MAX_LEN, and range_worth_reading(src, len) > 0
     * in one compare (as chain_next): 4096 <= src <= PS_ADDR_LIMIT - len,
     * both sides unsigned. */
    if (len - 8u > PS_WORDS_MAX_LEN - 8u || src - 4096u > PS_ADDR_LIMIT - 4096u - len)
        return -1;
    /* Only the scope's thread has it (ps_read_scope_held), and it is
     * still set: ps_read_in_scope's test, without the thread's id. */
    if (scope == NULL || scope != scope_env)
        return words_read(dst, src, len, off);
    jump_to = scope;
    in_copy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    _Static_assert(PS_WORDS == 9, "ps_read_words_in_scope loads 9 words");
    dst[0] = guarded_word(src + off[0]);
    dst[1] = guarded_word(src + off[1]);
    dst[2] = guarded_word(src + off[2]);
    dst[3] = guarded_word(src + off[3]);
    dst[4] = guarded_word(src + off[4]);
    dst[5] = guarded_word(src + off[5]);
    dst[6] = guarded_word(src + off[6]);
    dst[7] = guarded_word(src + off[7]);
    dst[8] = guarded_word(src + off[8]);
    atomic_signal_fence(memory_order_seq_cst);
    in_copy = 0;
    return 0;
}

PS_TICK_PATH int ps_read(void *dst, uintptr_t src, size_t n)
{
    int r = range_worth_reading(src, n);
    if (r <= 0)
        return r;
    /* Inside our own batch: the guard is already ours.  (Only this thread
     * ever stores its own id there, so a relaxed load is exact.) */
    if (atomic_load_explicit(&guard_owner, memory_order_relaxed) == self_id())
        return copy_guarded(dst, src, n);
    return read_unbatched(dst, src, n);
}
