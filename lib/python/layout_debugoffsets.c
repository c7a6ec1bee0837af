/*
 * layout_debugoffsets.c - layouts for CPython 3.13 and newer, read from the
 * interpreter's own _Py_DebugOffsets.
 *
 * _Py_DebugOffsets is the first member of _PyRuntime: the cookie "xdebugpy",
 * the version, a free-threading flag and then, per struct of interest, its
 * size and the offsets of its fields.  The *values* describe the running
 * build exactly (debug, free-threaded, any patch release); only the
 * *position* of each value inside the block changes between minor versions,
 * so that is the data kept (layout_debugoffsets_table.c): one table per
 * minor version, written from that version's header and checked against a
 * block captured from a real interpreter
 * (test/unit/fixtures/debug_offsets-*.txt).  Here: the one pass that reads
 * a block with those tables and checks it.
 *
 * Everything read from the block is untrusted: members whose value the C
 * types fix must hold it, each offset must fall inside the size the block
 * reports for its struct, and every size must be plausible, or the layout
 * is refused instead of misread, in one line naming the version.
 */
#include <stdio.h>
#include <string.h>

#include "python/layout.h"
#include "python/layout_debugoffsets_table.h"

#define SUPPORTED "3.9-3.16"

/* "3.15.0rc1", "3.16.0a0", "3.14.7" from a PY_VERSION_HEX (release level
 * 0xA alpha, 0xB beta, 0xC candidate, 0xF final). */
static void version_name(uint32_t hex, char *buf, size_t len)
{
    unsigned lv = (hex >> 4) & 0xf, serial = hex & 0xf;
    const char *level = lv == 0xa ? "a" : lv == 0xb ? "b" : lv == 0xc ? "rc" : "?";
    if (lv == 0xf)
        snprintf(buf, len, "%u.%u.%u", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff);
    else
        snprintf(buf, len, "%u.%u.%u%s%u", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff,
                 level, serial);
}

static uint64_t get64(const uint8_t *d, uint32_t pos)
{
    uint64_t v;
    memcpy(&v, d + pos, sizeof v);
    return v;
}

/* State of one validation pass: the first problem found wins. */
struct check {
    const uint8_t *d;
    char *why;
    size_t whylen;
    int bad;
};

/* Reads a struct size and checks it lies in [lo, hi]. */
static uint32_t get_size(struct check *c, uint32_t pos, const char *what,
                         uint64_t lo, uint64_t hi)
{
    uint64_t v = get64(c->d, pos);
    if (!c->bad && (v < lo || v > hi)) {
        snprintf(c->why, c->whylen, "_Py_DebugOffsets: implausible size %llu of %s",
                 (unsigned long long)v, what);
        c->bad = 1;
    }
    return (uint32_t)v;
}

/* Reads a field offset and checks that width bytes there fit in its struct.
 * pos 0: the block has no such member (see ps_do_positions[]). */
static uint32_t get_off(struct check *c, uint32_t pos, uint32_t struct_size,
                        unsigned width, const char *what)
{
    if (pos == 0)
        return PS_NOFIELD;
    uint64_t v = get64(c->d, pos);
    if (!c->bad && (v + width > struct_size)) {
        snprintf(c->why, c->whylen, "_Py_DebugOffsets: offset %llu of %s lies outside its struct",
                 (unsigned long long)v, what);
        c->bad = 1;
    }
    return (uint32_t)v;
}

/* Fills the thread-name fields, or leaves inst_kind PS_INST_NONE (3.13
 * only: the constants of ps_do_names_maps, layout_debugoffsets_table.c). */
static void names_layout(const uint8_t *dbg, int v, int ft, uint32_t fr_size,
                         struct ps_layout *l)
{
    const struct ps_do_names_map *m = NULL;
    for (size_t i = 0; i < ps_do_names_maps_count; i++)
        if (ps_do_names_maps[i].minor == l->minor &&
            ps_do_names_maps[i].free_threaded == ft)
            m = &ps_do_names_maps[i];
    l->inst_kind = PS_INST_NONE;
    if (m == NULL)
        return;
    uint64_t localsplus = get64(dbg, ps_do_positions[DO_FR_LOCALSPLUS][v]);
    uint64_t dict_size = get64(dbg, ps_do_positions[DO_DICT_SIZE][v]);
    uint64_t keys = get64(dbg, ps_do_positions[DO_DICT_MA_KEYS][v]);
    uint64_t values = get64(dbg, ps_do_positions[DO_DICT_MA_VALUES][v]);
    if (get64(dbg, ps_do_positions[DO_TP_NAME][v]) != m->tp_name ||
        get64(dbg, ps_do_positions[DO_TP_FLAGS][v]) != m->tp_flags ||
        localsplus + 8 > fr_size || dict_size > 256 || keys + 8 > dict_size ||
        values + 8 > dict_size)
        return;
    l->inst_kind = PS_INST_INLINE;
    l->dk_kind = PS_DK_LOG2;
    ps_dict_keys_layout(l);
    l->fr_localsplus = (uint32_t)localsplus;
    l->tp_name = m->tp_name;
    l->tp_flags = m->tp_flags;
    l->tp_basicsize = m->tp_basicsize;
    l->tp_base = m->tp_base;
    l->tp_dictoffset = m->tp_dictoffset;
    l->ht_cached_keys = m->ht_cached_keys;
    l->inst_dict = m->inst_dict;
    l->inst_values = 0;
    l->dict_keys = (uint32_t)keys;
    l->dict_values = (uint32_t)values;
    l->values_items = 8;   /* capacity, size, embedded, valid, then values[] */
    l->values_valid = 3;
}

/*
 * 3.14+: what the asyncio task walk (tasks_read.c) reads beyond frames: the
 * generator's name, embedded frame and state, a frame's stack pointer, and
 * (where thread names did not already) the type and dict fields the block
 * gives.  tp_base is not in the block: 256 in GIL builds, checked like the
 * names' constants by tp_name and tp_flags holding their known values.
 * Free-threaded builds: the same behind a 32-byte object header.
 */
static void objects_layout(struct check *c, const uint8_t *dbg, int v, int ft,
                           uint32_t fr_size, struct ps_layout *l)
{
    l->fr_stackpointer = PS_NOFIELD;
    l->gen_name = l->gen_iframe = l->gen_frame_state = PS_NOFIELD;
    if (ps_do_positions[DO_GEN_SIZE][v] == 0)
        return;
    uint32_t gen = get_size(c, ps_do_positions[DO_GEN_SIZE][v], "PyGenObject", 32, 4096);
    if (c->bad)
        return;
    l->fr_stackpointer = get_off(c, ps_do_positions[DO_FR_STACKPOINTER][v], fr_size, 8,
                                 "frame.stackpointer");
    l->gen_name = get_off(c, ps_do_positions[DO_GEN_NAME][v], gen, 8, "gen.gi_name");
    l->gen_iframe = get_off(c, ps_do_positions[DO_GEN_IFRAME][v], gen, 8, "gen.gi_iframe");
    l->gen_frame_state = get_off(c, ps_do_positions[DO_GEN_FRAME_STATE][v], gen, 1,
                                 "gen.gi_frame_state");
    if (l->inst_kind != PS_INST_NONE)
        return;
    /* PyTypeObject behind a 16 or (free-threaded) 32-byte header */
    uint32_t tp_name = ft ? 40 : 24, tp_flags = ft ? 184 : 168, tp_base = ft ? 272 : 256;
    uint64_t dict_size = get64(dbg, ps_do_positions[DO_DICT_SIZE][v]);
    uint64_t keys = get64(dbg, ps_do_positions[DO_DICT_MA_KEYS][v]);
    uint64_t values = get64(dbg, ps_do_positions[DO_DICT_MA_VALUES][v]);
    if (get64(dbg, ps_do_positions[DO_TP_NAME][v]) != tp_name ||
        get64(dbg, ps_do_positions[DO_TP_FLAGS][v]) != tp_flags || dict_size > 256 ||
        keys + 8 > dict_size || values + 8 > dict_size)
        return;
    l->tp_name = tp_name;
    l->tp_flags = tp_flags;
    l->tp_base = tp_base;
    l->dk_kind = PS_DK_LOG2;
    ps_dict_keys_layout(l);
    l->dict_keys = (uint32_t)keys;
    l->dict_values = (uint32_t)values;
    l->values_items = 8;
    l->values_valid = 3;
    l->objects_described = 1;
}

/*
 * PYSAMPLE_GIL: locked and last_holder inside struct _gil_runtime_state,
 * from where the block says the interpreter's embedded GIL and those two
 * members lie.  A block whose values do not fit a GIL struct leaves the
 * holder unknown (PS_NOFIELD) rather than the layout refused: only
 * PYSAMPLE_GIL needs them.
 */
static void gil_layout(const uint8_t *dbg, int v, uint32_t is_size, struct ps_layout *l)
{
    uint64_t state = get64(dbg, ps_do_positions[DO_GIL_STATE][v]);
    uint64_t locked = get64(dbg, ps_do_positions[DO_GIL_LOCKED][v]);
    uint64_t holder = get64(dbg, ps_do_positions[DO_GIL_HOLDER][v]);
    l->gil_last_holder = l->gil_locked = PS_NOFIELD;
    if (state == 0 || state >= is_size || locked < state || holder < state ||
        locked - state > 64 || holder - state > 64 || holder % 8 != 0 || locked % 4 != 0)
        return;
    l->gil_last_holder = (uint32_t)(holder - state);
    l->gil_locked = (uint32_t)(locked - state);
}

/* The [gc] frame (interpstate.c): 'collecting' from the block, and
 * tstate->state after _status (ps_do_ts_state_after_status,
 * layout_debugoffsets_table.c, says why it holds).  Values that do not fit
 * leave the field unknown (PS_NOFIELD) rather than the layout refused. */
static void gc_layout(const uint8_t *dbg, int v, uint32_t ts_size, struct ps_layout *l)
{
    uint64_t size = get64(dbg, ps_do_positions[DO_GC_SIZE][v]);
    uint64_t collecting = get64(dbg, ps_do_positions[DO_GC_COLLECTING][v]);
    uint64_t status = get64(dbg, ps_do_positions[DO_TS_STATUS][v]);
    uint32_t state = (uint32_t)status + ps_do_ts_state_after_status[v];
    l->gc_collecting = l->ts_state = PS_NOFIELD;
    if (l->is_gc != PS_NOFIELD && size >= 64 && size <= 4096 && collecting + 4 <= size &&
        collecting % 4 == 0)
        l->gc_collecting = (uint32_t)collecting;
    if (status == 32 && state + 4 <= ts_size && l->ts_frame != PS_NOFIELD &&
        state + 4 <= l->ts_frame)
        l->ts_state = state;
}

/* The first member of ps_do_expect[] that does not hold its type-given
 * value in a block laid out as column col says (-1: all hold). */
static int first_mismatch(const uint8_t *dbg, int col, int ft)
{
    for (size_t i = 0; i < ps_do_expect_count; i++) {
        const uint32_t pos = ps_do_expect[i].pos[col];
        uint64_t want = ft ? ps_do_expect[i].ft : ps_do_expect[i].gil;
        if (pos != 0 && get64(dbg, pos) != want)
            return (int)i;
    }
    return -1;
}

/* "(llist_node.prev is 16, expected 8)": member i of ps_do_expect[]. */
static void say_mismatch(const uint8_t *dbg, int col, int ft, int i, char *buf, size_t len)
{
    snprintf(buf, len, "(%s is %llu, expected %llu)", ps_do_expect[i].what,
             (unsigned long long)get64(dbg, ps_do_expect[i].pos[col]),
             (unsigned long long)(ft ? ps_do_expect[i].ft : ps_do_expect[i].gil));
}

/* The members of ps_do_expect[] must hold their type-given values. */
static int layout_matches(const uint8_t *dbg, const struct ps_do_version *m, int ft,
                          const char *ver, char *why, size_t whylen)
{
    int i = first_mismatch(dbg, m->column, ft);
    if (i < 0)
        return 1;
    char what[128];
    say_mismatch(dbg, m->column, ft, i, what, sizeof what);
    snprintf(why, whylen, "CPython %s%s: its _Py_DebugOffsets is not laid out as "
             "3.%d's %s, a patched or unknown build (supported: %s, 3.%d from %s)",
             ver, ft ? " (free-threaded)" : "", m->reads_as, what, SUPPORTED, m->minor,
             m->min_name);
    return 0;
}

/* Offset of field f from the block, checked against its struct's size
 * (sizes[]); PS_NOFIELD where this version's block has none. */
static uint32_t field_off(struct check *c, int v, int ft, enum ps_field f,
                          const uint32_t *sizes)
{
    uint32_t pos = ps_do_positions[f][v];
    /* Only free-threaded builds have thread-local bytecode; the GIL build
     * reports offset 0 for the absent field. */
    int ft_only = f == PS_F_FR_TLBC_INDEX || f == PS_F_CO_TLBC;
    if (pos == 0 || (ft_only && !ft))
        return PS_NOFIELD;
    const struct ps_field_desc *d = &ps_fields[f];
    uint32_t off = get_off(c, pos, sizes[d->in], d->width, d->name);
    return ft_only && off == 0 ? PS_NOFIELD : off;
}

/*
 * A version newer than every row of ps_do_versions[]: why names what
 * differs from the newest layout known, or that nothing in the block
 * does.  A newer CPython may keep the block's layout and still change
 * what the values mean (frame owners, stackref tags, string bits): only
 * versions checked against a real interpreter are read.
 */
static void say_unknown(const uint8_t *dbg, size_t do_len, const char *ver, char *why,
                        size_t whylen)
{
    const struct ps_do_version *newest = &ps_do_versions[NKNOWN - 1];
    uint64_t ft = do_len >= newest->total ? get64(dbg, 16) : 2;
    char what[256] = "";
    if (ft > 1 || memcmp(dbg, "xdebugpy", 8) != 0) {
        snprintf(what, sizeof what, "; no _Py_DebugOffsets found");
    } else {
        char diff[128];
        int i = first_mismatch(dbg, newest->column, (int)ft);
        if (i >= 0)
            say_mismatch(dbg, newest->column, (int)ft, i, diff, sizeof diff);
        snprintf(what, sizeof what, "; its _Py_DebugOffsets %s 3.%d's%s%s", i >= 0 ?
                 "differs from" : "is laid out as", newest->minor, i >= 0 ? " " : "",
                 i >= 0 ? diff : ", but it was never checked on a real build");
    }
    snprintf(why, whylen, "CPython %s is not supported (supported: %s)%s", ver, SUPPORTED,
             what);
}

/* The row of this minor version in ps_do_versions[], or -1 with why said:
 * a version not in the table, or a pre-release older than its block's
 * layout. */
static int version_index(const uint8_t *dbg, size_t do_len, uint32_t hexversion,
                         const char *ver, char *why, size_t whylen)
{
    int minor = (hexversion >> 16) & 0xff, v = -1;
    for (int i = 0; i < NKNOWN; i++)
        if (ps_do_versions[i].minor == minor)
            v = i;
    if (v < 0 && minor > ps_do_versions[NKNOWN - 1].minor) {
        say_unknown(dbg, do_len, ver, why, whylen);
        return -1;
    }
    if (v < 0) {
        snprintf(why, whylen, "CPython %s is not supported (supported: %s)", ver, SUPPORTED);
        return -1;
    }
    const struct ps_do_version *m = &ps_do_versions[v];
    if (hexversion < m->min_hexversion) {
        snprintf(why, whylen, "CPython %s is not supported: this pre-release's _Py_DebugOffsets "
                 "differs from the 3.%d release's (supported: %s, 3.%d from %s)",
                 ver, minor, SUPPORTED, minor, m->min_name);
        return -1;
    }
    return v;
}

/* The block's head (c's, a problem said in c's why): the cookie, the
 * version it says (the one Py_Version says), the free-threading flag (0
 * or 1, into *ft), and the members whose value the C types fix.  0 if it
 * holds. */
static int header_valid(const struct check *c, size_t do_len, uint32_t hexversion,
                        const struct ps_do_version *m, const char *ver, uint64_t *ft)
{
    const uint8_t *dbg = c->d;
    char *why = c->why;
    size_t whylen = c->whylen;
    if (do_len < m->total || memcmp(dbg, "xdebugpy", 8) != 0) {
        snprintf(why, whylen, "_Py_DebugOffsets cookie not found in _PyRuntime");
        return 0;
    }
    if (get64(dbg, 8) != hexversion) {
        snprintf(why, whylen, "_Py_DebugOffsets version %llx does not match Py_Version %x",
                 (unsigned long long)get64(dbg, 8), hexversion);
        return 0;
    }
    *ft = get64(dbg, 16);
    if (*ft > 1) {
        snprintf(why, whylen, "_Py_DebugOffsets: bad free_threaded flag %llu",
                 (unsigned long long)*ft);
        return 0;
    }
    return layout_matches(dbg, m, (int)*ft, ver, why, whylen);
}

/* Every struct's size the block gives, each checked against ps_do_structs[]. */
static void read_sizes(struct check *c, int v, uint32_t sizes[PS_S_COUNT])
{
    for (int s = 0; s < PS_S_COUNT; s++)
        if (ps_do_structs[s].size_row != 0)
            sizes[s] = get_size(c, ps_do_positions[ps_do_structs[s].size_row][v],
                                ps_do_structs[s].name,
                                ps_do_structs[s].lo, ps_do_structs[s].hi);
}

/* Every ps_field the block gives, each against its struct's size, and
 * the spans derived from them. */
static void fields_layout(struct check *c, int v, int ft, const uint32_t *sizes,
                          struct ps_layout *l)
{
    for (int f = 0; f < PS_F_COUNT; f++)
        ps_layout_set(l, (enum ps_field)f, field_off(c, v, ft, (enum ps_field)f, sizes));
    l->co_nunits = sizes[PS_S_OBJECT];  /* ob_size follows the object header (PyVarObject) */
    /* A frame's size on the data stack (frames.c checks each link with it)
     * is not in _Py_DebugOffsets.  co_stacksize and co_nlocalsplus are the
     * ints on either side of co_firstlineno in every PyCodeObject from
     * 3.11 to 3.15 (_PyCode_DEF; checked with offsetof() for 3.13, 3.14,
     * 3.14t and 3.15). */
    if (l->co_firstlineno != PS_NOFIELD && l->co_firstlineno >= 4) {
        l->co_stacksize = l->co_firstlineno - 4;
        l->co_nlocalsplus = l->co_firstlineno + 4;
    }
    ps_layout_spans(l);
}

/* How frames of 3.13+ are walked: what the block cannot say, because it
 * is a constant or a tag of the version rather than an offset. */
static void frame_kinds(const uint8_t *dbg, int v, uint32_t fr_size, struct ps_layout *l)
{
    l->frame_kind = PS_FRAMES_INTERP;
    l->pos_kind = PS_POS_INSTR_PTR;
    /* Frame owners at or above this are not Python frames: 3.13
     * FRAME_OWNED_BY_CSTACK (3); 3.14 FRAME_OWNED_BY_INTERPRETER (3) and
     * CSTACK (4); 3.15 dropped CSTACK, INTERPRETER stays 3. */
    l->owner_first_native = 3;
    /* f_executable is a _PyStackRef from 3.14 on: Py_TAG_BITS is 3 in GIL
     * builds (3.15: also in free-threaded ones), 1 in 3.14t. */
    l->code_tag_mask = l->minor >= 14 ? 3 : 0;
    uint64_t specials = get64(dbg, ps_do_positions[DO_FR_LOCALSPLUS][v]);
    l->fr_specials = specials >= 64 && specials <= fr_size && specials % 8 == 0
                         ? (uint32_t)specials : PS_NOFIELD;
    l->lt_format = PS_LT_LOCATIONS;
}

/* Where a str's characters begin (compact ASCII and compact), checked as
 * plausible, and its state bits. */
static void str_layout(struct check *c, int v, int ft, struct ps_layout *l)
{
    uint32_t compact_pos = ps_do_positions[DO_UN_COMPACT_SIZE][v];
    l->str_ascii_data = (uint32_t)get64(c->d, ps_do_positions[DO_UN_ASCII_SIZE][v]);
    l->str_compact_data = compact_pos != 0 ? (uint32_t)get64(c->d, compact_pos)
                                           : l->str_ascii_data + 16;
    if (!c->bad && (l->str_ascii_data < 24 || l->str_ascii_data > 128 ||
                    l->str_compact_data <= l->str_ascii_data || l->str_compact_data > 160)) {
        snprintf(c->why, c->whylen, "_Py_DebugOffsets: implausible str header sizes %u/%u",
                 l->str_ascii_data, l->str_compact_data);
        c->bad = 1;
    }
    /* Free-threaded 3.14+ made 'interned' a whole byte (3.15 moved the
     * bit-field into struct _PyUnicodeObject_state, with the same members). */
    ps_layout_str_bits(l, ft && l->minor >= 14);
    l->st_ready_bit = 0xff;
}

/* The optional parts: each leaves its fields unknown rather than the
 * layout refused, and the two that read further only from a block found
 * sound so far. */
static void optional_layouts(struct check *c, int v, int ft, const uint32_t *sizes,
                             struct ps_layout *l)
{
    gil_layout(c->d, v, sizes[PS_S_INTERP], l);
    gc_layout(c->d, v, sizes[PS_S_TSTATE], l);
    if (!c->bad)
        names_layout(c->d, v, ft, sizes[PS_S_FRAME], l);
    if (!c->bad)
        objects_layout(c, c->d, v, ft, sizes[PS_S_FRAME], l);
    else
        l->fr_stackpointer = l->gen_name = l->gen_iframe = l->gen_frame_state = PS_NOFIELD;
}

/* Prefixes why with the version: the user has to know which build said
 * this. */
static void name_the_build(char *why, size_t whylen, const char *ver, int ft)
{
    char detail[256];
    snprintf(detail, sizeof detail, "%s", why);
    snprintf(why, whylen, "CPython %s%s: %s", ver, ft ? " (free-threaded)" : "", detail);
}

enum ps_layout_status ps_layout_from_debug_offsets(const uint8_t *dbg,
                                                   size_t do_len,
                                                   uint32_t hexversion,
                                                   struct ps_layout *l,
                                                   char *why, size_t whylen)
{
    char ver[32];
    uint64_t ft = 0;

    version_name(hexversion, ver, sizeof ver);
    int row = version_index(dbg, do_len, hexversion, ver, why, whylen);
    if (row < 0)
        return PS_LAYOUT_UNSUPPORTED;
    const struct ps_do_version *m = &ps_do_versions[row];
    /* One pass: every step below checks against c, and the first problem
     * it finds is the one reported. */
    struct check c = { dbg, why, whylen, 0 };
    if (!header_valid(&c, do_len, hexversion, m, ver, &ft))
        return PS_LAYOUT_INVALID;
    const int v = m->column;   /* every position below: this layout's */

    uint32_t sizes[PS_S_COUNT] = { 0 };
    read_sizes(&c, v, sizes);
    memset(l, 0, sizeof *l);
    l->hexversion = hexversion;
    l->minor = m->reads_as;
    l->free_threaded = (int)ft;
    l->from_debug_offsets = 1;
    fields_layout(&c, v, (int)ft, sizes, l);
    frame_kinds(dbg, v, sizes[PS_S_FRAME], l);
    str_layout(&c, v, (int)ft, l);
    optional_layouts(&c, v, (int)ft, sizes, l);
    if (c.bad)
        name_the_build(why, whylen, ver, (int)ft);
    return c.bad ? PS_LAYOUT_INVALID : PS_LAYOUT_OK;
}
