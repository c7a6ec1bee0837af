/*
 * layout_legacy.c - built-in layouts for CPython 3.9 to 3.12.
 *
 * These versions carry no description of themselves, so the offsets are
 * data written down here, one table row per minor version.  They were taken
 * with offsetof() against each version's internal headers (release and
 * Py_DEBUG builds give identical values for every field used here) and are
 * stable across patch releases; x86_64 and aarch64 Linux agree, and so does
 * macOS, because none of these fields sits behind a pthread type.
 *
 * The one build flavour that moves them, --with-trace-refs (two extra
 * pointers in every object header), is refused by the caller.
 */
#include <stdio.h>
#include <string.h>

#include "layout.h"

/* Per-minor table, by field name so that a transposed number shows in
 * review.  Fields that are PS_NOFIELD do not exist in that version. */
struct legacy_row {
    int minor;
    /* runtime, interpreter, thread */
    uint32_t rt_finalizing, rt_interp_head, is_threads_head;
    uint32_t ts_thread_id, ts_native_id, ts_frame, ts_cframe, cf_current_frame;
    /* frames */
    enum ps_frame_kind frame_kind;
    enum ps_pos_kind pos_kind;
    uint32_t fr_back, fr_code, fr_pos, fr_owner;
    /* code */
    uint32_t co_filename, co_name, co_qualname, co_linetable, co_firstlineno;
    uint32_t co_nunits, co_code_adaptive;
    enum ps_lt_format lt_format;
    /* str: sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject) */
    uint32_t str_ascii_data, str_compact_data;
};

#define NO PS_NOFIELD

static const struct legacy_row rows[] = {
    /* 3.9: PyFrameObject chain; f_lasti is a byte offset; lnotab */
    {
      .minor = 9,
      .rt_finalizing = 16, .rt_interp_head = 32, .is_threads_head = 8,
      .ts_thread_id = 176, .ts_native_id = NO, .ts_frame = 24,
      .ts_cframe = NO, .cf_current_frame = NO,
      .frame_kind = PS_FRAMES_OBJECT, .pos_kind = PS_POS_LASTI_BYTES,
      .fr_back = 24, .fr_code = 32, .fr_pos = 104, .fr_owner = NO,
      .co_filename = 104, .co_name = 112, .co_qualname = NO,
      .co_linetable = 120, .co_firstlineno = 40,
      .co_nunits = NO, .co_code_adaptive = NO, .lt_format = PS_LT_LNOTAB,
      .str_ascii_data = 48, .str_compact_data = 72,
    },
    /* 3.10: f_lasti counts code units; PEP 626 line table */
    {
      .minor = 10,
      .rt_finalizing = 16, .rt_interp_head = 32, .is_threads_head = 8,
      .ts_thread_id = 176, .ts_native_id = NO, .ts_frame = 24,
      .ts_cframe = NO, .cf_current_frame = NO,
      .frame_kind = PS_FRAMES_OBJECT, .pos_kind = PS_POS_LASTI_UNITS,
      .fr_back = 24, .fr_code = 32, .fr_pos = 96, .fr_owner = NO,
      .co_filename = 104, .co_name = 112, .co_qualname = NO,
      .co_linetable = 120, .co_firstlineno = 40,
      .co_nunits = NO, .co_code_adaptive = NO, .lt_format = PS_LT_LINETABLE310,
      .str_ascii_data = 48, .str_compact_data = 72,
    },
    /* 3.11: _PyInterpreterFrame in data-stack chunks, reached through
     * tstate->cframe->current_frame; no shim frames; co_qualname appears */
    {
      .minor = 11,
      .rt_finalizing = 24, .rt_interp_head = 40, .is_threads_head = 16,
      .ts_thread_id = 152, .ts_native_id = 160, .ts_frame = NO,
      .ts_cframe = 56, .cf_current_frame = 8,
      .frame_kind = PS_FRAMES_INTERP, .pos_kind = PS_POS_INSTR_PTR,
      .fr_back = 48, .fr_code = 32, .fr_pos = 56, .fr_owner = NO,
      .co_filename = 112, .co_name = 120, .co_qualname = 128,
      .co_linetable = 136, .co_firstlineno = 72,
      .co_nunits = 16, .co_code_adaptive = 184, .lt_format = PS_LT_LOCATIONS,
      .str_ascii_data = 48, .str_compact_data = 72,
    },
    /* 3.12: f_code moves to the front; owner 3 marks C-stack entry shims;
     * str loses wstr (smaller headers) */
    {
      .minor = 12,
      .rt_finalizing = 24, .rt_interp_head = 40, .is_threads_head = 72,
      .ts_thread_id = 136, .ts_native_id = 144, .ts_frame = NO,
      .ts_cframe = 56, .cf_current_frame = 0,
      .frame_kind = PS_FRAMES_INTERP, .pos_kind = PS_POS_INSTR_PTR,
      .fr_back = 8, .fr_code = 0, .fr_pos = 56, .fr_owner = 70,
      .co_filename = 112, .co_name = 120, .co_qualname = 128,
      .co_linetable = 136, .co_firstlineno = 68,
      .co_nunits = 16, .co_code_adaptive = 192, .lt_format = PS_LT_LOCATIONS,
      .str_ascii_data = 40, .str_compact_data = 56,
    },
};

/*
 * Thread names (threadnames.c): where a Thread object's attributes live.
 * Kept apart from rows[] because nothing else uses them.  Taken with
 * offsetof() against each version's internal headers (release and debug
 * alike), except the 3.9/3.10 keys object, whose struct lives in
 * Objects/dict-common.h (not installed): that one was checked by reading a
 * live Thread's __dict__ through ctypes.  The PyTypeObject and PyDictObject
 * fields are the same in all four versions:
 *   tp_name 24, tp_basicsize 32, tp_flags 168, tp_base 256, tp_dictoffset 288,
 *   ma_keys 32, ma_values 40.
 */
struct names_row {
    int minor;
    enum ps_inst_kind inst_kind;
    enum ps_dk_kind dk_kind;
    uint32_t fr_localsplus;   /* PyFrameObject.f_localsplus / _PyInterpreterFrame.localsplus */
    uint32_t ht_cached_keys;
    int32_t inst_dict, inst_values;
};

static const struct names_row names_rows[] = {
    { .minor = 9, .inst_kind = PS_INST_DICTOFFSET, .dk_kind = PS_DK_SIZE,
      .fr_localsplus = 360, .ht_cached_keys = 864, .inst_dict = 0, .inst_values = 0 },
    { .minor = 10, .inst_kind = PS_INST_DICTOFFSET, .dk_kind = PS_DK_SIZE,
      .fr_localsplus = 352, .ht_cached_keys = 872, .inst_dict = 0, .inst_values = 0 },
    /* _PyObject_ManagedDictPointer: obj - 3 words; _PyObject_ValuesPointer: obj - 4 */
    { .minor = 11, .inst_kind = PS_INST_VALUES_OR_DICT, .dk_kind = PS_DK_LOG2,
      .fr_localsplus = 72, .ht_cached_keys = 872, .inst_dict = -24, .inst_values = -32 },
    /* _PyObject_DictOrValuesPointer: obj - 3 words */
    { .minor = 12, .inst_kind = PS_INST_TAGGED, .dk_kind = PS_DK_LOG2,
      .fr_localsplus = 72, .ht_cached_keys = 880, .inst_dict = -24, .inst_values = 0 },
};

static void names_layout(int minor, struct ps_layout *l)
{
    l->inst_kind = PS_INST_NONE;
    for (size_t i = 0; i < sizeof names_rows / sizeof names_rows[0]; i++) {
        const struct names_row *r = &names_rows[i];
        if (r->minor != minor)
            continue;
        l->inst_kind = r->inst_kind;
        l->dk_kind = r->dk_kind;
        ps_dict_keys_layout(l);
        l->fr_localsplus = r->fr_localsplus;
        l->ht_cached_keys = r->ht_cached_keys;
        l->inst_dict = r->inst_dict;
        l->inst_values = r->inst_values;
    }
    l->tp_name = 24;
    l->tp_basicsize = 32;
    l->tp_flags = 168;
    l->tp_base = 256;
    l->tp_dictoffset = 288;
    l->dict_keys = 32;
    l->dict_values = 40;
    l->values_items = 0;
    l->values_valid = PS_NOFIELD;
}

static uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

/* Bytes to read from a struct so every listed field (width 8) is covered. */
static uint32_t span(const uint32_t *offs, size_t n)
{
    uint32_t end = 0;
    for (size_t i = 0; i < n; i++)
        if (offs[i] != PS_NOFIELD)
            end = max_u32(end, offs[i] + 8);
    return end;
}

enum ps_layout_status ps_layout_legacy(int minor, uint32_t hexversion,
                                       struct ps_layout *l,
                                       char *why, size_t whylen)
{
    const struct legacy_row *r = NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].minor == minor)
            r = &rows[i];
    if (r == NULL) {
        snprintf(why, whylen, "Python 3.%d is not supported (3.9 or newer is needed)", minor);
        return PS_LAYOUT_UNSUPPORTED;
    }

    memset(l, 0, sizeof *l);
    l->hexversion = hexversion;
    l->minor = minor;
    l->rt_finalizing = r->rt_finalizing;
    l->rt_interp_head = r->rt_interp_head;
    l->is_next = 0;
    l->is_threads_head = r->is_threads_head;
    /* PyInterpreterState.id, by offsetof() like the rows: after next,
     * tstate_head and runtime (3.9, 3.10), after the threads struct and
     * runtime (3.11), right after next (3.12). */
    l->is_id = minor <= 10 ? 24 : minor == 11 ? 48 : 8;
    /* interp->modules (3.9-3.11), interp->imports.modules (3.12): the
     * same in release and Py_DEBUG builds. */
    l->is_modules = minor <= 10 ? 856 : minor == 11 ? 888 : 944;
    l->ts_next = 8;
    l->ts_interp = 16;
    l->ts_thread_id = r->ts_thread_id;
    l->ts_native_id = r->ts_native_id;
    l->ts_frame = r->ts_frame;
    l->ts_cframe = r->ts_cframe;
    l->cf_current_frame = r->cf_current_frame;
    {
        const uint32_t f[] = { l->ts_next, l->ts_interp, l->ts_thread_id,
                               l->ts_native_id, l->ts_frame, l->ts_cframe };
        l->ts_read = span(f, sizeof f / sizeof f[0]);
    }

    l->frame_kind = r->frame_kind;
    l->pos_kind = r->pos_kind;
    l->fr_back = r->fr_back;
    l->fr_code = r->fr_code;
    l->fr_pos = r->fr_pos;
    l->fr_owner = r->fr_owner;
    l->fr_tlbc_index = PS_NOFIELD;
    l->owner_first_native = r->fr_owner == PS_NOFIELD ? 256 : 3;
    l->code_tag_mask = 0;
    {
        const uint32_t f[] = { l->fr_back, l->fr_code, l->fr_pos, l->fr_owner };
        l->fr_read = span(f, sizeof f / sizeof f[0]);
    }

    l->ob_type = 8;
    l->co_filename = r->co_filename;
    l->co_name = r->co_name;
    l->co_qualname = r->co_qualname;
    l->co_linetable = r->co_linetable;
    l->co_firstlineno = r->co_firstlineno;
    l->co_nunits = r->co_nunits;
    l->co_code_adaptive = r->co_code_adaptive;
    l->co_tlbc = PS_NOFIELD;
    l->lt_format = r->lt_format;
    {
        const uint32_t f[] = { l->ob_type, l->co_filename, l->co_name, l->co_qualname,
                               l->co_linetable, l->co_firstlineno, l->co_nunits };
        l->co_read = span(f, sizeof f / sizeof f[0]);
    }

    l->bytes_size = 16;
    l->bytes_sval = 32;
    l->str_length = 16;
    l->str_state = 32;
    l->str_ascii_data = r->str_ascii_data;
    l->str_compact_data = r->str_compact_data;
    l->st_kind_shift = 2;
    l->st_compact_bit = 5;
    l->st_ascii_bit = 6;
    l->st_ready_bit = minor <= 11 ? 7 : 0xff;
    names_layout(minor, l);
    (void)why;
    (void)whylen;
    return PS_LAYOUT_OK;
}
