/*
 * control.c - armed mode's command handling (control.h), on the sampler
 * thread only.
 *
 * Sessions.  The process has one profile (profile.h).  A session borrows
 * it: record, top and start empty it, switch the sampler's ticks on at the
 * asked rate, and give it back empty when they end; so only one runs at a
 * time and the others are told "busy" (so is everything while the process
 * profiles to PYSAMPLE_OUTPUT or through pysample_start(), whose profile
 * is not ours to empty).  dump needs no session: one tick of every thread,
 * on this thread, into the empty profile, rendered and emptied again.
 *
 * Never blocking the sampler.  Every descriptor is non-blocking; a request
 * must arrive whole within PS_CTL_READ_NS of the connection, a reply must
 * make progress every PS_CTL_WRITE_NS, else the connection is dropped (and
 * its session with it).  A client that goes away mid-session ends it.
 *
 * Who may connect: the kernel's word on the peer's uid (ctlsock.h), which
 * must be our effective uid.  Others are refused and the refusal is said
 * on stderr in one line (at most one such line a second; the lines held
 * back are counted in the next).
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/control.h"
#include "control/ctlproto.h"
#include "platform/ctlsock.h"
#include "util/message.h"
#include "platform/platform.h"
#include "profile/profile.h"
#include "sampler/quality.h"
#include "sampler/sampler.h"

#define PS_CTL_CONNS 8
#define PS_CTL_READ_NS 5000000000ull
#define PS_CTL_WRITE_NS 30000000000ull
#define PS_CTL_REFUSAL_LOG_NS 1000000000ull

enum session { SES_NONE = 0, SES_RECORD, SES_TOP, SES_STARTED };

struct conn {
    int fd;                  /* -1: a free slot */
    long uid, pid;
    char in[PS_CTL_LINE_MAX];
    size_t inlen;
    int got_request;
    int close_after;         /* close once out is sent */
    uint64_t deadline;       /* request by then; or, sending, progress by then */
    struct ps_buf out;
};

static struct {
    int enabled;
    struct ps_config cfg;
    unsigned hexversion;
    int free_threaded;
    int wake[2];
    int lfd;
    int listen_failed;
    char shown[160], file[160];
    pid_t pid;
    struct conn conns[PS_CTL_CONNS];
    /* the session, if any */
    enum session ses;
    int ses_conn;            /* its connection (-1: start/stop, none held) */
    int ses_rate;
    uint64_t ses_start, ses_end, ses_next, ses_interval;
    struct ps_stats ses_base;
    uint64_t refusal_at;
    unsigned refusals_held;
} ctl = { .wake = { -1, -1 }, .lfd = -1 };

static const char *session_name(enum session s)
{
    return s == SES_RECORD ? "record" : s == SES_TOP ? "top" : s == SES_STARTED ? "start" : "none";
}

int ps_control_setup(const struct ps_config *cfg, unsigned hexversion, int free_threaded)
{
    if (ctl.enabled)
        return 0;
    ctl.cfg = *cfg;
    ctl.hexversion = hexversion;
    ctl.free_threaded = free_threaded;
    for (int i = 0; i < PS_CTL_CONNS; i++)
        ctl.conns[i].fd = -1;
    int rc = ps_ctlsock_pipe(ctl.wake);
    if (rc != 0) {
        ps_say("cannot arm: %s; PYSAMPLE_ARM is off", strerror(-rc));
        return rc;
    }
    ctl.pid = getpid();
    ctl.enabled = 1;
    return 0;
}

int ps_control_enabled(void)
{
    return ctl.enabled;
}

void ps_control_wake(void)
{
    if (ctl.wake[1] >= 0) {
        char b = 1;
        ssize_t n = write(ctl.wake[1], &b, 1);  /* full pipe: already woken */
        (void)n;
    }
}

/* ---- the socket ------------------------------------------------------------ */

/*
 * Removes the sockets of our uid in dir that nobody listens on any more:
 * processes that were killed or _exit()ed before they could.  "Nobody
 * listens" is asked of the kernel by connecting, not guessed from the pid,
 * which another pid namespace sharing the directory may be using.
 */
static void sweep_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    unsigned uid = (unsigned)geteuid();
    struct dirent *e;
    int checked = 0;
    while ((e = readdir(d)) != NULL && checked < 256) {
        unsigned u;
        long pid;
        char tail[8];
        if (sscanf(e->d_name, "pysample.%u.%ld.%7s", &u, &pid, tail) != 3 || u != uid ||
            strcmp(tail, "sock") != 0 || pid == (long)getpid())
            continue;
        checked++;
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        int n = snprintf(a.sun_path, sizeof a.sun_path, "%s/%s", dir, e->d_name);
        if (n < 0 || (size_t)n >= sizeof a.sun_path)
            continue;
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0)
            break;
        if (connect(fd, (struct sockaddr *)&a, (socklen_t)sizeof a) != 0 && errno == ECONNREFUSED)
            unlink(a.sun_path);
        close(fd);
    }
    closedir(d);
}

static void open_listen(void)
{
    char why[256];
    const char *dir = ctl.cfg.control_dir[0] ? ctl.cfg.control_dir : ps_ctlsock_default_dir();
    if (dir[0] != '\0')
        sweep_stale(dir);
    int fd = ps_ctlsock_listen(dir, ctl.shown, sizeof ctl.shown, ctl.file, sizeof ctl.file, why,
                               sizeof why);
    if (fd < 0) {
        ctl.listen_failed = 1;
        ps_say("%s; `pysample ... --pid %ld` cannot reach this process", why, (long)getpid());
        return;
    }
    ctl.lfd = fd;
}

void ps_control_process_exit(void)
{
    if (ctl.enabled && getpid() == ctl.pid && ctl.file[0] != '\0') {
        unlink(ctl.file);
        ctl.file[0] = '\0';
    }
}

/* ---- connections ----------------------------------------------------------- */

static void end_session(int send_to);

static void close_conn(int i)
{
    struct conn *c = &ctl.conns[i];
    if (c->fd < 0)
        return;
    if (ctl.ses != SES_NONE && ctl.ses_conn == i)
        end_session(-1);
    close(c->fd);
    c->fd = -1;
    ps_buf_free(&c->out);
}

/* Sends what can be sent now. */
static void flush(int i)
{
    struct conn *c = &ctl.conns[i];
    while (c->out.len > 0) {
        long n = ps_ctlsock_send(c->fd, c->out.data, c->out.len);
        if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR)
            break;
        if (n <= 0) {
            close_conn(i);
            return;
        }
        ps_buf_consume(&c->out, (size_t)n);
        c->deadline = ps_now_ns() + PS_CTL_WRITE_NS;
    }
    if (c->out.len == 0 && c->close_after)
        close_conn(i);
}

static void frame(int i, const char *kind, const char *data, size_t len)
{
    struct conn *c = &ctl.conns[i];
    if (c->fd < 0)
        return;
    if (c->out.len == 0)
        c->deadline = ps_now_ns() + PS_CTL_WRITE_NS;
    if (ps_ctlproto_frame(&c->out, kind, data, len) != 0)
        close_conn(i);  /* out of memory: the client sees the connection end */
}

/* The last frame of a request: ok or err; the connection closes once it
 * is sent. */
static void finish_conn(int i, const char *kind, const char *text)
{
    if (ctl.conns[i].fd < 0)
        return;
    frame(i, kind, text, strlen(text));
    ctl.conns[i].close_after = 1;
    flush(i);
}

static void refuse(int fd, long uid, long pid)
{
    close(fd);
    uint64_t now = ps_now_ns();
    if (ctl.refusal_at != 0 && now - ctl.refusal_at < PS_CTL_REFUSAL_LOG_NS) {
        ctl.refusals_held++;
        return;
    }
    char more[64] = "";
    if (ctl.refusals_held)
        snprintf(more, sizeof more, " (and %u more since the last such line)", ctl.refusals_held);
    ps_say("refused a control connection from uid %ld (pid %ld): only uid %u may profile this "
           "process%s", uid, pid, (unsigned)geteuid(), more);
    ctl.refusal_at = now;
    ctl.refusals_held = 0;
}

static void accept_all(void)
{
    for (int n = 0; n < 16; n++) {
        long uid = -1, pid = -1;
        int fd = ps_ctlsock_accept(ctl.lfd, &uid, &pid);
        if (fd < 0)
            return;
        if (uid != (long)geteuid()) {
            refuse(fd, uid, pid);
            continue;
        }
        int i = 0;
        while (i < PS_CTL_CONNS && ctl.conns[i].fd >= 0)
            i++;
        if (i == PS_CTL_CONNS) {
            static const char busy[] = "err 42\nbusy: too many control connections at once";
            long w = ps_ctlsock_send(fd, busy, sizeof busy - 1);
            (void)w;
            close(fd);
            continue;
        }
        struct conn *c = &ctl.conns[i];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->uid = uid;
        c->pid = pid;
        c->deadline = ps_now_ns() + PS_CTL_READ_NS;
    }
}

/* ---- sessions -------------------------------------------------------------- */

static void quality_now(struct ps_quality *q, const char *how, const struct ps_stats *base,
                        uint64_t since)
{
    struct ps_stats now;
    ps_sampler_stats(&now);
    memset(q, 0, sizeof *q);
    q->how = how;
    q->mode = ctl.cfg.mode == PS_MODE_CPU ? "cpu" : "wall";
    q->hexversion = ctl.hexversion;
    q->free_threaded = ctl.free_threaded;
    q->requested_hz = ctl.ses_rate;
    ps_quality_between(q, base, &now, ps_now_ns() - since);
}

/* meta and data frames of the profile as it is now. */
static int send_profile(int i, const struct ps_quality *q)
{
    char meta[1024];
    size_t mlen = ps_quality_format(q, meta, sizeof meta);
    char *data;
    size_t len;
    if (ps_profile_render(&data, &len) != 0) {
        finish_conn(i, "err", "out of memory while rendering the profile");
        return -1;
    }
    frame(i, "meta", meta, mlen);
    frame(i, "data", data, len);
    free(data);
    return 0;
}

/* Why no session can start now, or NULL. */
static const char *cannot_sample(void)
{
    static char why[160];
    if (!ps_sampler_ready())
        return "the interpreter is not initialised yet; try again";
    if (ps_sampler_finished())
        return "the interpreter is shutting down";
    if (ctl.ses != SES_NONE) {
        snprintf(why, sizeof why, "busy: a `pysample %s` of this process is under way",
                 session_name(ctl.ses));
        return why;
    }
    if (ps_sampler_sampling())
        return "busy: this process is already profiled (PYSAMPLE_OUTPUT or pysample_start())";
    return NULL;
}

static const char *begin_session(enum session s, int conn, int rate)
{
    const char *why = cannot_sample();
    if (why != NULL)
        return why;
    if (ps_profile_reset() != 0)
        return "out of memory";
    ctl.ses = s;
    ctl.ses_conn = conn;
    ctl.ses_rate = rate > 0 ? rate : ctl.cfg.rate_hz;
    ctl.ses_start = ps_now_ns();
    ps_sampler_stats(&ctl.ses_base);
    ps_sampler_set_rate(ctl.ses_rate);
    ps_sampler_set_active(1);
    return NULL;
}

/* Ends the session; its profile goes to connection send_to (-1: nobody). */
static void end_session(int send_to)
{
    if (ctl.ses == SES_NONE)
        return;
    ps_sampler_set_active(0);
    if (send_to >= 0 && ctl.conns[send_to].fd >= 0) {
        struct ps_quality q;
        char how[32];
        snprintf(how, sizeof how, "armed %s", session_name(ctl.ses));
        quality_now(&q, how, &ctl.ses_base, ctl.ses_start);
        if (send_profile(send_to, &q) == 0)
            finish_conn(send_to, "ok", "");
    }
    ctl.ses = SES_NONE;
    ctl.ses_conn = -1;
    ps_sampler_set_rate(ctl.cfg.rate_hz);
    ps_profile_reset();
}

static void dump(int i)
{
    const char *why = cannot_sample();
    if (why != NULL) {
        finish_conn(i, "err", why);
        return;
    }
    if (ps_profile_reset() != 0) {
        finish_conn(i, "err", "out of memory");
        return;
    }
    struct ps_stats base;
    ps_sampler_stats(&base);
    uint64_t t0 = ps_now_ns();
    ps_sampler_tick_all();
    struct ps_quality q;
    ctl.ses_rate = 0;
    quality_now(&q, "armed dump", &base, t0);
    q.mode = "wall";
    if (send_profile(i, &q) == 0)
        finish_conn(i, "ok", "");
    ps_profile_reset();
}

static void status(int i)
{
    struct ps_quality q;
    struct ps_stats zero;
    memset(&zero, 0, sizeof zero);
    char how[64];
    snprintf(how, sizeof how, "armed %s", session_name(ctl.ses));
    if (ctl.ses != SES_NONE)
        quality_now(&q, how, &ctl.ses_base, ctl.ses_start);
    else
        quality_now(&q, how, &zero, ps_now_ns());
    char meta[1024];
    size_t mlen = ps_quality_format(&q, meta, sizeof meta);
    frame(i, "meta", meta, mlen);
    finish_conn(i, "ok", "");
}

static void handle_request(int i, const char *line, size_t len)
{
    struct ps_ctl_request r;
    char why[200];
    if (ps_ctlproto_parse(line, len, &r, why, sizeof why) != 0) {
        finish_conn(i, "err", why);
        return;
    }
    const char *no;
    switch (r.verb) {
    case PS_CTL_STATUS:
        status(i);
        return;
    case PS_CTL_DUMP:
        dump(i);
        return;
    case PS_CTL_RECORD:
    case PS_CTL_TOP:
        if ((no = begin_session(r.verb == PS_CTL_RECORD ? SES_RECORD : SES_TOP, i, r.rate_hz)) != NULL) {
            finish_conn(i, "err", no);
            return;
        }
        if (r.verb == PS_CTL_RECORD) {
            ctl.ses_end = ctl.ses_start + (uint64_t)r.duration_s * 1000000000ull;
        } else {
            ctl.ses_interval = (uint64_t)r.interval_ms * 1000000ull;
            ctl.ses_next = ctl.ses_start + ctl.ses_interval;
        }
        return;
    case PS_CTL_START:
        if ((no = begin_session(SES_STARTED, -1, r.rate_hz)) != NULL) {
            finish_conn(i, "err", no);
            return;
        }
        snprintf(why, sizeof why, "sampling at %d Hz until `pysample stop --pid %ld`", ctl.ses_rate,
                 (long)getpid());
        finish_conn(i, "ok", why);
        return;
    case PS_CTL_STOP:
        if (ctl.ses != SES_STARTED) {
            snprintf(why, sizeof why, "not started: run `pysample start --pid %ld` first%s%s%s",
                     (long)getpid(), ctl.ses != SES_NONE ? " (a `pysample " : "",
                     ctl.ses != SES_NONE ? session_name(ctl.ses) : "",
                     ctl.ses != SES_NONE ? "` is under way)" : "");
            finish_conn(i, "err", why);
            return;
        }
        end_session(i);
        return;
    }
}

/* The connection has something to read. */
static void readable(int i)
{
    struct conn *c = &ctl.conns[i];
    if (c->got_request) {
        /* Nothing more is expected: end of file (or an error) means the
         * client is gone, and whatever else it sends is ignored. */
        char junk[256];
        ssize_t n = read(c->fd, junk, sizeof junk);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            close_conn(i);
        return;
    }
    ssize_t n = read(c->fd, c->in + c->inlen, sizeof c->in - c->inlen);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        close_conn(i);
        return;
    }
    if (n < 0)
        return;
    c->inlen += (size_t)n;
    char *nl = memchr(c->in, '\n', c->inlen);
    if (nl == NULL) {
        if (c->inlen == sizeof c->in) {
            c->got_request = 1;
            finish_conn(i, "err", "request longer than 511 bytes");
        }
        return;
    }
    c->got_request = 1;
    handle_request(i, c->in, (size_t)(nl - c->in));
}

/* The session's moments: the end of a record, the next frame of top. */
static void session_timers(uint64_t now)
{
    if (ctl.ses == SES_RECORD && now >= ctl.ses_end) {
        end_session(ctl.ses_conn);
    } else if (ctl.ses == SES_TOP && now >= ctl.ses_next) {
        int i = ctl.ses_conn;
        /* A client still reading the previous frame skips this one. */
        if (ctl.conns[i].out.len == 0) {
            struct ps_quality q;
            quality_now(&q, "armed top", &ctl.ses_base, ctl.ses_start);
            if (send_profile(i, &q) == 0)
                flush(i);
        }
        while (ctl.ses == SES_TOP && ctl.ses_next <= now)
            ctl.ses_next += ctl.ses_interval;
    }
}

void ps_control_wait(uint64_t deadline)
{
    if (!ctl.enabled)
        return;
    if (ctl.lfd < 0 && !ctl.listen_failed)
        open_listen();
    uint64_t now = ps_now_ns();
    session_timers(now);

    struct pollfd fds[2 + PS_CTL_CONNS];
    int who[2 + PS_CTL_CONNS];
    unsigned n = 0;
    fds[n].fd = ctl.wake[0];
    fds[n].events = POLLIN;
    who[n++] = -1;
    if (ctl.lfd >= 0) {
        fds[n].fd = ctl.lfd;
        fds[n].events = POLLIN;
        who[n++] = -2;
    }
    uint64_t until = deadline;
    if (ctl.ses == SES_RECORD && ctl.ses_end < until)
        until = ctl.ses_end;
    if (ctl.ses == SES_TOP && ctl.ses_next < until)
        until = ctl.ses_next;
    for (int i = 0; i < PS_CTL_CONNS; i++) {
        struct conn *c = &ctl.conns[i];
        if (c->fd < 0)
            continue;
        if (c->deadline < until && (!c->got_request || c->out.len > 0))
            until = c->deadline;
        fds[n].fd = c->fd;
        fds[n].events = (short)(POLLIN | (c->out.len > 0 ? POLLOUT : 0));
        who[n++] = i;
    }
    int ready = ps_ctlsock_poll(fds, n, until);
    for (unsigned k = 0; ready > 0 && k < n; k++) {
        short ev = fds[k].revents;
        if (ev == 0)
            continue;
        if (who[k] == -1) {
            char buf[64];
            while (read(ctl.wake[0], buf, sizeof buf) > 0)
                ;
        } else if (who[k] == -2) {
            accept_all();
        } else {
            int i = who[k];
            if (ctl.conns[i].fd != fds[k].fd)
                continue;
            if (ev & (POLLIN | POLLHUP | POLLERR))
                readable(i);
            if (ctl.conns[i].fd == fds[k].fd && (ev & POLLOUT))
                flush(i);
        }
    }
    now = ps_now_ns();
    session_timers(now);
    for (int i = 0; i < PS_CTL_CONNS; i++) {
        struct conn *c = &ctl.conns[i];
        if (c->fd >= 0 && now > c->deadline && (!c->got_request || c->out.len > 0))
            close_conn(i);  /* silent, or not reading what it asked for */
    }
}

int ps_control_child_after_fork(void)
{
    if (!ctl.enabled)
        return 0;
    int had = ctl.ses != SES_NONE;
    if (ctl.lfd >= 0)
        close(ctl.lfd);
    ctl.lfd = -1;
    ctl.listen_failed = 0;
    ctl.file[0] = '\0';    /* the parent's, not ours to remove */
    for (int i = 0; i < PS_CTL_CONNS; i++) {
        struct conn *c = &ctl.conns[i];
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        ps_buf_free(&c->out);
    }
    ctl.ses = SES_NONE;
    ctl.ses_conn = -1;
    close(ctl.wake[0]);
    close(ctl.wake[1]);
    ctl.wake[0] = ctl.wake[1] = -1;
    if (ps_ctlsock_pipe(ctl.wake) != 0)
        ctl.enabled = 0;  /* the child is simply not armed */
    ctl.pid = getpid();
    ctl.refusal_at = 0;
    ctl.refusals_held = 0;
    return had;
}
