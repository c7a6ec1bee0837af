/*
 * grow.h - the one growth policy of the library's arrays (symbols' text
 * and keys, the stack table's frames arena): capacity doubles from a first
 * size, so appending n elements costs O(n) copies in all.
 */
#ifndef PS_GROW_H
#define PS_GROW_H

#include <stdint.h>
#include <stdlib.h>

/*
 * Array p of *cap elements of size bytes, made to hold need: returned as
 * is if it does already, else reallocated to the first power-of-two
 * multiple of first that holds it, with *cap updated.  NULL if memory (or
 * the size_t range) runs out; p is then untouched and still valid.
 */
static inline void *ps_grow(void *p, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : first;
    while (c < need) {
        if (c > SIZE_MAX / 2 / size)
            return NULL;
        c *= 2;
    }
    void *q = realloc(p, c * size);
    if (q != NULL)
        *cap = c;
    return q;
}

#endif
