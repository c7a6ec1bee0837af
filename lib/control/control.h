/*
 * control.h - armed mode's server: the process answers `pysample record|
 * dump|top|start|stop|status --pid PID` from another process of the same
 * user (docs/configuration.md, PYSAMPLE_ARM; docs/kubernetes.md).
 *
 * The control socket is one of the sampler thread's wait sources: the
 * sampler's waits become ps_control_wait, which accepts, checks who
 * connected, reads requests and sends replies, and queues each whole
 * request as a command.  The sampler drains the queue (ps_control_next)
 * and answers through ps_control_frame/finish (lib/sampler/sessions.c):
 * nothing here calls back up.  No program thread ever does control I/O;
 * an armed idle process has one thread blocked in poll(), waking every
 * 2 s to check that its descriptors are still its own (control.c).
 */
#ifndef PS_CONTROL_H
#define PS_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "control/ctlproto.h"

/* Armed: remembers the settings and makes the wake-up pipe (the socket is
 * opened by the sampler thread).  0, or a negative errno (said). */
int ps_control_setup(const struct ps_config *cfg);

/* 1 once ps_control_setup succeeded in this process. */
int ps_control_enabled(void);

/*
 * On the sampler thread: waits until deadline (monotonic ns, UINT64_MAX:
 * none) or until something happened (a wake-up, a connection, bytes), and
 * does the I/O that is ready.  Returns early; the caller drains the
 * commands and loops.
 */
void ps_control_wait(uint64_t deadline);

/* Ends a ps_control_wait at once.  Any thread; async-signal-safe. */
void ps_control_wake(void);

/* A command for the sampler: a request of a connection, or the news that
 * a connection whose request was delivered went away unanswered. */
enum ps_ctl_cmd_kind { PS_CTL_CMD_REQUEST = 1, PS_CTL_CMD_GONE };
struct ps_ctl_cmd {
    enum ps_ctl_cmd_kind kind;
    int conn;                    /* a handle: stale once the connection ends */
    struct ps_ctl_request req;   /* REQUEST */
};

/* The next command: 1 (and *cmd), or 0 when there is none. */
int ps_control_next(struct ps_ctl_cmd *cmd);

/* Replies to a connection (ctlproto.h's frames).  A handle that went
 * away is ignored.  finish sends the last frame (ok or err) and closes
 * once it is out; frame returns -1 if the connection is gone. */
int ps_control_frame(int conn, const char *kind, const char *data, size_t len);
void ps_control_finish(int conn, const char *kind, const char *text);
/* 1 while the connection is open; sending: earlier frames not yet out. */
int ps_control_open(int conn);
int ps_control_sending(int conn);

/* Whether a session of the sampler holds the profile (told by it; asked
 * by the fork child handler). */
void ps_control_note_session(int on);

/* The process ends or execs: its socket file (directory variant) goes.
 * Only in the process that made it. */
void ps_control_process_exit(void);

/* fork() child: the parent's socket, connections and session are not
 * ours; the child listens on its own pid.  Returns 1 if a session of the
 * parent was sampling (the child must not). */
int ps_control_child_after_fork(void);

#endif
