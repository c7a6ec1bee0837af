/*
 * Unit test: layouts.  The 3.13+ path is fed real _Py_DebugOffsets blocks
 * captured from real interpreters (unit/fixtures/debug_offsets-*.txt: a
 * GIL build, a free-threaded one and a --with-pydebug one, whose offsets
 * equal the GIL build's: only struct sizes differ) and must produce the
 * offsets those builds really have; then the same blocks, damaged in each way the
 * validation must catch, must be refused.  The 3.9-3.12 tables must cover
 * exactly those versions.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "debug_offsets_fixture.h"
#include "layout.h"


static void put64(uint8_t *b, size_t pos, uint64_t v)
{
    memcpy(b + pos, &v, sizeof v);
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

    memcpy(b, f->block, sizeof b);  /* a version from the future */
    put64(b, 8, 0x031000F0);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, 0x031000F0, &l, why, sizeof why),
                 PS_LAYOUT_UNSUPPORTED);
    CHECK(strstr(why, "CPython 3.16.0 is not supported (supported: 3.9-3.15)") != NULL);

    memcpy(b, f->block, sizeof b);  /* CPython's main branch: 3.15's block, 3.16 */
    put64(b, 8, 0x031000A0);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, 0x031000A0, &l, why, sizeof why),
                 PS_LAYOUT_UNSUPPORTED);
    CHECK(strcmp(why, "CPython 3.16.0a0 is not supported (supported: 3.9-3.15)") == 0);

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
struct want {
    int minor, ft;
    uint32_t rt_finalizing, rt_interp_head, is_next, is_threads_head;
    uint32_t ts_next, ts_interp, ts_frame, ts_thread_id, ts_native_id;
    uint32_t fr_back, fr_code, fr_pos, fr_owner, fr_tlbc_index;
    uint32_t ob_type, co_filename, co_name, co_qualname, co_linetable, co_firstlineno,
             co_nunits, co_code_adaptive, co_tlbc;
    uint32_t bytes_size, bytes_sval, str_length, str_state, str_ascii_data, str_compact_data;
    size_t ts_frame_pos, co_size_pos;   /* positions in the block, for check_refusals */
};

static const struct want wants[] = {
    { .minor = 14, .ft = 0,
      .rt_finalizing = 784, .rt_interp_head = 808, .is_next = 7272, .is_threads_head = 7344,
      .ts_next = 8, .ts_interp = 16, .ts_frame = 72, .ts_thread_id = 152, .ts_native_id = 160,
      .fr_back = 8, .fr_code = 0, .fr_pos = 56, .fr_owner = 74, .fr_tlbc_index = PS_NOFIELD,
      .ob_type = 8, .co_filename = 112, .co_name = 120, .co_qualname = 128,
      .co_linetable = 136, .co_firstlineno = 68, .co_nunits = 16, .co_code_adaptive = 208,
      .co_tlbc = PS_NOFIELD,
      .bytes_size = 16, .bytes_sval = 32, .str_length = 16, .str_state = 32,
      .str_ascii_data = 40, .str_compact_data = 56,
      .ts_frame_pos = 208, .co_size_pos = 312 },
    { .minor = 15, .ft = 0,
      .rt_finalizing = 912, .rt_interp_head = 936, .is_next = 7264, .is_threads_head = 7336,
      .ts_next = 8, .ts_interp = 16, .ts_frame = 72, .ts_thread_id = 176, .ts_native_id = 184,
      .fr_back = 8, .fr_code = 0, .fr_pos = 56, .fr_owner = 74, .fr_tlbc_index = PS_NOFIELD,
      .ob_type = 8, .co_filename = 112, .co_name = 120, .co_qualname = 128,
      .co_linetable = 136, .co_firstlineno = 68, .co_nunits = 16, .co_code_adaptive = 208,
      .co_tlbc = PS_NOFIELD,
      .bytes_size = 16, .bytes_sval = 32, .str_length = 16, .str_state = 32,
      .str_ascii_data = 40, .str_compact_data = 56,
      .ts_frame_pos = 208, .co_size_pos = 376 },
    /* free-threaded: 32-byte object header; tlbc_index and co_tlbc present */
    { .minor = 14, .ft = 1,
      .rt_finalizing = 784, .rt_interp_head = 808, .is_next = 7272, .is_threads_head = 7344,
      .ts_next = 8, .ts_interp = 16, .ts_frame = 72, .ts_thread_id = 152, .ts_native_id = 160,
      .fr_back = 8, .fr_code = 0, .fr_pos = 56, .fr_owner = 78, .fr_tlbc_index = 72,
      .ob_type = 24, .co_filename = 128, .co_name = 136, .co_qualname = 144,
      .co_linetable = 152, .co_firstlineno = 84, .co_nunits = 32, .co_code_adaptive = 232,
      .co_tlbc = 224,
      .bytes_size = 32, .bytes_sval = 48, .str_length = 32, .str_state = 48,
      .str_ascii_data = 56, .str_compact_data = 72,
      .ts_frame_pos = 208, .co_size_pos = 312 },
    { .minor = 15, .ft = 1,
      .rt_finalizing = 912, .rt_interp_head = 936, .is_next = 7264, .is_threads_head = 7336,
      .ts_next = 8, .ts_interp = 16, .ts_frame = 72, .ts_thread_id = 176, .ts_native_id = 184,
      .fr_back = 8, .fr_code = 0, .fr_pos = 56, .fr_owner = 78, .fr_tlbc_index = 72,
      .ob_type = 24, .co_filename = 128, .co_name = 136, .co_qualname = 144,
      .co_linetable = 152, .co_firstlineno = 84, .co_nunits = 32, .co_code_adaptive = 232,
      .co_tlbc = 224,
      .bytes_size = 32, .bytes_sval = 48, .str_length = 32, .str_state = 48,
      .str_ascii_data = 56, .str_compact_data = 72,
      .ts_frame_pos = 208, .co_size_pos = 376 },
};

static void check_new(const struct fixture *f)
{
    struct ps_layout l;
    char why[256] = "";
    int minor = (f->version >> 16) & 0xff, ft = f->block[16];
    const struct want *w = NULL;
    for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++)
        if (wants[i].minor == minor && wants[i].ft == ft)
            w = &wants[i];
    CHECK(w != NULL);
    if (w == NULL)
        return;
    int rc = ps_layout_from_debug_offsets(f->block, sizeof f->block, f->version, &l, why, sizeof why);
    if (rc != PS_LAYOUT_OK)
        fprintf(stderr, "%s: refused: %s\n", f->name, why);
    CHECK_EQ_INT(rc, PS_LAYOUT_OK);
    CHECK_EQ_INT(l.minor, minor);
    CHECK_EQ_INT(l.free_threaded, ft);
    CHECK_EQ_INT(l.rt_finalizing, w->rt_finalizing);
    CHECK_EQ_INT(l.rt_interp_head, w->rt_interp_head);
    CHECK_EQ_INT(l.is_next, w->is_next);
    CHECK_EQ_INT(l.is_threads_head, w->is_threads_head);
    CHECK_EQ_INT(l.ts_next, w->ts_next);
    CHECK_EQ_INT(l.ts_interp, w->ts_interp);
    CHECK_EQ_INT(l.ts_frame, w->ts_frame);
    CHECK_EQ_INT(l.ts_thread_id, w->ts_thread_id);
    CHECK_EQ_INT(l.ts_native_id, w->ts_native_id);
    CHECK_EQ_INT(l.fr_back, w->fr_back);
    CHECK_EQ_INT(l.fr_code, w->fr_code);
    CHECK_EQ_INT(l.fr_pos, w->fr_pos);
    CHECK_EQ_INT(l.fr_owner, w->fr_owner);
    CHECK_EQ_INT(l.fr_tlbc_index, w->fr_tlbc_index);
    CHECK_EQ_INT(l.code_tag_mask, 3);   /* f_executable is a _PyStackRef */
    CHECK_EQ_INT(l.owner_first_native, 3);
    CHECK_EQ_INT(l.ob_type, w->ob_type);
    CHECK_EQ_INT(l.co_filename, w->co_filename);
    CHECK_EQ_INT(l.co_name, w->co_name);
    CHECK_EQ_INT(l.co_qualname, w->co_qualname);
    CHECK_EQ_INT(l.co_linetable, w->co_linetable);
    CHECK_EQ_INT(l.co_firstlineno, w->co_firstlineno);
    CHECK_EQ_INT(l.co_nunits, w->co_nunits);
    CHECK_EQ_INT(l.co_code_adaptive, w->co_code_adaptive);
    CHECK_EQ_INT(l.co_tlbc, w->co_tlbc);
    CHECK_EQ_INT(l.bytes_size, w->bytes_size);
    CHECK_EQ_INT(l.bytes_sval, w->bytes_sval);
    CHECK_EQ_INT(l.str_length, w->str_length);
    CHECK_EQ_INT(l.str_state, w->str_state);
    CHECK_EQ_INT(l.str_ascii_data, w->str_ascii_data);
    CHECK_EQ_INT(l.str_compact_data, w->str_compact_data);
    /* Free-threaded 3.14+: 'interned' is a whole byte, the bits move up. */
    CHECK_EQ_INT(l.st_kind_shift, ft ? 8 : 2);
    CHECK_EQ_INT(l.st_compact_bit, ft ? 11 : 5);
    CHECK_EQ_INT(l.st_ascii_bit, ft ? 12 : 6);
    CHECK_EQ_INT(l.inst_kind, PS_INST_NONE);   /* 3.14+: OS thread names */
    CHECK(l.ts_read >= l.ts_native_id + 8 && l.fr_read >= l.fr_owner + 1 &&
          l.co_read >= l.co_filename + 8);
    check_refusals(f, w->ts_frame_pos, w->co_size_pos);

    /* The block of one minor version read with another's table must be
     * refused, naming the version and the member that did not match (as
     * the 3.15 block was, read with a table not taken from 3.15.0's header). */
    uint8_t b[1024];
    uint32_t other = minor == 15 ? 0x030E07F0 : 0x030F00F0;
    memcpy(b, f->block, sizeof b);
    put64(b, 8, other);
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, other, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);
    CHECK(strncmp(why, minor == 15 ? "CPython 3.14.7" : "CPython 3.15.0", 14) == 0);
    CHECK(strstr(why, "is not laid out as") != NULL && strstr(why, "expected") != NULL);
    fprintf(stderr, "  %s\n", why);
}

int main(void)
{
    struct ps_layout l;
    char why[256];
    int seen = 0, seen_new = 0;

    DIR *dir = opendir("unit/fixtures");
    CHECK(dir != NULL);
    struct dirent *de;
    while (dir != NULL && (de = readdir(dir)) != NULL) {
        if (strncmp(de->d_name, "debug_offsets-", 14) != 0)
            continue;
        char path[512];
        struct fixture *f = calloc(1, sizeof *f);
        snprintf(path, sizeof path, "unit/fixtures/%s", de->d_name);
        CHECK_EQ_INT(load(path, f), 0);
        fprintf(stderr, "%s", f->name);
        if (((f->version >> 16) & 0xff) == 13) {
            check_313(f);
            seen++;
        } else {
            check_new(f);
            seen_new++;
        }
        free(f);
    }
    if (dir != NULL)
        closedir(dir);
    CHECK(seen >= 3);  /* the GIL, free-threaded and debug fixtures */
    CHECK(seen_new >= 5);  /* 3.14, 3.14t, 3.15, 3.15t, 3.15d */

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
        CHECK_EQ_INT(l.fr_owner == PS_NOFIELD, minor <= 11);  /* shims from 3.12 */
    }
    CHECK_EQ_INT(ps_layout_legacy(8, 0x030812F0u, &l, why, sizeof why), PS_LAYOUT_UNSUPPORTED);
    CHECK(strstr(why, "3.8") != NULL);
    CHECK_EQ_INT(ps_layout_legacy(13, 0x030D00F0u, &l, why, sizeof why), PS_LAYOUT_UNSUPPORTED);
    CHECK_DONE();
}
