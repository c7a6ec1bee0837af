/*
 * ctlconn.h - armed mode's connections (ctlconn.c): each one's request
 * read, queued as a command for the sampler, its replies sent, and the
 * deadlines that keep a slow client from holding a slot.  What control.c's
 * wait asks of them; the sampler's side (ps_control_next, ps_control_frame,
 * ...) is declared in control.h.
 */
#ifndef PS_CTLCONN_H
#define PS_CTLCONN_H

#include <poll.h>
#include <stdint.h>

#include "util/ownfd.h"

#define PS_CTL_CONNS 8

/* What one wait polls: who[k] says whose fds[k] is (-1 the wake-up pipe,
 * -2 the listening socket, else a connection's slot); until, when it
 * ends at the latest. */
struct ps_ctl_waitset {
    struct pollfd fds[2 + PS_CTL_CONNS];
    int who[2 + PS_CTL_CONNS];
    unsigned n;
    uint64_t until;
};

static inline uint64_t ps_ctl_earliest(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static inline void ps_ctl_watch(struct ps_ctl_waitset *w, int fd, short events, int who)
{
    w->fds[w->n] = (struct pollfd){ .fd = fd, .events = events };
    w->who[w->n++] = who;
}

/* Every slot free (armed mode set up). */
void ps_ctlconn_setup(void);

/* A peer that may talk to us (control.c checked it): takes *fd into a free
 * slot, or, with every slot taken, answers busy and closes it. */
void ps_ctlconn_admit(struct ps_fd *fd);

/* Forgets each connection whose descriptor the program took. */
void ps_ctlconn_check(void);

/* Adds every connection to w, with the deadlines that end the wait. */
void ps_ctlconn_watch(struct ps_ctl_waitset *w);

/* The events poll reported for slot i, whose descriptor was fd. */
void ps_ctlconn_events(int i, int fd, short ev);

/* Closes, silently, each connection past its deadline. */
void ps_ctlconn_expire(uint64_t now);

/* fork() child: the parent's connections and queued commands are not
 * ours. */
void ps_ctlconn_child_after_fork(void);

#endif
