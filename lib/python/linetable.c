/*
 * linetable.c - decoding of CPython line tables into sorted address ranges.
 *
 * The tables come from a foreign (possibly corrupt, possibly racing) process,
 * so the decoder trusts nothing: every byte read is bounds-checked against
 * len, line arithmetic is done in 64 bits and rejected if it leaves int32,
 * and anything that does not look like the documented encoding yields -1
 * rather than a guess.  Decoding happens once per code object; lookup runs
 * for every frame of every sample, hence the sorted ranges and the binary
 * search.
 */
#include "python/linetable.h"

#include <limits.h>

struct emitter {
    struct ps_lt_range *out;
    size_t cap;
    size_t n;
};

/*
 * Appends [start, end) -> line.  Zero-length ranges can never match an
 * address, so they are dropped; a range continuing the previous one with the
 * same line is folded into it, which keeps the array (and the search) small:
 * 3.9/3.10 split long byte runs into 255-byte pieces and 3.11+ into 8-unit
 * entries that all carry the same line.
 */
static int emit(struct emitter *e, uint32_t start, uint32_t end, int64_t line)
{
    if (end <= start)
        return 0;
    if (line < INT32_MIN || line > INT32_MAX)
        return -1;
    if (e->n > 0) {
        struct ps_lt_range *prev = &e->out[e->n - 1];
        if (prev->end == start && prev->line == (int32_t)line) {
            prev->end = end;
            return 0;
        }
    }
    if (e->n >= e->cap)
        return -1;
    e->out[e->n].start = start;
    e->out[e->n].end = end;
    e->out[e->n].line = (int32_t)line;
    e->n++;
    return 0;
}

/* Line numbers are kept in 64 bits so a hostile table cannot wrap them. */
static int line_ok(int64_t line)
{
    return line >= INT32_MIN && line <= INT32_MAX;
}

/*
 * 3.9 co_lnotab and 3.10 co_linetable (PEP 626) are the same byte pairs,
 * (address increment, signed line delta), read two ways:
 *   lnotab: PyCode_Addr2Line applies a pair's delta to every address >= the
 *     pair's cumulative address, so a range shows the running line and the
 *     delta counts from the next range on (pairs with increment 0 only move
 *     the running line); the last line holds for every later address.
 *   PEP 626: the delta applies to the range being described, and -128
 *     marks a range without a line, leaving the running line untouched
 *     (Objects/lnotab_notes.txt).
 */
static int decode_pairs(const uint8_t *tab, size_t len, int64_t line, int pep626,
                        struct emitter *e)
{
    uint64_t start = 0;

    if (len % 2)
        return -1;
    for (size_t i = 0; i < len; i += 2) {
        uint64_t end = start + tab[i];
        int8_t delta = (int8_t)tab[i + 1];
        if (end >= UINT32_MAX)
            return -1;
        int64_t shown = line;
        if (pep626 && delta == -128)
            shown = -1;
        else if (pep626)
            shown = line += delta;
        if (!line_ok(line) || emit(e, (uint32_t)start, (uint32_t)end, shown) < 0)
            return -1;
        if (!pep626) {
            line += delta;
            if (!line_ok(line))
                return -1;
        }
        start = end;
    }
    return pep626 ? 0 : emit(e, (uint32_t)start, UINT32_MAX, line);
}

/*
 * Varints of the 3.11+ location table: 6-bit groups, least significant
 * first, 0x40 meaning "more follows".  Every non-start byte has bit 7 clear;
 * seeing bit 7 set means the entry was cut short, which is malformed.  The
 * shift limit keeps a corrupt run of continuation bytes from overflowing.
 */
static int read_varint(const uint8_t *tab, size_t len, size_t *pos, uint64_t *val)
{
    uint64_t v = 0;
    unsigned shift = 0;

    for (;;) {
        if (*pos >= len || (tab[*pos] & 0x80) || shift > 30)
            return -1;
        uint8_t b = tab[(*pos)++];
        v |= (uint64_t)(b & 0x3f) << shift;
        shift += 6;
        if (!(b & 0x40))
            break;
    }
    *val = v;
    return 0;
}

static int read_svarint(const uint8_t *tab, size_t len, size_t *pos, int64_t *val)
{
    uint64_t u;

    if (read_varint(tab, len, pos, &u) < 0)
        return -1;
    *val = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
    return 0;
}

/* Skips n column bytes, which must exist and must not start a new entry. */
static int skip_bytes(const uint8_t *tab, size_t len, size_t *pos, size_t n)
{
    for (; n > 0; n--, (*pos)++)
        if (*pos >= len || (tab[*pos] & 0x80))
            return -1;
    return 0;
}

/*
 * 3.11+ location table (Objects/locations.md).  Only the line matters here;
 * columns are parsed just far enough to find the next entry.  "No location"
 * entries (code 15) get line -1 and do not move the running line.
 */
static int decode_locations(const uint8_t *tab, size_t len, int64_t line,
                            struct emitter *e)
{
    uint64_t end = 0;
    size_t pos = 0;

    while (pos < len) {
        uint8_t b = tab[pos++];
        if (!(b & 0x80))
            return -1;
        unsigned code = (b >> 3) & 15;
        uint64_t start = end;
        int64_t entry_line = line;
        uint64_t skip;
        int64_t delta;

        end += (b & 7) + 1;
        if (end >= UINT32_MAX)
            return -1;
        if (code <= 9) {            /* short form: line unchanged */
            if (skip_bytes(tab, len, &pos, 1) < 0)
                return -1;
        } else if (code <= 12) {    /* one-line form */
            line += code - 10;
            entry_line = line;
            if (skip_bytes(tab, len, &pos, 2) < 0)
                return -1;
        } else if (code == 13) {    /* no columns */
            if (read_svarint(tab, len, &pos, &delta) < 0)
                return -1;
            line += delta;
            entry_line = line;
        } else if (code == 14) {    /* long form: end line, column, end column follow */
            if (read_svarint(tab, len, &pos, &delta) < 0 ||
                read_varint(tab, len, &pos, &skip) < 0 ||
                read_varint(tab, len, &pos, &skip) < 0 ||
                read_varint(tab, len, &pos, &skip) < 0)
                return -1;
            line += delta;
            entry_line = line;
        } else {                    /* code 15: no location */
            entry_line = -1;
        }
        if (!line_ok(line) || emit(e, (uint32_t)start, (uint32_t)end, entry_line) < 0)
            return -1;
    }
    return (int)e->n;
}

int ps_linetable_decode(enum ps_lt_format fmt, const uint8_t *tab, size_t len,
                        int firstlineno, struct ps_lt_range *out, size_t cap)
{
    struct emitter e = { out, cap, 0 };
    int rc;

    if (len > 0 && tab == NULL)
        return -1;
    /* The return value is an int; refuse capacities it could not report. */
    if (e.cap > INT_MAX)
        e.cap = INT_MAX;
    switch (fmt) {
    case PS_LT_LNOTAB:
        rc = decode_pairs(tab, len, firstlineno, 0, &e);
        break;
    case PS_LT_LINETABLE310:
        rc = decode_pairs(tab, len, firstlineno, 1, &e);
        break;
    case PS_LT_LOCATIONS:
        rc = decode_locations(tab, len, firstlineno, &e);
        break;
    default:
        return -1;
    }
    return rc < 0 ? -1 : (int)e.n;
}

int ps_linetable_lookup(const struct ps_lt_range *r, size_t n, int64_t addr,
                        int firstlineno)
{
    /* A frame that has not executed its first instruction yet reports the
     * def line, as f_lineno does. */
    if (addr < 0)
        return firstlineno;
    if (n == 0 || (uint64_t)addr < r[0].start)
        return -1;

    /* Find the last range with start <= addr; ranges are sorted and disjoint. */
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].start <= (uint64_t)addr)
            lo = mid;
        else
            hi = mid;
    }
    return (uint64_t)addr < r[lo].end ? r[lo].line : -1;
}
