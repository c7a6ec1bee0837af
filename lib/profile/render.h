/*
 * render.h - the profile's text: collapsed lines, escaped and sorted
 * (docs/format.md).
 */
#ifndef PS_RENDER_H
#define PS_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "profile/escape.h"
#include "profile/stacktab.h"
#include "util/symtab.h"

/*
 * Renders the stacks of t, whose ids are symbols of syms, as collapsed
 * lines sorted as strcmp orders them, into a malloc'ed buffer (*out,
 * *len, NUL-terminated).  Reads both tables only.  Returns 0 or -1 (out
 * of memory).
 */
int ps_render(const struct ps_stacktab *t, const struct ps_symtab *syms, char **out,
              size_t *len);

/*
 * The same in two steps, so that a file is written without holding the
 * tables' lock and without the whole text in memory.  ps_render_prepare
 * reads the tables (hold their lock) and copies out what the lines need,
 * sorted: 0, or -1 (out of memory).  ps_rendered_emit then hands the
 * lines, in order, in chunks of whole lines, to sink, reading nothing but
 * *rd: 0, -ENOMEM, or the first non-zero value sink returned (it is not
 * called again after that).  Neither calls malloc (their memory is mapped
 * from the kernel, util/arena.h): the final write must finish even while a
 * program thread holds the allocator's lock.
 */
struct ps_rendered;
typedef int (*ps_render_sink)(void *ctx, const char *data, size_t len);

int ps_render_prepare(const struct ps_stacktab *t, const struct ps_symtab *syms,
                      struct ps_rendered **rd);
int ps_rendered_emit(const struct ps_rendered *rd, ps_render_sink sink, void *ctx);
/* How many lines; the line (0 first) of the stack of id stack_id
 * (struct ps_stack.id), or UINT32_MAX for none. */
size_t ps_rendered_lines(const struct ps_rendered *rd);
uint32_t ps_rendered_line(const struct ps_rendered *rd, uint32_t stack_id);
/* The text's length is at most this. */
size_t ps_rendered_size(const struct ps_rendered *rd);
void ps_rendered_free(struct ps_rendered *rd);

#endif
