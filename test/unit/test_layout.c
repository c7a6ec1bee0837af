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

/* Each kind of damage must make the block unusable. */
static void check_refusals(const struct fixture *f)
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
    CHECK(strstr(why, "3.16") != NULL);

    memcpy(b, f->block, sizeof b);
    put64(b, 16, 2);  /* free_threaded flag must be 0 or 1 */
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, f->version, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);

    memcpy(b, f->block, sizeof b);
    put64(b, 184, 1u << 20);  /* thread_state.current_frame beyond the struct (3.13 map) */
    CHECK_EQ_INT(ps_layout_from_debug_offsets(b, sizeof b, f->version, &l, why, sizeof why),
                 PS_LAYOUT_INVALID);
    CHECK(strstr(why, "tstate.current_frame") != NULL);

    memcpy(b, f->block, sizeof b);
    put64(b, 272, 3);  /* sizeof(PyCodeObject) implausible */
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
    check_refusals(f);
}

int main(void)
{
    struct ps_layout l;
    char why[256];
    int seen = 0;

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
        }
        free(f);
    }
    if (dir != NULL)
        closedir(dir);
    CHECK(seen >= 3);  /* the GIL, free-threaded and debug fixtures */

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
