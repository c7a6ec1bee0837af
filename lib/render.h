/*
 * render.h - the profile's text: collapsed lines, escaped and sorted
 * (docs/format.md).
 */
#ifndef PS_RENDER_H
#define PS_RENDER_H

#include <stddef.h>

#include "stacktab.h"
#include "symtab.h"

/*
 * Renders the stacks of t, whose ids are symbols of syms, as collapsed
 * lines sorted as strcmp orders them, into a malloc'ed buffer (*out,
 * *len, NUL-terminated).  Reads both tables only.  Returns 0 or -1 (out
 * of memory).
 */
int ps_render(const struct ps_stacktab *t, const struct ps_symtab *syms, char **out,
              size_t *len);

/* Escapes s into out for the output format ('%', ';' and control
 * characters as %XX), never splitting an escape; out is always
 * terminated.  Returns the bytes written. */
size_t ps_escape(const char *s, char *out, size_t outlen);

#endif
