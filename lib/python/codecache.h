/*
 * codecache.h - code object -> (function id, line table), resolved once.
 */
#ifndef PS_CODECACHE_H
#define PS_CODECACHE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "python/linetable.h"
#include "python/runtime.h"
#include "util/symtab.h"

/*
 * A code object's roles: what a feature needs to recognise in a walk (the
 * frame whose first local is a Thread, the frame of TaskGroup.__aexit__).
 * Each is decided once per code object, when it is resolved, by the
 * classifier its feature registered at setup, so that the cache knows the
 * roles by number only and no feature by name.
 */
enum {
    PS_ROLE_THREAD_BOOT = 1u << 0,      /* threading's Thread._bootstrap_inner */
    PS_ROLE_TASKGROUP_EXIT = 1u << 1,   /* asyncio's TaskGroup.__aexit__ */
    PS_ROLE_COUNT = 2
};

/* 1 if the function (qualified name, file name) has the role, else 0. */
typedef int (*ps_code_classifier)(const char *name, const char *file);

/* Registers fn for role (one PS_ROLE_* bit); a later call replaces it.
 * Called before the sampler resolves code (setup), never concurrently with
 * ps_code_resolve. */
void ps_code_classify_with(unsigned role, ps_code_classifier fn);

/* What identifies a code object beyond its address, as read from its
 * current bytes (see codecache.c): words in this order, each the 8 bytes
 * at its field (framecode.c reads them so, memread.h ps_read_words_in_scope),
 * 0 for a field the version does not have.  co_firstlineno is an int:
 * only its own 4 bytes, the first of its word, are compared (ps_code_lo32);
 * ob_size (the code units) is a whole word. */
enum ps_code_word {
    PS_CODE_LINETABLE, PS_CODE_FILENAME, PS_CODE_NAME, PS_CODE_QUALNAME, PS_CODE_NUNITS,
    PS_CODE_FIRSTLINENO,
    PS_CODE_ID_WORDS
};

/* The int in the first 4 bytes of word w (as they lay in memory). */
static inline int32_t ps_code_lo32(uint64_t w)
{
    int32_t v;
    memcpy(&v, &w, sizeof v);
    return v;
}

/*
 * One cache line, 64-byte aligned: what a lookup compares and everything
 * the walk takes from a hit (issue #36: a tick starts on cold caches, and
 * a hit of a set's first way is then this one line, read, nothing written
 * unless the line memo changes).  The line table's ranges, which only a
 * memo miss needs, are in the set's last line (struct ps_code_set).
 */
struct ps_code_entry {
    _Alignas(64) struct {
        uintptr_t addr;         /* 0: an empty way */
        uintptr_t filename, name, qualname, linetable;
        int32_t nunits;         /* code objects of more units are not cached */
        int32_t firstlineno;
    } id;
    uint32_t func;              /* symbol of (qualname, filename) */
    /* The last address looked up and its line (ps_code_line): a frame
     * that is not the innermost one sits at the same call instruction
     * tick after tick.  Always a true pair: it starts as address -1 and
     * that address's line. */
    int32_t memo_addr;
    int32_t memo_line;
    uint8_t skip;               /* interpreter shim: not shown */
    uint8_t roles;              /* PS_ROLE_* bits (ps_code_classify_with) */
    uint8_t way;                /* its index in its set */
    /* In a set's first way only: the four ways' recency, 2 bits each (3:
     * the most recent, 0: the next to go).  The first way's line is read
     * by every lookup of the set; a hit writes this only if it changes. */
    uint8_t ages;
};

/* Whether e is the entry of the code object at addr whose identity words
 * are w (the comparison every hit makes, codecache.c): field by field,
 * the line table's address, the likeliest to differ, first.  e's nunits
 * is 32 bits: a code object of more units never has an entry (refill). */
static inline int ps_code_same(const struct ps_code_entry *e, uintptr_t addr, const uint64_t *w)
{
    return e->id.addr == addr && e->id.linetable == w[PS_CODE_LINETABLE] &&
           e->id.filename == w[PS_CODE_FILENAME] && e->id.name == w[PS_CODE_NAME] &&
           e->id.qualname == w[PS_CODE_QUALNAME] &&
           (int64_t)e->id.nunits == (int64_t)w[PS_CODE_NUNITS] &&
           e->id.firstlineno == ps_code_lo32(w[PS_CODE_FIRSTLINENO]);
}

#define PS_CODECACHE_WAYS 4

/* A set: four entries, then the ways' line tables, 320 bytes in a row. */
struct ps_code_set {
    struct ps_code_entry way[PS_CODECACHE_WAYS];
    struct {
        _Alignas(64) struct ps_lt_range *ranges[PS_CODECACHE_WAYS]; /* owned */
        uint32_t nranges[PS_CODECACHE_WAYS];
    } lines;
};

struct ps_codecache {
    struct ps_code_set *set;  /* sets of them, mapped: pages touched lazily */
    size_t sets;              /* power of two */
    uint64_t hits, misses;
};

/* A table of at least max_entries entries, none of its pages touched: 0
 * or -1. */
int ps_codecache_init(struct ps_codecache *c, size_t max_entries);
/* Clears c and unmaps its table. */
void ps_codecache_free(struct ps_codecache *c);
/*
 * The set of c that the code object at addr is kept in.  Code objects
 * made together (a module's, a class's functions) sit a few hundred bytes
 * apart, and a walk meets them together: their sets follow their
 * addresses (bits 8 and up, in order) so that a walk's entries share a
 * few pages of the table instead of taking one page each (4096 sets of
 * 320 bytes: 1.25 MB, 320 pages, each a TLB miss for the tick that starts
 * cold after its sleep).  The 1 MiB region the address is in is hashed
 * and added, so that objects at one offset of different regions (arenas,
 * heaps) spread over the sets as a hash would spread them.
 */
static inline size_t ps_code_set_of(const struct ps_codecache *c, uintptr_t addr)
{
    size_t region = (size_t)((uint64_t)(addr >> 20) * 0x9E3779B97F4A7C15ull >> 32);
    return ((size_t)(addr >> 8) + region) & (c->sets - 1);
}
size_t ps_code_set(const struct ps_codecache *c, uintptr_t addr);

/* Way w of st was used: the ways more recent than it age by one, and it
 * becomes the most recent.  The ages of the ways in use stay distinct
 * (from 3 down), and an unused way has 0 unless a refill of it failed; a
 * full set's 0 is its least recently used way.  Written only on a change. */
static inline void ps_code_touch(struct ps_code_set *st, int w)
{
    unsigned ages = st->way[0].ages, a = (ages >> (2 * w)) & 3u;
    if (a == 3u)
        return;
    unsigned next = 0;
    for (int v = 0; v < PS_CODECACHE_WAYS; v++) {
        unsigned av = (ages >> (2 * v)) & 3u;
        av = v == w ? 3u : av > a ? av - 1 : av;
        next |= av << (2 * v);
    }
    st->way[0].ages = (uint8_t)next;
}

/* The hit path of ps_code_resolve_words, for the walk to inline: the
 * entry of the code object at addr with identity words w, its recency
 * touched, or NULL, for ps_code_resolve_words to look again and refill
 * (a miss: a few a run).  Counts nothing. */
static inline struct ps_code_entry *ps_code_hit(struct ps_codecache *c, uintptr_t addr,
                                                const uint64_t *w)
{
    struct ps_code_set *st = &c->set[ps_code_set_of(c, addr)];
    for (int v = 0; v < PS_CODECACHE_WAYS; v++) {
        struct ps_code_entry *e = &st->way[v];
        if (ps_code_same(e, addr, w)) {
            ps_code_touch(st, v);
            return e;
        }
        if (e->id.addr == 0)
            break;  /* filled in order (ps_code_resolve_words) */
    }
    return NULL;
}
void ps_codecache_clear(struct ps_codecache *c);

/*
 * Resolves the code object at addr, interning its names in syms (which
 * the cache's entries then refer to: the two are cleared together, by
 * profile.c).  snap holds L.co_read bytes copied from addr (already
 * checked to be a code object).  Returns the entry, or NULL
 * if its names or table cannot be read (the frame is then dropped).
 */
struct ps_code_entry *ps_code_resolve(struct ps_codecache *c,
                                            const struct ps_python *py,
                                            struct ps_symtab *syms, int lines,
                                            uintptr_t addr, const uint8_t *snap);

/* The same from the identity words w (enum ps_code_word) read from the
 * object's current bytes, the walk's way (framecode.c). */
struct ps_code_entry *ps_code_resolve_words(struct ps_codecache *c, const struct ps_python *py,
                                            struct ps_symtab *syms, int lines, uintptr_t addr,
                                            const uint64_t *w);

/* Its miss path alone, for a caller whose ps_code_hit found nothing (the
 * walk, framecode.c): the entry refilled for addr and w (out of line: a
 * few a run), or NULL. */
struct ps_code_entry *ps_code_miss_words(struct ps_codecache *c, const struct ps_python *py,
                                         struct ps_symtab *syms, int lines, uintptr_t addr,
                                         const uint64_t *w);

/* Line for an address in the format's unit (firstlineno if unknown).  The
 * memo is checked inline (a caller frame sits at the same call instruction
 * tick after tick); the ranges never change while the entry lives, so the
 * memo holds as long as it does. */
int32_t ps_code_line_lookup(struct ps_code_entry *e, int64_t addr);

static inline int32_t ps_code_line(struct ps_code_entry *e, int64_t addr)
{
    if (addr == e->memo_addr)
        return e->memo_line;
    return ps_code_line_lookup(e, addr);
}

#endif
