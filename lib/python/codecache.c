/*
 * codecache.c - resolving code objects once.
 *
 * Reading a code object's names and decoding its line table costs a few
 * microseconds; a sample touches the same few hundred code objects again
 * and again.  So the result is cached, keyed by the code object's address.
 *
 * Why a cached entry is never confused with a freed-and-reused code object.
 * An address alone proves nothing: functions made by exec() or lambdas in a
 * loop are freed, and a new code object may land at the same address.  So
 * every lookup compares, besides the address, the identity snapshot taken
 * from the *current* bytes of the object (the walk reads them with its
 * type: framecode.h; codecache.h, enum ps_code_word): the pointers to
 * co_filename, co_name, co_qualname and the line table, co_firstlineno
 * and the bytecode length.  A new code object
 * at the same address owns a new line table object; for all of these to
 * match, the new object would need the same names, the same first line, the
 * same length, and a line table allocated at exactly the old one's address
 * -- and even then the table describes the same compiled source, so the
 * answer we cached is the right one.  Entries are never trusted without
 * this check, so an entry cannot outlive its code object in any way that
 * shows: a stale one is simply replaced on its next miss.
 *
 * What the walk may batch and what it may not (issue 14).  On 3.11+ the
 * walk copies many frames in one read (framespan.h: up to 32 KiB of a
 * thread's data stack, before any code object is read), so a frame's
 * bytes may be a few microseconds older than the code object's it then
 * reads.  That does not weaken the above: the
 * identity is still compared against the code object's bytes read *now*,
 * one read per code object, never against anything kept from the copy or
 * from an earlier tick; what the copy could add is a frame that returned
 * in between, whose code object (held by the frame until then) was freed
 * and reused -- and then the type check, the identity check and the
 * instruction pointer (which must lie in the current object's bytecode)
 * see the new object, exactly as a frame read one at a time could have
 * been overtaken.  Skipping that read (trusting a cached entry because the
 * frame's code pointer is unchanged) is what would break the guarantee, and
 * is not done.
 *
 * A read may find its entry without the set's lookup: the walk compares
 * the words it read with the entry its own earlier read of the same code
 * object found (framecode.h).  That is the same comparison, of bytes
 * read now, with the entry the lookup would have found; nothing is
 * trusted for having matched before.
 *
 * Within one walk, one read of a code object serves the frames whose bytes
 * were copied *before* it (framecode.h, struct walk_codes: a recursive stack
 * shows the same code object on many frames of one 32 KiB copy).  What
 * such a frame gets is exactly what a read of its own would have given it:
 * the object's bytes read after the frame's were copied, compared with the
 * cached identity; a read made earlier, or in an earlier walk or tick,
 * never serves a frame, and a frame copied after the last read of its code
 * object has it read again.
 *
 * The cache is bounded (set-associative, least recently used way replaced),
 * so programs that create code without end cannot grow it.
 *
 * What a hit touches (issue #36: the sampler's tick starts on caches its
 * sleep left cold, so each line it touches is a miss).  A set is four
 * one-line entries and a line of their line tables, side by side
 * (codecache.h).  A lookup compares the ways' addresses in order, and the
 * walk takes everything it needs from the entry that matches: a hit of
 * the first way reads one line.  The ways' recency is kept in the first
 * way's line, which every lookup reads, and written only when it changes
 * (a set whose code objects take turns); nothing else is written by a
 * hit but the line memo, when the frame's address changed.  The table is
 * mapped, not allocated and cleared: its 1.25 MB are touched page by page,
 * as code objects fall in them.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "python/codecache.h"
#include "memory/memread.h"
#include "python/pystr.h"
#include "util/tickpath.h"

_Static_assert(sizeof(struct ps_code_entry) == 64, "an entry is one line");
_Static_assert(sizeof(struct ps_code_set) == 64 * (1 + PS_CODECACHE_WAYS), "a set is 5 lines");

/* Line tables larger than this are not decoded (the frame keeps line 0). */
#define PS_MAX_LINETABLE (1u << 20)

int ps_codecache_init(struct ps_codecache *c, size_t max_entries)
{
    memset(c, 0, sizeof *c);
    size_t sets = 64;
    while (sets * PS_CODECACHE_WAYS < max_entries)
        sets *= 2;
    /* Zero pages, aligned to a page (the sets are to a line), touched only
     * where code objects fall: a set of zeros is a set of empty ways. */
    void *p = mmap(NULL, sets * sizeof *c->set, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    c->set = p;
    c->sets = sets;
    return 0;
}

void ps_codecache_free(struct ps_codecache *c)
{
    if (c->set == NULL)
        return;
    ps_codecache_clear(c);
    munmap(c->set, c->sets * sizeof *c->set);
    memset(c, 0, sizeof *c);
}

/* Empties way w of s; the first way's line keeps the set's recency. */
static void drop(struct ps_code_set *s, int w)
{
    uint8_t ages = s->way[0].ages;
    free(s->lines.ranges[w]);
    s->lines.ranges[w] = NULL;
    s->lines.nranges[w] = 0;
    memset(&s->way[w], 0, sizeof s->way[w]);
    s->way[0].ages = ages;
}

/* Only the ways in use are written: a set never used stays a zero page. */
void ps_codecache_clear(struct ps_codecache *c)
{
    for (size_t i = 0; i < c->sets; i++) {
        struct ps_code_set *s = &c->set[i];
        for (int w = 0; w < PS_CODECACHE_WAYS; w++)
            if (s->way[w].id.addr != 0)
                drop(s, w);
        if (s->way[0].ages != 0)
            s->way[0].ages = 0;
    }
}

/* The identity words of the code object whose L.co_read bytes are snap
 * (codecache.h): what the walk reads of the object itself, taken here from
 * a whole copy (ps_code_resolve's callers). */
static void snapshot_words(const struct ps_layout *L, const uint8_t *snap, uint64_t *w)
{
    w[PS_CODE_FILENAME] = ps_ptr_at(snap, L->co_filename);
    w[PS_CODE_NAME] = ps_ptr_at(snap, L->co_name);
    w[PS_CODE_QUALNAME] = ps_ptr_at(snap, L->co_qualname);
    w[PS_CODE_LINETABLE] = ps_ptr_at(snap, L->co_linetable);
    w[PS_CODE_NUNITS] = 0;
    if (L->co_nunits != PS_NOFIELD)
        memcpy(&w[PS_CODE_NUNITS], snap + L->co_nunits, sizeof w[PS_CODE_NUNITS]);
    w[PS_CODE_FIRSTLINENO] = 0;
    memcpy(&w[PS_CODE_FIRSTLINENO], snap + L->co_firstlineno, sizeof(int32_t));
}

/* The registered classifiers, by role bit (ps_code_classify_with). */
static ps_code_classifier classifiers[PS_ROLE_COUNT];

void ps_code_classify_with(unsigned role, ps_code_classifier fn)
{
    for (unsigned i = 0; i < PS_ROLE_COUNT; i++)
        if (role == 1u << i)
            classifiers[i] = fn;
}

static uint8_t classify(const char *name, const char *file)
{
    uint8_t roles = 0;
    for (unsigned i = 0; i < PS_ROLE_COUNT; i++)
        if (classifiers[i] != NULL && classifiers[i](name, file))
            roles |= (uint8_t)(1u << i);
    return roles;
}

/* Reads names and the line table into way w of set st.  0 or -1. */
static int fill(struct ps_code_set *st, int w, const struct ps_python *py,
                struct ps_symtab *syms, int lines)
{
    struct ps_code_entry *e = &st->way[w];
    const struct ps_layout *L = &py->L;
    static char name[PS_STR_MAX * 4 + 1], file[PS_STR_MAX * 4 + 1];
    uintptr_t nameobj = e->id.qualname ? e->id.qualname : e->id.name;

    if (ps_str_read(L, nameobj, name, sizeof name) < 0 ||
        ps_str_read(L, e->id.filename, file, sizeof file) < 0)
        return -1;

    /* Interpreter-made shims, not user code: 3.12's entry frame code
     * ("<shim>") and 3.13+'s _Py_InitCleanup (named "__init__" everywhere,
     * with no locations). */
    e->skip = strcmp(file, "<shim>") == 0 ||
              (strcmp(file, "__init__") == 0 && strcmp(name, "__init__") == 0);

    e->roles = classify(name, file);

    e->func = ps_sym_python(syms, name, file);
    if (e->func == PS_ID_NONE)
        return -1;

    if (!lines)
        return 0;
    uint8_t *tab;
    size_t len;
    if (ps_bytes_read(L, e->id.linetable, PS_MAX_LINETABLE, &tab, &len) != 0)
        return -1;
    /* Each table byte yields at most one range, plus one for the lnotab tail. */
    struct ps_lt_range *r = malloc((len + 2) * sizeof *r);
    if (r == NULL) {
        free(tab);
        return -1;
    }
    int n = ps_linetable_decode(L->lt_format, tab, len, e->id.firstlineno, r, len + 2);
    free(tab);
    if (n < 0) {
        free(r);
        return -1;
    }
    st->lines.ranges[w] = r;
    st->lines.nranges[w] = (uint32_t)n;
    return 0;
}

/* The way a miss refills: one that held this address (its code object
 * was freed and the address reused: that entry can never hit again), else
 * an empty one, else the least recently used. */
static int victim_of(const struct ps_code_set *st, int stale)
{
    if (stale >= 0)
        return stale;
    for (int w = 0; w < PS_CODECACHE_WAYS; w++)
        if (st->way[w].id.addr == 0)
            return w;
    int v = 0;
    unsigned ages = st->way[0].ages;
    for (int w = 1; w < PS_CODECACHE_WAYS; w++)
        if (((ages >> (2 * w)) & 3u) < ((ages >> (2 * v)) & 3u))
            v = w;
    return v;
}

static int32_t line_of(const struct ps_code_set *st, const struct ps_code_entry *e,
                       int64_t addr);

/* The miss path: way w of st is refilled for id.  Out of line: the hit
 * path is what runs for nearly every frame. */
static __attribute__((noinline)) struct ps_code_entry *
refill(struct ps_codecache *c, struct ps_code_set *st, int w, uintptr_t addr, const uint64_t *id,
       const struct ps_python *py, struct ps_symtab *syms, int lines)
{
    c->misses++;
    drop(st, w);
    /* nunits is kept in 32 bits (the entry is one line): more would not
     * compare exactly, so such a code object is not cached (its frames
     * are dropped, as for a code object that cannot be read). */
    int64_t nunits = (int64_t)id[PS_CODE_NUNITS];
    if (nunits < INT32_MIN || nunits > INT32_MAX)
        return NULL;
    struct ps_code_entry *e = &st->way[w];
    e->id.addr = addr;
    e->id.filename = id[PS_CODE_FILENAME];
    e->id.name = id[PS_CODE_NAME];
    e->id.qualname = id[PS_CODE_QUALNAME];
    e->id.linetable = id[PS_CODE_LINETABLE];
    e->id.nunits = (int32_t)nunits;
    e->id.firstlineno = ps_code_lo32(id[PS_CODE_FIRSTLINENO]);
    e->way = (uint8_t)w;
    if (fill(st, w, py, syms, lines) != 0) {
        drop(st, w);
        return NULL;
    }
    e->memo_addr = -1;
    e->memo_line = line_of(st, e, -1);
    ps_code_touch(st, w);
    return e;
}

/* Out of line, for the tests (codecache.h, ps_code_set_of). */
size_t ps_code_set(const struct ps_codecache *c, uintptr_t addr)
{
    return ps_code_set_of(c, addr);
}

PS_TICK_PATH struct ps_code_entry *ps_code_miss_words(struct ps_codecache *c,
                                                     const struct ps_python *py,
                                                     struct ps_symtab *syms, int lines,
                                                     uintptr_t addr, const uint64_t *w)
{
    struct ps_code_set *st = &c->set[ps_code_set_of(c, addr)];
    /* A way with this address whose identity differs (ps_code_hit found
     * none that matches): its code object was freed and the address
     * reused, and the refill takes its place. */
    int stale = -1;
    for (int v = 0; v < PS_CODECACHE_WAYS && st->way[v].id.addr != 0; v++)
        if (st->way[v].id.addr == addr)
            stale = v;
    return refill(c, st, victim_of(st, stale), addr, w, py, syms, lines);
}

PS_TICK_PATH struct ps_code_entry *ps_code_resolve_words(struct ps_codecache *c,
                                                        const struct ps_python *py,
                                                        struct ps_symtab *syms, int lines,
                                                        uintptr_t addr, const uint64_t *w)
{
    struct ps_code_entry *e = ps_code_hit(c, addr, w);
    if (e != NULL) {
        c->hits++;
        return e;
    }
    return ps_code_miss_words(c, py, syms, lines, addr, w);
}

struct ps_code_entry *ps_code_resolve(struct ps_codecache *c, const struct ps_python *py,
                                      struct ps_symtab *syms, int lines, uintptr_t addr,
                                      const uint8_t *snap)
{
    uint64_t w[PS_CODE_ID_WORDS];
    snapshot_words(&py->L, snap, w);
    return ps_code_resolve_words(c, py, syms, lines, addr, w);
}

/* The line of addr in e, of set st. */
static int32_t line_of(const struct ps_code_set *st, const struct ps_code_entry *e,
                       int64_t addr)
{
    int line = ps_linetable_lookup(st->lines.ranges[e->way], st->lines.nranges[e->way], addr,
                                   e->id.firstlineno);
    /* No location (compiler-generated instructions): the function's first
     * line is the most useful thing to show. */
    return line < 0 ? e->id.firstlineno : line;
}

PS_TICK_PATH int32_t ps_code_line_lookup(struct ps_code_entry *e, int64_t addr)
{
    /* e - e->way is its set's first way, at the set's start. */
    const struct ps_code_set *st = (const struct ps_code_set *)(const void *)(e - e->way);
    int32_t line = line_of(st, e, addr);
    /* The memo holds addresses of 32 bits (those of every code object
     * that has an entry); a larger one is looked up each time. */
    if (addr >= INT32_MIN && addr <= INT32_MAX) {
        e->memo_addr = (int32_t)addr;
        e->memo_line = line;
    }
    return line;
}
