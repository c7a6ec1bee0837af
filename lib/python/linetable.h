/*
 * linetable.h - decoding of CPython line tables (3.9 lnotab, 3.10 PEP 626
 * linetable, 3.11+ location table) into address ranges.
 *
 * The decoder works on a local copy of the table's bytes (never on
 * interpreter memory), so it is an ordinary pure function: the caller copies
 * the bytes with the fault-safe reader first.
 */
#ifndef PS_LINETABLE_H
#define PS_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

enum ps_lt_format {
    PS_LT_LNOTAB = 1,      /* 3.9: (addr incr u8, line incr s8); addresses in bytes */
    PS_LT_LINETABLE310,    /* 3.10: PEP 626 (byte count u8, line delta s8, -128 = none) */
    PS_LT_LOCATIONS,       /* 3.11+: location table; addresses in code units */
};

/*
 * One address range [start, end) and the line executing there; -1 when the
 * range has no line number.  Units: bytes for PS_LT_LNOTAB and
 * PS_LT_LINETABLE310, 16-bit code units for PS_LT_LOCATIONS.
 */
struct ps_lt_range {
    uint32_t start;
    uint32_t end;
    int32_t line;
};

/*
 * Decodes the whole table into out[0..cap).  Adjacent ranges with the same
 * line are merged.  For PS_LT_LNOTAB the last range ends at UINT32_MAX.
 * Returns the number of ranges, or -1 if the table is malformed or needs
 * more than cap ranges.
 */
int ps_linetable_decode(enum ps_lt_format fmt, const uint8_t *tab, size_t len,
                        int firstlineno, struct ps_lt_range *out, size_t cap);

/*
 * Line for address addr (in the format's unit): firstlineno when addr < 0
 * (frame not started), -1 when no range covers addr or its range has no line.
 */
int ps_linetable_lookup(const struct ps_lt_range *r, size_t n, int64_t addr,
                        int firstlineno);

#endif
