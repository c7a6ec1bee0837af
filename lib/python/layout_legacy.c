/*
 * layout_legacy.c - built-in layouts for CPython 3.9 to 3.12.
 *
 * These versions carry no description of themselves, so the offsets are
 * data written down here: one row per field, one column per minor
 * version.  They were taken with offsetof() against each version's
 * internal headers (release and Py_DEBUG builds give identical values for
 * every field used here) and are stable across patch releases; x86_64 and
 * aarch64 Linux agree, and so does macOS, because none of these fields
 * sits behind a pthread type.
 *
 * The one build flavour that moves them, --with-trace-refs (two extra
 * pointers in every object header), is refused by the caller.
 */
#include <stdio.h>
#include <string.h>

#include "python/layout.h"

/*
 * Offsets per minor version, one row per field (layout.h's ps_fields say
 * what each is), one column per version: a difference between versions
 * is a difference along a row.  NO: the version has no such field.
 */
#define NO PS_NOFIELD
#define NVERSIONS 4   /* 3.9, 3.10, 3.11, 3.12 */

static const uint32_t offsets[PS_F_COUNT][NVERSIONS] = {
    /*                           3.9  3.10  3.11  3.12 */
    /* _PyRuntimeState */
    [PS_F_RT_FINALIZING] =    {  16,   16,   24,   24 },
    [PS_F_RT_INTERP_HEAD] =   {  32,   32,   40,   40 },
    /* _PyRuntime.ceval.gil until 3.11; 3.12 moved the GIL into each
     * interpreter, reached through the pointer interp->ceval.gil */
    [PS_F_RT_GIL] =           { 352,  352,  360,   NO },
    /* PyInterpreterState; id after next, tstate_head and runtime (3.9,
     * 3.10), after the threads struct and runtime (3.11), right after
     * next (3.12); modules is interp->modules (3.9-3.11),
     * interp->imports.modules (3.12), alike in release and Py_DEBUG builds */
    [PS_F_IS_NEXT] =          {   0,    0,    0,    0 },
    [PS_F_IS_THREADS_HEAD] =  {   8,    8,   16,   72 },
    [PS_F_IS_ID] =            {  24,   24,   48,    8 },
    [PS_F_IS_MODULES] =       { 856,  856,  888,  944 },
    [PS_F_IS_CEVAL_GIL] =     {  NO,   NO,   NO,  384 },
    /* interp->gc, struct _gc_runtime_state (its 'collecting' is at 200 in
     * all four; 3.12 moved it near the front) */
    [PS_F_IS_GC] =            { 616,  616,  648,  112 },
    /* PyThreadState; 3.11/3.12 reach the frame through tstate->cframe */
    [PS_F_TS_NEXT] =          {   8,    8,    8,    8 },
    [PS_F_TS_INTERP] =        {  16,   16,   16,   16 },
    [PS_F_TS_FRAME] =         {  24,   24,   NO,   NO },
    [PS_F_TS_THREAD_ID] =     { 176,  176,  152,  136 },
    [PS_F_TS_NATIVE_ID] =     {  NO,   NO,  160,  144 },
    [PS_F_TS_CFRAME] =        {  NO,   NO,   56,   56 },
    [PS_F_CF_CURRENT_FRAME] = {  NO,   NO,    8,    0 },
    /* PyFrameObject (3.9/3.10), _PyInterpreterFrame (3.11+): 3.12 moves
     * f_code to the front; owner 0 = on the thread's data stack, 1 = in a
     * generator, 2 = in a frame object, 3 (3.12) = C-stack entry shim */
    [PS_F_FR_BACK] =          {  24,   24,   48,    8 },
    [PS_F_FR_CODE] =          {  32,   32,   32,    0 },
    [PS_F_FR_POS] =           { 104,   96,   56,   56 },
    [PS_F_FR_OWNER] =         {  NO,   NO,   69,   70 },
    [PS_F_FR_TLBC_INDEX] =    {  NO,   NO,   NO,   NO },
    /* 3.11: bool is_entry after prev_instr and the int stacktop; 3.12+
     * mark a call's start with a shim frame instead (merge.c) */
    [PS_F_FR_IS_ENTRY] =      {  NO,   NO,   68,   NO },
    /* PyObject */
    [PS_F_OB_TYPE] =          {   8,    8,    8,    8 },
    /* PyCodeObject; co_qualname appears in 3.11 */
    [PS_F_CO_FILENAME] =      { 104,  104,  112,  112 },
    [PS_F_CO_NAME] =          { 112,  112,  120,  120 },
    [PS_F_CO_QUALNAME] =      {  NO,   NO,  128,  128 },
    [PS_F_CO_LINETABLE] =     { 120,  120,  136,  136 },
    [PS_F_CO_FIRSTLINENO] =   {  40,   40,   72,   68 },
    [PS_F_CO_NUNITS] =        {  NO,   NO,   16,   16 },
    [PS_F_CO_CODE_ADAPTIVE] = {  NO,   NO,  184,  192 },
    [PS_F_CO_TLBC] =          {  NO,   NO,   NO,   NO },
    /* a frame takes co_nlocalsplus + co_stacksize + 9 (FRAME_SPECIALS_SIZE)
     * words of the data stack (3.12's co_framesize caches the sum) */
    [PS_F_CO_STACKSIZE] =     {  NO,   NO,   68,   64 },
    [PS_F_CO_NLOCALSPLUS] =   {  NO,   NO,   76,   72 },
    /* PyBytesObject, PyUnicodeObject */
    [PS_F_BYTES_SIZE] =       {  16,   16,   16,   16 },
    [PS_F_BYTES_SVAL] =       {  32,   32,   32,   32 },
    [PS_F_STR_LENGTH] =       {  16,   16,   16,   16 },
    [PS_F_STR_STATE] =        {  32,   32,   32,   32 },
};

/* What is not an offset, per version, likewise one column per version. */
static const struct {
    enum ps_frame_kind frame_kind[NVERSIONS];
    enum ps_pos_kind pos_kind[NVERSIONS];
    enum ps_lt_format lt_format[NVERSIONS];
    uint32_t str_ascii_data[NVERSIONS];     /* sizeof(PyASCIIObject) */
    uint32_t str_compact_data[NVERSIONS];   /* sizeof(PyCompactUnicodeObject) */
    uint8_t st_ready_bit[NVERSIONS];        /* 0xff: no "ready" bit (3.12 dropped it) */
} kinds = {
    /* 3.9: f_lasti is a byte offset; 3.10: it counts code units, PEP 626
     * line table; 3.11: _PyInterpreterFrame, instruction pointer; 3.12:
     * str loses wstr (smaller headers) */
    .frame_kind = { PS_FRAMES_OBJECT, PS_FRAMES_OBJECT, PS_FRAMES_INTERP, PS_FRAMES_INTERP },
    .pos_kind = { PS_POS_LASTI_BYTES, PS_POS_LASTI_UNITS, PS_POS_INSTR_PTR, PS_POS_INSTR_PTR },
    .lt_format = { PS_LT_LNOTAB, PS_LT_LINETABLE310, PS_LT_LOCATIONS, PS_LT_LOCATIONS },
    .str_ascii_data = { 48, 48, 48, 40 },
    .str_compact_data = { 72, 72, 72, 56 },
    .st_ready_bit = { 7, 7, 7, 0xff },
};

/*
 * Thread names (threadnames.c): where a Thread object's attributes live.
 * Kept apart from offsets[] because nothing else uses them.  Taken with
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

enum ps_layout_status ps_layout_legacy(int minor, uint32_t hexversion,
                                       struct ps_layout *l,
                                       char *why, size_t whylen)
{
    if (minor < 9 || minor > 8 + NVERSIONS) {
        snprintf(why, whylen, "Python 3.%d is not supported (3.9 or newer is needed)", minor);
        return PS_LAYOUT_UNSUPPORTED;
    }
    int v = minor - 9;

    memset(l, 0, sizeof *l);
    l->hexversion = hexversion;
    l->minor = minor;
    for (int f = 0; f < PS_F_COUNT; f++)
        ps_layout_set(l, (enum ps_field)f, offsets[f][v]);
    ps_layout_spans(l);

    l->frame_kind = kinds.frame_kind[v];
    l->pos_kind = kinds.pos_kind[v];
    l->owner_first_native = l->fr_owner == PS_NOFIELD ? 256 : 3;
    l->code_tag_mask = 0;
    /* _PyInterpreterFrame.localsplus: 9 words of specials in 3.11 and 3.12 */
    l->fr_specials = minor >= 11 ? 72 : PS_NOFIELD;
    l->lt_format = kinds.lt_format[v];
    l->str_ascii_data = kinds.str_ascii_data[v];
    l->str_compact_data = kinds.str_compact_data[v];
    ps_layout_str_bits(l, 0);
    l->st_ready_bit = kinds.st_ready_bit[v];
    names_layout(minor, l);
    /* struct _gil_runtime_state: interval, last_holder, locked */
    l->gil_last_holder = 8;
    l->gil_locked = 16;
    /* struct _gc_runtime_state: trash state, enabled, debug, the three
     * generations, generation0, the permanent generation and the
     * generation stats come before 'collecting' in all four versions */
    l->gc_collecting = 200;
    /* no tstate->state before 3.13; only free-threaded builds read it */
    l->ts_state = PS_NOFIELD;
    l->fr_stackpointer = PS_NOFIELD;
    l->gen_name = l->gen_iframe = l->gen_frame_state = PS_NOFIELD;
    (void)why;
    (void)whylen;
    return PS_LAYOUT_OK;
}
