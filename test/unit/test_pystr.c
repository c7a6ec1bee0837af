/* Unit test: str objects of every kind, laid out as each CPython version
 * lays them out, read back through ps_str_read; and UTF-8 transcoding. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "python/layout.h"
#include "memory/memread.h"
#include "python/pystr.h"

/* Builds a compact str object in buf the way the given layout describes. */
static void make_str(const struct ps_layout *l, uint8_t *buf, const void *data,
                     int64_t length, int kind, int ascii)
{
    memset(buf, 0, 512);
    memcpy(buf + l->str_length, &length, sizeof length);
    uint32_t state = ((uint32_t)kind << l->st_kind_shift) | (1u << l->st_compact_bit) |
                     ((uint32_t)ascii << l->st_ascii_bit);
    if (l->st_ready_bit != 0xff)
        state |= 1u << l->st_ready_bit;
    memcpy(buf + l->str_state, &state, sizeof state);
    memcpy(buf + (ascii ? l->str_ascii_data : l->str_compact_data), data,
           (size_t)length * (size_t)kind);
}

static void check_layout(const struct ps_layout *l)
{
    static uint8_t obj[512];
    char out[256];

    make_str(l, obj, "hello_world", 11, 1, 1);
    CHECK_EQ_INT(ps_str_read(l, (uintptr_t)obj, out, sizeof out), 11);
    CHECK_EQ_STR(out, "hello_world");

    const uint8_t latin1[] = { 'c', 'a', 'f', 0xE9 };               /* café */
    make_str(l, obj, latin1, 4, 1, 0);
    CHECK_EQ_INT(ps_str_read(l, (uintptr_t)obj, out, sizeof out), 5);
    CHECK_EQ_STR(out, "caf\xC3\xA9");

    const uint16_t ucs2[] = { 0x95A2, 0x6570, '_', 0x03BB };        /* 関数_λ */
    make_str(l, obj, ucs2, 4, 2, 0);
    CHECK(ps_str_read(l, (uintptr_t)obj, out, sizeof out) > 0);
    CHECK_EQ_STR(out, "\xE9\x96\xA2\xE6\x95\xB0_\xCE\xBB");

    const uint32_t ucs4[] = { 'x', 0x10400 };                       /* x𐐀 */
    make_str(l, obj, ucs4, 2, 4, 0);
    CHECK(ps_str_read(l, (uintptr_t)obj, out, sizeof out) > 0);
    CHECK_EQ_STR(out, "x\xF0\x90\x90\x80");

    /* Refused: negative or huge length, a bad kind, a non-compact string,
     * "ASCII" bytes >= 0x80, too small an output buffer, unreadable memory. */
    make_str(l, obj, "abc", 3, 1, 1);
    int64_t neg = -1;
    memcpy(obj + l->str_length, &neg, sizeof neg);
    CHECK_EQ_INT(ps_str_read(l, (uintptr_t)obj, out, sizeof out), -1);
    int64_t huge = 1 << 20;
    memcpy(obj + l->str_length, &huge, sizeof huge);
    CHECK_EQ_INT(ps_str_read(l, (uintptr_t)obj, out, sizeof out), -1);
    make_str(l, obj, "abcdefghi", 3, 3, 0);   /* kind 3 does not exist */
    CHECK_EQ_INT(ps_str_read(l, (uintptr_t)obj, out, sizeof out), -1);
    make_str(l, obj, "abc", 3, 1, 1);
    uint32_t st;
    memcpy(&st, obj + l->str_state, sizeof st);
    st &= ~(1u << l->st_compact_bit);
    memcpy(obj + l->str_state, &st, sizeof st);
    CHECK_EQ_INT(ps_str_read(l, (uintptr_t)obj, out, sizeof out), -1);
    make_str(l, obj, "ab\xff", 3, 1, 1);
    CHECK_EQ_INT(ps_str_read(l, (uintptr_t)obj, out, sizeof out), -1);
    make_str(l, obj, "abcdef", 6, 1, 1);
    CHECK_EQ_INT(ps_str_read(l, (uintptr_t)obj, out, 4), -1);
    CHECK_EQ_INT(ps_str_read(l, 0, out, sizeof out), -1);
    CHECK_EQ_INT(ps_str_read(l, 16, out, sizeof out), -1);
}

int main(void)
{
    char why[256];
    struct ps_layout l;
    CHECK_EQ_INT(ps_mem_init(), 0);

    for (int minor = 9; minor <= 12; minor++) {
        CHECK_EQ_INT(ps_layout_legacy(minor, 0x030000F0u | ((unsigned)minor << 16), &l, why,
                                      sizeof why), PS_LAYOUT_OK);
        check_layout(&l);
    }

    /* 3.14t moves the state bits: the layout must say so and reading must
     * follow.  Build that layout by hand from the documented positions. */
    CHECK_EQ_INT(ps_layout_legacy(12, 0x030C01F0u, &l, why, sizeof why), PS_LAYOUT_OK);
    l.str_length = 32; l.str_state = 48; l.str_ascii_data = 56; l.str_compact_data = 72;
    l.st_kind_shift = 8; l.st_compact_bit = 11; l.st_ascii_bit = 12;
    check_layout(&l);

    /* Transcoding edge cases. */
    char out[16];
    const uint16_t sur[] = { 0xD800 };               /* lone surrogate -> U+FFFD */
    CHECK_EQ_INT(ps_str_to_utf8((const uint8_t *)sur, 1, 2, out, sizeof out), 3);
    CHECK_EQ_STR(out, "\xEF\xBF\xBD");
    const uint32_t bad[] = { 0x110000 };
    CHECK_EQ_INT(ps_str_to_utf8((const uint8_t *)bad, 1, 4, out, sizeof out), -1);
    const uint8_t l1[] = { 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF };
    CHECK_EQ_INT(ps_str_to_utf8(l1, 8, 1, out, sizeof out), -1);  /* 16 bytes + NUL > 16 */
    CHECK_EQ_INT(ps_str_to_utf8(l1, 7, 1, out, sizeof out), 14);
    CHECK_DONE();
}
