/*
 * darwin/machosyms.c - the loaded images and their function symbols on
 * macOS, for the native unwinder (which addresses are code) and for names:
 * the counterpart of lib/platform/linux/elfsyms.c (platform/stacks.h).
 *
 * The list is dyld's: _dyld_image_count, _dyld_get_image_header,
 * _dyld_get_image_vmaddr_slide and _dyld_get_image_name.  They take dyld's
 * lock, so the list is read by the sampler thread before a tick and never
 * while a thread is suspended (it could be inside dlopen, holding that
 * lock).  It is read again when dyld's add- and remove-image callbacks have
 * counted a change since (the callbacks only count; the first refresh
 * registers them).  Per image: its __TEXT segment, slid ([lo, hi): the
 * Mach header and the code), and its load address, the Mach header, from
 * which library+0x1234 offsets count (as `atos -l` takes them).
 *
 * Symbols come from memory, not from the file, the first time an address
 * in the image is named (never while a thread is suspended): LC_SYMTAB's
 * nlist_64 entries and strings are in the image's __LINKEDIT, mapped with
 * it, at slide + linkedit.vmaddr - linkedit.fileoff + offset.  The images of
 * the dyld shared cache (libSystem and the rest of the OS) have theirs in
 * the cache's shared linkedit, which the same formula reaches; the cache
 * keeps its images' local (static) symbols in a separate file that is not
 * mapped, so those print as library+0x1234.  Kept: defined symbols of a
 * section in __TEXT, sorted, names copied with the one leading '_' that
 * the C compiler adds removed.  LC_FUNCTION_STARTS (every function's start,
 * static and stripped ones included, ULEB128 deltas) bounds them: an
 * address is named by a symbol only if that symbol starts the address's
 * own function; otherwise library+0x1234, never a neighbour's name.  The
 * same starts answer ps_darwin_same_function for the frame-0 rule
 * (regs.c) without allocating.  Every read of an image goes through
 * ps_read: an image unloaded meanwhile fails cleanly.
 *
 * Memory: at most PS_SYM_BUDGET bytes of symbols over all images (as on
 * Linux); past it, names are offsets.  An image that was unloaded loses its
 * table at the next refresh; one that stayed keeps it.
 *
 * Compile-checked in the cross build; the logic runs on Linux against fake
 * images in test/cross/test_darwin_copy.c.  Not run on a Mac
 * (docs/macos.md).
 */
#include <mach-o/dyld.h>
#include <mach-o/loader.h>
#include <mach-o/nlist.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/bsearch.h"
#include "memory/memread.h"
#include "platform/stacks.h"
#include "platform/darwin/darwin.h"
#include "util/grow.h"

#define PS_SYM_BUDGET (256u << 20)
#define PS_IMAGES_MAX 4096
#define PS_CMDS_MAX (1u << 20)       /* bytes of load commands we read */
#define PS_NSYMS_MAX (1u << 24)
#define PS_STRTAB_MAX (256u << 20)

/* Sorted arrays below are searched by bsearch.h on a uint64_t key. */
struct sym {
    uint64_t off;     /* from the Mach header */
    uint32_t name;    /* into strs */
};

/* What is read of an image the first time one of its addresses is named;
 * kept across refreshes while the image stays. */
struct names {
    int state;                 /* 0 not loaded, 1 loaded, -1 none to be had */
    struct sym *syms;
    size_t nsyms;
    char *strs;
    uint64_t *starts;          /* function starts, from the header, ascending */
    size_t nstarts;
    size_t bytes;
};

struct ps_obj {
    uint64_t lo;               /* __TEXT, slid: [lo, hi); the key, first */
    uintptr_t hi;
    uintptr_t base;            /* the Mach header */
    uintptr_t data_lo, data_hi; /* every segment but __PAGEZERO and __LINKEDIT */
    int interp;
    char *path;                /* malloc'ed */
    const char *name;          /* base name, inside path */
    struct names t;
};

static struct {
    struct ps_obj *objs;       /* sorted by lo */
    size_t n;
    unsigned long seen;        /* changes counted when the list was read */
    int have_list;
    size_t sym_bytes;
} T;

/* Bumped whenever the list changes (ps_objs_generation). */
static uint32_t objs_gen;

/* --- the list ---------------------------------------------------------------- */

static _Atomic unsigned long changes;
static _Atomic int watching;

/* dyld calls these with its lock held, for every image there when they are
 * registered and for each one loaded or unloaded after: count, nothing else. */
static void image_added(const struct mach_header *mh, intptr_t slide)
{
    (void)mh;
    (void)slide;
    atomic_fetch_add(&changes, 1);
}

static void image_removed(const struct mach_header *mh, intptr_t slide)
{
    (void)mh;
    (void)slide;
    atomic_fetch_add(&changes, 1);
}

/* What the load commands of one image say. */
struct macho {
    uint64_t text_vmaddr, text_vmsize;
    uint64_t le_vmaddr, le_fileoff, le_vmsize;
    uint64_t lo, hi;                 /* all segments but __PAGEZERO, __LINKEDIT */
    int have_text, have_le;
    struct symtab_command symtab;
    int have_symtab;
    struct linkedit_data_command starts;
    int have_starts;
};

static int segname_is(const char *segname, const char *want)
{
    return strncmp(segname, want, 16) == 0;
}

/* What one segment adds: __TEXT's place, __LINKEDIT's, the span of the
 * image's data. */
static void note_segment(const struct segment_command_64 *sc, struct macho *m)
{
    if (segname_is(sc->segname, SEG_TEXT)) {
        m->text_vmaddr = sc->vmaddr;
        m->text_vmsize = sc->vmsize;
        m->have_text = 1;
    } else if (segname_is(sc->segname, SEG_LINKEDIT)) {
        m->le_vmaddr = sc->vmaddr;
        m->le_fileoff = sc->fileoff;
        m->le_vmsize = sc->vmsize;
        m->have_le = 1;
    }
    if (!segname_is(sc->segname, SEG_LINKEDIT) && !segname_is(sc->segname, SEG_PAGEZERO) &&
        sc->vmsize != 0) {
        if (sc->vmaddr < m->lo)
            m->lo = sc->vmaddr;
        if (sc->vmaddr + sc->vmsize > m->hi)
            m->hi = sc->vmaddr + sc->vmsize;
    }
}

/* Reads the header and load commands of the image at mh.  0 or -1. */
static int parse_macho(uintptr_t mh, struct macho *m)
{
    struct mach_header_64 h;
    memset(m, 0, sizeof *m);
    m->lo = UINT64_MAX;
    if (ps_read(&h, mh, sizeof h) != 0 || h.magic != MH_MAGIC_64 || h.sizeofcmds > PS_CMDS_MAX ||
        h.sizeofcmds < sizeof(struct load_command))
        return -1;
    uint8_t *cmds = malloc(h.sizeofcmds);
    if (cmds == NULL || ps_read(cmds, mh + sizeof h, h.sizeofcmds) != 0) {
        free(cmds);
        return -1;
    }
    size_t at = 0;
    for (uint32_t i = 0; i < h.ncmds; i++) {
        struct load_command lc;
        if (h.sizeofcmds - at < sizeof lc)
            break;
        memcpy(&lc, cmds + at, sizeof lc);
        if (lc.cmdsize < sizeof lc || lc.cmdsize > h.sizeofcmds - at)
            break;
        if (lc.cmd == LC_SEGMENT_64 && lc.cmdsize >= sizeof(struct segment_command_64)) {
            struct segment_command_64 sc;
            memcpy(&sc, cmds + at, sizeof sc);
            note_segment(&sc, m);
        } else if (lc.cmd == LC_SYMTAB && lc.cmdsize >= sizeof(struct symtab_command)) {
            memcpy(&m->symtab, cmds + at, sizeof m->symtab);
            m->have_symtab = 1;
        } else if (lc.cmd == LC_FUNCTION_STARTS &&
                   lc.cmdsize >= sizeof(struct linkedit_data_command)) {
            memcpy(&m->starts, cmds + at, sizeof m->starts);
            m->have_starts = 1;
        }
        at += lc.cmdsize;
    }
    free(cmds);
    return m->have_text && m->text_vmsize != 0 ? 0 : -1;
}

static int by_lo(const void *a, const void *b)
{
    const struct ps_obj *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void drop_syms(struct ps_obj *o)
{
    free(o->t.syms);
    free(o->t.strs);
    free(o->t.starts);
    T.sym_bytes -= o->t.bytes;
    memset(&o->t, 0, sizeof o->t);
}

/* The image of the new list that is old (same header, code and path), or
 * NULL if it went. */
static struct ps_obj *same_image(struct ps_obj *objs, size_t n, const struct ps_obj *old)
{
    for (size_t j = 0; j < n; j++)
        if (objs[j].base == old->base && objs[j].lo == old->lo &&
            strcmp(objs[j].path, old->path) == 0)
            return &objs[j];
    return NULL;
}

/* One image of dyld's list into o.  0, or -1 (skipped). */
static int collect(uint32_t i, struct ps_obj *o)
{
    const struct mach_header *mh = _dyld_get_image_header(i);
    const char *path = _dyld_get_image_name(i);
    if (mh == NULL)
        return -1;
    uintptr_t slide = (uintptr_t)_dyld_get_image_vmaddr_slide(i);
    struct macho m;
    if (parse_macho((uintptr_t)mh, &m) != 0)
        return -1;
    memset(o, 0, sizeof *o);
    o->base = (uintptr_t)mh;
    o->lo = (uintptr_t)m.text_vmaddr + slide;
    o->hi = o->lo + (uintptr_t)m.text_vmsize;
    if (m.lo < m.hi) {
        o->data_lo = (uintptr_t)m.lo + slide;
        o->data_hi = (uintptr_t)m.hi + slide;
    }
    o->path = strdup(path != NULL && path[0] != '\0' ? path : "[unknown image]");
    if (o->path == NULL)
        return -1;
    const char *slash = strrchr(o->path, '/');
    o->name = slash ? slash + 1 : o->path;
    return 0;
}

/* dyld's list as it is now, sorted by address, in a new array of *n
 * images; NULL without memory. */
static struct ps_obj *read_images(size_t *n_out)
{
    uint32_t count = _dyld_image_count();
    if (count > PS_IMAGES_MAX)
        count = PS_IMAGES_MAX;
    struct ps_obj *objs = calloc(count ? count : 1, sizeof *objs);
    if (objs == NULL)
        return NULL;
    size_t n = 0;
    /* An image unloaded meanwhile shifts the indexes: the header of a
     * past-the-end index is NULL, and the count moved, so the next tick
     * reads the list again. */
    for (uint32_t i = 0; i < count; i++)
        if (collect(i, &objs[n]) == 0)
            n++;
    qsort(objs, n, sizeof *objs, by_lo);
    *n_out = n;
    return objs;
}

int ps_objs_refresh(uintptr_t interp)
{
    if (!atomic_exchange(&watching, 1)) {
        /* Each calls its function once per image already loaded, here. */
        _dyld_register_func_for_add_image(image_added);
        _dyld_register_func_for_remove_image(image_removed);
    }
    unsigned long now = atomic_load(&changes);
    if (T.have_list && now == T.seen)
        return 0;
    size_t n;
    struct ps_obj *objs = read_images(&n);
    if (objs == NULL)
        return 0;
    /* Images that stayed keep their names; the others' are freed. */
    for (size_t i = 0; i < T.n; i++) {
        struct ps_obj *stay = same_image(objs, n, &T.objs[i]);
        if (stay != NULL)
            stay->t = T.objs[i].t;
        else
            drop_syms(&T.objs[i]);
        free(T.objs[i].path);
    }
    free(T.objs);
    T.objs = objs;
    T.n = n;
    objs_gen++;   /* the unwinder's cache is per address: stale now */
    /* The interpreter's code: the image whose segments hold _PyRuntime
     * (the executable, or libpython / the Python framework). */
    for (size_t i = 0; i < T.n; i++)
        T.objs[i].interp = interp != 0 && interp >= T.objs[i].data_lo && interp < T.objs[i].data_hi;
    T.seen = now;
    T.have_list = 1;
    return 1;
}

void ps_objs_free(void)
{
    struct ps_obj *objs = T.objs;
    size_t n = T.n;
    T.objs = NULL;
    T.n = 0;
    T.have_list = 0;
    objs_gen++;
    while (n > 0) {
        n--;
        drop_syms(&objs[n]);
        free(objs[n].path);
    }
    free(objs);
}

const char *ps_obj_name(const struct ps_obj *o)
{
    return o->name;
}

uint32_t ps_objs_generation(void)
{
    return objs_gen;
}

const struct ps_obj *ps_objs_find(uintptr_t pc)
{
    size_t i = PS_UPPER_BOUND(T.objs, T.n, struct ps_obj, lo, pc);
    return i > 0 && pc < T.objs[i - 1].hi ? &T.objs[i - 1] : NULL;
}

uintptr_t ps_obj_offset(const struct ps_obj *o, uintptr_t pc)
{
    /* From the Mach header, as `atos -l <header>` takes it. */
    return pc - o->base;
}

uintptr_t ps_obj_eh_frame_hdr(const struct ps_obj *o)
{
    /* Mach-O has no .eh_frame_hdr (its unwind tables are __unwind_info and
     * __eh_frame, not read here): macOS code keeps frame pointers, and the
     * unwinder walks them (docs/native.md). */
    (void)o;
    return 0;
}

int ps_obj_is_interp(const struct ps_obj *o)
{
    return o->interp;
}

/* --- symbols ------------------------------------------------------------------- */

static int by_off(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Reads [addr, addr + n) of an image into a new buffer, or NULL. */
static void *read_copy(uintptr_t addr, size_t n)
{
    uint8_t *buf = malloc(n ? n : 1);
    /* In pieces: one Mach call per 64 KiB is cheap; one of 100 MiB would
     * hold a big kernel copy for nothing if the table is cut short. */
    for (size_t at = 0; buf != NULL && at < n;) {
        size_t k = n - at < 65536 ? n - at : 65536;
        if (ps_read(buf + at, addr + at, k) != 0) {
            free(buf);
            return NULL;
        }
        at += k;
    }
    return buf;
}

/* LC_FUNCTION_STARTS: ULEB128 deltas from the __TEXT segment's start (the
 * header), the first from 0, up to a 0. */
static void load_starts(struct ps_obj *o, const struct macho *m, uintptr_t linkedit)
{
    if (!m->have_starts || m->starts.datasize == 0 || m->starts.datasize > PS_STRTAB_MAX)
        return;
    uint8_t *d = read_copy(linkedit + m->starts.dataoff, m->starts.datasize);
    if (d == NULL)
        return;
    size_t cap = 0, n = 0;
    uint64_t *starts = NULL;
    uint64_t off = 0;
    for (size_t at = 0; at < m->starts.datasize;) {
        uint64_t delta = 0;
        unsigned shift = 0;
        uint8_t b = 0x80;
        while (at < m->starts.datasize && (b & 0x80)) {
            b = d[at++];
            if (shift < 64)
                delta |= (uint64_t)(b & 0x7f) << shift;
            shift += 7;
        }
        if (delta == 0 || (b & 0x80))
            break;
        off += delta;
        if (off > m->text_vmsize)
            break;
        if (T.sym_bytes + o->t.bytes + sizeof *starts > PS_SYM_BUDGET)
            break;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 1024;
            uint64_t *ns = realloc(starts, nc * sizeof *ns);
            if (ns == NULL)
                break;
            starts = ns;
            cap = nc;
        }
        starts[n++] = off;
        o->t.bytes += sizeof *starts;
    }
    free(d);
    /* Ascending by construction (deltas are positive): no sort needed. */
    o->t.starts = starts;
    o->t.nstarts = n;
}

/* Symbol s's name (len bytes), without the C compiler's prefix, if s is
 * a symbol of the code whose name ends inside the string table names;
 * NULL if not. */
static const char *symbol_name(const struct nlist_64 *s, const char *names, const struct macho *m,
                               size_t *len_out)
{
    const struct symtab_command *st = &m->symtab;
    if ((s->n_type & N_STAB) != 0 || (s->n_type & N_TYPE) != N_SECT || s->n_sect == NO_SECT ||
        s->n_un.n_strx == 0 || s->n_un.n_strx >= st->strsize ||
        s->n_value < m->text_vmaddr || s->n_value - m->text_vmaddr >= m->text_vmsize)
        return NULL;   /* debug entries, undefined, absolute, outside the code */
    const char *nm = names + s->n_un.n_strx;
    size_t room = st->strsize - s->n_un.n_strx;
    size_t len = strnlen(nm, room);
    if (len == room)
        return NULL;   /* not terminated inside the table */
    if (nm[0] == '_' && len > 1) {
        nm++;       /* the C compiler's prefix */
        len--;
    }
    *len_out = len;
    return nm;
}

/* How far an image's tables have grown: entries and name bytes
 * allocated, name bytes used. */
struct symgrow {
    size_t cap, strcap, used;
};

/* Appends the symbol nm (len bytes) at off to t.  0, or -1 without
 * memory. */
static int append_symbol(struct names *t, struct symgrow *g, const char *nm, size_t len,
                         uint64_t off)
{
    struct sym *syms = ps_grow(t->syms, &g->cap, t->nsyms + 1, sizeof *syms, 1024);
    if (syms == NULL)
        return -1;
    t->syms = syms;
    char *strs = ps_grow(t->strs, &g->strcap, g->used + len + 1, 1, 16384);
    if (strs == NULL)
        return -1;
    t->strs = strs;
    memcpy(t->strs + g->used, nm, len);
    t->strs[g->used + len] = '\0';
    t->syms[t->nsyms] = (struct sym){ off, (uint32_t)g->used };
    t->nsyms++;
    g->used += len + 1;
    t->bytes += sizeof(struct sym) + len + 1;
    return 0;
}

static void load_symtab(struct ps_obj *o, const struct macho *m, uintptr_t linkedit)
{
    const struct symtab_command *st = &m->symtab;
    if (!m->have_symtab || st->nsyms == 0 || st->nsyms > PS_NSYMS_MAX ||
        st->strsize == 0 || st->strsize > PS_STRTAB_MAX)
        return;
    struct nlist_64 *nl = read_copy(linkedit + st->symoff, (size_t)st->nsyms * sizeof *nl);
    char *names = nl != NULL ? read_copy(linkedit + st->stroff, st->strsize) : NULL;
    if (names == NULL) {
        free(nl);
        return;
    }
    struct symgrow g = { 0, 0, 0 };
    for (uint32_t i = 0; i < st->nsyms; i++) {
        size_t len;
        const char *nm = symbol_name(&nl[i], names, m, &len);
        if (nm == NULL)
            continue;
        struct names *t = &o->t;
        if (len == 0 || T.sym_bytes + t->bytes + sizeof(struct sym) + len + 1 > PS_SYM_BUDGET)
            continue;
        if (append_symbol(t, &g, nm, len, nl[i].n_value - m->text_vmaddr) != 0)
            break;
    }
    free(nl);
    free(names);
    if (o->t.nsyms > 0)
        qsort(o->t.syms, o->t.nsyms, sizeof *o->t.syms, by_off);
}

static void load_syms(struct ps_obj *o)
{
    struct macho m;
    o->t.state = -1;
    if (parse_macho(o->base, &m) != 0 || !m.have_le)
        return;
    /* Where file offsets into __LINKEDIT are in memory (the slide is the
     * header's distance from its unslid __TEXT address). */
    uintptr_t slide = o->base - (uintptr_t)m.text_vmaddr;
    uintptr_t linkedit = (uintptr_t)m.le_vmaddr + slide - (uintptr_t)m.le_fileoff;
    load_symtab(o, &m, linkedit);
    load_starts(o, &m, linkedit);
    if (o->t.nsyms == 0 && o->t.nstarts == 0) {
        drop_syms(o);
        return;
    }
    T.sym_bytes += o->t.bytes;
    o->t.state = 1;
}

/* Index + 1 of the last function start at or below off, or 0. */
static size_t start_of(const struct names *t, uint64_t off)
{
    return ps_upper_bound(t->starts, t->nstarts, sizeof *t->starts, 0, off);
}

/* Index + 1 of the last symbol at or below off, or 0. */
static size_t sym_of(const struct names *t, uint64_t off)
{
    return PS_UPPER_BOUND(t->syms, t->nsyms, struct sym, off, off);
}

const char *ps_obj_symbol(const struct ps_obj *co, uintptr_t pc)
{
    struct ps_obj *o = (struct ps_obj *)co;
    if (o->t.state == 0)
        load_syms(o);
    if (o->t.state != 1)
        return NULL;
    const struct names *t = &o->t;
    uint64_t off = pc - o->base;
    size_t s = sym_of(t, off), f = start_of(t, off);
    /* A symbol before the start of pc's own function names another one
     * (a static function the table does not list). */
    if (s == 0 || (f > 0 && t->syms[s - 1].off < t->starts[f - 1]))
        return NULL;
    return t->strs + t->syms[s - 1].name;
}

int ps_darwin_same_function(uintptr_t a, uintptr_t b)
{
    const struct ps_obj *oa = ps_objs_find(a), *ob = ps_objs_find(b);
    if (oa == NULL || ob == NULL || oa != ob)
        return 0;
    const struct names *t = &oa->t;
    if (t->state != 1)
        return -1;
    uint64_t x = a - oa->base, y = b - oa->base;
    if (t->nstarts > 0)
        return start_of(t, x) == start_of(t, y);
    /* No function starts: the nearest symbols decide (aliases share an
     * offset, so compare offsets, not entries). */
    size_t sx = sym_of(t, x), sy = sym_of(t, y);
    if (sx == 0 || sy == 0)
        return sx == sy ? -1 : 0;
    return t->syms[sx - 1].off == t->syms[sy - 1].off;
}
