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
 * the sampler thread (joined: it is really gone, the count is true), and
 * the fclose() of that stream starts it again (~0.1 ms; the samples and the
 * flush schedule carry on).  If the open fails, it starts again at once;
 * if the stream is never closed, the next fopen() anywhere, or the next
 * fork, starts it again.  A fork that is not os.fork() (subprocess, a C
 * extension) opens no such file: the window closes at the next fopen() by
 * that thread, or after a second, and nothing happens.  The fopen/fclose
 * stand-ins (lib/platform/linux/interpose.c) report here through
 * lifecycle.c; where there are none (macOS, docs/macos.md) the window is
 * never used.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "platform/platform.h"
#include "profile/writer.h"
#include "sampler/forkpause.h"
#include "sampler/sampler.h"
#include "sampler/state.h"
#include "util/section.h"

/* How long after fork() CPython's thread count may come. */
#define PS_COUNT_WINDOW_NS 1000000000ull

static struct {
    pthread_mutex_t *lock;        /* the one starts and stops take (lifecycle's) */
    _Atomic int open;             /* the next fopen by thread may be the count */
    pthread_t thread;
    uint64_t until_ns;
    _Atomic(FILE *) stream;       /* CPython's /proc/self/stat while we are out */
    uint64_t out_since;
    int paused;                   /* the sampler stepped out (under lock) */
} fp;

void ps_forkpause_init(pthread_mutex_t *lock)
{
    fp.lock = lock;
}

/* Stops the sampler thread for a moment: 1 if it did. */
static int pause_sampler(void)
{
    struct ps_section sec;
    ps_section_enter(&sec, fp.lock);
    int paused = 0;
    if (!fp.paused && ps_sampler_may_read() && ps_writer_state() == PS_WRITE_OPEN) {
        ps_sampler_stop();
        fp.paused = paused = 1;
    }
    ps_section_leave(&sec);
    return paused;
}

static void resume_sampler(void)
{
    struct ps_section sec;
    ps_section_enter(&sec, fp.lock);
    if (fp.paused) {
        fp.paused = 0;
        if (ps_writer_state() == PS_WRITE_OPEN)
            ps_sampler_start_thread();
    }
    ps_section_leave(&sec);
}

static void come_back(void)
{
    atomic_store(&fp.stream, NULL);
    resume_sampler();
}

int ps_forkpause_fopen_begin(const char *path)
{
    if (fp.lock == NULL)
        return 0;
    if (atomic_load(&fp.stream) != NULL && ps_now_ns() - fp.out_since > PS_COUNT_WINDOW_NS)
        come_back();
    if (!atomic_load(&fp.open) || !pthread_equal(pthread_self(), fp.thread))
        return 0;
    atomic_store(&fp.open, 0);
    if (path == NULL || strcmp(path, "/proc/self/stat") != 0 ||
        ps_now_ns() > fp.until_ns)
        return 0;
    return pause_sampler();
}

void ps_forkpause_fopen_end(FILE *f)
{
    if (f == NULL) {
        resume_sampler();
        return;
    }
    fp.out_since = ps_now_ns();
    atomic_store(&fp.stream, f);
}

void ps_forkpause_fclosed(FILE *f)
{
    if (f != NULL && atomic_load(&fp.stream) == f)
        come_back();
}

void ps_forkpause_prepare(void)
{
    /* A pause that was never closed ends now, so that parent and child
     * both start from a running sampler. */
    if (atomic_load(&fp.stream) != NULL)
        come_back();
    atomic_store(&fp.open, 0);
}

void ps_forkpause_parent(void)
{
    if (!ps_sampler_may_read())
        return;
    fp.thread = pthread_self();
    fp.until_ns = ps_now_ns() + PS_COUNT_WINDOW_NS;
    atomic_store(&fp.open, 1);
}

void ps_forkpause_child(void)
{
    fp.paused = 0;
}
