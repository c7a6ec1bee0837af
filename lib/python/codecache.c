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
 * from the *current* bytes of the object (the caller copies them for the
 * type check anyway): the pointers to co_filename, co_name, co_qualname and
 * the line table, co_firstlineno and the bytecode length.  A new code object
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
 */
#include <stdlib.h>
#include <string.h>

#include "python/codecache.h"
#include "memory/memread.h"
#include "python/pystr.h"
#include "util/tickpath.h"

/* Line tables larger than this are not decoded (the frame keeps line 0). */
#define PS_MAX_LINETABLE (1u << 20)

int ps_codecache_init(struct ps_codecache *c, size_t max_entries)
{
    memset(c, 0, sizeof *c);
    size_t sets = 64;
    while (sets * PS_CODECACHE_WAYS < max_entries)
        sets *= 2;
    /* Aligned as its entries are (codecache.h): calloc promises 16 bytes. */
    size_t bytes = sets * PS_CODECACHE_WAYS * sizeof *c->e;
    c->e = aligned_alloc(_Alignof(struct ps_code_entry), bytes);
    if (c->e != NULL)
        memset(c->e, 0, bytes);
    if (c->e == NULL)
        return -1;
    c->sets = sets;
    return 0;
}

static void drop(struct ps_code_entry *e)
{
    free(e->ranges);
    memset(e, 0, sizeof *e);
}

void ps_codecache_clear(struct ps_codecache *c)
{
    for (size_t i = 0; i < c->sets * PS_CODECACHE_WAYS; i++)
        drop(&c->e[i]);
}

static void snapshot_id(const struct ps_layout *L, uintptr_t addr, const uint8_t *snap,
                        struct ps_code_id *id)
{
    id->addr = addr;
    id->filename = ps_ptr_at(snap, L->co_filename);
    id->name = ps_ptr_at(snap, L->co_name);
    id->qualname = ps_ptr_at(snap, L->co_qualname);
    id->linetable = ps_ptr_at(snap, L->co_linetable);
    id->nunits = 0;
    if (L->co_nunits != PS_NOFIELD)
        memcpy(&id->nunits, snap + L->co_nunits, sizeof id->nunits);
    memcpy(&id->firstlineno, snap + L->co_firstlineno, sizeof id->firstlineno);
}

/* Field by field: cheaper than memcmp of the struct (and blind to its
 * padding); the line table's address, the likeliest to differ, first. */
static int same_id(const struct ps_code_id *a, const struct ps_code_id *b)
{
    return a->linetable == b->linetable && a->filename == b->filename &&
           a->name == b->name && a->qualname == b->qualname && a->nunits == b->nunits &&
           a->firstlineno == b->firstlineno;
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

/* Reads names and the line table into e.  0 or -1. */
static int fill(struct ps_code_entry *e, const struct ps_python *py,
                struct ps_symtab *syms, int lines)
{
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

    e->nranges = 0;
    e->ranges = NULL;
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
    e->ranges = r;
    e->nranges = (uint32_t)n;
    return 0;
}

/* The miss path: victim (the set's least recently used way) is refilled
 * for id.  Out of line: the hit path is what runs for nearly every frame. */
static __attribute__((noinline)) struct ps_code_entry *
refill(struct ps_codecache *c, struct ps_code_entry *victim, const struct ps_code_id *id,
       const struct ps_python *py, struct ps_symtab *syms, int lines)
{
    c->misses++;
    drop(victim);
    victim->id = *id;
    if (fill(victim, py, syms, lines) != 0) {
        drop(victim);
        return NULL;
    }
    victim->valid = 1;
    victim->stamp = c->clock;
    victim->memo_addr = INT64_MIN;
    return victim;
}

/*
 * Code objects made together (a module's, a class's functions) sit a few
 * hundred bytes apart, and a walk meets them together: their sets follow
 * their addresses (bits 8 and up, in order) so that a walk's entries share
 * a few pages of the table instead of taking one page each (16384 entries
 * of ~104 bytes: 1.7 MB, ~420 pages, each a TLB miss for the tick that
 * starts cold after its sleep).  The 1 MiB region the address is in is
 * hashed and added, so that objects at one offset of different regions
 * (arenas, heaps) spread over the sets as a hash would spread them.
 */
PS_TICK_PATH size_t ps_code_set(const struct ps_codecache *c, uintptr_t addr)
{
    size_t region = (size_t)((uint64_t)(addr >> 20) * 0x9E3779B97F4A7C15ull >> 32);
    return ((size_t)(addr >> 8) + region) & (c->sets - 1);
}

PS_TICK_PATH struct ps_code_entry *ps_code_resolve(struct ps_codecache *c,
                                      const struct ps_python *py,
                                      struct ps_symtab *syms, int lines,
                                      uintptr_t addr, const uint8_t *snap)
{
    struct ps_code_id id;
    snapshot_id(&py->L, addr, snap, &id);

    struct ps_code_entry *ways = &c->e[ps_code_set(c, addr) * PS_CODECACHE_WAYS];
    struct ps_code_entry *victim = &ways[0];
    c->clock++;
    for (int w = 0; w < PS_CODECACHE_WAYS; w++) {
        struct ps_code_entry *e = &ways[w];
        if (e->valid && e->id.addr == addr && same_id(&e->id, &id)) {
            e->stamp = c->clock;
            c->hits++;
            return e;
        }
        if (!e->valid || e->stamp < victim->stamp)
            victim = e;
        if (!e->valid)
            break;
    }
    return refill(c, victim, &id, py, syms, lines);
}

PS_TICK_PATH int32_t ps_code_line_lookup(struct ps_code_entry *e, int64_t addr)
{
    int line = ps_linetable_lookup(e->ranges, e->nranges, addr, e->id.firstlineno);
    /* No location (compiler-generated instructions): the function's first
     * line is the most useful thing to show. */
    if (line < 0)
        line = e->id.firstlineno;
    e->memo_addr = addr;
    e->memo_line = line;
    return line;
}
