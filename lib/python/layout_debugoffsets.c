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

#include "python/layout.h"

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
#define NVERSIONS 3   /* 3.13, 3.14, 3.15 */

enum {
    DO_RT_SIZE = PS_F_COUNT, DO_IS_SIZE, DO_TS_SIZE, DO_FR_SIZE, DO_CO_SIZE, DO_OB_SIZE,
    DO_BY_SIZE, DO_UN_SIZE, DO_UN_ASCII_SIZE, DO_UN_COMPACT_SIZE,
    DO_FR_LOCALSPLUS, DO_TP_NAME, DO_TP_FLAGS, DO_DICT_SIZE, DO_DICT_MA_KEYS,
    DO_DICT_MA_VALUES,
    DO_FR_STACKPOINTER, DO_GEN_SIZE, DO_GEN_NAME, DO_GEN_IFRAME, DO_GEN_FRAME_STATE,
    DO_GIL_STATE, DO_GIL_LOCKED, DO_GIL_HOLDER,
    DO_TS_STATUS, DO_GC_SIZE, DO_GC_COLLECTING,
    DO_COUNT
};

static const uint16_t positions[DO_COUNT][NVERSIONS] = {
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
static const struct {
    const char *what;
    uint64_t gil, ft;                 /* value in GIL and free-threaded builds */
    uint16_t pos[NVERSIONS];          /* 3.13, 3.14, 3.15 */
} expect[] = {
    { "err_stackitem.exc_value", 0, 0, { 0, 0, 304 } },
    { "interpreter_frame.previous", 8, 8, { 232, 256, 320 } },
    { "pyobject.size", 16, 32, { 352, 400, 464 } },
    { "pyobject.ob_type", 8, 24, { 360, 408, 472 } },
    { "llist_node.next", 0, 0, { 0, 696, 0 } },
    { "llist_node.prev", 8, 8, { 0, 704, 832 } },
    { "debugger_support.debugger_script_path_size", 512, 512, { 0, 752, 880 } },
};

/* The versions: earliest release with each block layout, and the block's
 * size (sizeof(_Py_DebugOffsets)). */
static const struct do_version {
    int minor;
    uint32_t min_hexversion;
    const char *min_name;      /* ... as the user knows it */
    uint32_t total;
} versions[NVERSIONS] = {
    /* the block sits in pycore_runtime.h; fixed since 3.13.0rc2 */
    { .minor = 13, .min_hexversion = 0x030D00C2, .min_name = "3.13.0rc2", .total = 584 },
    /* fixed since 3.14.0b2 */
    { .minor = 14, .min_hexversion = 0x030E00B2, .min_name = "3.14.0b2", .total = 760 },
    /* last_profiled_frame_seq arrived in 3.15.0b4 */
    { .minor = 15, .min_hexversion = 0x030F00B4, .min_name = "3.15.0b4", .total = 888 },
};

/* Where each struct's size is, and what size is plausible. */
static const struct {
    int size_row;              /* DO_*_SIZE; 0: no such struct in the block */
    const char *name;
    uint64_t lo, hi;
} structs[PS_S_COUNT] = {
    [PS_S_RUNTIME] = { DO_RT_SIZE, "_PyRuntimeState", 256, 1u << 24 },
    [PS_S_INTERP] = { DO_IS_SIZE, "PyInterpreterState", 256, 1u << 24 },
    [PS_S_TSTATE] = { DO_TS_SIZE, "PyThreadState", 64, 1u << 16 },
    [PS_S_FRAME] = { DO_FR_SIZE, "_PyInterpreterFrame", 32, 4096 },
    [PS_S_CODE] = { DO_CO_SIZE, "PyCodeObject", 64, 4096 },
    [PS_S_OBJECT] = { DO_OB_SIZE, "PyObject", 16, 64 },
    [PS_S_BYTES] = { DO_BY_SIZE, "PyBytesObject", 24, 128 },
    [PS_S_STR] = { DO_UN_SIZE, "PyUnicodeObject", 32, 256 },
};

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
 * pos 0: the block has no such member (see positions[]). */
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
static void names_layout(const uint8_t *dbg, int v, int ft, uint32_t fr_size,
                         struct ps_layout *l)
{
    const struct names_map *m = NULL;
    for (size_t i = 0; i < sizeof names_maps / sizeof names_maps[0]; i++)
        if (names_maps[i].minor == versions[v].minor && names_maps[i].free_threaded == ft)
            m = &names_maps[i];
    l->inst_kind = PS_INST_NONE;
    if (m == NULL)
        return;
    uint64_t localsplus = get64(dbg, positions[DO_FR_LOCALSPLUS][v]);
    uint64_t dict_size = get64(dbg, positions[DO_DICT_SIZE][v]);
    uint64_t keys = get64(dbg, positions[DO_DICT_MA_KEYS][v]);
    uint64_t values = get64(dbg, positions[DO_DICT_MA_VALUES][v]);
    if (get64(dbg, positions[DO_TP_NAME][v]) != m->tp_name ||
        get64(dbg, positions[DO_TP_FLAGS][v]) != m->tp_flags ||
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
    if (positions[DO_GEN_SIZE][v] == 0)
        return;
    uint32_t gen = get_size(c, positions[DO_GEN_SIZE][v], "PyGenObject", 32, 4096);
    if (c->bad)
        return;
    l->fr_stackpointer = get_off(c, positions[DO_FR_STACKPOINTER][v], fr_size, 8,
                                 "frame.stackpointer");
    l->gen_name = get_off(c, positions[DO_GEN_NAME][v], gen, 8, "gen.gi_name");
    l->gen_iframe = get_off(c, positions[DO_GEN_IFRAME][v], gen, 8, "gen.gi_iframe");
    l->gen_frame_state = get_off(c, positions[DO_GEN_FRAME_STATE][v], gen, 1,
                                 "gen.gi_frame_state");
    if (l->inst_kind != PS_INST_NONE)
        return;
    /* PyTypeObject behind a 16 or (free-threaded) 32-byte header */
    uint32_t tp_name = ft ? 40 : 24, tp_flags = ft ? 184 : 168, tp_base = ft ? 272 : 256;
    uint64_t dict_size = get64(dbg, positions[DO_DICT_SIZE][v]);
    uint64_t keys = get64(dbg, positions[DO_DICT_MA_KEYS][v]);
    uint64_t values = get64(dbg, positions[DO_DICT_MA_VALUES][v]);
    if (get64(dbg, positions[DO_TP_NAME][v]) != tp_name ||
        get64(dbg, positions[DO_TP_FLAGS][v]) != tp_flags || dict_size > 256 ||
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
    uint64_t state = get64(dbg, positions[DO_GIL_STATE][v]);
    uint64_t locked = get64(dbg, positions[DO_GIL_LOCKED][v]);
    uint64_t holder = get64(dbg, positions[DO_GIL_HOLDER][v]);
    l->gil_last_holder = l->gil_locked = PS_NOFIELD;
    if (state == 0 || state >= is_size || locked < state || holder < state ||
        locked - state > 64 || holder - state > 64 || holder % 8 != 0 || locked % 4 != 0)
        return;
    l->gil_last_holder = (uint32_t)(holder - state);
    l->gil_locked = (uint32_t)(locked - state);
}

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
static const uint32_t ts_state_after_status[NVERSIONS] = { 8, 12, 16 };

static void gc_layout(const uint8_t *dbg, int v, uint32_t ts_size, struct ps_layout *l)
{
    uint64_t size = get64(dbg, positions[DO_GC_SIZE][v]);
    uint64_t collecting = get64(dbg, positions[DO_GC_COLLECTING][v]);
    uint64_t status = get64(dbg, positions[DO_TS_STATUS][v]);
    uint32_t state = (uint32_t)status + ts_state_after_status[v];
    l->gc_collecting = l->ts_state = PS_NOFIELD;
    if (l->is_gc != PS_NOFIELD && size >= 64 && size <= 4096 && collecting + 4 <= size &&
        collecting % 4 == 0)
        l->gc_collecting = (uint32_t)collecting;
    if (status == 32 && state + 4 <= ts_size && l->ts_frame != PS_NOFIELD && state + 4 <= l->ts_frame)
        l->ts_state = state;
}

/* The members of expect[] must hold their type-given values. */
static int layout_matches(const uint8_t *dbg, int v, int ft, const char *ver, char *why,
                          size_t whylen)
{
    const struct do_version *m = &versions[v];
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        const uint32_t pos = expect[i].pos[v];
        if (pos == 0)
            continue;
        uint64_t want = ft ? expect[i].ft : expect[i].gil, got = get64(dbg, pos);
        if (got != want) {
            snprintf(why, whylen, "CPython %s%s: its _Py_DebugOffsets is not laid out as "
                     "3.%d's (%s is %llu, expected %llu), a patched or unknown build "
                     "(supported: %s, 3.%d from %s)", ver, ft ? " (free-threaded)" : "",
                     m->minor, expect[i].what, (unsigned long long)got,
                     (unsigned long long)want, SUPPORTED, m->minor, m->min_name);
            return 0;
        }
    }
    return 1;
}

/* Offset of field f from the block, checked against its struct's size
 * (sizes[]); PS_NOFIELD where this version's block has none. */
static uint32_t field_off(struct check *c, int v, int ft, enum ps_field f,
                          const uint32_t *sizes)
{
    uint32_t pos = positions[f][v];
    /* Only free-threaded builds have thread-local bytecode; the GIL build
     * reports offset 0 for the absent field. */
    int ft_only = f == PS_F_FR_TLBC_INDEX || f == PS_F_CO_TLBC;
    if (pos == 0 || (ft_only && !ft))
        return PS_NOFIELD;
    const struct ps_field_desc *d = &ps_fields[f];
    uint32_t off = get_off(c, pos, sizes[d->in], d->width, d->name);
    return ft_only && off == 0 ? PS_NOFIELD : off;
}

/* The index of this minor version in versions[], or -1 with why said:
 * a version not in the table, or a pre-release older than its block's
 * layout. */
static int version_index(uint32_t hexversion, const char *ver, char *why, size_t whylen)
{
    int minor = (hexversion >> 16) & 0xff, v = -1;
    for (int i = 0; i < NVERSIONS; i++)
        if (versions[i].minor == minor)
            v = i;
    if (v < 0) {
        /* A newer CPython may keep the block's layout and still change what
         * the values mean (frame owners, stackref tags, string bits): only
         * versions checked against a real interpreter are read. */
        snprintf(why, whylen, "CPython %s is not supported (supported: %s)", ver, SUPPORTED);
        return -1;
    }
    const struct do_version *m = &versions[v];
    if (hexversion < m->min_hexversion) {
        snprintf(why, whylen, "CPython %s is not supported: this pre-release's _Py_DebugOffsets "
                 "differs from the 3.%d release's (supported: %s, 3.%d from %s)",
                 ver, minor, SUPPORTED, minor, m->min_name);
        return -1;
    }
    return v;
}

/* The block's head: the cookie, the version it says (the one Py_Version
 * says), the free-threading flag (0 or 1, into *ft), and the members whose
 * value the C types fix.  0 if it holds. */
static int header_valid(const uint8_t *dbg, size_t do_len, uint32_t hexversion, int v,
                        const char *ver, uint64_t *ft, char *why, size_t whylen)
{
    if (do_len < versions[v].total || memcmp(dbg, "xdebugpy", 8) != 0) {
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
    return layout_matches(dbg, v, (int)*ft, ver, why, whylen);
}

/* Every struct's size the block gives, each checked against structs[]. */
static void read_sizes(struct check *c, int v, uint32_t sizes[PS_S_COUNT])
{
    for (int s = 0; s < PS_S_COUNT; s++)
        if (structs[s].size_row != 0)
            sizes[s] = get_size(c, positions[structs[s].size_row][v], structs[s].name,
                                structs[s].lo, structs[s].hi);
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
    uint64_t specials = get64(dbg, positions[DO_FR_LOCALSPLUS][v]);
    l->fr_specials = specials >= 64 && specials <= fr_size && specials % 8 == 0
                         ? (uint32_t)specials : PS_NOFIELD;
    l->lt_format = PS_LT_LOCATIONS;
}

/* Where a str's characters begin (compact ASCII and compact), checked as
 * plausible, and its state bits. */
static void str_layout(struct check *c, int v, int ft, struct ps_layout *l)
{
    uint32_t compact_pos = positions[DO_UN_COMPACT_SIZE][v];
    l->str_ascii_data = (uint32_t)get64(c->d, positions[DO_UN_ASCII_SIZE][v]);
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
    int v = version_index(hexversion, ver, why, whylen);
    if (v < 0)
        return PS_LAYOUT_UNSUPPORTED;
    if (!header_valid(dbg, do_len, hexversion, v, ver, &ft, why, whylen))
        return PS_LAYOUT_INVALID;

    /* One pass: every step below checks against c, and the first problem
     * it finds is the one reported. */
    struct check c = { dbg, why, whylen, 0 };
    uint32_t sizes[PS_S_COUNT] = { 0 };
    read_sizes(&c, v, sizes);
    memset(l, 0, sizeof *l);
    l->hexversion = hexversion;
    l->minor = versions[v].minor;
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
