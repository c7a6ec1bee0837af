/*
 * linux/dlwatch_stub.h - between dlwatch.c and the exported dlopen (and
 * glibc's dlmopen): a few instructions of assembly per architecture that
 * jump to the C library's with the caller's return address untouched
 * (dlwatch.c, "Who the caller is").  One file per CPU, chosen by
 * lib/meson.build as regs_<arch>.c are: dlwatch_x86_64.c,
 * dlwatch_aarch64.c, and dlwatch_other.c (plain C: every call goes through
 * unwatched) elsewhere.  The stubs name what is declared here in their
 * assembly: keep the names and types.
 */
#ifndef PS_LINUX_DLWATCH_STUB_H
#define PS_LINUX_DLWATCH_STUB_H

#include <dlfcn.h>

#define PS_EXPORT __attribute__((visibility("default")))
#define PS_HIDDEN __attribute__((visibility("hidden")))

/* glibc has link-map namespaces (dlmopen) and resolves a bare name against
 * the calling object; musl has one namespace, and its dlopen() searches as
 * the main program would, whoever calls it (see "Who the caller is"). */
#if defined(__GLIBC__)
#define PS_DL_NAMESPACES 1
#else
#define PS_DL_NAMESPACES 0
#endif

typedef void *(*dlopen_fn)(const char *, int);

/* The C library's dlopen, once resolved (NULL before): dlwatch.c's. */
extern PS_HIDDEN dlopen_fn ps_dl_real_dlopen;
/* The watch is on (ps_dlwatch_arm). */
extern PS_HIDDEN _Atomic int ps_dl_armed;

/* Resolves the C library's functions (the stubs call it when the pointer is
 * NULL: a library constructor that runs before ours calls dlopen). */
PS_HIDDEN void ps_dl_resolve(void);
/* The watch is on: 0 sends the call straight through (caller is the
 * return address), 1 to the watched one. */
PS_HIDDEN int ps_dl_watch_ok(const char *file, const void *caller);
/* The watched call, entered by a jump with the stub's arguments. */
PS_HIDDEN void *ps_dl_watched_dlopen(const char *file, int mode);

#if PS_DL_NAMESPACES
typedef void *(*dlmopen_fn)(Lmid_t, const char *, int);
extern PS_HIDDEN dlmopen_fn ps_dl_real_dlmopen;
PS_HIDDEN void *ps_dl_watched_dlmopen(Lmid_t ns, const char *file, int mode);
#endif

#endif
