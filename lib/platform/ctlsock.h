/*
 * ctlsock.h - the control channel's socket: the operating-system half of
 * `pysample record|dump|top|start|stop --pid` (control.c is the rest).
 *
 * One listening Unix stream socket per armed process, named (control.c)
 *   pysample.<uid>.<pidns>.<pid>
 * after the process's effective uid, the identity of its PID namespace
 * (Linux: the inode of /proc/self/ns/pid, the same number seen from every
 * namespace; 0 where there are none) and its pid in that namespace, so
 * that two containers' pid 1s sharing a network namespace (one pod) never
 * want the same name:
 *   Linux, no directory:  the abstract name "@<name>" (no file: nothing to
 *                         clean up, nothing to chmod; reachable from the
 *                         same network namespace, which is what
 *                         `kubectl exec` into the pod gives);
 *   with a directory:     "<dir>/<name>.sock" (macOS always: it has no
 *                         abstract names; /tmp by default).
 * Whoever connects is identified by the kernel (SO_PEERCRED on Linux,
 * getpeereid/LOCAL_PEERPID on macOS), not by anything they send: control.c
 * decides.
 *
 * Every descriptor is non-blocking and close-on-exec.  Called only on the
 * sampler thread, except ps_ctlsock_pipe (fork child handler).
 */
#ifndef PS_CTLSOCK_H
#define PS_CTLSOCK_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

/* The name, for the effective uid, the pid namespace and the pid
 * (control.c makes it, ctlsweep.c recognises it; the Python tool's
 * scripts/pysample_tool/remote.py does both the same way), and what its
 * file in a directory adds. */
#define PS_CTLSOCK_NAME "pysample.%u.%llu.%ld"
#define PS_CTLSOCK_SUFFIX ".sock"

/* The directory used when PYSAMPLE_CONTROL_DIR is not set: "" (abstract
 * names) on Linux, "/tmp" on macOS. */
const char *ps_ctlsock_default_dir(void);

/* The identity of this process's PID namespace (0: none, or unknown). */
unsigned long long ps_ctlsock_pidns(void);

/* Where ps_ctlsock_listen puts the names it made: the name as the user
 * sees it (shownlen bytes of room) and the file's path, if any (filelen). */
struct ps_ctlsock_names {
    char *shown;
    size_t shownlen;
    char *file;
    size_t filelen;
};

/*
 * Listens on base ("pysample.<uid>.<pidns>.<pid>") in dir ("" = abstract).
 * A file of that name is removed first only if it is a socket of our own
 * uid (an earlier process that had our pid: a container's pid 1
 * restarted); anything else there is refused, never touched.  Returns the
 * descriptor, or a negative errno with why filled in; the name as the user
 * sees it is copied to out->shown, the file (if any) to out->file.
 */
int ps_ctlsock_listen(const char *dir, const char *base, const struct ps_ctlsock_names *out,
                      char *why, size_t whylen);

/* 1 if fd is a socket bound to the name shown (as ps_ctlsock_listen made
 * it), else 0. */
int ps_ctlsock_bound_to(int fd, const char *shown);

/* Accepts one connection: its descriptor, or a negative errno (-EAGAIN:
 * none pending).  *uid and *pid are the peer's as the kernel knows them,
 * translated into our namespaces (*pid 0 for a peer our PID namespace
 * cannot see, -1 where the system does not say). */
int ps_ctlsock_accept(int lfd, long *uid, long *pid);

/* 1 if process pid (as we see it) is in our user namespace, 0 if not or
 * if that cannot be told (macOS: always 1, there are none). */
int ps_ctlsock_same_userns(long pid);

/* The uid the kernel reports for a user it cannot map into our user
 * namespace (/proc/sys/kernel/overflowuid), or -1 where there is none. */
long ps_ctlsock_overflow_uid(void);

/* 0 if the kernel lets no other process of our uid read this one (Linux:
 * not dumpable after a change of credentials), else 1. */
int ps_ctlsock_dumpable(void);

/* send() that never raises SIGPIPE: bytes sent or a negative errno. */
long ps_ctlsock_send(int fd, const void *buf, size_t len);

/* A non-blocking close-on-exec pipe for waking the sampler thread. */
int ps_ctlsock_pipe(int fds[2]);

/* poll() until the monotonic deadline (ns; UINT64_MAX: none).  Returns
 * what poll returns. */
int ps_ctlsock_poll(struct pollfd *fds, unsigned n, uint64_t deadline_ns);

#endif
