/*
 * pystr.h - reading Python str and bytes objects out of interpreter memory.
 */
#ifndef PS_PYSTR_H
#define PS_PYSTR_H

#include <stddef.h>
#include <stdint.h>

#include "python/layout.h"

/* Longest name or path we copy, in code points; longer ones are refused. */
#define PS_STR_MAX 4096

/*
 * Copies the str object at addr as NUL-terminated UTF-8 into out[0..outlen).
 * Handles compact ASCII and compact Latin-1/UCS-2/UCS-4 (transcoded from
 * the canonical data, never from a cached UTF-8 copy).  Returns the byte
 * length, or -1 if the object cannot be read or is not a plausible string.
 */
int ps_str_read(const struct ps_layout *l, uintptr_t addr, char *out, size_t outlen);

/*
 * Transcodes n code points of width kind (1, 2 or 4) to UTF-8.  Pure
 * function, exposed for the unit tests.  Returns bytes written (without the
 * NUL), or -1 if out is too small or a code point is invalid.
 */
int ps_str_to_utf8(const uint8_t *data, size_t n, int kind, char *out, size_t outlen);

/*
 * Copies the bytes object at addr into a malloc'ed buffer (*out, *len).
 * maxlen bounds the size accepted.  Returns 0 or -1.
 */
int ps_bytes_read(const struct ps_layout *l, uintptr_t addr, size_t maxlen,
                  uint8_t **out, size_t *len);

#endif
