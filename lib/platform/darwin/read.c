/*
 * darwin/read.c - the checked copy behind ps_read() on macOS, and the copy
 * of a suspended thread's memory that the walk reads after resuming it.
 *
 * mach_vm_read_overwrite() on our own task (mach_task_self()) copies from
 * any address of the process into our buffer inside the kernel and returns
 * KERN_INVALID_ADDRESS or KERN_PROTECTION_FAILURE for an unreadable byte
 * instead of faulting.  It needs no entitlement and no root: a task may
 * always read itself.  macOS never uses the guarded direct read of
 * memread.c (ps_plat_read_direct_ok() says so); docs/macos.md explains why:
 * in short, a fault on macOS is first a Mach exception that crash reporters
 * and debuggers see before any signal handler could take it back, and with
 * the thread suspended the copy is a handful of calls per sample anyway.
 *
 * The copy.  suspend.c suspends a thread with recording on, the sampler
 * reads its thread state and frame chain (lib/python/framecopy.c chooses
 * what), suspend.c resumes it, and the ordinary walk (frames.c) then runs
 * with replay on: every read the walk makes of a range
 * that was recorded is served from the copy, so it sees the thread exactly
 * as it was while stopped, and whatever it allocates to resolve new code
 * objects happens with no thread suspended.  Reads outside the recording
 * (code objects, names, line tables) go to live memory as on Linux.
 *
 * Only the thread that turned recording or replay on is affected (the
 * sampler); a concurrent reader elsewhere reads live memory.
 */
#include <stdlib.h>
#include <string.h>

#include "util/bsearch.h"
#include "platform/platform.h"
#include "platform/darwin/darwin.h"

struct rec {
    uintptr_t addr;
    size_t len;
    size_t off;   /* into copy.data */
};

enum { COPY_OFF = 0, COPY_RECORD, COPY_REPLAY };

static struct {
    int state;
    pthread_t owner;
    struct rec *recs;
    size_t nrecs, caprecs;
    unsigned char *data;
    size_t used, capdata;
} copy;

static int mach_read(void *dst, uintptr_t src, size_t n)
{
    mach_vm_size_t got = 0;
    kern_return_t kr = mach_vm_read_overwrite(mach_task_self(), (mach_vm_address_t)src,
                                              (mach_vm_size_t)n, (mach_vm_address_t)(uintptr_t)dst,
                                              &got);
    return kr == KERN_SUCCESS && got == n ? 0 : -1;
}

/*
 * Probes once: proves the call works here, and goes once through every
 * path a suspension uses (record, lookup, replay), so that each libSystem
 * function they call (mach_vm_read_overwrite, memcpy, pthread_self,
 * pthread_equal) is bound before any thread is suspended.  The zig linker
 * has no -bind_at_load, and a lazy bind enters dyld, whose lock a
 * suspended thread may hold.
 */
int ps_plat_read_init(void)
{
    static const uint64_t probe_src = 0x5053414d504c45ull;
    uint64_t probe = 0, again = 0;
    if (ps_darwin_copy_reserve(4, 64) != 0)
        return -1;
    ps_darwin_copy_record();
    int rc = ps_plat_read(&probe, (uintptr_t)&probe_src, sizeof probe);
    ps_darwin_copy_replay();
    if (rc == 0)
        rc = ps_plat_read(&again, (uintptr_t)&probe_src, sizeof again);
    ps_darwin_copy_off();
    return rc == 0 && probe == probe_src && again == probe_src ? 0 : -1;
}

int ps_plat_read_force(const char *method)
{
    if (method == NULL || strcmp(method, "auto") == 0 || strcmp(method, "syscall") == 0 ||
        strcmp(method, "mach_vm_read_overwrite") == 0)
        return ps_plat_read_init();
    return -1;  /* process_vm_readv, pipe and file are Linux's */
}

int ps_plat_read_direct_ok(void)
{
    return 0;
}

const char *ps_plat_read_name(void)
{
    return "mach_vm_read_overwrite";
}

void ps_plat_read_after_fork(void)
{
    /* mach_task_self() is re-read by libSystem in the child; the copy and
     * the thread registry belonged to the parent's threads. */
    copy.state = COPY_OFF;
    ps_darwin_threads_after_fork();
}

/* --- the copy -------------------------------------------------------------- */

int ps_darwin_copy_reserve(size_t records, size_t bytes)
{
    if (records > copy.caprecs) {
        struct rec *r = realloc(copy.recs, records * sizeof *r);
        if (r == NULL)
            return -1;
        copy.recs = r;
        copy.caprecs = records;
    }
    if (bytes > copy.capdata) {
        unsigned char *d = realloc(copy.data, bytes);
        if (d == NULL)
            return -1;
        copy.data = d;
        copy.capdata = bytes;
    }
    return 0;
}

int ps_darwin_copy_fits(size_t records, size_t bytes)
{
    return records <= copy.caprecs && bytes <= copy.capdata;
}

void ps_darwin_copy_record(void)
{
    copy.owner = pthread_self();
    copy.nrecs = 0;
    copy.used = 0;
    copy.state = copy.recs != NULL && copy.data != NULL ? COPY_RECORD : COPY_OFF;
}

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = ((const struct rec *)a)->addr, y = ((const struct rec *)b)->addr;
    return x < y ? -1 : x > y;
}

void ps_darwin_copy_replay(void)
{
    /* Runs after the thread is resumed: sorting may call into libc freely.
     * Sorted, a lookup is a binary search, which matters for the misses
     * (every code object read misses) on deep stacks. */
    if (copy.state != COPY_RECORD)
        return;
    qsort(copy.recs, copy.nrecs, sizeof *copy.recs, by_addr);
    copy.state = COPY_REPLAY;
}

void ps_darwin_copy_off(void)
{
    copy.state = COPY_OFF;
}

static int contains(const struct rec *r, uintptr_t addr, size_t n)
{
    return addr >= r->addr && addr - r->addr <= r->len && n <= r->len - (addr - r->addr);
}

static const struct rec *find(uintptr_t addr, size_t n)
{
    if (copy.state == COPY_RECORD) {
        /* While the thread is suspended only the latest reads are looked
         * at (the span just read holds the next older frames): a full
         * search per frame would make deep stacks quadratic. */
        for (size_t k = 0; k < 4 && k < copy.nrecs; k++)
            if (contains(&copy.recs[copy.nrecs - 1 - k], addr, n))
                return &copy.recs[copy.nrecs - 1 - k];
        return NULL;
    }
    /* Replay: the last record starting at or below addr, or one of the few
     * before it (span reads may overlap the record above them). */
    size_t lo = PS_UPPER_BOUND(copy.recs, copy.nrecs, struct rec, addr, addr);
    for (size_t k = 0; k < 4 && k < lo; k++)
        if (contains(&copy.recs[lo - 1 - k], addr, n))
            return &copy.recs[lo - 1 - k];
    return NULL;
}

int ps_darwin_copy_get(void *dst, uintptr_t addr, size_t n)
{
    const struct rec *r = copy.state != COPY_OFF ? find(addr, n) : NULL;
    if (r == NULL)
        return -1;
    memcpy(dst, copy.data + r->off + (addr - r->addr), n);
    return 0;
}

static int mine(void)
{
    return pthread_equal(pthread_self(), copy.owner);
}

int ps_plat_read(void *dst, uintptr_t src, size_t n)
{
    if (copy.state == COPY_REPLAY && mine()) {
        if (ps_darwin_copy_get(dst, src, n) == 0)
            return 0;
        return mach_read(dst, src, n);
    }
    if (mach_read(dst, src, n) != 0)
        return -1;
    if (copy.state == COPY_RECORD && mine()) {
        if (copy.nrecs < copy.caprecs && n <= copy.capdata - copy.used) {
            struct rec *r = &copy.recs[copy.nrecs++];
            r->addr = src;
            r->len = n;
            r->off = copy.used;
            memcpy(copy.data + copy.used, dst, n);
            copy.used += n;
        }
        /* Out of room: the rest of the walk reads live memory. */
    }
    return 0;
}
