/*
 * writer.c - the one path to PYSAMPLE_OUTPUT (writer.h).
 *
 * Tickets.  A "now" request takes the next number (asked); a write
 * samples asked before it renders, and once its file is in place, every
 * request up to that number has been served (done).  So a request made
 * while a write is already rendering waits for the next write, which is
 * the one that contains what happened before the request.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "profile/output.h"
#include "profile/profile.h"
#include "sampler/quality.h"
#include "sampler/state.h"
#include "sampler/writer.h"
#include "settings.h"
#include "util/lock.h"
#include "util/message.h"

/* One write waits for another this long at most (a very large profile on
 * a slow disk); longer, and the writer holding the lock is a thread that a
 * signal handler now writing interrupted. */
#define PS_WRITER_WAIT_MS 5000

static struct {
    pthread_mutex_t lock;        /* one write of the file at a time */
    _Atomic int state;           /* enum ps_write_state */
    _Atomic int final_asked;     /* the writing thread is to write the final profile */
    _Atomic unsigned asked;      /* tickets of "now" requests handed out */
    _Atomic unsigned done;       /* the last ticket a finished write covers */
    void (*after)(const char *path);
    struct ps_episode quality_failing;  /* PYSAMPLE_QUALITY's file not written */
} writer = { .lock = PTHREAD_MUTEX_INITIALIZER };

unsigned ps_writer_ask(enum ps_write_kind kind)
{
    if (kind == PS_WRITE_FINAL) {
        atomic_store(&writer.final_asked, 1);
        return 0;
    }
    return atomic_fetch_add(&writer.asked, 1) + 1;
}

/*
 * PYSAMPLE_QUALITY: after each write of the profile (on the writing
 * thread), <path>.quality.json says what it is worth (docs/format.md):
 * the sampler's counts since it started.  Written atomically, like the
 * profile.
 */
static void write_quality(const char *path)
{
    struct ps_stats zero, now;
    memset(&zero, 0, sizeof zero);
    ps_sampler_stats(&now);
    struct ps_quality q;
    ps_sampler_quality(&q, "PYSAMPLE_OUTPUT", &zero, &now, now.sampled_ns, now.requested_hz);
    char json[2048], side[4200];
    size_t n = ps_quality_json(&q, (long)getpid(), json, sizeof json);
    int w = snprintf(side, sizeof side, "%s.quality.json", path);
    int rc = n == 0 ? -ENOBUFS : w < 0 || (size_t)w >= sizeof side ? -ENAMETOOLONG
           : ps_write_atomic(side, json, n, ps_settings_process()->file_mode);
    if (!ps_episode_turn(&writer.quality_failing, rc))
        return;
    if (rc != 0)
        ps_say("cannot write the quality figures %s.quality.json: %s; said once, until they are "
               "written again", path, ps_output_strerror(rc));
    else
        ps_say("the quality figures %s.quality.json are written again", path);
}

/* Renders and writes; every ticket asked before the render is served. */
void ps_writer_write_now(int say_errors)
{
    char path[4096];
    if (ps_lock_bounded(&writer.lock, PS_WRITER_WAIT_MS) != 0) {
        if (say_errors)
            ps_say("cannot write the profile for %s: another write never ended",
                   ps_settings_process()->output);
        return;
    }
    unsigned covers = atomic_load(&writer.asked);
    int rc = ps_profile_write(NULL, path, sizeof path);
    if (rc == 0 && ps_settings_process()->quality_sidecar)
        write_quality(path);
    if (rc == 0 && writer.after != NULL)
        writer.after(path);
    atomic_store(&writer.done, covers);
    pthread_mutex_unlock(&writer.lock);
    if (rc == -ENOMEM)
        ps_say("out of memory while writing the profile");
    else if (rc != 0 && say_errors)
        ps_say("cannot write the profile for %s: %s", ps_settings_process()->output, strerror(-rc));
}

void ps_writer_after_write(void (*fn)(const char *path))
{
    writer.after = fn;
}

int ps_writer_write_final(void)
{
    int expect = PS_WRITE_OPEN;
    if (!atomic_compare_exchange_strong(&writer.state, &expect, PS_WRITE_FINAL_WRITING))
        return 0;
    ps_writer_write_now(1);
    atomic_store(&writer.state, PS_WRITE_FINAL_DONE);
    return 1;
}

int ps_writer_serve(void)
{
    if (atomic_load(&writer.final_asked)) {
        ps_writer_write_final();
        return 1;
    }
    if (atomic_load(&writer.state) == PS_WRITE_OPEN)
        ps_writer_write_now(0);
    return 0;
}

enum ps_write_state ps_writer_state(void)
{
    return (enum ps_write_state)atomic_load(&writer.state);
}

int ps_writer_covered(unsigned ticket)
{
    return atomic_load(&writer.state) == PS_WRITE_FINAL_DONE ||
           (int)(atomic_load(&writer.done) - ticket) >= 0;
}

void ps_writer_child_after_fork(void)
{
    /* Its files have names of their own: their failures are new. */
    atomic_store(&writer.quality_failing.failing, 0);
    pthread_mutex_init(&writer.lock, NULL);
    atomic_store(&writer.state, PS_WRITE_OPEN);
    atomic_store(&writer.final_asked, 0);
}
