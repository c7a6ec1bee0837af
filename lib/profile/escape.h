/*
 * escape.h - a frame or label as the output format writes it: '%', ';'
 * and control characters as %XX (docs/format.md), so that ';' separates
 * frames and a line is one stack.
 */
#ifndef PS_ESCAPE_H
#define PS_ESCAPE_H

#include <stddef.h>

/* Escapes s into out, never splitting an escape; out is always
 * terminated.  Returns the bytes written. */
size_t ps_escape(const char *s, char *out, size_t outlen);

/* The length of s escaped. */
size_t ps_escaped_len(const char *s);

#endif
