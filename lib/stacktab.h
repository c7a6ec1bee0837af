/*
 * stacktab.h - the aggregated profile: identical stacks are counted once.
 *
 * A frame is a 64-bit value: the id of an interned (qualname, filename)
 * pair in the high half and the line in the low half.  A stack is a thread
 * label id plus its frames, root first.  Strings are stored escaped for the
 * output format (docs/format.md), so writing the file is concatenation.
 *
 * Memory is bounded: at most max_stacks distinct stacks.  Past the limit a
 * sample is counted on a one-frame stack "[pysample: stack table full]" of
 * its thread, so the total stays right and the loss is visible.
 *
 * Not thread-safe by itself; the caller (sampler.c) serialises access.
 */
#ifndef PS_STACKTAB_H
#define PS_STACKTAB_H

#include <stddef.h>
#include <stdint.h>

#define PS_LINE_NONE INT32_MIN  /* frame printed without a line number */
#define PS_ID_NONE UINT32_MAX

struct ps_strtab;

struct ps_stacktab {
    /* interned strings: functions ("name\0file" pairs) and thread labels */
    struct ps_strtab *funcs;
    struct ps_strtab *labels;
    /* stacks */
    struct ps_stack *slots;
    size_t cap;          /* power of two */
    size_t used;
    size_t max_stacks;
    uint64_t *frames;    /* arena of all stacks' frames */
    size_t nframes, frames_cap;
    uint64_t total;      /* samples added */
    uint64_t overflowed; /* samples that went to the "table full" stack */
    uint32_t full_func;  /* id of the marker function, interned lazily */
};

int ps_stacktab_init(struct ps_stacktab *t, size_t max_stacks);
void ps_stacktab_free(struct ps_stacktab *t);
/* Empties t.  0, or -1 (out of memory) with t as it was. */
int ps_stacktab_clear(struct ps_stacktab *t);

/* Interns a function; name and file are raw UTF-8.  file NULL = marker
 * frame printed as the bare name.  Returns an id or PS_ID_NONE. */
uint32_t ps_func_intern(struct ps_stacktab *t, const char *name, const char *file);

/* Interns a thread label "thread <tid>" or "thread <tid> (<name>)". */
uint32_t ps_label_intern(struct ps_stacktab *t, long tid, const char *name);

static inline uint64_t ps_frame(uint32_t func, int32_t line)
{
    return ((uint64_t)func << 32) | (uint32_t)line;
}

/* Counts one sample of frames[0..depth) (root first) on thread label. */
int ps_stacktab_add(struct ps_stacktab *t, uint32_t label, const uint64_t *frames,
                    uint32_t depth, uint64_t count);

/*
 * Renders the profile as collapsed lines, sorted, into a malloc'ed buffer
 * (*out, *len).  Returns 0 or -1 (out of memory).
 */
int ps_stacktab_render(const struct ps_stacktab *t, char **out, size_t *len);

/* Escapes s into out for the output format; returns bytes written. */
size_t ps_escape(const char *s, char *out, size_t outlen);

#endif
