/*
 * linux/sigmask.c - whether a thread blocks the native-stack signal
 * (regs.c sends a running thread SIGURG only if it does not: a blocked
 * one would stay pending in it, seen by sigpending() and taken by
 * sigwait()), read from /proc/self/task/TID/status and remembered.
 *
 * The read costs 15-40 us (the kernel formats some 55 lines), before
 * every signal to a running thread, most of a native sample's cost.  A
 * thread's mask changes only by its own doing, so an answer "it does not
 * block it" is remembered per thread while nothing that can change a mask
 * has happened since: the program's pthread_sigmask and sigprocmask go
 * through our stand-ins (interpose_sigaction.c), which bump a generation
 * before and after the change, and a thread starting (interpose_threads.c:
 * a new thread, perhaps with a reused tid, inherits its creator's mask)
 * bumps it too.  The answer is kept for at most PS_MASK_KEEP_NS besides,
 * for the changes that go round the stand-ins (a raw rt_sigprocmask
 * system call, siglongjmp restoring a saved mask, swapcontext,
 * sigblock; sighold and sigrelse have stand-ins): there a thread may be
 * sent one SIGURG within that long of blocking it (docs/native.md).  "It blocks it" is never
 * remembered: such a thread is read again at its next sample.
 *
 * The generation is read before the file, so a change whose second bump
 * comes after the read makes the answer stale at once; what is left is
 * what reading the status before every signal left: a signal sent right
 * after a read that came just before the change.  The table is the
 * sampler thread's own; only the generation is shared.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "platform/linux/linux.h"

#define PS_MASK_SLOTS 64            /* power of two */
#define PS_MASK_KEEP_NS 10000000ull

static _Atomic uint64_t generation = 1;

static struct {
    long tid;
    uint64_t gen;                   /* the generation before the read */
    uint64_t at;                    /* when it was read */
} mem[PS_MASK_SLOTS];

void ps_sigmask_changed(void)
{
    atomic_fetch_add(&generation, 1);
}

/* 1 if thread tid's status says it blocks sig now; a status that cannot
 * be read or parsed counts as blocking. */
static int status_blocks(long tid, int sig)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    if (ps_linux_read_small(path, buf, sizeof buf) < 0)
        return 1;
    const char *p = strstr(buf, "\nSigBlk:");
    if (p == NULL)
        return 1;
    char *end;
    errno = 0;
    unsigned long long mask = strtoull(p + 9, &end, 16);
    if (errno != 0 || end == p + 9)
        return 1;
    return (mask >> (sig - 1)) & 1;
}

int ps_thread_blocks_signal(long tid, int sig, uint64_t now)
{
    uint64_t gen = atomic_load(&generation);
    unsigned slot = (unsigned long)tid & (PS_MASK_SLOTS - 1);
    if (mem[slot].tid == tid && mem[slot].gen == gen && now - mem[slot].at < PS_MASK_KEEP_NS)
        return 0;
    int blocks = status_blocks(tid, sig);
    if (blocks) {
        mem[slot].tid = 0;
        return 1;
    }
    mem[slot].tid = tid;
    mem[slot].gen = gen;
    mem[slot].at = now;
    return 0;
}
