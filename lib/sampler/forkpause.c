/*
 * forkpause.c - the sampler thread steps out of CPython 3.12+'s thread
 * count after os.fork() (forkpause.h).
 *
 * Right after fork() returns in the parent, os.fork() reads field 20 of
 * /proc/self/stat (fopen, fread, fclose) and, if it is above 1, issues
 * "DeprecationWarning: This process (pid=...) is multi-threaded, use of
 * fork() may lead to deadlocks in the child" (shown by default when the
 * fork is in __main__, an exception under -W error on 3.14+).  Our sampler
 * thread must not be the reason.  It cannot simply be stopped during fork
 * and restarted in the parent's atfork handler: that runs inside fork(),
 * before the count.  So the parent's handler opens a window, and the next
 * fopen() of /proc/self/stat by the forking thread within a second stops
 * the sampler thread, and the fclose() of that stream starts it again
 * (~0.1 ms; the samples and the flush schedule carry on).  Stopped means
 * joined and then released: pthread_join returns when the kernel clears
 * the thread's tid, before it takes the thread out of the count, and a
 * traced thread stays counted until its tracer waits for it; so
 * ps_sampler_stop waits, at most 100 ms, until the kernel no longer has
 * the thread (sampler.c).  If the open fails, it starts again at once;
 * if the stream is never closed, the next fopen() anywhere, or the next
 * fork, starts it again.  A fork that is not os.fork() (subprocess, a C
 * extension) opens no such file: the window closes at the next fopen() by
 * that thread, or after a second, and nothing happens.  The fopen/fclose
 * stand-ins (lib/platform/linux/interpose.c) report here through
 * lifecycle.c; where there are none (macOS, docs/macos.md) the window is
 * never used.
 *
 * The window is a state of its own (enum phase, moved along `moves` by
 * compare-and-swap: util/statem.h; docs/design.md draws it), the
 * sampler's side of it the sampler's PAUSED (state.h):
 *
 *   CLOSED --fork (parent)--> OPEN --that thread opens /proc/self/stat in
 *   time, the sampler joined--> OUT --the open succeeded--> STREAM
 *   OPEN --another file, too late, nothing to pause--> CLOSED
 *   OUT --the open failed--> CLOSED;  STREAM --its fclose, a second gone,
 *   the next fork--> CLOSED (the sampler started again)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "platform/platform.h"
#include "sampler/writer.h"
#include "sampler/forkpause.h"
#include "sampler/sampler.h"
#include "sampler/state.h"
#include "util/section.h"
#include "util/statem.h"

/* How long after fork() CPython's thread count may come. */
#define PS_COUNT_WINDOW_NS 1000000000ull

#define M(a, b) { PS_FORKPAUSE_##a, PS_FORKPAUSE_##b }
const struct ps_move ps_forkpause_moves[] = {
    M(CLOSED, OPEN),    /* fork(), in the parent */
    M(OPEN, CLOSED),    /* that thread opened another file, too late, or nothing to pause */
    M(OPEN, OUT),       /* ... opened /proc/self/stat in time: the sampler joined */
    M(OUT, CLOSED),     /* the open failed: the sampler back at once */
    M(OUT, STREAM),     /* the open succeeded: back at its fclose */
    M(STREAM, CLOSED),  /* its fclose, a second gone, or the next fork: back */
};
#undef M
const size_t ps_forkpause_nmoves = sizeof ps_forkpause_moves / sizeof ps_forkpause_moves[0];

static struct {
    pthread_mutex_t *lock;        /* the one starts and stops take (lifecycle's) */
    _Atomic int phase;            /* enum ps_forkpause_phase */
    pthread_t thread;             /* OPEN: the thread that forked ... */
    uint64_t until_ns;            /* ... and until when its fopen may be the count */
    _Atomic(FILE *) stream;       /* STREAM: CPython's /proc/self/stat ... */
    _Atomic uint64_t out_since;   /* ... opened then */
} fp;

const char *ps_forkpause_phase_name(enum ps_forkpause_phase p)
{
    static const char *const names[PS_FORKPAUSE_PHASES] = { "CLOSED", "OPEN", "OUT", "STREAM" };
    return (unsigned)p < PS_FORKPAUSE_PHASES ? names[p] : "?";
}

static int move(enum ps_forkpause_phase from, enum ps_forkpause_phase to)
{
    return ps_move(&fp.phase, ps_forkpause_moves, ps_forkpause_nmoves, (int)from, (int)to);
}

void ps_forkpause_init(pthread_mutex_t *lock)
{
    fp.lock = lock;
}

/* Stops the sampler thread for a moment (PAUSED): 1 if it did. */
static int pause_sampler(void)
{
    struct ps_section sec;
    ps_section_enter(&sec, fp.lock);
    int paused = ps_writer_state() == PS_WRITE_OPEN && ps_sampler_pause();
    ps_section_leave(&sec);
    return paused;
}

/* The window just closed from OUT or STREAM: the sampler comes back. */
static void resume_sampler(void)
{
    struct ps_section sec;
    ps_section_enter(&sec, fp.lock);
    ps_sampler_resume(ps_writer_state() == PS_WRITE_OPEN);
    ps_section_leave(&sec);
}

/* STREAM -> CLOSED, the sampler back, if the stream is f (NULL: any). */
static void come_back(FILE *f)
{
    if (f != NULL && atomic_load(&fp.stream) != f)
        return;
    if (move(PS_FORKPAUSE_STREAM, PS_FORKPAUSE_CLOSED) != 0)
        return;
    atomic_store(&fp.stream, NULL);
    resume_sampler();
}

int ps_forkpause_fopen_begin(const char *path)
{
    if (fp.lock == NULL)
        return 0;
    if (atomic_load(&fp.phase) == PS_FORKPAUSE_STREAM &&
        ps_now_ns() - atomic_load(&fp.out_since) > PS_COUNT_WINDOW_NS)
        come_back(NULL);
    if (atomic_load(&fp.phase) != PS_FORKPAUSE_OPEN || !pthread_equal(pthread_self(), fp.thread))
        return 0;
    if (path == NULL || strcmp(path, "/proc/self/stat") != 0 || ps_now_ns() > fp.until_ns ||
        move(PS_FORKPAUSE_OPEN, PS_FORKPAUSE_OUT) != 0) {
        move(PS_FORKPAUSE_OPEN, PS_FORKPAUSE_CLOSED);
        return 0;
    }
    if (pause_sampler())
        return 1;
    move(PS_FORKPAUSE_OUT, PS_FORKPAUSE_CLOSED);
    return 0;
}

void ps_forkpause_fopen_end(FILE *f)
{
    if (f == NULL) {
        if (move(PS_FORKPAUSE_OUT, PS_FORKPAUSE_CLOSED) == 0)
            resume_sampler();
        return;
    }
    atomic_store(&fp.stream, f);
    atomic_store(&fp.out_since, ps_now_ns());
    if (move(PS_FORKPAUSE_OUT, PS_FORKPAUSE_STREAM) != 0) {
        /* Closed meanwhile (none is expected): the sampler back now. */
        atomic_store(&fp.stream, NULL);
        resume_sampler();
    }
}

void ps_forkpause_fclosed(FILE *f)
{
    if (f != NULL)
        come_back(f);
}

void ps_forkpause_prepare(void)
{
    /* A pause that was never closed ends now, so that parent and child
     * both start from a running sampler. */
    come_back(NULL);
    move(PS_FORKPAUSE_OPEN, PS_FORKPAUSE_CLOSED);
}

void ps_forkpause_parent(void)
{
    if (!ps_sampler_may_read())
        return;
    fp.thread = pthread_self();
    fp.until_ns = ps_now_ns() + PS_COUNT_WINDOW_NS;
    move(PS_FORKPAUSE_CLOSED, PS_FORKPAUSE_OPEN);
}

enum ps_forkpause_phase ps_forkpause_phase(void)
{
    return (enum ps_forkpause_phase)atomic_load(&fp.phase);
}

void ps_forkpause_child(void)
{
    /* Not a move: the parent's window is not the child's.  A sampler
     * PAUSED in the parent is OFF here (state.h). */
    atomic_store(&fp.phase, PS_FORKPAUSE_CLOSED);
    atomic_store(&fp.stream, NULL);
}
