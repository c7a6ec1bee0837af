/*
 * ctlsock.h - the control channel's socket: the operating-system half of
 * `pysample record|dump|top|start|stop --pid` (control.c is the rest).
 *
 * One listening Unix stream socket per armed process, named after the
 * process's effective uid and pid:
 *   Linux, no directory:  the abstract name "@pysample.<uid>.<pid>" (no
 *                         file: nothing to clean up, nothing to chmod;
 *                         reachable from the same network namespace, which
 *                         is what `kubectl exec` into the pod gives);
 *   with a directory:     "<dir>/pysample.<uid>.<pid>.sock" (macOS always:
 *                         it has no abstract names; /tmp by default).
 * Whoever connects is identified by the kernel (SO_PEERCRED on Linux,
 * getpeereid/LOCAL_PEERPID on macOS), not by anything they send: the
 * caller compares the uid with ours.
 *
 * Every descriptor is non-blocking and close-on-exec.  Called only on the
 * sampler thread, except ps_ctlsock_pipe (fork child handler) and
 * ps_ctlsock_wake (any thread, async-signal-safe: one write()).
 */
#ifndef PS_CTLSOCK_H
#define PS_CTLSOCK_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

/* The directory used when PYSAMPLE_CONTROL_DIR is not set: "" (abstract
 * names) on Linux, "/tmp" on macOS. */
const char *ps_ctlsock_default_dir(void);

/*
 * Listens on this process's name in dir ("" = abstract).  A file of that
 * name is a socket of an earlier process that had our pid (a container's
 * pid 1 restarted, or an exec'd image): it is removed first.  Returns the
 * descriptor, or a negative errno with why filled in; the name as the user
 * sees it is copied to shown, the file (if any) to file.
 */
int ps_ctlsock_listen(const char *dir, char *shown, size_t shownlen, char *file, size_t filelen,
                      char *why, size_t whylen);

/* Accepts one connection: its descriptor, or a negative errno (-EAGAIN:
 * none pending).  *uid and *pid are the peer's as the kernel knows them
 * (*pid -1 where it does not say). */
int ps_ctlsock_accept(int lfd, long *uid, long *pid);

/* send() that never raises SIGPIPE: bytes sent or a negative errno. */
long ps_ctlsock_send(int fd, const void *buf, size_t len);

/* A non-blocking close-on-exec pipe for waking the sampler thread. */
int ps_ctlsock_pipe(int fds[2]);

/* poll() until the monotonic deadline (ns; UINT64_MAX: none).  Returns
 * what poll returns. */
int ps_ctlsock_poll(struct pollfd *fds, unsigned n, uint64_t deadline_ns);

#endif
