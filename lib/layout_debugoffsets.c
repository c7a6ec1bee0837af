/*
 * layout_debugoffsets.c - layouts for CPython 3.13 and newer, read from the
 * interpreter's own _Py_DebugOffsets.
 *
 * _Py_DebugOffsets is the first member of _PyRuntime: the cookie "xdebugpy",
 * the version, a free-threading flag and then, per struct of interest, its
 * size and the offsets of its fields.  The *values* describe the running
 * build exactly (debug, free-threaded, any patch release); only the
 * *position* of each value inside the block changes between minor versions,
 * so that is the data kept here, one column per layout of the block.
 *
 * Everything read from the block is untrusted: each offset must fall inside
 * the size the block reports for its struct, and every size must be
 * plausible, or the layout is refused instead of misread.
 */
#include <stdio.h>
#include <string.h>

#include "layout.h"

/* Position of each value we use inside _Py_DebugOffsets. */
struct do_map {
    int minor;
    uint32_t min_hexversion;   /* earliest release with this block layout */
    uint32_t total;            /* sizeof(_Py_DebugOffsets) */
    uint32_t rt_size, rt_finalizing, rt_interp_head;
    uint32_t is_size, is_next, is_threads_head;
    uint32_t ts_size, ts_next, ts_interp, ts_current_frame, ts_thread_id, ts_native_id;
    uint32_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_owner, fr_tlbc_index;
    uint32_t co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno,
             co_code_adaptive, co_tlbc;
    uint32_t ob_size_, ob_type;
    uint32_t by_size, by_ob_size, by_ob_sval;
    uint32_t un_size, un_state, un_length, un_ascii_size, un_compact_size;
};

#define NO PS_NOFIELD

static const struct do_map maps[] = {
    /* 3.13: layout fixed since 3.13.0rc2 (earlier prereleases differ) */
    { 13, 0x030D00C2, 584, 24, 32, 40, 48, 64, 72,
      152, 168, 176, 184, 192, 200,
      224, 232, 240, 248, 264, NO,
      272, 280, 288, 296, 304, 312, 344, NO,
      352, 360, 512, 520, 528, 536, 544, 552, 560, NO },
    /* 3.14: threads_main, generations, stackpointer, tlbc_index, co_tlbc,
     * set/gen/llist/debugger sections; fixed since 3.14.0b2 */
    { 14, 0x030E00B2, 760, 24, 32, 40, 48, 64, 72,
      176, 192, 200, 208, 216, 224,
      248, 256, 264, 272, 288, 304,
      312, 320, 328, 336, 344, 352, 384, 392,
      400, 408, 592, 600, 608, 616, 624, 632, 640, NO },
    /* 3.15: base_frame/last_profiled_frame in thread_state, more type and
     * unicode fields; alphas had other layouts, so betas and later only */
    { 15, 0x030F00B1, 880, 24, 32, 40, 48, 64, 72,
      176, 192, 200, 208, 232, 240,
      304, 312, 320, 328, 344, 360,
      368, 376, 384, 392, 400, 408, 440, 448,
      456, 464, 680, 688, 696, 704, 712, 720, 728, 736 },
};

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

/* Reads a field offset and checks that width bytes there fit in its struct. */
static uint32_t get_off(struct check *c, uint32_t pos, uint32_t struct_size,
                        unsigned width, const char *what)
{
    if (pos == PS_NOFIELD)
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
    uint32_t do_fr_localsplus, do_tp_name, do_tp_flags;  /* positions in the block */
    uint32_t do_dict_size, do_ma_keys, do_ma_values;
    uint32_t tp_name, tp_flags;                           /* expected values */
    uint32_t tp_basicsize, tp_base, tp_dictoffset, ht_cached_keys;
    int32_t inst_dict;                                    /* MANAGED_DICT_OFFSET */
};

static const struct names_map names_maps[] = {
    { 13, 0, 256, 376, 392, 448, 456, 464, 24, 168, 32, 256, 288, 880, -24 },
    /* free-threaded: 32-byte object header, no GC header before the object */
    { 13, 1, 256, 376, 392, 448, 456, 464, 40, 184, 48, 272, 304, 896, -8 },
};

/* Fills the thread-name fields, or leaves inst_kind PS_INST_NONE. */
static void names_layout(const uint8_t *dbg, int minor, int ft, uint32_t fr_size,
                         struct ps_layout *l)
{
    const struct names_map *m = NULL;
    for (size_t i = 0; i < sizeof names_maps / sizeof names_maps[0]; i++)
        if (names_maps[i].minor == minor && names_maps[i].free_threaded == ft)
            m = &names_maps[i];
    l->inst_kind = PS_INST_NONE;
    if (m == NULL)
        return;
    uint64_t localsplus = get64(dbg, m->do_fr_localsplus);
    uint64_t dict_size = get64(dbg, m->do_dict_size);
    uint64_t keys = get64(dbg, m->do_ma_keys), values = get64(dbg, m->do_ma_values);
    if (get64(dbg, m->do_tp_name) != m->tp_name || get64(dbg, m->do_tp_flags) != m->tp_flags ||
        localsplus + 8 > fr_size || dict_size > 256 || keys + 8 > dict_size ||
        values + 8 > dict_size)
        return;
    l->inst_kind = PS_INST_INLINE;
    l->dk_kind = PS_DK_LOG2;
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

enum ps_layout_status ps_layout_from_debug_offsets(const uint8_t *dbg,
                                                   size_t do_len,
                                                   uint32_t hexversion,
                                                   struct ps_layout *l,
                                                   char *why, size_t whylen)
{
    int minor = (hexversion >> 16) & 0xff;
    const struct do_map *m = NULL;
    for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++)
        if (maps[i].minor == minor)
            m = &maps[i];

    if (m == NULL) {
        snprintf(why, whylen, "Python 3.%d is newer than this build of libpysample supports (3.9 to 3.15)", minor);
        return PS_LAYOUT_UNSUPPORTED;
    }
    if (hexversion < m->min_hexversion) {
        snprintf(why, whylen, "Python pre-release %x is not supported: its debug offsets "
                 "differ from the 3.%d release (use 3.%d final)", hexversion, minor, minor);
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
    /* interpreter_state.id sits right after .size in every layout of the
     * block (3.13-3.15), so it needs no column of its own. */
    l->is_id = get_off(&c, m->is_size + 8, is, 8, "interp.id");

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
    if (ft && m->fr_tlbc_index != PS_NOFIELD) {
        /* Only free-threaded builds have thread-local bytecode; the GIL build
         * reports offset 0 for the absent field. */
        uint32_t t = get_off(&c, m->fr_tlbc_index, fr, 4, "frame.tlbc_index");
        l->fr_tlbc_index = t ? t : PS_NOFIELD;
    }
    l->owner_first_native = 3;  /* 3.13 CSTACK, 3.14+ INTERPRETER and up */
    l->code_tag_mask = minor >= 14 ? 3 : 0;  /* _PyStackRef tag bits */
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
    if (ft && m->co_tlbc != PS_NOFIELD) {
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
    l->str_utf8_length = l->str_ascii_data;
    l->str_utf8 = l->str_ascii_data + 8;
    l->str_compact_data = m->un_compact_size != PS_NOFIELD
                              ? (uint32_t)get64(dbg, m->un_compact_size)
                              : l->str_ascii_data + 16;
    if (!c.bad && (l->str_ascii_data < 24 || l->str_ascii_data > 128 ||
                   l->str_compact_data <= l->str_ascii_data || l->str_compact_data > 160)) {
        snprintf(why, whylen, "_Py_DebugOffsets: implausible str header sizes %u/%u",
                 l->str_ascii_data, l->str_compact_data);
        c.bad = 1;
    }
    /* The state bit-field is a plain unsigned int except in free-threaded
     * 3.14+, where 'interned' became a whole byte and pushed the rest up. */
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
        names_layout(dbg, minor, (int)ft, fr, l);
    return c.bad ? PS_LAYOUT_INVALID : PS_LAYOUT_OK;
}
