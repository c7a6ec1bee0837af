/*
 * bsearch.h - the one binary search: in an array sorted by a 64-bit key
 * field, how many elements have a key at or below a value.  The element
 * before that index is then the last one starting at or below it (a
 * range lookup: the object, symbol or copied span containing an address),
 * or, if its key equals the value, an exact match.
 */
#ifndef PS_BSEARCH_H
#define PS_BSEARCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

_Static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "keys are addresses of 64-bit platforms");

/* base[0..n), each size bytes, sorted by the uint64_t (or uintptr_t) at
 * offset key_off of each: the number of elements whose key is <= key. */
static inline size_t ps_upper_bound(const void *base, size_t n, size_t size, size_t key_off,
                                    uint64_t key)
{
    const unsigned char *b = base;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k;
        memcpy(&k, b + mid * size + key_off, sizeof k);
        if (k <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The same for an array of type whose key is the member field. */
#define PS_UPPER_BOUND(base, n, type, field, key) \
    ps_upper_bound((base), (n), sizeof(type), offsetof(type, field), (uint64_t)(key))

#endif
