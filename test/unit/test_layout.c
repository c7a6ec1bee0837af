/*
 * Unit test: layouts.  The 3.13+ path is fed real _Py_DebugOffsets blocks
 * captured from real interpreters (unit/fixtures/debug_offsets-*.txt: a
 * GIL build, a free-threaded one and a --with-pydebug one, whose offsets
 * equal the GIL build's: only struct sizes differ) and must produce the
 * offsets those builds really have; then the same blocks, damaged in each way the
 * validation must catch, must be refused.  The 3.9-3.12 tables must cover
 * exactly those versions.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "debug_offsets_fixture.h"
#include "python/layout.h"
#include "python/runtime.h"


static void put64(uint8_t *b, size_t pos, uint64_t v)
{
    memcpy(b + pos, &v, sizeof v);
}

/* What the [gc] frame reads is not worth refusing a layout for: a gc
 * section whose size cannot hold 'collecting', or a thread state whose
 * _status is not where tstate->state was measured from, leave only those
 * unknown.  gc_size_pos, status_pos: their positions in the block. */
static void check_gc_damage(const struct fixture *f, size_t gc_size_pos, size_t status_pos)
{
    struct ps_layout l;
    char why[256];
    uint8_t b[1024];

    memcpy(b, f->block, sizeof b);
    put64(b, gc_size_pos, 8);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, f->version, &l, why, sizeof why),
                 PS_LAYOUT_OK);
    CHECK_EQ_INT(l.gc_collecting, PS_NOFIELD);
    CHECK(l.ts_state != PS_NOFIELD);

    memcpy(b, f->block, sizeof b);
    put64(b, status_pos, 40);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, f->version, &l, why, sizeof why),
                 PS_LAYOUT_OK);
    CHECK_EQ_INT(l.ts_state, PS_NOFIELD);
    CHECK(l.gc_collecting != PS_NOFIELD);
}

/* Versions after 3.15: main's 3.16.0a0 is read while its block is laid
 * out as 3.15's, a newer one is refused; either names what differs. */
static void check_future(const struct fixture *f)
{
    struct ps_layout l;
    char why[256];
    uint8_t b[1024];

    /* A version newer than every one known: refused, saying whether its
     * block is laid out as the newest known (3.16's, which is 3.15's). */
    int newest_layout = ((f->version >> 16) & 0xff) >= 15;
    memcpy(b, f->block, sizeof b);
    put64(b, 8, 0x031100F0);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, 0x031100F0, &l, why, sizeof why),
                 PS_LAYOUT_UNSUPPORTED);
    CHECK(strncmp(why, "CPython 3.17.0 is not supported (supported: 3.9-3.16); its "
                  "_Py_DebugOffsets ", 76) == 0);
    fprintf(stderr, "  %s\n", why);
    CHECK(strstr(why, newest_layout ? "is laid out as 3.16's, but it was never checked"
                                    : "differs from 3.16's (") != NULL);

    /* CPython's main branch (3.16.0a0) is read as 3.15 while its block is
     * laid out as 3.15's; a block laid out otherwise is refused, naming
     * the member that differs. */
    memcpy(b, f->block, sizeof b);
    put64(b, 8, 0x031000A0);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, 0x031000A0, &l, why, sizeof why),
                 newest_layout ? PS_LAYOUT_OK : PS_LAYOUT_INVALID);
    if (newest_layout)
        CHECK_EQ_INT(l.minor, 15);
    else
        CHECK(strncmp(why, "CPython 3.16.0a0", 16) == 0 &&
              strstr(why, "is not laid out as 3.15's (") != NULL &&
              strstr(why, "(supported: 3.9-3.16, 3.16 from 3.16.0a0)") != NULL);
}

/* Each kind of damage must make the block unusable.  ts_frame_pos and
 * co_size_pos: where this version's block keeps thread_state.current_frame
 * and code_object.size. */
static void check_refusals(const struct fixture *f, size_t ts_frame_pos, size_t co_size_pos)
{
    struct ps_layout l;
    char why[256];
    uint8_t b[1024];

    memcpy(b, f->block, sizeof b);
    b[0] = 'X';  /* cookie */
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, f->version, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);

    memcpy(b, f->block, sizeof b);  /* version disagrees with Py_Version */
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, f->version + 0x100, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);
    CHECK(strstr(why, "does not match") != NULL);

    memcpy(b, f->block, sizeof b);  /* a pre-release with another layout */
    put64(b, 8, 0x030D00C1);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, 0x030D00C1, &l, why, sizeof why),
                 PS_LAYOUT_UNSUPPORTED);
    CHECK(strstr(why, "pre-release") != NULL);

    check_future(f);

    memcpy(b, f->block, sizeof b);
    put64(b, 16, 2);  /* free_threaded flag must be 0 or 1 */
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, f->version, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);

    memcpy(b, f->block, sizeof b);
    put64(b, ts_frame_pos, 1u << 20);  /* thread_state.current_frame beyond the struct */
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, f->version, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);
    CHECK(strstr(why, "tstate.current_frame") != NULL);

    memcpy(b, f->block, sizeof b);
    put64(b, co_size_pos, 3);  /* sizeof(PyCodeObject) implausible */
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, f->version, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);

    /* A block shorter than its layout. */
    CHECK_EQ_INT(ps_layout_from_debug_offsets(f->block, 100, f->version, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);
}

static void check_313(const struct fixture *f)
{
    struct ps_layout l;
    char why[256] = "";
    int rc = ps_layout_from_debug_offsets(f->block, sizeof f->block, f->version, &l, why, sizeof why);
    if (rc != PS_LAYOUT_OK)
        fprintf(stderr, "%s: refused: %s\n", f->name, why);
    CHECK_EQ_INT(rc, PS_LAYOUT_OK);
    int ft = f->block[16];
    CHECK_EQ_INT(l.free_threaded, ft);
    CHECK_EQ_INT(l.minor, 13);
    /* Not PyObjects: the same in both builds (cpython-internals.md 2.3). */
    CHECK_EQ_INT(l.rt_finalizing, 608);
    CHECK_EQ_INT(l.rt_interp_head, 632);
    CHECK_EQ_INT(l.is_next, 7264);
    CHECK_EQ_INT(l.is_threads_head, 7344);
    CHECK_EQ_INT(l.ts_next, 8);
    CHECK_EQ_INT(l.ts_interp, 16);
    CHECK_EQ_INT(l.ts_frame, 72);
    CHECK_EQ_INT(l.ts_thread_id, 152);
    CHECK_EQ_INT(l.ts_native_id, 160);
    CHECK_EQ_INT(l.fr_back, 8);
    CHECK_EQ_INT(l.fr_code, 0);
    CHECK_EQ_INT(l.fr_pos, 56);
    CHECK_EQ_INT(l.fr_owner, 70);
    CHECK_EQ_INT(l.code_tag_mask, 0);
    CHECK_EQ_INT(l.fr_tlbc_index, PS_NOFIELD);
    /* Objects: everything moves by 16 in the free-threaded header. */
    int d = ft ? 16 : 0;
    CHECK_EQ_INT(l.ob_type, 8 + d);
    CHECK_EQ_INT(l.co_filename, 112 + d);
    CHECK_EQ_INT(l.co_name, 120 + d);
    CHECK_EQ_INT(l.co_qualname, 128 + d);
    CHECK_EQ_INT(l.co_linetable, 136 + d);
    CHECK_EQ_INT(l.co_firstlineno, 68 + d);
    CHECK_EQ_INT(l.co_nunits, 16 + d);
    CHECK_EQ_INT(l.co_code_adaptive, 200 + d);
    CHECK_EQ_INT(l.bytes_size, 16 + d);
    CHECK_EQ_INT(l.bytes_sval, 32 + d);
    CHECK_EQ_INT(l.str_length, 16 + d);
    CHECK_EQ_INT(l.str_state, 32 + d);
    CHECK_EQ_INT(l.str_ascii_data, 40 + d);
    CHECK_EQ_INT(l.str_compact_data, 56 + d);
    /* 3.13t keeps the old state bits; only 3.14t moves them. */
    CHECK_EQ_INT(l.st_kind_shift, 2);
    CHECK_EQ_INT(l.st_compact_bit, 5);
    CHECK_EQ_INT(l.st_ascii_bit, 6);
    CHECK(l.ts_read >= 168 && l.fr_read >= 72 && l.co_read >= 144 + (unsigned)d);
    /* [gc]: interp->gc and its 'collecting' from the block; tstate->state
     * by offsetof() in the 3.13.0 and 3.13.5 headers (GIL and free-threaded) */
    CHECK_EQ_INT(l.is_gc, 7400);
    CHECK_EQ_INT(l.gc_collecting, 200);
    CHECK_EQ_INT(l.ts_state, 40);
    check_gc_damage(f, 568, 216);
    check_refusals(f, 184, 272);
}

/*
 * 3.14 and 3.15: what each real build's block says, as read through the
 * table of its minor version.  These values were checked against the
 * running interpreter when the fixture was captured
 * (unit/capture_debug_offsets.py: its own thread state, frame, code
 * object, bytes and str), so a table that picks the wrong member of the
 * block fails here.
 */
/* One row per field (layout.h's ps_fields), one column per fixture kind:
 * 3.14, 3.15, 3.14t, 3.15t (free-threaded: 32-byte object header,
 * tlbc_index and co_tlbc present), 3.16 (CPython's main branch at
 * 999a046b24cf, read as 3.15: its GIL build's PyCodeObject lost
 * _co_unique_id, so co_code_adaptive moved, and the block says so). */
#define NWANT 5
static const struct { int minor, ft; size_t ts_frame_pos, co_size_pos; } want_of[NWANT] = {
    /* positions in the block, for check_refusals */
    { 14, 0, 208, 312 }, { 15, 0, 208, 376 }, { 14, 1, 208, 312 }, { 15, 1, 208, 376 },
    { 16, 0, 208, 376 },
};
#define NO PS_NOFIELD
#define X 0xfffffffeu  /* not captured from the live interpreter: not checked */
#define WANT(f, a, b, c, d, e) [f] = { a, b, c, d, e }
static const uint32_t wants[PS_F_COUNT][NWANT] = {
    /* field                  3.14  3.15  3.14t  3.15t  3.16 */
    WANT(PS_F_RT_FINALIZING, 784, 912, 784, 912, 912),
    WANT(PS_F_RT_INTERP_HEAD, 808, 936, 808, 936, 936),
    WANT(PS_F_IS_NEXT, 7272, 7264, 7272, 7264, 7264),
    WANT(PS_F_IS_THREADS_HEAD, 7344, 7336, 7344, 7336, 7336),
    WANT(PS_F_TS_NEXT, 8, 8, 8, 8, 8),
    WANT(PS_F_TS_INTERP, 16, 16, 16, 16, 16),
    WANT(PS_F_TS_FRAME, 72, 72, 72, 72, 72),
    WANT(PS_F_TS_THREAD_ID, 152, 176, 152, 176, 176),
    WANT(PS_F_TS_NATIVE_ID, 160, 184, 160, 184, 184),
    WANT(PS_F_FR_BACK, 8, 8, 8, 8, 8),
    WANT(PS_F_FR_CODE, 0, 0, 0, 0, 0),
    WANT(PS_F_FR_POS, 56, 56, 56, 56, 56),
    WANT(PS_F_FR_OWNER, 74, 74, 78, 78, 74),
    WANT(PS_F_OB_TYPE, 8, 8, 24, 24, 8),
    WANT(PS_F_CO_FILENAME, 112, 112, 128, 128, 112),
    WANT(PS_F_CO_NAME, 120, 120, 136, 136, 120),
    WANT(PS_F_CO_QUALNAME, 128, 128, 144, 144, 128),
    WANT(PS_F_CO_LINETABLE, 136, 136, 152, 152, 136),
    WANT(PS_F_CO_NUNITS, 16, 16, 32, 32, 16),
    WANT(PS_F_CO_CODE_ADAPTIVE, 208, 208, 232, 232, 200),
    WANT(PS_F_BYTES_SIZE, 16, 16, 32, 32, 16),
    WANT(PS_F_BYTES_SVAL, 32, 32, 48, 48, 32),
    WANT(PS_F_STR_LENGTH, 16, 16, 32, 32, 16),
    WANT(PS_F_STR_STATE, 32, 32, 48, 48, 32),
    /* absent in some or all of these builds, or not checked */
    WANT(PS_F_IS_CEVAL_GIL, 16, 16, 16, 16, 16),
    WANT(PS_F_IS_GC, 7408, 7400, 7408, 7400, 7400),
    WANT(PS_F_RT_GIL, NO, NO, NO, NO, NO),
    WANT(PS_F_IS_ID, X, X, X, X, X),
    WANT(PS_F_IS_MODULES, X, X, X, X, X),
    WANT(PS_F_TS_CFRAME, NO, NO, NO, NO, NO),
    WANT(PS_F_CF_CURRENT_FRAME, NO, NO, NO, NO, NO),
    WANT(PS_F_FR_TLBC_INDEX, NO, NO, 72, 72, NO),
    WANT(PS_F_FR_IS_ENTRY, NO, NO, NO, NO, NO),
    WANT(PS_F_CO_FIRSTLINENO, 68, 68, 84, 84, 68),
    WANT(PS_F_CO_TLBC, NO, NO, 224, 224, NO),
    WANT(PS_F_CO_STACKSIZE, 64, 64, 80, 80, 64),
    WANT(PS_F_CO_NLOCALSPLUS, 72, 72, 88, 88, 72),
};

/*
 * A 3.15 block with its version said to be 3.16.0a0 (CPython's main
 * branch, whose pycore_debug_offsets.h is 3.15's): read exactly as the
 * 3.15 block is.  A 3.16 that inserts a member into the block (as
 * 3.15.0b4 did into thread_state) is refused in one line naming the
 * member found out of place; one that only appends after the members
 * read is still read.
 */
static void check_next(const struct fixture *f)
{
    struct ps_layout as15, as16;
    char why[256] = "";
    uint8_t b[1024];

    CHECK_EQ_INT(ps_layout_from_debug_offsets(f->block, sizeof f->block, f->version, &as15,
                                              why, sizeof why), PS_LAYOUT_OK);
    memcpy(b, f->block, sizeof b);
    put64(b, 8, 0x031000A0);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, 0x031000A0, &as16, why, sizeof why),
                 PS_LAYOUT_OK);
    CHECK_EQ_INT(as16.hexversion, 0x031000A0);
    as16.hexversion = as15.hexversion;
    CHECK(memcmp(&as15, &as16, sizeof as15) == 0);

    memcpy(b, f->block, sizeof b);   /* one more member after thread_state.status */
    memmove(b + 272, b + 264, sizeof b - 272);
    put64(b, 8, 0x031000A0);
    put64(b, 264, 1);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, 0x031000A0, &as16, why, sizeof why),
                 PS_LAYOUT_INVALID);
    CHECK(strncmp(why, "CPython 3.16.0a0", 16) == 0 &&
          strstr(why, "is not laid out as 3.15's (err_stackitem.exc_value is ") != NULL &&
          strstr(why, ", expected 0)") != NULL);
    fprintf(stderr, "  %s\n", why);

    memcpy(b, f->block, sizeof b);   /* one more member after the block */
    put64(b, 8, 0x031000A0);
    put64(b, 888, 12345);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, 0x031000A0, &as16, why, sizeof why),
                 PS_LAYOUT_OK);
}

static void check_new(const struct fixture *f)
{
    struct ps_layout l;
    char why[256] = "";
    int minor = (f->version >> 16) & 0xff, ft = f->block[16];
    int w = -1;
    for (int i = 0; i < NWANT; i++)
        if (want_of[i].minor == minor && want_of[i].ft == ft)
            w = i;
    CHECK(w >= 0);
    if (w < 0)
        return;
    int rc = ps_layout_from_debug_offsets(f->block, sizeof f->block, f->version, &l, why, sizeof why);
    if (rc != PS_LAYOUT_OK)
        fprintf(stderr, "%s: refused: %s\n", f->name, why);
    CHECK_EQ_INT(rc, PS_LAYOUT_OK);
    CHECK_EQ_INT(l.minor, minor == 16 ? 15 : minor);   /* 3.16.0a0 reads as 3.15 */
    CHECK_EQ_INT(l.free_threaded, ft);
    for (int fld = 0; fld < PS_F_COUNT; fld++) {
        if (wants[fld][w] == X)
            continue;
        if (ps_layout_get(&l, (enum ps_field)fld) != wants[fld][w])
            fprintf(stderr, "%s: %s\n", f->name, ps_fields[fld].name);
        CHECK_EQ_INT(ps_layout_get(&l, (enum ps_field)fld), wants[fld][w]);
    }
    CHECK_EQ_INT(l.code_tag_mask, 3);   /* f_executable is a _PyStackRef */
    CHECK_EQ_INT(l.owner_first_native, 3);
    CHECK_EQ_INT(l.str_ascii_data, ft ? 56 : 40);
    CHECK_EQ_INT(l.str_compact_data, ft ? 72 : 56);
    /* Free-threaded 3.14+: 'interned' is a whole byte, the bits move up. */
    CHECK_EQ_INT(l.st_kind_shift, ft ? 8 : 2);
    CHECK_EQ_INT(l.st_compact_bit, ft ? 11 : 5);
    CHECK_EQ_INT(l.st_ascii_bit, ft ? 12 : 6);
    CHECK_EQ_INT(l.inst_kind, PS_INST_NONE);   /* 3.14+: OS thread names */
    /* struct _gil_runtime_state: a mutex-sized member more in FT builds */
    CHECK_EQ_INT(l.gil_last_holder, ft ? 16 : 8);
    CHECK_EQ_INT(l.gil_locked, ft ? 24 : 16);
    /* [gc]: 'collecting' inside the gc state (3.14 and 3.15 reordered it);
     * tstate->state after _status, holds_gil (3.15: and gil_requested)
     * and _whence: offsetof() in the installed 3.14.7 and 3.15.0rc1 headers */
    CHECK_EQ_INT(l.gc_collecting, minor == 14 ? 192 : 112);
    CHECK_EQ_INT(l.ts_state, minor == 14 ? 44 : 48);
    check_gc_damage(f, minor == 14 ? 648 : 752, minor == 14 ? 240 : 264);
    CHECK(l.ts_read >= l.ts_native_id + 8 && l.fr_read >= l.fr_owner + 1 &&
          l.co_read >= l.co_filename + 8);
    check_refusals(f, want_of[w].ts_frame_pos, want_of[w].co_size_pos);

    /* The block of one minor version read with another's table must be
     * refused, naming the version and the member that did not match (as
     * the 3.15 block was, read with a table not taken from 3.15.0's header). */
    uint8_t b[1024];
    uint32_t other = minor >= 15 ? 0x030E07F0 : 0x030F00F0;
    memcpy(b, f->block, sizeof b);
    put64(b, 8, other);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, other, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);
    CHECK(strncmp(why, minor >= 15 ? "CPython 3.14.7" : "CPython 3.15.0", 14) == 0);
    CHECK(strstr(why, "is not laid out as") != NULL && strstr(why, "expected") != NULL);
    fprintf(stderr, "  %s\n", why);
}

/*
 * An interpreter older than 3.9 is told by its exported symbols and refused
 * in one line naming its version, _PyRuntime or not (3.6 and 2.7 have
 * none); a process without CPython's symbols is not Python at all.
 */
static int dummy_symbol;

static void *lookup_in(const char *name, void *ctx)
{
    for (const char *const *s = ctx; *s != NULL; s++)
        if (strcmp(*s, name) == 0)
            return &dummy_symbol;
    return NULL;
}

static void check_old_pythons(void)
{
    static const char *const py27[] = { "Py_Initialize", "PyCode_Type", "PyString_FromString",
                                        "PyCapsule_New", NULL };
    static const char *const py36[] = { "Py_Initialize", "PyCode_Type", "PyOS_FSPath", NULL };
    static const char *const py37[] = { "_PyRuntime", "Py_Initialize", "PyCode_Type", NULL };
    static const char *const py38[] = { "_PyRuntime", "Py_Initialize", "PyCode_Type",
                                        "PyCode_NewWithPosOnlyArgs", NULL };
    static const char *const other[] = { "Py_Initialize", NULL };
    static const struct { const char *const *syms; const char *name; } old[] = {
        { py27, "(2.7)" }, { py36, "(3.6)" }, { py37, "(3.7)" }, { py38, "(3.8)" },
    };
    struct ps_python py;
    char why[256];
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++) {
        why[0] = '\0';
        CHECK_EQ_INT(ps_python_detect_with(&py, lookup_in, (void *)old[i].syms, why, sizeof why),
                     PS_DETECT_UNSUPPORTED);
        CHECK(strstr(why, old[i].name) != NULL && strstr(why, "older than 3.9") != NULL);
    }
    CHECK_EQ_INT(ps_python_detect_with(&py, lookup_in, (void *)other, why, sizeof why),
                 PS_DETECT_NOT_PYTHON);
}

/* Fixtures checked: 3.13's, and the newer versions'. */
struct seen {
    int v313, newer;
};

static void check_fixture(struct fixture *f, void *ctx)
{
    struct seen *seen = ctx;
    fprintf(stderr, "%s", f->name);
    if (((f->version >> 16) & 0xff) == 13) {
        check_313(f);
        seen->v313++;
    } else {
        check_new(f);
        seen->newer++;
    }
    if (((f->version >> 16) & 0xff) == 15)
        check_next(f);
}

int main(void)
{
    struct ps_layout l;
    char why[256];

    struct seen seen = { 0, 0 };
    each_fixture("debug_offsets-", check_fixture, &seen);
    CHECK(seen.v313 >= 3);  /* the GIL, free-threaded and debug fixtures */
    CHECK(seen.newer >= 6);  /* 3.14, 3.14t, 3.15, 3.15t, 3.15d, 3.16 */

    for (int minor = 9; minor <= 12; minor++) {
        CHECK_EQ_INT(ps_layout_legacy(minor, 0x030000F0u | ((unsigned)minor << 16), &l, why,
                                      sizeof why), PS_LAYOUT_OK);
        CHECK_EQ_INT(l.minor, minor);
        CHECK_EQ_INT(l.from_debug_offsets, 0);
        CHECK(l.ts_read > 0 && l.fr_read > 0 && l.co_read > 0);
        CHECK_EQ_INT(l.frame_kind, minor <= 10 ? PS_FRAMES_OBJECT : PS_FRAMES_INTERP);
        CHECK_EQ_INT(l.lt_format, minor == 9 ? PS_LT_LNOTAB
                                  : minor == 10 ? PS_LT_LINETABLE310 : PS_LT_LOCATIONS);
        CHECK_EQ_INT(l.co_qualname == PS_NOFIELD, minor <= 10);
        /* the owner byte from 3.11 (where the frame lives: data stack,
         * generator, frame object), C-stack shims (owner 3) from 3.12 */
        CHECK_EQ_INT(l.fr_owner == PS_NOFIELD, minor <= 10);
        CHECK_EQ_INT(l.owner_first_native, minor <= 10 ? 256 : 3);
        /* a frame's size on the data stack: offsetof() in 3.11.7's and
         * 3.12.1's code.h/pycore_frame.h */
        CHECK_EQ_INT(l.co_stacksize, minor == 11 ? 68 : minor == 12 ? 64 : PS_NOFIELD);
        CHECK_EQ_INT(l.co_nlocalsplus, minor == 11 ? 76 : minor == 12 ? 72 : PS_NOFIELD);
        CHECK_EQ_INT(l.fr_specials, minor >= 11 ? 72 : PS_NOFIELD);
        CHECK(l.co_nlocalsplus == PS_NOFIELD || l.co_read >= l.co_nlocalsplus + 4);
        /* 3.11 marks a call's first frame (offsetof(_PyInterpreterFrame,
         * is_entry) in 3.11.7's pycore_frame.h), inside the snapshot */
        CHECK_EQ_INT(l.fr_is_entry, minor == 11 ? 68 : PS_NOFIELD);
        CHECK(l.fr_is_entry == PS_NOFIELD || l.fr_read >= l.fr_is_entry + 1);
        /* [gc]: offsetof(PyInterpreterState, gc) and offsetof(struct
         * _gc_runtime_state, collecting) in 3.9.18's, 3.10.13's, 3.11.7's
         * (and Debian 3.11.2's) and 3.12.1's headers, release and Py_DEBUG */
        CHECK_EQ_INT(l.is_gc, minor <= 10 ? 616 : minor == 11 ? 648 : 112);
        CHECK_EQ_INT(l.gc_collecting, 200);
        CHECK_EQ_INT(l.ts_state, PS_NOFIELD);
    }
    CHECK_EQ_INT(ps_layout_legacy(8, 0x030812F0u, &l, why, sizeof why), PS_LAYOUT_UNSUPPORTED);
    CHECK(strstr(why, "3.8") != NULL);
    CHECK_EQ_INT(ps_layout_legacy(13, 0x030D00F0u, &l, why, sizeof why), PS_LAYOUT_UNSUPPORTED);
    check_old_pythons();
    CHECK_DONE();
}
