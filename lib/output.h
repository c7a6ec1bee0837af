/*
 * output.h - where the output is written: file names, atomic replacement.
 */
#ifndef PS_OUTPUT_H
#define PS_OUTPUT_H

#include <stddef.h>

/*
 * Remembers the template and checks, now rather than at exit, that a file
 * can be created next to the first path it expands to.  Returns 0, or -1
 * with a message for the user in why.
 */
int ps_output_init(const char *tmpl, int file_mode, char *why, size_t whylen);

/* In a forked child: the parent's claim on a %p-less name is not ours. */
void ps_output_after_fork(void);

/*
 * Writes data atomically to the configured output (tmpl NULL) or to the
 * template tmpl: a new temporary file in the target's directory, then
 * rename() over the target, so a reader sees the old or the new profile,
 * never a partial one.  Returns 0 or a negative errno; the path written is
 * copied to written (if not NULL).
 */
int ps_output_write(const char *tmpl, const char *data, size_t len,
                    char *written, size_t writtenlen);

/* Lower level, exposed for the unit tests: atomic write of data to path. */
int ps_write_atomic(const char *path, const char *data, size_t len, int mode);

#endif
