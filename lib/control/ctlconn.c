/*
 * ctlconn.c - armed mode's connections (ctlconn.h): on the sampler thread,
 * within control.c's wait.
 *
 * A connection sends one request line; once it is whole it is queued as a
 * command for the sampler (ps_control_next), which answers through
 * ps_control_frame/finish.  Never blocking the sampler: every descriptor
 * is non-blocking, a request must arrive whole within PS_CTL_READ_NS and
 * a reply must make progress every PS_CTL_WRITE_NS, else the connection is
 * dropped.  A handle carries its slot's generation, so that a command of a
 * connection that went away never reaches the one that took its slot.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "control/control.h"
#include "control/ctlconn.h"
#include "platform/ctlsock.h"
#include "platform/platform.h"

#define PS_CTL_QUEUE (4 * PS_CTL_CONNS)
#define PS_CTL_READ_NS 5000000000ull
#define PS_CTL_WRITE_NS 30000000000ull

struct conn {
    struct ps_fd fd;         /* fd -1: a free slot */
    unsigned gen;            /* the handle's upper bits: stale handles miss */
    char in[PS_CTL_LINE_MAX];
    size_t inlen;
    int got_request;
    int delivered;           /* queued as a command, not yet finished */
    int eof;                 /* the client half-closed: nothing more to read */
    int close_after;         /* close once out is sent */
    uint64_t deadline;       /* request by then; or, sending, progress by then */
    struct ps_buf out;
};

static struct {
    struct conn conns[PS_CTL_CONNS];
    struct ps_ctl_cmd queue[PS_CTL_QUEUE];
    unsigned qhead, qlen;
} ctl;

void ps_ctlconn_setup(void)
{
    for (int i = 0; i < PS_CTL_CONNS; i++)
        ctl.conns[i].fd.fd = -1;
}

/* ---- the command queue ------------------------------------------------------- */

static int handle_of(int i)
{
    return (int)(ctl.conns[i].gen << 4) | i;
}

static struct conn *conn_of(int handle)
{
    int i = handle & 0xf;
    if (handle < 0 || i >= PS_CTL_CONNS)
        return NULL;
    struct conn *c = &ctl.conns[i];
    return c->fd.fd >= 0 && handle_of(i) == handle ? c : NULL;
}

static void push(enum ps_ctl_cmd_kind kind, int i, const struct ps_ctl_request *req)
{
    if (ctl.qlen == PS_CTL_QUEUE)
        return;  /* cannot happen: a connection queues at most two */
    struct ps_ctl_cmd *c = &ctl.queue[(ctl.qhead + ctl.qlen++) % PS_CTL_QUEUE];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->conn = handle_of(i);
    if (req != NULL)
        c->req = *req;
}

int ps_control_next(struct ps_ctl_cmd *cmd)
{
    if (ctl.qlen == 0)
        return 0;
    *cmd = ctl.queue[ctl.qhead];
    ctl.qhead = (ctl.qhead + 1) % PS_CTL_QUEUE;
    ctl.qlen--;
    return 1;
}

/* ---- connections ------------------------------------------------------------- */

static void close_conn(int i)
{
    struct conn *c = &ctl.conns[i];
    if (c->fd.fd < 0)
        return;
    if (c->delivered)
        push(PS_CTL_CMD_GONE, i, NULL);
    ps_fd_release(&c->fd);
    ps_buf_free(&c->out);
    c->gen++;
}

/* Sends what can be sent now. */
static void flush(int i)
{
    struct conn *c = &ctl.conns[i];
    while (c->out.len > 0) {
        if (!ps_fd_ours(&c->fd)) {
            close_conn(i);
            return;
        }
        long n = ps_ctlsock_send(c->fd.fd, c->out.data, c->out.len);
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

int ps_control_frame(int conn, const char *kind, const char *data, size_t len)
{
    struct conn *c = conn_of(conn);
    if (c == NULL)
        return -1;
    if (c->out.len == 0)
        c->deadline = ps_now_ns() + PS_CTL_WRITE_NS;
    if (ps_ctlproto_frame(&c->out, kind, data, len) != 0) {
        close_conn(conn & 0xf);  /* out of memory: the client sees the connection end */
        return -1;
    }
    flush(conn & 0xf);
    return conn_of(conn) != NULL ? 0 : -1;
}

void ps_control_finish(int conn, const char *kind, const char *text)
{
    struct conn *c = conn_of(conn);
    if (c == NULL)
        return;
    c->delivered = 0;  /* answered: its end is nobody's news */
    c->close_after = 1;
    ps_control_frame(conn, kind, text, strlen(text));
}

int ps_control_open(int conn)
{
    return conn_of(conn) != NULL;
}

int ps_control_sending(int conn)
{
    struct conn *c = conn_of(conn);
    return c != NULL && c->out.len > 0;
}

void ps_ctlconn_admit(struct ps_fd *fd)
{
    int i = 0;
    while (i < PS_CTL_CONNS && ctl.conns[i].fd.fd >= 0)
        i++;
    if (i == PS_CTL_CONNS) {
        static const char busy[] = "err 42\nbusy: too many control connections at once";
        if (ps_fd_ours(fd)) {
            long w = ps_ctlsock_send(fd->fd, busy, sizeof busy - 1);
            (void)w;
        }
        ps_fd_release(fd);
        return;
    }
    struct conn *c = &ctl.conns[i];
    unsigned gen = c->gen;
    memset(c, 0, sizeof *c);
    c->gen = gen;
    c->fd = *fd;
    c->deadline = ps_now_ns() + PS_CTL_READ_NS;
}

/* Reads what the client sent into c->in (once the request is in, into a
 * bin).  1 if c->in may now hold a whole request, 0 if not, or if the
 * connection was closed. */
static int read_in(int i)
{
    struct conn *c = &ctl.conns[i];
    char junk[256];
    char *into = c->got_request ? junk : c->in + c->inlen;
    size_t room = c->got_request ? sizeof junk : sizeof c->in - c->inlen;
    ssize_t n = read(c->fd.fd, into, room);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n < 0 || (n == 0 && !c->got_request && c->inlen == 0)) {
        close_conn(i);
        return 0;
    }
    if (n == 0) {
        /* Half-closed (socat, `shutdown(SHUT_WR)`): the reply is still
         * wanted.  A request without its newline ends here. */
        c->eof = 1;
        return !c->got_request;
    }
    if (c->got_request)
        return 0;  /* nothing more is expected: ignored */
    c->inlen += (size_t)n;
    return 1;
}

/* The request, once its line is whole (or the client has half-closed):
 * queued for the sampler thread, or answered with err. */
static void take_request(int i)
{
    struct conn *c = &ctl.conns[i];
    char *nl = memchr(c->in, '\n', c->inlen);
    if (nl == NULL && !c->eof) {
        if (c->inlen == sizeof c->in) {
            c->got_request = 1;
            ps_control_finish(handle_of(i), "err", "request longer than 511 bytes");
        }
        return;
    }
    c->got_request = 1;
    struct ps_ctl_request r;
    char why[200];
    size_t len = nl != NULL ? (size_t)(nl - c->in) : c->inlen;
    if (ps_ctlproto_parse(c->in, len, &r, why, sizeof why) != 0) {
        ps_control_finish(handle_of(i), "err", why);
        return;
    }
    c->delivered = 1;
    push(PS_CTL_CMD_REQUEST, i, &r);
}

/* The connection has something to read, or its client went away. */
static void readable(int i)
{
    if (!ps_fd_ours(&ctl.conns[i].fd)) {
        close_conn(i);
        return;
    }
    if (read_in(i))
        take_request(i);
}

void ps_ctlconn_check(void)
{
    for (int i = 0; i < PS_CTL_CONNS; i++)
        if (ctl.conns[i].fd.fd >= 0 && !ps_fd_ours(&ctl.conns[i].fd))
            close_conn(i);
}

/* Every connection: readable until its client half-closed, writable while
 * a reply waits; the wait ends by the deadline of one still owing us its
 * request or taking its reply. */
void ps_ctlconn_watch(struct ps_ctl_waitset *w)
{
    for (int i = 0; i < PS_CTL_CONNS; i++) {
        struct conn *c = &ctl.conns[i];
        if (c->fd.fd < 0)
            continue;
        if (!c->got_request || c->out.len > 0)
            w->until = ps_ctl_earliest(w->until, c->deadline);
        ps_ctl_watch(w, c->fd.fd, (short)((c->eof ? 0 : POLLIN) | (c->out.len > 0 ? POLLOUT : 0)),
                     i);
    }
}

/* A connection's events.  Its slot may have been closed, or closed and
 * taken again, by an earlier step of this pass: the descriptor polled
 * must still be the slot's. */
void ps_ctlconn_events(int i, int fd, short ev)
{
    struct conn *c = &ctl.conns[i];
    if (c->fd.fd != fd)
        return;
    if (ev & POLLIN)
        readable(i);
    else if ((ev & (POLLHUP | POLLERR)) && c->fd.fd == fd)
        close_conn(i);  /* gone for good: nothing can reach it */
    if (c->fd.fd == fd && (ev & POLLOUT))
        flush(i);
}

/* Closes, silently, each connection past its deadline that has not sent
 * its request or is not reading what it asked for. */
void ps_ctlconn_expire(uint64_t now)
{
    for (int i = 0; i < PS_CTL_CONNS; i++) {
        struct conn *c = &ctl.conns[i];
        if (c->fd.fd >= 0 && now > c->deadline && (!c->got_request || c->out.len > 0))
            close_conn(i);
    }
}

void ps_ctlconn_child_after_fork(void)
{
    for (int i = 0; i < PS_CTL_CONNS; i++) {
        struct conn *c = &ctl.conns[i];
        ps_fd_release(&c->fd);
        ps_buf_free(&c->out);
        c->gen++;
    }
    ctl.qlen = 0;
}
