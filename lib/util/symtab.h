/*
 * symtab.h - interned symbols: what a frame or a thread prints as.
 *
 * A symbol is a Python function (qualname, file), a native function
 * (function, library) or an address in a library, a marker frame
 * ("[pysample: truncated]", "[task Task-3 \"handle\"]"), or a thread label.
 * Each distinct one is stored once, raw (render.c escapes them for the
 * file), and named by a 32-bit id.
 *
 * Ownership.  The symbols belong with the code cache (profile.c owns both),
 * not with the aggregated stacks: pysample_reset and a fork child empty
 * the stack table only, so an id, once handed out, means the same symbol
 * for the life of the table and nobody checks a generation.  The one
 * exception is profile.c's rebuild of a table that has filled up (see
 * ps_symtab_refused), done together with the code cache and only when no
 * stack holds an id.
 *
 * A frame is a 64-bit value: the symbol id in the high half and the line in
 * the low half (PS_LINE_NONE: no line shown).
 *
 * Memory is bounded: at most max(4096, 2 x max_stacks) functions and
 * markers and max(4096, max_stacks / 4) thread labels.  Past a limit a new
 * function is the marker "[pysample: function table full]" and a new
 * thread is labelled "thread ? ([pysample: too many threads])", so samples
 * still count and the loss is visible.
 *
 * Not thread-safe by itself; the caller (profile.c's lock) serialises.
 */
#ifndef PS_SYMTAB_H
#define PS_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

#define PS_LINE_NONE INT32_MIN  /* frame printed without a line number */
#define PS_ID_NONE UINT32_MAX

/* Markers every table holds from the start, at fixed ids: whoever needs
 * them (the sampler, the stack table) uses the constant. */
enum {
    PS_SYM_STACKS_FULL,   /* "[pysample: stack table full]" */
    PS_SYM_TRUNCATED,     /* "[pysample: truncated]": a stack cut at max_depth */
    PS_SYM_FUNCS_FULL,    /* "[pysample: function table full]" */
    PS_SYM_GC,            /* "[gc]": the thread was collecting garbage */
    PS_SYM_RESERVED       /* count */
};
enum { PS_LABEL_TOO_MANY, PS_LABEL_RESERVED };

enum ps_sym_kind {
    PS_SYM_PYTHON,   /* "name (file:line)", or "name (file)" without a line */
    PS_SYM_NATIVE,   /* "function (library)" */
    PS_SYM_MARKER,   /* the bare text */
};

struct ps_strtab;

/* A thread's label as last interned (ps_sym_label): the sampler asks for
 * the same few labels every tick, and formatting one costs more than
 * walking a short stack. */
#define PS_LABEL_MEMO 16
#define PS_LABEL_MEMO_NAME 64
struct ps_label_memo {
    long tid;
    uint32_t id;               /* PS_ID_NONE: empty slot */
    char name[PS_LABEL_MEMO_NAME];
};

struct ps_symtab {
    struct ps_strtab *funcs;   /* Python and native functions, markers */
    struct ps_strtab *labels;  /* thread labels */
    size_t max_funcs, max_labels;
    int refused;               /* a new symbol met a limit */
    /* Which ids these are: new for each table and each clear, never
     * reused, so that what caches ids outside the table (merge.c's names
     * per address) knows them stale without being told. */
    uint32_t generation;
    struct ps_label_memo memo[PS_LABEL_MEMO];  /* by tid; emptied with labels */
};

/* One symbol as stored: name, and file (a library for a native function;
 * NULL for a marker).  Raw UTF-8, NUL-terminated. */
struct ps_sym {
    enum ps_sym_kind kind;
    const char *name;
    const char *file;
};

/* Limits derived from the stack limit (see above).  0 or -1. */
int ps_symtab_init(struct ps_symtab *s, size_t max_stacks);
void ps_symtab_free(struct ps_symtab *s);
/* Empties s back to its reserved symbols, keeping its memory; cannot
 * fail. */
void ps_symtab_clear(struct ps_symtab *s);

/* Whether a new symbol was refused for a limit since the last clear. */
static inline int ps_symtab_refused(const struct ps_symtab *s)
{
    return s->refused;
}

/* Each returns an id, or PS_ID_NONE (out of memory, or a text too long). */
uint32_t ps_sym_python(struct ps_symtab *s, const char *qualname, const char *file);
/* function NULL: the address "library+0x<offset>", a marker. */
uint32_t ps_sym_native(struct ps_symtab *s, const char *function, const char *library,
                       uint64_t offset);
uint32_t ps_sym_marker(struct ps_symtab *s, const char *text);
/* "thread <tid>" or "thread <tid> (<name>)"; tid < 0: "thread ?". */
uint32_t ps_sym_label(struct ps_symtab *s, long tid, const char *name);

/* The symbol with id (an id this table gave out). */
void ps_sym_get(const struct ps_symtab *s, uint32_t id, struct ps_sym *out);
/* The text of label id, NUL-terminated. */
const char *ps_sym_label_text(const struct ps_symtab *s, uint32_t id);
/* Number of labels: ids are 0 .. n-1. */
size_t ps_sym_label_count(const struct ps_symtab *s);

static inline uint64_t ps_frame(uint32_t sym, int32_t line)
{
    return ((uint64_t)sym << 32) | (uint32_t)line;
}
static inline uint32_t ps_frame_sym(uint64_t frame)
{
    return (uint32_t)(frame >> 32);
}
static inline int32_t ps_frame_line(uint64_t frame)
{
    return (int32_t)(uint32_t)frame;
}

/* A stack being built, root first, before it is counted: frames[0..depth)
 * of room (the sampler's buffer: threadsample.c, and the tasks' stacks
 * made in it, tasks.h).  Here beside the frames, not with the stack table
 * that counts it: asyncio/ builds stacks and is below profile/. */
struct ps_stack_buf {
    uint64_t *frames;
    int depth;
    int room;
};

#endif
