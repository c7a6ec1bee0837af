/*
 * test_linetable.c - line table decoding: hand-written tables for each
 * format (edge cases and malformed input), a randomized comparison of the
 * 3.9/3.10 decoders against CPython's own linear algorithms, and every code
 * object in unit/fixtures/linetable-*.txt, which gen_linetable_fixtures.py
 * produced from real interpreters (expected lines from the interpreter, not
 * from this decoder).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getline, strdup, dirent under -std=c11 */
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "python/linetable.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define MAXR 64

static int decode(enum ps_lt_format fmt, const uint8_t *tab, size_t len,
                  int first, struct ps_lt_range *out)
{
    return ps_linetable_decode(fmt, tab, len, first, out, MAXR);
}

/* Tolerates a failed decode (n < 0) so a broken decoder fails checks
 * instead of crashing the test. */
static int lookup(const struct ps_lt_range *r, int n, int64_t addr, int first)
{
    return n < 0 ? -999 : ps_linetable_lookup(r, (size_t)n, addr, first);
}

/* An address and the line it must be on (-1: none). */
struct at_line {
    int64_t addr;
    int line;
};

/* Each expectation of want[0..nw) against r[0..n), a table whose code
 * object starts at line first; a failure names the address. */
static void check_lines(const struct ps_lt_range *r, int n, int first,
                        const struct at_line *want, size_t nw, int src_line)
{
    for (size_t i = 0; i < nw; i++) {
        int got = lookup(r, n, want[i].addr, first);
        if (got != want[i].line) {
            fprintf(stderr, "%s:%d: CHECK failed: address %lld: line %d, expected %d\n",
                    __FILE__, src_line, (long long)want[i].addr, got, want[i].line);
            check_failures++;
        }
    }
}

#define CHECK_LINES(r, n, first, ...) do { \
    static const struct at_line want_[] = { __VA_ARGS__ }; \
    check_lines(r, n, first, want_, NELEM(want_), __LINE__); } while (0)

static void test_lnotab(void)
{
    struct ps_lt_range r[MAXR];
    /* (6,+1) (0,+2) (4,-1) (255,0) (10,+3): an addr_incr-0 pair, a 255-byte
     * split that must merge back, and a negative delta. */
    static const uint8_t tab[] = { 6, 1, 0, 2, 4, 0xff, 255, 0, 10, 3 };
    int n = decode(PS_LT_LNOTAB, tab, sizeof tab, 10, r);

    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(r[0].start, 0);
    CHECK_EQ_INT(r[0].end, 6);
    CHECK_EQ_INT(r[2].start, 10);
    CHECK_EQ_INT(r[2].end, 275);
    CHECK_EQ_INT(r[3].end, UINT32_MAX);
    CHECK_LINES(r, n, 10, { -1, 10 }, { 0, 10 }, { 5, 10 }, { 6, 13 }, { 9, 13 }, { 10, 12 },
                { 274, 12 }, { 275, 15 }, { 1000000, 15 });

    /* Empty table: the whole code object is on firstlineno. */
    n = decode(PS_LT_LNOTAB, NULL, 0, 7, r);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(lookup(r, n, 0, 7), 7);
    CHECK_EQ_INT(lookup(r, n, 12345, 7), 7);

    /* -128 is an ordinary line delta in 3.9 (unlike 3.10). */
    static const uint8_t m128[] = { 2, 0x80 };
    n = decode(PS_LT_LNOTAB, m128, sizeof m128, 200, r);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(lookup(r, n, 2, 200), 72);

    /* Odd length: a truncated pair. */
    CHECK_EQ_INT(decode(PS_LT_LNOTAB, tab, sizeof tab - 1, 10, r), -1);
    /* Cap overflow, without writing past cap. */
    struct ps_lt_range small[4];
    memset(small, 0xaa, sizeof small);
    CHECK_EQ_INT(ps_linetable_decode(PS_LT_LNOTAB, tab, sizeof tab, 10, small, 3), -1);
    CHECK_EQ_INT(small[3].start, 0xaaaaaaaau);
    CHECK_EQ_INT(ps_linetable_decode(PS_LT_LNOTAB, tab, sizeof tab, 10, small, 4), 4);
}

static void test_310(void)
{
    struct ps_lt_range r[MAXR];
    /* [0,4) +1; zero-length +2; [4,10) none; [10,12) +0; zero-length -3;
     * [12,16) +1 */
    static const uint8_t tab[] = { 4, 1, 0, 2, 6, 0x80, 2, 0, 0, 0xfd, 4, 1 };
    int n = decode(PS_LT_LINETABLE310, tab, sizeof tab, 20, r);

    CHECK_EQ_INT(n, 4);
    CHECK_LINES(r, n, 20, { -2, 20 }, { 0, 21 }, { 3, 21 }, { 4, -1 }, { 9, -1 },
                { 10, 23 }, /* -128 left the line alone */
                { 12, 21 }, { 15, 21 }, { 16, -1 }); /* past the end */

    /* Same-line and no-line neighbours merge. */
    static const uint8_t same[] = { 254, 0, 100, 0, 2, 0x80, 2, 0x80 };
    n = decode(PS_LT_LINETABLE310, same, sizeof same, 5, r);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(r[0].end, 354);
    CHECK_EQ_INT(r[1].line, -1);
    CHECK_EQ_INT(r[1].end, 358);

    CHECK_EQ_INT(decode(PS_LT_LINETABLE310, NULL, 0, 5, r), 0);
    CHECK_EQ_INT(lookup(r, 0, 0, 5), -1);
    CHECK_EQ_INT(lookup(r, 0, -1, 5), 5);
    CHECK_EQ_INT(decode(PS_LT_LINETABLE310, tab, 3, 20, r), -1);
    CHECK_EQ_INT(ps_linetable_decode(PS_LT_LINETABLE310, tab, sizeof tab, 20, r, 3), -1);
}

/* Entry start byte of the 3.11+ location table. */
#define LOC(code, units) (uint8_t)(0x80 | ((code) << 3) | ((units) - 1))

static void test_locations(void)
{
    struct ps_lt_range r[MAXR];
    static const uint8_t tab[] = {
        LOC(11, 2), 4, 10,                  /* one-line +1: [0,2) 1001 */
        LOC(0, 1), 0x05,                    /* short: [2,3) 1001, merges */
        LOC(15, 3),                         /* none: [3,6) -1 */
        LOC(14, 4), 0x59, 0x09,             /* long: delta -300 (601 in two groups) */
                    0x02, 0x48, 0x03, 0x05, /*   end delta, col+1 = 200, endcol+1 */
        LOC(13, 1), 0x50, 0x1f,             /* no columns: +1000: [10,11) 1701 */
        LOC(12, 8), 0, 0,                   /* one-line +2: [11,19) 1703 */
        LOC(15, 1),                         /* none: [19,20) -1 */
        LOC(10, 1), 0, 1,                   /* one-line +0: [20,21) 1703 */
    };
    int n = decode(PS_LT_LOCATIONS, tab, sizeof tab, 1000, r);

    CHECK_EQ_INT(n, 7);
    CHECK_LINES(r, n, 1000, { -1, 1000 }, { 0, 1001 }, { 2, 1001 }, { 3, -1 }, { 5, -1 },
                { 6, 701 }, { 9, 701 }, { 10, 1701 }, { 11, 1703 }, { 18, 1703 }, { 19, -1 },
                { 20, 1703 }, /* "none" kept the line */
                { 21, -1 }, { INT64_MAX, -1 });

    /* Cap overflow, without writing past cap. */
    struct ps_lt_range small[7];
    memset(small, 0xaa, sizeof small);
    CHECK_EQ_INT(ps_linetable_decode(PS_LT_LOCATIONS, tab, sizeof tab, 1000, small, 6), -1);
    CHECK_EQ_INT(small[6].start, 0xaaaaaaaau);
    CHECK_EQ_INT(ps_linetable_decode(PS_LT_LOCATIONS, tab, sizeof tab, 1000, small, 7), 7);

    /* Malformed tables. */
    static const struct { const char *what; uint8_t b[16]; size_t len; } bad[] = {
        { "continuation byte at entry start", { 0x05, 0x05 }, 2 },
        { "stray bytes after a short entry", { LOC(0, 1), 1, 1, 1 }, 4 },
        { "short form without its byte", { LOC(0, 1) }, 1 },
        { "one-line form cut short", { LOC(10, 1), 0 }, 2 },
        { "varint ends at len", { LOC(13, 1), 0x50 }, 2 },
        { "varint ends at len, valid byte beyond", { LOC(13, 1), 0x50, 0x1f }, 2 },
        { "one-line form cut by an entry start", { LOC(10, 1), 0, LOC(15, 1) }, 3 },
        { "varint cut by an entry start", { LOC(13, 1), 0x50, LOC(0, 1), LOC(15, 1) }, 4 },
        { "long form missing columns", { LOC(14, 1), 0x02, 0x00 }, 3 },
        /* Value 0, but more groups than any 64-bit shift can hold. */
        { "overlong varint", { LOC(13, 1), 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
                               0x40, 0x40, 0x40, 0x40, 0x40, 0x00 }, 13 },
    };
    for (size_t i = 0; i < NELEM(bad); i++) {
        int rc = decode(PS_LT_LOCATIONS, bad[i].b, bad[i].len, 1, r);
        if (rc != -1)
            fprintf(stderr, "malformed table accepted: %s\n", bad[i].what);
        CHECK_EQ_INT(rc, -1);
    }
    CHECK_EQ_INT(decode((enum ps_lt_format)0, tab, sizeof tab, 1, r), -1);
}

/* Deterministic PRNG so failures reproduce. */
static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* CPython 3.9's PyCode_Addr2Line, verbatim in spirit. */
static int ref_lnotab(const uint8_t *p, size_t len, int first, int addrq)
{
    int line = first, addr = 0;
    for (size_t i = 0; i + 1 < len; i += 2) {
        addr += p[i];
        if (addr > addrq)
            break;
        line += (int8_t)p[i + 1];
    }
    return line;
}

/* CPython 3.10's range walk (advance() + _PyCode_CheckLineNumber). */
static int ref_310(const uint8_t *p, size_t len, int first, int addrq)
{
    int line = first, end = 0;
    if (addrq < 0)
        return first;
    for (size_t i = 0; i + 1 < len; i += 2) {
        int start = end, d = (int8_t)p[i + 1];
        end += p[i];
        if (d != -128)
            line += d;
        if (start <= addrq && addrq < end)
            return d == -128 ? -1 : line;
    }
    return -1;
}

/* Random tables biased towards the interesting bytes (0, 255, -128). */
static void test_random(void)
{
    static const uint8_t pick[] = { 0, 1, 2, 6, 127, 128, 129, 254, 255 };
    struct ps_lt_range r[MAXR];
    uint8_t tab[40];
    int bad = 0;

    for (int iter = 0; iter < 2000; iter++) {
        size_t len = 2 * (rnd() % (NELEM(tab) / 2 + 1));
        for (size_t i = 0; i < len; i++)
            tab[i] = rnd() % 2 ? pick[rnd() % NELEM(pick)] : (uint8_t)rnd();
        int first = (int)(rnd() % 1000);
        for (int fmt = PS_LT_LNOTAB; fmt <= PS_LT_LINETABLE310; fmt++) {
            int n = decode((enum ps_lt_format)fmt, tab, len, first, r);
            CHECK(n >= 0);
            for (size_t k = 1; n > 0 && k < (size_t)n; k++)
                CHECK(r[k].start == r[k - 1].end && r[k].line != r[k - 1].line);
            for (int a = -1; n >= 0 && a < 20 * 256 && bad < 5; a++) {
                int want = fmt == PS_LT_LNOTAB ? ref_lnotab(tab, len, first, a)
                                               : ref_310(tab, len, first, a);
                int got = lookup(r, n, a, first);
                if (got != want) {
                    fprintf(stderr, "random fmt %d iter %d addr %d: got %d want %d\n",
                            fmt, iter, a, got, want);
                    bad++;
                }
            }
        }
        /* Random bytes as a location table: must be rejected or decode to
         * sorted, contiguous ranges, never crash or overrun. */
        int n = decode(PS_LT_LOCATIONS, tab, len, first, r);
        for (size_t k = 1; n > 0 && k < (size_t)n; k++)
            CHECK(r[k].start == r[k - 1].end && r[k].start < r[k].end);
    }
    CHECK_EQ_INT(bad, 0);
}

/* ---- fixtures from real interpreters ---- */

struct fixture_stats {
    long codes, addrs, mismatches, bad_records;
};

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Decodes "tab <hex>" into an exact-size heap buffer, so sanitizers catch
 * any read past len. */
static uint8_t *parse_hex(const char *s, size_t *len)
{
    size_t n = strcspn(s, "\r\n");
    if (n == 1 && s[0] == '-')
        n = 0;
    if (n % 2)
        return NULL;
    uint8_t *b = malloc(n / 2 ? n / 2 : 1);
    for (size_t i = 0; b && i < n / 2; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(b);
            return NULL;
        }
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    *len = n / 2;
    return b;
}

static void check_code(const char *file, int fmt, int first, long naddrs,
                       const char *name, const char *hex, const char *exp,
                       struct fixture_stats *st)
{
    size_t len = 0;
    uint8_t *tab = parse_hex(hex, &len);
    /* Each 3.9/3.10 pair and each 3.11+ entry yields at most one range. */
    size_t cap = len + 2;
    struct ps_lt_range *r = malloc(cap * sizeof *r);
    int n = tab && r ? ps_linetable_decode(fmt, tab, len, first, r, cap) : -1;

    st->codes++;
    if (n < 0) {
        fprintf(stderr, "%s: %s: decode failed\n", file, name);
        st->mismatches++;
        goto out;
    }
    if (n > 0 && ps_linetable_decode(fmt, tab, len, first, r, (size_t)n - 1) != -1) {
        fprintf(stderr, "%s: %s: cap %d not reported as overflow\n", file, name, n - 1);
        st->mismatches++;
    }
    n = ps_linetable_decode(fmt, tab, len, first, r, cap);
    if (lookup(r, n, -1, first) != first)
        st->mismatches++;

    /* exp: "<line>[*<count>] ..." covering naddrs addresses in order. */
    long i = 0, step = fmt == PS_LT_LOCATIONS ? 1 : 2;
    const char *p = exp;
    char *e;
    while (i < naddrs) {
        long line = strtol(p, &e, 10), count = 1;
        if (e == p)
            break;
        if (*e == '*')
            count = strtol(e + 1, &e, 10);
        p = e;
        for (long k = 0; k < count && i < naddrs; k++, i++) {
            int got = lookup(r, n, i * step, first);
            st->addrs++;
            if (got != line && st->mismatches++ < 5)
                fprintf(stderr, "%s: %s (format %d, first %d): addr %ld: got %d, want %ld\n",
                        file, name, fmt, first, i * step, got, line);
        }
    }
    if (i != naddrs) {
        fprintf(stderr, "%s: %s: expectations cover %ld of %ld addresses\n",
                file, name, i, naddrs);
        st->bad_records++;
    }
out:
    free(tab);
    free(r);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_fixture(const char *dir, const char *fname, int *formats_seen)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, fname);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f)
        return;

    struct fixture_stats st = { 0, 0, 0, 0 };
    char *line = NULL, *hex = NULL, name[256];
    size_t lcap = 0, hcap = 0;
    int fmt = 0, first = 0;
    long naddrs = 0;
    int state = 0;  /* 0: want code, 1: want tab, 2: want exp */

    while (getline(&line, &lcap, f) >= 0) {
        if (line[0] == '#')
            continue;
        if (state == 0 && sscanf(line, "code %d %d %ld %255s", &fmt, &first,
                                 &naddrs, name) == 4) {
            state = 1;
        } else if (state == 1 && strncmp(line, "tab ", 4) == 0) {
            size_t need = strlen(line + 4) + 1;
            if (need > hcap && !(hex = realloc(hex, hcap = need)))
                break;
            memcpy(hex, line + 4, need);
            state = 2;
        } else if (state == 2 && strncmp(line, "exp ", 4) == 0) {
            if (fmt >= PS_LT_LNOTAB && fmt <= PS_LT_LOCATIONS)
                formats_seen[fmt] = 1;
            check_code(fname, fmt, first, naddrs, name, hex, line + 4, &st);
            state = 0;
        } else {
            fprintf(stderr, "%s: unexpected line: %.60s\n", fname, line);
            st.bad_records++;
            state = 0;
        }
    }
    free(line);
    free(hex);
    fclose(f);

    printf("%-24s %5ld code objects, %6ld addresses checked, %ld mismatches\n",
           fname, st.codes, st.addrs, st.mismatches);
    CHECK(st.codes > 0);
    CHECK_EQ_INT(st.mismatches, 0);
    CHECK_EQ_INT(st.bad_records, 0);
}

static void test_fixtures(void)
{
    const char *dir = "unit/fixtures";
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d)
        return;

    char *names[64];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < NELEM(names)) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "linetable-", 10) == 0 && l > 4 &&
            strcmp(de->d_name + l - 4, ".txt") == 0)
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], name_cmp);

    int formats_seen[PS_LT_LOCATIONS + 1] = { 0 };
    for (size_t i = 0; i < n; i++) {
        check_fixture(dir, names[i], formats_seen);
        free(names[i]);
    }
    /* A lost fixture must not turn into a silently passing test. */
    CHECK(formats_seen[PS_LT_LNOTAB]);
    CHECK(formats_seen[PS_LT_LINETABLE310]);
    CHECK(formats_seen[PS_LT_LOCATIONS]);
}

int main(void)
{
    test_lnotab();
    test_310();
    test_locations();
    test_random();
    test_fixtures();
    CHECK_DONE();
}
