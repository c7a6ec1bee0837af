/*
 * output.h - where the output is written: file names per process, atomic
 * replacement (output.c explains both; docs/processes.md for users).
 */
#ifndef PS_OUTPUT_H
#define PS_OUTPUT_H

#include <stddef.h>

/*
 * Remembers where the template is (the settings' PYSAMPLE_OUTPUT, which
 * outlives every write: it is read there, not copied), notes when this
 * process started, and checks,
 * now rather than at exit, that a file can be created next to the first
 * path it expands to.  A template naming a directory (a trailing '/', or
 * a directory there) means <directory>/pysample-%p.txt.  A name skipped
 * because something we must not replace is there is said once on stderr
 * (message.h) when a write skips it.  Returns 0, or -1 with a message
 * for the user in why.
 */
int ps_output_init(const char *tmpl, int file_mode, char *why, size_t whylen);

/* In a forked child: a new process, started now, that is not the first
 * one; the parent's name is not ours. */
void ps_output_after_fork(void);

/*
 * Writes atomically to this process's own name for the configured output
 * (tmpl NULL) or to the template tmpl as given: a new temporary file in the
 * target's directory, then link() or rename() into place, so a reader sees
 * the old or the new profile, never a partial one.  Not thread-safe for
 * tmpl NULL (the caller serialises).  Returns 0 or a negative errno; the
 * path written is copied to written (if not NULL).
 *
 * The content is made while it is written: fill calls
 * put(put_ctx, data, len) for each piece in order and returns 0, or the
 * first non-zero value put returned, or a negative errno of its own; then
 * nothing is put in place and the temporary file is removed.
 */
typedef int (*ps_output_put_fn)(void *put_ctx, const char *data, size_t len);
typedef int (*ps_output_fill_fn)(void *ctx, ps_output_put_fn put, void *put_ctx);
int ps_output_write_with(const char *tmpl, ps_output_fill_fn fill, void *ctx,
                         char *written, size_t writtenlen);

/*
 * What a side file's name held that it was not written over: returned
 * negated by ps_output_write_beside and ps_write_atomic, and said by
 * ps_output_strerror ("File exists" said nothing of a refused link).
 */
enum ps_output_refused {
    PS_OUTPUT_REFUSED_LINK = 0x10000,   /* a symbolic link */
    PS_OUTPUT_REFUSED_DIR,              /* a directory */
    PS_OUTPUT_REFUSED_SPECIAL,          /* a FIFO, socket or device */
    PS_OUTPUT_REFUSED_OTHERS,           /* another user's file */
};

/* What rc (a negative errno or refusal) means, for a message. */
const char *ps_output_strerror(int rc);

/*
 * Writes fill's content atomically to <path><suffix>, a file beside a
 * profile just written to path (PYSAMPLE_TIMELINE's <profile>.timeline),
 * with the profile's file mode, as ps_write_atomic does: what another user
 * may have planted there is neither followed nor replaced
 * (-PS_OUTPUT_REFUSED_*).  0 or a negative errno.
 */
int ps_output_write_beside(const char *path, const char *suffix, ps_output_fill_fn fill,
                           void *ctx);

/* Atomic write of data to path with the given mode (the side files:
 * PYSAMPLE_STATS, the quality sidecar).  A symbolic link, a directory or
 * another user's file at path is neither followed nor replaced:
 * -PS_OUTPUT_REFUSED_*. */
int ps_write_atomic(const char *path, const char *data, size_t len, int mode);

#endif
