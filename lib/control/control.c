/*
 * control.c - armed mode's server (control.h): the control socket as a
 * wait source of the sampler thread, on that thread only (but for the
 * wake-up).
 *
 * Who may connect.  The kernel's word on the peer (ctlsock.h), never
 * anything it sends: its uid must be our effective uid; a peer the kernel
 * cannot map into our user namespace shows as the overflow uid, which a
 * process of a rootless container may itself run as, so that uid is
 * accepted only from a peer of our own user namespace.  And nobody is
 * answered once the kernel would let nobody read us (not dumpable, after
 * a change of credentials) or once our uid is not the one we were armed
 * with.  A refused peer gets one err frame saying what to do, and the
 * refusal is said on stderr in one line.  Any local user may connect, once
 * a second for ever: so the first refusal is said at once, the ones after
 * it only counted, in a line at most every PS_CTL_REFUSAL_LOG_NS (10
 * minutes) and PS_CTL_REFUSAL_LINES such lines in all; what is still held
 * at exit is said then, in one line.
 *
 * Never blocking the sampler, whoever connects.  Every descriptor is
 * non-blocking; a connection slow to send its request or to take its
 * reply is dropped (ctlconn.c: the connections).  At most PS_CTL_ACCEPTS
 * connections are accepted per PS_CTL_WINDOW_NS: a flood from anyone costs bounded CPU, and the
 * owner's client, queued among the flood's, is reached within a few
 * windows.  accept() failing for want of descriptors (EMFILE: the program
 * is at its limit) leaves the socket readable: the listening socket is
 * then not polled for a while (doubling up to PS_CTL_BACKOFF_MAX_NS)
 * instead of spinning.
 *
 * Never touching the program's descriptors (ownfd.h): each of ours is
 * checked before every use; a lost one is forgotten and made again.  The
 * wait itself is a use: poll() looks descriptors up by number on every
 * pass but waits only on the files it found on the first, so once the
 * program has closed ours and taken their numbers nothing would ever wake
 * it.  Hence no wait is longer than PS_CTL_CHECK_NS: an idle armed
 * process wakes every 2 s, for a few fstat()s.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/control.h"
#include "control/ctlconn.h"
#include "util/ownfd.h"
#include "control/ctlsweep.h"
#include "control/ctlwake.h"
#include "platform/ctlsock.h"
#include "platform/platform.h"
#include "util/message.h"

#define PS_CTL_REFUSAL_LOG_NS 600000000000ull
#define PS_CTL_REFUSAL_LINES 6
#define PS_CTL_WINDOW_NS 100000000ull
#define PS_CTL_ACCEPTS 64
#define PS_CTL_BACKOFF_NS 50000000ull
#define PS_CTL_BACKOFF_MAX_NS 2000000000ull
#define PS_CTL_SWEEP_NS 50000000ull
#define PS_CTL_CHECK_NS 2000000000ull

static struct {
    int enabled;
    char dir[256];
    unsigned armed_uid;
    pid_t pid;
    /* The listening socket, and when to try again to make it. */
    struct ps_fd lfd;
    int listen_said, listen_given_up, wake_said;
    uint64_t listen_at, listen_backoff;
    char shown[256], file[256];
    uint64_t file_ino;
    /* Accepting: the window's count, a pause, the EMFILE back-off. */
    uint64_t window_start, paused_until, emfile_backoff;
    unsigned window_accepts;
    int session;
    /* Refusals said (lines, the last one's time) and held back since,
     * with the last one held (said at exit, maybe on another thread). */
    uint64_t refusal_at;
    unsigned refusal_lines;
    _Atomic unsigned refusals_held;
    _Atomic long held_uid, held_pid;
} ctl = { .lfd = PS_FD_NONE };

void ps_control_wake(void)
{
    ps_ctlwake_signal();
}

int ps_control_setup(const struct ps_config *cfg)
{
    if (ctl.enabled)
        return 0;
    snprintf(ctl.dir, sizeof ctl.dir, "%s",
             cfg->control_dir[0] ? cfg->control_dir : ps_ctlsock_default_dir());
    ps_ctlconn_setup();
    int rc = ps_ctlwake_make();
    if (rc != 0) {
        ps_say("cannot arm: %s; PYSAMPLE_ARM is off", strerror(-rc));
        return rc;
    }
    ctl.pid = getpid();
    ctl.armed_uid = (unsigned)geteuid();
    ctl.enabled = 1;
    return 0;
}

int ps_control_enabled(void)
{
    return ctl.enabled;
}

void ps_control_note_session(int on)
{
    ctl.session = on;
}

/* ---- the socket -------------------------------------------------------------- */

static void open_listen(uint64_t now)
{
    char base[96], why[400];
    snprintf(base, sizeof base, PS_CTLSOCK_NAME, (unsigned)geteuid(), ps_ctlsock_pidns(),
             (long)getpid());
    if (ctl.dir[0] != '\0') {
        char own[128];
        snprintf(own, sizeof own, "%s" PS_CTLSOCK_SUFFIX, base);
        ps_ctlsweep(ctl.dir, (unsigned)geteuid(), own, now + PS_CTL_SWEEP_NS);
    }
    const struct ps_ctlsock_names out = {ctl.shown, sizeof ctl.shown, ctl.file, sizeof ctl.file};
    int fd = ps_ctlsock_listen(ctl.dir, base, &out, why, sizeof why);
    if (fd >= 0 && ps_fd_own(&ctl.lfd, fd) == 0) {
        struct stat st;
        ctl.file_ino = ctl.file[0] && lstat(ctl.file, &st) == 0 ? (uint64_t)st.st_ino : 0;
        ctl.listen_backoff = 0;
        return;
    }
    if (fd >= 0) {
        snprintf(why, sizeof why, "cannot keep the control socket %s: out of descriptors",
                 ctl.shown);
        fd = -EMFILE;
    }
    int transient = fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM || fd == -ENOBUFS;
    if (!ctl.listen_said)
        ps_say("%s; `pysample ... --pid %ld` cannot reach this process%s", why, (long)getpid(),
               transient ? " for now" : "");
    ctl.listen_said = 1;
    if (!transient) {
        ctl.listen_given_up = 1;
        return;
    }
    ctl.listen_backoff = ctl.listen_backoff ? ctl.listen_backoff * 2 : PS_CTL_BACKOFF_NS;
    if (ctl.listen_backoff > PS_CTL_BACKOFF_MAX_NS)
        ctl.listen_backoff = PS_CTL_BACKOFF_MAX_NS;
    ctl.listen_at = now + ctl.listen_backoff;
}

static void say_held_refusals(void);

/* What refusals were held back is said; our socket file goes, only if it
 * is still the one we bound. */
void ps_control_process_exit(void)
{
    struct stat st;
    if (ctl.enabled && getpid() == ctl.pid)
        say_held_refusals();
    if (ctl.enabled && getpid() == ctl.pid && ctl.file[0] != '\0' && lstat(ctl.file, &st) == 0 &&
        S_ISSOCK(st.st_mode) && (uint64_t)st.st_ino == ctl.file_ino)
        unlink(ctl.file);
    ctl.file[0] = '\0';
}

/* ---- who may connect --------------------------------------------------------- */

/* NULL if the peer may talk to us; else why not, for both ends. */
static const char *refusal(long uid, long pid, char *why, size_t n)
{
    unsigned me = (unsigned)geteuid();
    if (uid != (long)me) {
        snprintf(why, n, "only uid %u may profile this process: it accepts only its own user "
                 "(run pysample as uid %u)", me, me);
    } else if (uid == ps_ctlsock_overflow_uid() && !ps_ctlsock_same_userns(pid)) {
        snprintf(why, n, "uid %ld is how the kernel shows a user of another user namespace; this "
                 "process accepts only its own user in its own user namespace (run pysample "
                 "inside it, e.g. in the container)", uid);
    } else if (me != ctl.armed_uid) {
        snprintf(why, n, "this process changed its user since it was armed (uid %u, now %u): it "
                 "answers nobody", ctl.armed_uid, me);
    } else if (!ps_ctlsock_dumpable()) {
        snprintf(why, n, "this process is not dumpable (it changed its credentials): the kernel "
                 "lets no other process read it, and neither does pysample");
    } else {
        return NULL;
    }
    return why;
}

static void refuse(struct ps_fd *fd, long uid, long pid, const char *why)
{
    char msg[512];
    struct ps_buf b = { 0 };
    snprintf(msg, sizeof msg, "refused: %s", why);
    if (ps_ctlproto_frame(&b, "err", msg, strlen(msg)) == 0 && ps_fd_ours(fd)) {
        long w = ps_ctlsock_send(fd->fd, b.data, b.len);  /* best effort: never waited for */
        (void)w;
    }
    ps_buf_free(&b);
    ps_fd_release(fd);
    uint64_t now = ps_now_ns();
    if (ctl.refusal_lines >= PS_CTL_REFUSAL_LINES ||
        (ctl.refusal_lines > 0 && now - ctl.refusal_at < PS_CTL_REFUSAL_LOG_NS)) {
        atomic_store(&ctl.held_uid, uid);
        atomic_store(&ctl.held_pid, pid);
        atomic_fetch_add(&ctl.refusals_held, 1);
        return;
    }
    char more[160] = "";
    unsigned held = atomic_exchange(&ctl.refusals_held, 0);
    if (held)
        snprintf(more, sizeof more, " (and %u more since the last such line)", held);
    ctl.refusal_lines++;
    ctl.refusal_at = now;
    const char *next = ctl.refusal_lines == 1
                           ? "; more refusals are counted, in a line every 10 minutes at most"
                       : ctl.refusal_lines == PS_CTL_REFUSAL_LINES
                           ? "; further refusals are said at exit"
                           : "";
    ps_say("refused a control connection from uid %ld (pid %ld): %s%s%s", uid, pid, why, more,
           next);
}

/* The refusals held back since the last line, in one line (at exit). */
static void say_held_refusals(void)
{
    unsigned held = atomic_exchange(&ctl.refusals_held, 0);
    if (held)
        ps_say("refused %u more control connection%s since the last such line (the last from uid "
               "%ld, pid %ld)", held, held == 1 ? "" : "s", atomic_load(&ctl.held_uid),
               atomic_load(&ctl.held_pid));
}

/* Accepts what is pending, within the window's allowance. */
static void accept_some(uint64_t now)
{
    if (now - ctl.window_start >= PS_CTL_WINDOW_NS) {
        ctl.window_start = now;
        ctl.window_accepts = 0;
    }
    while (ctl.window_accepts < PS_CTL_ACCEPTS && ps_fd_ours(&ctl.lfd)) {
        long uid = -1, pid = -1;
        int fd = ps_ctlsock_accept(ctl.lfd.fd, &uid, &pid);
        if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
            ctl.emfile_backoff = ctl.emfile_backoff ? ctl.emfile_backoff * 2 : PS_CTL_BACKOFF_NS;
            if (ctl.emfile_backoff > PS_CTL_BACKOFF_MAX_NS)
                ctl.emfile_backoff = PS_CTL_BACKOFF_MAX_NS;
            ctl.paused_until = now + ctl.emfile_backoff;
            return;
        }
        if (fd == -EAGAIN || fd == -EWOULDBLOCK)
            break;
        ctl.window_accepts++;
        if (fd < 0)
            continue;  /* ECONNABORTED and the like: that one only */
        ctl.emfile_backoff = 0;
        struct ps_fd own;
        if (ps_fd_own(&own, fd) != 0)
            continue;
        char why[400];
        const char *no = refusal(uid, pid, why, sizeof why);
        if (no != NULL)
            refuse(&own, uid, pid, no);
        else
            ps_ctlconn_admit(&own);
    }
    if (ctl.window_accepts >= PS_CTL_ACCEPTS)
        ctl.paused_until = ctl.window_start + PS_CTL_WINDOW_NS;
}

/* ---- the wait ---------------------------------------------------------------- */

/* Forgets whatever of ours the program took; 1 if the wake-up pipe had to
 * be made again (the caller must look at its flags before waiting: a
 * wake-up may have gone to the lost one). */
static int check_fds(uint64_t now)
{
    int rewoke = 0;
    if (!ps_ctlwake_ours()) {
        ps_ctlwake_drop();
        /* Not made (no descriptors left): the wait still ends every
         * PS_CTL_CHECK_NS, when it is tried again. */
        rewoke = ps_ctlwake_make() == 0;
        if (!rewoke && !ctl.wake_said)
            ps_say("armed mode lost its wake-up pipe and cannot make another for now: it answers, "
                   "but wakes up to 2 s late");
        ctl.wake_said |= !rewoke;
    }
    if (ctl.lfd.fd >= 0 && (!ps_fd_ours(&ctl.lfd) || !ps_ctlsock_bound_to(ctl.lfd.fd, ctl.shown))) {
        ps_fd_release(&ctl.lfd);
        ctl.listen_at = now;
    }
    ps_ctlconn_check();
    return rewoke;
}

/* The wake-up pipe, and the listening socket unless accepting is paused
 * (then the wait ends with the pause) or it is yet to be made again. */
static void watch_socket(struct ps_ctl_waitset *w, uint64_t now)
{
    if (ps_ctlwake_fd() >= 0)
        ps_ctl_watch(w, ps_ctlwake_fd(), POLLIN, -1);
    if (ctl.lfd.fd >= 0 && now >= ctl.paused_until)
        ps_ctl_watch(w, ctl.lfd.fd, POLLIN, -2);
    else if (ctl.lfd.fd >= 0)
        w->until = ps_ctl_earliest(w->until, ctl.paused_until);
    else if (!ctl.listen_given_up)
        w->until = ps_ctl_earliest(w->until, ctl.listen_at);
}

static void serve(const struct ps_ctl_waitset *w, int ready)
{
    for (unsigned k = 0; ready > 0 && k < w->n; k++) {
        short ev = w->fds[k].revents;
        if (ev == 0)
            continue;
        if (w->who[k] == -1)
            ps_ctlwake_drain();
        else if (w->who[k] == -2)
            accept_some(ps_now_ns());
        else
            ps_ctlconn_events(w->who[k], w->fds[k].fd, ev);
    }
}

void ps_control_wait(uint64_t deadline)
{
    if (!ctl.enabled)
        return;
    uint64_t now = ps_now_ns();
    if (check_fds(now))
        return;
    if (ctl.lfd.fd < 0 && !ctl.listen_given_up && now >= ctl.listen_at)
        open_listen(now);
    struct ps_ctl_waitset w = { .n = 0, .until = ps_ctl_earliest(deadline, now + PS_CTL_CHECK_NS) };
    watch_socket(&w, now);
    ps_ctlconn_watch(&w);
    serve(&w, ps_ctlsock_poll(w.fds, w.n, w.until));
    ps_ctlconn_expire(ps_now_ns());
}

int ps_control_child_after_fork(void)
{
    if (!ctl.enabled)
        return 0;
    int had = ctl.session;
    ctl.session = 0;
    ps_fd_release(&ctl.lfd);
    ctl.listen_said = ctl.listen_given_up = 0;
    ctl.listen_at = ctl.listen_backoff = ctl.paused_until = ctl.emfile_backoff = 0;
    ctl.file[0] = '\0';    /* the parent's, not ours to remove */
    ps_ctlconn_child_after_fork();
    ps_ctlwake_drop();
    if (ps_ctlwake_make() != 0)
        ctl.enabled = 0;  /* the child is simply not armed */
    ctl.pid = getpid();
    ctl.armed_uid = (unsigned)geteuid();
    ctl.refusal_at = 0;
    ctl.refusal_lines = 0;
    atomic_store(&ctl.refusals_held, 0);
    return had;
}
