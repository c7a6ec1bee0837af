/*
 * forks.c - every step of fork() (forks.h), in one table per moment.
 *
 * Each subsystem resets its own state in its own *_after_fork function;
 * none calls another's.  The order is decided here, once, and the comments
 * above the tables say why it is what it is.
 */
#include <stddef.h>

#include "control/control.h"
#include "forks.h"
#include "memory/memread.h"
#include "platform/platform.h"
#include "profile/output.h"
#include "profile/profile.h"
#include "sampler/forkpause.h"
#include "sampler/sampler.h"
#include "sampler/state.h"
#include "sampler/stats.h"
#include "sampler/writer.h"
#include "util/owner.h"

void ps_fork_prepare(void)
{
    /* A pause left open ends, so that both sides start from a running
     * sampler; the profile's lock last, held across the fork so that no
     * child inherits it held by a thread it does not have. */
    ps_forkpause_prepare();
    ps_sampler_prepare_fork();
    ps_profile_prepare_fork();
}

void ps_fork_parent(int counts_threads)
{
    ps_profile_parent_after_fork();
    if (counts_threads)
        ps_forkpause_parent();
}

/* What a child step leaves for a later one. */
struct fork_child {
    void (*lifecycle)(void);  /* the lifecycle's own step (forks.h) */
    int session_was_on;       /* an armed session was on: the parent's */
    int sampler_was_running;  /* the parent's sampler read the interpreter */
};

static void child_lifecycle(struct fork_child *c) { c->lifecycle(); }
static void child_control(struct fork_child *c)
{
    c->session_was_on = ps_control_child_after_fork();
}
static void child_sampler(struct fork_child *c)
{
    c->sampler_was_running = ps_sampler_child_forked();
}
static void child_state(struct fork_child *c)
{
    ps_sampler_state_child_after_fork(c->session_was_on);
}
static void child_restart(struct fork_child *c)
{
    ps_sampler_child_restart(c->sampler_was_running);
}

/*
 * The child: a new process with its own profile (empty), file, final write
 * and sampler thread; only the forking thread exists.  The order matters:
 * - ownership first: later steps ask whether this process is ours;
 * - then reads (one in flight at fork never ends; the syscall path's pid
 *   and descriptors were the parent's): the lifecycle's step reads the
 *   interpreter;
 * - the file's name, its writes, the fork pause and the lifecycle's lock
 *   before anything can ask for a write; the profile emptied next;
 * - control before the sampler's state: a session on in the parent leaves
 *   the child's sampler idle;
 * - whether the sampler ran is asked before its state is forgotten; its
 *   thread starts again last, once every part it uses is the child's.
 * Not here: linux/threads.c's /proc descriptors and dlwatch.c's scan lock,
 * their own pthread_atfork handlers (registered at first use, their own
 * file's state only).
 */
static const struct {
    void (*plain)(void);
    void (*with)(struct fork_child *c);
} child_steps[] = {
    { ps_owner_claim, NULL },
    { ps_mem_after_fork, NULL },
    { ps_plat_read_after_fork, NULL },
    { ps_output_after_fork, NULL },
    { ps_writer_child_after_fork, NULL },
    { ps_forkpause_child, NULL },
    { NULL, child_lifecycle },
    { ps_profile_child_after_fork, NULL },
    { NULL, child_control },
    { NULL, child_sampler },
    { NULL, child_state },
    { ps_stats_child_after_fork, NULL },
    { ps_sampler_child_loop, NULL },
    { ps_sampler_child_threads, NULL },
    { ps_sampler_child_native, NULL },
    { ps_sampler_child_sessions, NULL },
    { NULL, child_restart },
};

void ps_fork_child(void (*lifecycle)(void))
{
    struct fork_child c = { lifecycle, 0, 0 };
    for (size_t i = 0; i < sizeof child_steps / sizeof child_steps[0]; i++) {
        if (child_steps[i].plain != NULL)
            child_steps[i].plain();
        else
            child_steps[i].with(&c);
    }
}
