/*
 * orphan.c - the sampler thread as the last one of its process (orphan.h).
 *
 * Looked at every 100 ms at most: one pread of /proc/self/stat, held open,
 * while the leader runs (platform.h).  The only exit() the library calls,
 * and only on a positive reading: the leader has ended and no other
 * program thread is listed.  An armed, idle thread that never wakes by
 * itself is woken when a program thread ends (ps_orphan_thread_ending) and
 * then looks for a second: the thread that told it is still finishing when
 * it first looks, and is gone microseconds later, so it looks again after
 * PS_ORPHAN_FIRST_NS, and then twice as long each time up to 100 ms.
 * Looking every 100 ms kept each child forked by a thread alive ~100 ms
 * after its thread ended (150 forks: 14 s, 0.8 s without the library);
 * now about a millisecond.  The final profile (and PYSAMPLE_STATS)
 * is written here, before exit(0), so that our atexit handler finds it
 * done and waits for nobody.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "control/control.h"
#include "platform/platform.h"
#include "sampler/writer.h"
#include "sampler/orphan.h"
#include "sampler/state.h"
#include "settings.h"

#define PS_ORPHAN_FIRST_NS 250000ull
#define PS_ORPHAN_EVERY_NS 100000000ull

static struct {
    _Atomic int thread_ended;   /* a program thread said it is ending */
    uint64_t next_check;        /* when to look for the program's threads */
    uint64_t step;              /* ... after the next look (0: every 100 ms) */
    uint64_t watch_until;       /* armed and idle: look until then, not never */
} orphan;

void ps_orphan_thread_ending(void)
{
    if (atomic_exchange(&orphan.thread_ended, 1) == 0 && ps_sampler_armed())
        ps_control_wake();
}

int ps_orphan_news(void)
{
    return atomic_load(&orphan.thread_ended);
}

int ps_orphan_watching(uint64_t now)
{
    return now < orphan.watch_until;
}

uint64_t ps_orphan_next_check(void)
{
    return orphan.next_check;
}

void ps_orphan_check(const struct ps_sampler_ctx *ctx, uint64_t now)
{
    if (atomic_exchange(&orphan.thread_ended, 0)) {
        orphan.watch_until = now + 1000000000ull;
        orphan.next_check = now;
        orphan.step = PS_ORPHAN_FIRST_NS;
    }
    if (now < orphan.next_check)
        return;
    if (orphan.step == 0 || orphan.step > PS_ORPHAN_EVERY_NS)
        orphan.step = PS_ORPHAN_EVERY_NS;
    orphan.next_check = now + orphan.step;
    orphan.step *= 2;
    /* Only a positive reading ends the process: "cannot tell" (no
     * descriptor free, no memory) is 0 here and we look again later. */
    if (!ps_program_threads_gone(ps_orphan_watching(now)))
        return;
    /* From the state the loop is in (WAITING, SAMPLING, IDLE, FINISHED);
     * refused, the exit is not this thread's to make. */
    if (ps_sampler_move(ps_sampler_state(), PS_SAMPLER_EXITING) != 0)
        return;
    if (ps_settings_process()->output[0]) {
        ps_writer_ask(PS_WRITE_FINAL);
        ps_writer_serve();
    }
    ps_sampler_write_stats(ctx);
    exit(0);
}
