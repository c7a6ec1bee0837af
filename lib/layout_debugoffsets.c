/*
 * layout_debugoffsets.c - layouts for CPython 3.13 and newer, read from the
 * interpreter's own _Py_DebugOffsets.
 *
 * _Py_DebugOffsets is the first member of _PyRuntime: the cookie "xdebugpy",
 * the version, a free-threading flag and then, per struct of interest, its
 * size and the offsets of its fields.  The *values* describe the running
 * build exactly (debug, free-threaded, any patch release); only the
 * *position* of each value inside the block changes between minor versions,
 * so that is the data kept here: one table per minor version, written from
 * that version's header and checked against a block captured from a real
 * interpreter (test/unit/fixtures/debug_offsets-*.txt).
 *
 * Everything read from the block is untrusted: members whose value the C
 * types fix must hold it, each offset must fall inside the size the block
 * reports for its struct, and every size must be plausible, or the layout
 * is refused instead of misread, in one line naming the version.
 */
#include <stdio.h>
#include <string.h>

#include "layout.h"

/*
 * Position (byte offset inside the block) of each value we use, per minor
 * version.  Every member of _Py_DebugOffsets is a uint64_t, so a position
 * is 8 x the member's index in the struct as declared in that version's
 * Include/internal/pycore_debug_offsets.h (3.13: pycore_runtime.h) at the
 * release tag.  Position 0 is the cookie, never a value, so a member left
 * out of a table (0) means "this version's block has no such value".
 *
 * expect[] lists members whose value is fixed by the C types involved, not
 * by the build: a block whose values there differ is not laid out as this
 * table says (another pre-release, a patched CPython), and is refused by
 * name rather than misread.
 */
struct do_expect {
    uint32_t pos;
    uint64_t gil, ft;          /* value in GIL and free-threaded builds */
    const char *what;
};

struct do_map {
    int minor;
    uint32_t min_hexversion;   /* earliest release with this block layout */
    const char *min_name;      /* ... as the user knows it */
    uint32_t total;            /* sizeof(_Py_DebugOffsets) */
    uint32_t rt_size, rt_finalizing, rt_interp_head;
    uint32_t is_size, is_id, is_next, is_threads_head, is_modules;
    uint32_t ts_size, ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_id;
    uint32_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_localsplus, fr_owner,
             fr_tlbc_index;
    uint32_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno,
             co_code_adaptive, co_tlbc;
    uint32_t ob_size_, ob_type;
    uint32_t tp_name, tp_flags;
    uint32_t dict_size, dict_ma_keys, dict_ma_values;
    uint32_t by_size, by_ob_size, by_ob_sval;
    uint32_t un_size, un_state, un_length, un_ascii_size, un_compact_size;
    struct do_expect expect[6];
};

/* 3.13: the block sits in pycore_runtime.h; fixed since 3.13.0rc2. */
static const struct do_map map_313 = {
    .minor = 13, .min_hexversion = 0x030D00C2, .min_name = "3.13.0rc2", .total = 584,
    .rt_size = 24, .rt_finalizing = 32, .rt_interp_head = 40,
    .is_size = 48, .is_id = 56, .is_next = 64, .is_threads_head = 72, .is_modules = 88,
    .ts_size = 152, .ts_next = 168, .ts_interp = 176, .ts_current_frame = 184,
    .ts_thread_id = 192, .ts_native_id = 200,
    .fr_size = 224, .fr_previous = 232, .fr_executable = 240, .fr_instr_ptr = 248,
    .fr_localsplus = 256, .fr_owner = 264,
    .co_size = 272, .co_filename = 280, .co_name = 288, .co_qualname = 296,
    .co_linetable = 304, .co_firstlineno = 312, .co_code_adaptive = 344,
    .ob_size_ = 352, .ob_type = 360,
    .tp_name = 376, .tp_flags = 392,
    .dict_size = 448, .dict_ma_keys = 456, .dict_ma_values = 464,
    .by_size = 512, .by_ob_size = 520, .by_ob_sval = 528,
    .un_size = 536, .un_state = 544, .un_length = 552, .un_ascii_size = 560,
    .expect = {
        { 232, 8, 8, "interpreter_frame.previous" },
        { 352, 16, 32, "pyobject.size" },
        { 360, 8, 24, "pyobject.ob_type" },
    },
};

/* 3.14: threads_main, code_object_generation, tlbc_generation, stackpointer,
 * tlbc_index, co_tlbc, set/gen/llist/debugger sections; fixed since 3.14.0b2. */
static const struct do_map map_314 = {
    .minor = 14, .min_hexversion = 0x030E00B2, .min_name = "3.14.0b2", .total = 760,
    .rt_size = 24, .rt_finalizing = 32, .rt_interp_head = 40,
    .is_size = 48, .is_id = 56, .is_next = 64, .is_threads_head = 72, .is_modules = 96,
    .ts_size = 176, .ts_next = 192, .ts_interp = 200, .ts_current_frame = 208,
    .ts_thread_id = 216, .ts_native_id = 224,
    .fr_size = 248, .fr_previous = 256, .fr_executable = 264, .fr_instr_ptr = 272,
    .fr_localsplus = 280, .fr_owner = 288, .fr_tlbc_index = 304,
    .co_size = 312, .co_filename = 320, .co_name = 328, .co_qualname = 336,
    .co_linetable = 344, .co_firstlineno = 352, .co_code_adaptive = 384, .co_tlbc = 392,
    .ob_size_ = 400, .ob_type = 408,
    .tp_name = 424, .tp_flags = 440,
    .dict_size = 528, .dict_ma_keys = 536, .dict_ma_values = 544,
    .by_size = 592, .by_ob_size = 600, .by_ob_sval = 608,
    .un_size = 616, .un_state = 624, .un_length = 632, .un_ascii_size = 640,
    .expect = {
        { 256, 8, 8, "interpreter_frame.previous" },
        { 400, 16, 32, "pyobject.size" },
        { 408, 8, 24, "pyobject.ob_type" },
        { 696, 0, 0, "llist_node.next" },
        { 704, 8, 8, "llist_node.prev" },
        { 752, 512, 512, "debugger_support.debugger_script_path_size" },
    },
};

/* 3.15: base_frame, last_profiled_frame(_seq), holds_gil, gil_requested,
 * current_exception, exc_state in thread_state; err_stackitem;
 * tp_basicsize/tp_dictoffset; heap_type_object; compactunicodeobject_size;
 * three more gc members.  last_profiled_frame_seq arrived in 3.15.0b4. */
static const struct do_map map_315 = {
    .minor = 15, .min_hexversion = 0x030F00B4, .min_name = "3.15.0b4", .total = 888,
    .rt_size = 24, .rt_finalizing = 32, .rt_interp_head = 40,
    .is_size = 48, .is_id = 56, .is_next = 64, .is_threads_head = 72, .is_modules = 96,
    .ts_size = 176, .ts_next = 192, .ts_interp = 200, .ts_current_frame = 208,
    .ts_thread_id = 240, .ts_native_id = 248,
    .fr_size = 312, .fr_previous = 320, .fr_executable = 328, .fr_instr_ptr = 336,
    .fr_localsplus = 344, .fr_owner = 352, .fr_tlbc_index = 368,
    .co_size = 376, .co_filename = 384, .co_name = 392, .co_qualname = 400,
    .co_linetable = 408, .co_firstlineno = 416, .co_code_adaptive = 448, .co_tlbc = 456,
    .ob_size_ = 464, .ob_type = 472,
    .tp_name = 488, .tp_flags = 504,
    .dict_size = 624, .dict_ma_keys = 632, .dict_ma_values = 640,
    .by_size = 688, .by_ob_size = 696, .by_ob_sval = 704,
    .un_size = 712, .un_state = 720, .un_length = 728, .un_ascii_size = 736,
    .un_compact_size = 744,
    .expect = {
        { 304, 0, 0, "err_stackitem.exc_value" },
        { 320, 8, 8, "interpreter_frame.previous" },
        { 464, 16, 32, "pyobject.size" },
        { 472, 8, 24, "pyobject.ob_type" },
        { 832, 8, 8, "llist_node.prev" },
        { 880, 512, 512, "debugger_support.debugger_script_path_size" },
    },
};

static const struct do_map *const maps[] = { &map_313, &map_314, &map_315 };

#define SUPPORTED "3.9-3.15"

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
 * pos 0: the block has no such member (see struct do_map). */
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

static uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

/*
 * Thread names (threadnames.c) for 3.13, where threads carry no OS name.
 * The block gives the frame's localsplus, tp_name, tp_flags and the dict's
 * ma_keys/ma_values; it does not give tp_basicsize, tp_base, tp_dictoffset,
 * ht_cached_keys or where the managed dict pointer sits, so those are
 * constants here, per build flavour (offsetof() against the 3.13.0 and
 * 3.13.5 headers, release, debug and --disable-gil).  They hold only for
 * the object header they were taken with, so the block's tp_name and
 * tp_flags must equal the values noted next to them, or names stay off.
 * 3.14+ sets OS thread names for every threading.Thread and is not
 * described (the sampler shows those).
 */
struct names_map {
    int minor, free_threaded;
    uint32_t tp_name, tp_flags;                           /* expected values */
    uint32_t tp_basicsize, tp_base, tp_dictoffset, ht_cached_keys;
    int32_t inst_dict;                                    /* MANAGED_DICT_OFFSET */
};

static const struct names_map names_maps[] = {
    { .minor = 13, .free_threaded = 0, .tp_name = 24, .tp_flags = 168,
      .tp_basicsize = 32, .tp_base = 256, .tp_dictoffset = 288, .ht_cached_keys = 880,
      .inst_dict = -24 },
    /* free-threaded: 32-byte object header, no GC header before the object */
    { .minor = 13, .free_threaded = 1, .tp_name = 40, .tp_flags = 184,
      .tp_basicsize = 48, .tp_base = 272, .tp_dictoffset = 304, .ht_cached_keys = 896,
      .inst_dict = -8 },
};

/* Fills the thread-name fields, or leaves inst_kind PS_INST_NONE. */
static void names_layout(const uint8_t *dbg, const struct do_map *dm, int ft, uint32_t fr_size,
                         struct ps_layout *l)
{
    const struct names_map *m = NULL;
    for (size_t i = 0; i < sizeof names_maps / sizeof names_maps[0]; i++)
        if (names_maps[i].minor == dm->minor && names_maps[i].free_threaded == ft)
            m = &names_maps[i];
    l->inst_kind = PS_INST_NONE;
    if (m == NULL)
        return;
    uint64_t localsplus = get64(dbg, dm->fr_localsplus);
    uint64_t dict_size = get64(dbg, dm->dict_size);
    uint64_t keys = get64(dbg, dm->dict_ma_keys), values = get64(dbg, dm->dict_ma_values);
    if (get64(dbg, dm->tp_name) != m->tp_name || get64(dbg, dm->tp_flags) != m->tp_flags ||
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

/* The members of expect[] must hold their type-given values. */
static int layout_matches(const uint8_t *dbg, const struct do_map *m, int ft, const char *ver,
                          char *why, size_t whylen)
{
    for (size_t i = 0; i < sizeof m->expect / sizeof m->expect[0]; i++) {
        const struct do_expect *e = &m->expect[i];
        if (e->what == NULL)
            break;
        uint64_t want = ft ? e->ft : e->gil, got = get64(dbg, e->pos);
        if (got != want) {
            snprintf(why, whylen, "CPython %s%s: its _Py_DebugOffsets is not laid out as "
                     "3.%d's (%s is %llu, expected %llu), a patched or unknown build "
                     "(supported: %s, 3.%d from %s)", ver, ft ? " (free-threaded)" : "",
                     m->minor, e->what, (unsigned long long)got, (unsigned long long)want,
                     SUPPORTED, m->minor, m->min_name);
            return 0;
        }
    }
    return 1;
}

enum ps_layout_status ps_layout_from_debug_offsets(const uint8_t *dbg,
                                                   size_t do_len,
                                                   uint32_t hexversion,
                                                   struct ps_layout *l,
                                                   char *why, size_t whylen)
{
    int minor = (hexversion >> 16) & 0xff;
    const struct do_map *m = NULL;
    char ver[32];

    version_name(hexversion, ver, sizeof ver);
    for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++)
        if (maps[i]->minor == minor)
            m = maps[i];

    if (m == NULL) {
        /* A newer CPython may keep the block's layout and still change what
         * the values mean (frame owners, stackref tags, string bits): only
         * versions checked against a real interpreter are read. */
        snprintf(why, whylen, "CPython %s is not supported (supported: %s)", ver, SUPPORTED);
        return PS_LAYOUT_UNSUPPORTED;
    }
    if (hexversion < m->min_hexversion) {
        snprintf(why, whylen, "CPython %s is not supported: this pre-release's _Py_DebugOffsets "
                 "differs from the 3.%d release's (supported: %s, 3.%d from %s)",
                 ver, minor, SUPPORTED, minor, m->min_name);
        return PS_LAYOUT_UNSUPPORTED;
    }
    if (do_len < m->total || memcmp(dbg, "xdebugpy", 8) != 0) {
        snprintf(why, whylen, "_Py_DebugOffsets cookie not found in _PyRuntime");
        return PS_LAYOUT_INVALID;
    }
    if (get64(dbg, 8) != hexversion) {
        snprintf(why, whylen, "_Py_DebugOffsets version %llx does not match Py_Version %x",
                 (unsigned long long)get64(dbg, 8), hexversion);
        return PS_LAYOUT_INVALID;
    }
    uint64_t ft = get64(dbg, 16);
    if (ft > 1) {
        snprintf(why, whylen, "_Py_DebugOffsets: bad free_threaded flag %llu", (unsigned long long)ft);
        return PS_LAYOUT_INVALID;
    }
    if (!layout_matches(dbg, m, (int)ft, ver, why, whylen))
        return PS_LAYOUT_INVALID;

    struct check c = { dbg, why, whylen, 0 };
    uint32_t rt = get_size(&c, m->rt_size, "_PyRuntimeState", 256, 1u << 24);
    uint32_t is = get_size(&c, m->is_size, "PyInterpreterState", 256, 1u << 24);
    uint32_t ts = get_size(&c, m->ts_size, "PyThreadState", 64, 1u << 16);
    uint32_t fr = get_size(&c, m->fr_size, "_PyInterpreterFrame", 32, 4096);
    uint32_t co = get_size(&c, m->co_size, "PyCodeObject", 64, 4096);
    uint32_t ob = get_size(&c, m->ob_size_, "PyObject", 16, 64);
    uint32_t by = get_size(&c, m->by_size, "PyBytesObject", 24, 128);
    uint32_t un = get_size(&c, m->un_size, "PyUnicodeObject", 32, 256);

    memset(l, 0, sizeof *l);
    l->hexversion = hexversion;
    l->minor = minor;
    l->free_threaded = (int)ft;
    l->from_debug_offsets = 1;

    l->rt_finalizing = get_off(&c, m->rt_finalizing, rt, 8, "runtime.finalizing");
    l->rt_interp_head = get_off(&c, m->rt_interp_head, rt, 8, "runtime.interpreters_head");
    l->is_next = get_off(&c, m->is_next, is, 8, "interp.next");
    l->is_threads_head = get_off(&c, m->is_threads_head, is, 8, "interp.threads_head");
    l->is_id = get_off(&c, m->is_id, is, 8, "interp.id");
    l->is_modules = get_off(&c, m->is_modules, is, 8, "interp.imports_modules");

    l->ts_next = get_off(&c, m->ts_next, ts, 8, "tstate.next");
    l->ts_interp = get_off(&c, m->ts_interp, ts, 8, "tstate.interp");
    l->ts_frame = get_off(&c, m->ts_current_frame, ts, 8, "tstate.current_frame");
    l->ts_thread_id = get_off(&c, m->ts_thread_id, ts, 8, "tstate.thread_id");
    l->ts_native_id = get_off(&c, m->ts_native_id, ts, 8, "tstate.native_thread_id");
    l->ts_cframe = PS_NOFIELD;
    l->cf_current_frame = PS_NOFIELD;
    l->ts_read = 8 + max_u32(max_u32(max_u32(l->ts_next, l->ts_interp), l->ts_frame),
                             max_u32(l->ts_thread_id, l->ts_native_id));

    l->frame_kind = PS_FRAMES_INTERP;
    l->pos_kind = PS_POS_INSTR_PTR;
    l->fr_back = get_off(&c, m->fr_previous, fr, 8, "frame.previous");
    l->fr_code = get_off(&c, m->fr_executable, fr, 8, "frame.executable");
    l->fr_pos = get_off(&c, m->fr_instr_ptr, fr, 8, "frame.instr_ptr");
    l->fr_owner = get_off(&c, m->fr_owner, fr, 1, "frame.owner");
    l->fr_tlbc_index = PS_NOFIELD;
    if (ft && m->fr_tlbc_index != 0) {
        /* Only free-threaded builds have thread-local bytecode; the GIL build
         * reports offset 0 for the absent field. */
        uint32_t t = get_off(&c, m->fr_tlbc_index, fr, 4, "frame.tlbc_index");
        l->fr_tlbc_index = t ? t : PS_NOFIELD;
    }
    /* Frame owners at or above this are not Python frames: 3.13
     * FRAME_OWNED_BY_CSTACK (3); 3.14 FRAME_OWNED_BY_INTERPRETER (3) and
     * CSTACK (4); 3.15 dropped CSTACK, INTERPRETER stays 3. */
    l->owner_first_native = 3;
    /* f_executable is a _PyStackRef from 3.14 on: Py_TAG_BITS is 3 in GIL
     * builds (3.15: also in free-threaded ones), 1 in 3.14t. */
    l->code_tag_mask = minor >= 14 ? 3 : 0;
    l->fr_read = 8 + max_u32(max_u32(l->fr_back, l->fr_code), max_u32(l->fr_pos, l->fr_owner));
    if (l->fr_tlbc_index != PS_NOFIELD)
        l->fr_read = max_u32(l->fr_read, l->fr_tlbc_index + 8);

    l->ob_type = get_off(&c, m->ob_type, ob, 8, "object.ob_type");
    l->co_filename = get_off(&c, m->co_filename, co, 8, "code.co_filename");
    l->co_name = get_off(&c, m->co_name, co, 8, "code.co_name");
    l->co_qualname = get_off(&c, m->co_qualname, co, 8, "code.co_qualname");
    l->co_linetable = get_off(&c, m->co_linetable, co, 8, "code.co_linetable");
    l->co_firstlineno = get_off(&c, m->co_firstlineno, co, 4, "code.co_firstlineno");
    l->co_code_adaptive = get_off(&c, m->co_code_adaptive, co, 2, "code.co_code_adaptive");
    l->co_nunits = ob;  /* ob_size follows the object header (PyVarObject) */
    l->co_tlbc = PS_NOFIELD;
    if (ft && m->co_tlbc != 0) {
        uint32_t t = get_off(&c, m->co_tlbc, co, 8, "code.co_tlbc");
        l->co_tlbc = t ? t : PS_NOFIELD;
    }
    l->lt_format = PS_LT_LOCATIONS;
    l->co_read = 8 + max_u32(max_u32(max_u32(l->co_filename, l->co_name),
                                     max_u32(l->co_qualname, l->co_linetable)),
                             max_u32(max_u32(l->co_firstlineno, l->co_nunits),
                                     max_u32(l->ob_type, l->co_tlbc == PS_NOFIELD ? 0 : l->co_tlbc)));

    l->bytes_size = get_off(&c, m->by_ob_size, by, 8, "bytes.ob_size");
    l->bytes_sval = get_off(&c, m->by_ob_sval, by, 1, "bytes.ob_sval");

    l->str_length = get_off(&c, m->un_length, un, 8, "str.length");
    l->str_state = get_off(&c, m->un_state, un, 4, "str.state");
    l->str_ascii_data = (uint32_t)get64(dbg, m->un_ascii_size);
    l->str_compact_data = m->un_compact_size != 0
                              ? (uint32_t)get64(dbg, m->un_compact_size)
                              : l->str_ascii_data + 16;
    if (!c.bad && (l->str_ascii_data < 24 || l->str_ascii_data > 128 ||
                   l->str_compact_data <= l->str_ascii_data || l->str_compact_data > 160)) {
        snprintf(why, whylen, "_Py_DebugOffsets: implausible str header sizes %u/%u",
                 l->str_ascii_data, l->str_compact_data);
        c.bad = 1;
    }
    /* The state bit-field is a plain unsigned int except in free-threaded
     * 3.14+, where 'interned' became a whole byte and pushed the rest up
     * (3.15 moved the bit-field into struct _PyUnicodeObject_state, with
     * the same members). */
    if (ft && minor >= 14) {
        l->st_kind_shift = 8;
        l->st_compact_bit = 11;
        l->st_ascii_bit = 12;
    } else {
        l->st_kind_shift = 2;
        l->st_compact_bit = 5;
        l->st_ascii_bit = 6;
    }
    l->st_ready_bit = 0xff;
    if (!c.bad)
        names_layout(dbg, m, (int)ft, fr, l);
    if (c.bad) {
        /* Prefix the version: the user has to know which build said this. */
        char detail[256];
        snprintf(detail, sizeof detail, "%s", why);
        snprintf(why, whylen, "CPython %s%s: %s", ver, ft ? " (free-threaded)" : "", detail);
    }
    return c.bad ? PS_LAYOUT_INVALID : PS_LAYOUT_OK;
}
