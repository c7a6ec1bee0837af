/*
 * layout_debugoffsets_table.c - where each value we use lies inside
 * CPython 3.13+'s _Py_DebugOffsets, per minor version, and what the block
 * cannot say: the values its C types fix, the versions' first releases and
 * block sizes, the plausible size of each struct, and the constants of
 * 3.13's thread names and of the [gc] frame.  Data only: the one pass that
 * reads and checks a block with them is layout_debugoffsets.c.
 */
#include "python/layout_debugoffsets_table.h"

/*
 * Position (byte offset inside the block) of each value we use, per minor
 * version.  Every member of _Py_DebugOffsets is a uint64_t, so a position
 * is 8 x the member's index in the struct as declared in that version's
 * Include/internal/pycore_debug_offsets.h (3.13: pycore_runtime.h) at the
 * release tag.  Position 0 is the cookie, never a value, so 0 in a column
 * means "this version's block has no such value".
 *
 * One row per value, one column per version.  The rows indexed by a
 * ps_field (layout.h) give that field's offset; the rows after them give
 * the sizes of the structs and the values read for thread names.
 */
const uint16_t ps_do_positions[DO_COUNT][NVERSIONS] = {
    /*                           3.13  3.14  3.15 */
    [DO_RT_SIZE] =            {   24,   24,   24 },
    [PS_F_RT_FINALIZING] =    {   32,   32,   32 },
    [PS_F_RT_INTERP_HEAD] =   {   40,   40,   40 },
    [PS_F_RT_GIL] =           {    0,    0,    0 },  /* per interpreter since 3.12 */
    [DO_IS_SIZE] =            {   48,   48,   48 },
    [PS_F_IS_ID] =            {   56,   56,   56 },
    [PS_F_IS_NEXT] =          {   64,   64,   64 },
    [PS_F_IS_THREADS_HEAD] =  {   72,   72,   72 },
    [PS_F_IS_MODULES] =       {   88,   96,   96 },
    /* the GIL in use (a pointer), and where the interpreter's own GIL and
     * its locked and last_holder members lie: the last two relative to
     * the first give their place in any GIL */
    [PS_F_IS_CEVAL_GIL] =     {  112,  120,  120 },
    [DO_GIL_STATE] =          {  120,  128,  128 },
    [DO_GIL_LOCKED] =         {  136,  144,  144 },
    [DO_GIL_HOLDER] =         {  144,  152,  152 },
    /* interp->gc (struct _gc_runtime_state), and in the block's gc section
     * (after the str section) its size and where 'collecting' lies */
    [PS_F_IS_GC] =            {   80,   88,   88 },
    [DO_GC_SIZE] =            {  568,  648,  752 },
    [DO_GC_COLLECTING] =      {  576,  656,  760 },
    /* 3.14: threads_main; 3.15: base_frame, last_profiled_frame(_seq),
     * holds_gil, gil_requested, current_exception, exc_state */
    [DO_TS_SIZE] =            {  152,  176,  176 },
    [PS_F_TS_NEXT] =          {  168,  192,  192 },
    [PS_F_TS_INTERP] =        {  176,  200,  200 },
    [PS_F_TS_FRAME] =         {  184,  208,  208 },
    [PS_F_TS_THREAD_ID] =     {  192,  216,  240 },
    [PS_F_TS_NATIVE_ID] =     {  200,  224,  248 },
    [DO_TS_STATUS] =          {  216,  240,  264 },
    [PS_F_TS_CFRAME] =        {    0,    0,    0 },
    [PS_F_CF_CURRENT_FRAME] = {    0,    0,    0 },
    /* 3.14: stackpointer, tlbc_index */
    [DO_FR_SIZE] =            {  224,  248,  312 },
    [PS_F_FR_BACK] =          {  232,  256,  320 },
    [PS_F_FR_CODE] =          {  240,  264,  328 },
    [PS_F_FR_POS] =           {  248,  272,  336 },
    [DO_FR_LOCALSPLUS] =      {  256,  280,  344 },
    [PS_F_FR_OWNER] =         {  264,  288,  352 },
    [PS_F_FR_TLBC_INDEX] =    {    0,  304,  368 },
    [PS_F_FR_IS_ENTRY] =      {    0,    0,    0 },  /* 3.11 only */
    /* 3.14: co_tlbc */
    [DO_CO_SIZE] =            {  272,  312,  376 },
    [PS_F_CO_FILENAME] =      {  280,  320,  384 },
    [PS_F_CO_NAME] =          {  288,  328,  392 },
    [PS_F_CO_QUALNAME] =      {  296,  336,  400 },
    [PS_F_CO_LINETABLE] =     {  304,  344,  408 },
    [PS_F_CO_FIRSTLINENO] =   {  312,  352,  416 },
    [PS_F_CO_NUNITS] =        {    0,    0,    0 },  /* PyObject's size: ob_size follows */
    [PS_F_CO_CODE_ADAPTIVE] = {  344,  384,  448 },
    [PS_F_CO_TLBC] =          {    0,  392,  456 },
    [DO_OB_SIZE] =            {  352,  400,  464 },
    [PS_F_OB_TYPE] =          {  360,  408,  472 },
    /* 3.15: tp_basicsize, tp_dictoffset */
    [DO_TP_NAME] =            {  376,  424,  488 },
    [DO_TP_FLAGS] =           {  392,  440,  504 },
    /* 3.14: set, gen sections */
    [DO_DICT_SIZE] =          {  448,  528,  624 },
    [DO_DICT_MA_KEYS] =       {  456,  536,  632 },
    [DO_DICT_MA_VALUES] =     {  464,  544,  640 },
    [DO_BY_SIZE] =            {  512,  592,  688 },
    [PS_F_BYTES_SIZE] =       {  520,  600,  696 },
    [PS_F_BYTES_SVAL] =       {  528,  608,  704 },
    [DO_UN_SIZE] =            {  536,  616,  712 },
    [PS_F_STR_STATE] =        {  544,  624,  720 },
    [PS_F_STR_LENGTH] =       {  552,  632,  728 },
    [DO_UN_ASCII_SIZE] =      {  560,  640,  736 },
    /* 3.15: compactunicodeobject_size */
    [DO_UN_COMPACT_SIZE] =    {    0,    0,  744 },
    /* 3.14+: for the asyncio task walk (tasks_read.c) */
    [DO_FR_STACKPOINTER] =    {    0,  296,  360 },
    [DO_GEN_SIZE] =           {    0,  664,  792 },
    [DO_GEN_NAME] =           {    0,  672,  800 },
    [DO_GEN_IFRAME] =         {    0,  680,  808 },
    [DO_GEN_FRAME_STATE] =    {    0,  688,  816 },
};

/*
 * Members whose value is fixed by the C types involved, not by the build:
 * a block whose values there differ is not laid out as the table says
 * (another pre-release, a patched CPython), and is refused by name rather
 * than misread.  Position 0: not checked in that version.
 */
const struct ps_do_expect ps_do_expect[] = {
    { "err_stackitem.exc_value", 0, 0, { 0, 0, 304 } },
    { "interpreter_frame.previous", 8, 8, { 232, 256, 320 } },
    { "pyobject.size", 16, 32, { 352, 400, 464 } },
    { "pyobject.ob_type", 8, 24, { 360, 408, 472 } },
    { "llist_node.next", 0, 0, { 0, 696, 0 } },
    { "llist_node.prev", 8, 8, { 0, 704, 832 } },
    { "debugger_support.debugger_script_path_size", 512, 512, { 0, 752, 880 } },
};

const size_t ps_do_expect_count = sizeof ps_do_expect / sizeof ps_do_expect[0];

const struct ps_do_version ps_do_versions[NKNOWN] = {
    /* the block sits in pycore_runtime.h; fixed since 3.13.0rc2 */
    { .minor = 13, .min_hexversion = 0x030D00C2, .min_name = "3.13.0rc2", .column = 0,
      .reads_as = 13, .total = 584 },
    /* fixed since 3.14.0b2 */
    { .minor = 14, .min_hexversion = 0x030E00B2, .min_name = "3.14.0b2", .column = 1,
      .reads_as = 14, .total = 760 },
    /* last_profiled_frame_seq arrived in 3.15.0b4 */
    { .minor = 15, .min_hexversion = 0x030F00B4, .min_name = "3.15.0b4", .column = 2,
      .reads_as = 15, .total = 888 },
    /* CPython's main branch at 999a046b24cf (3.16.0a0, 2026-08-21): its
     * pycore_debug_offsets.h is 3.15's byte for byte, and what the block
     * does not say was compared with 3.15's headers and holds (frame
     * owners, Py_TAG_BITS, frame and generator states, str bits, the
     * ints around co_firstlineno, tstate->state after _status, the line
     * table; docs/support.md).  Read as 3.15 while the members whose
     * values the C types fix (ps_do_expect[]) say the block is still
     * laid out so: a later 3.16 that moves them is refused naming the
     * member. */
    { .minor = 16, .min_hexversion = 0x031000A0, .min_name = "3.16.0a0", .column = 2,
      .reads_as = 15, .total = 888 },
};

const struct ps_do_struct ps_do_structs[PS_S_COUNT] = {
    [PS_S_RUNTIME] = { DO_RT_SIZE, "_PyRuntimeState", 256, 1u << 24 },
    [PS_S_INTERP] = { DO_IS_SIZE, "PyInterpreterState", 256, 1u << 24 },
    [PS_S_TSTATE] = { DO_TS_SIZE, "PyThreadState", 64, 1u << 16 },
    [PS_S_FRAME] = { DO_FR_SIZE, "_PyInterpreterFrame", 32, 4096 },
    [PS_S_CODE] = { DO_CO_SIZE, "PyCodeObject", 64, 4096 },
    [PS_S_OBJECT] = { DO_OB_SIZE, "PyObject", 16, 64 },
    [PS_S_BYTES] = { DO_BY_SIZE, "PyBytesObject", 24, 128 },
    [PS_S_STR] = { DO_UN_SIZE, "PyUnicodeObject", 32, 256 },
};

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
const struct ps_do_names_map ps_do_names_maps[] = {
    { .minor = 13, .free_threaded = 0, .tp_name = 24, .tp_flags = 168,
      .tp_basicsize = 32, .tp_base = 256, .tp_dictoffset = 288, .ht_cached_keys = 880,
      .inst_dict = -24 },
    /* free-threaded: 32-byte object header, no GC header before the object */
    { .minor = 13, .free_threaded = 1, .tp_name = 40, .tp_flags = 184,
      .tp_basicsize = 48, .tp_base = 272, .tp_dictoffset = 304, .ht_cached_keys = 896,
      .inst_dict = -8 },
};

const size_t ps_do_names_maps_count = sizeof ps_do_names_maps / sizeof ps_do_names_maps[0];

/*
 * The [gc] frame (interpstate.c): 'collecting' inside the gc state, from
 * the block, and for free-threaded builds tstate->state, which the block
 * does not give: it follows _status (3.13: _status, _whence, state; 3.14:
 * _status, holds_gil, _whence, state; 3.15: _status, holds_gil,
 * gil_requested, _whence, state), taken with offsetof() against the
 * 3.13.0 and 3.13.5 headers (GIL and free-threaded) and against the
 * installed headers of 3.14.7 and 3.15.0rc1 builds (GIL, free-threaded and
 * debug alike: 44 and 48).  It holds only where the block puts
 * _status where those headers do (32).  Values that do not fit leave the
 * field unknown (PS_NOFIELD) rather than the layout refused: only the
 * [gc] frame needs them.
 */
const uint32_t ps_do_ts_state_after_status[NVERSIONS] = { 8, 12, 16 };
