/*
 * counters.h - a set of event counters that one thread bumps and any
 * other thread reads: an array of atomics indexed by its owner's enum, so
 * that zeroing (a fork child) and reading all of them are one loop each
 * rather than a line per counter (stats.c, linux/regs.c).
 */
#ifndef PS_COUNTERS_H
#define PS_COUNTERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

static inline void ps_counters_zero(_Atomic uint64_t *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        atomic_store(&c[i], 0);
}

/* Each counter read on its own: the set is not a snapshot of one moment,
 * which statistics do not need. */
static inline void ps_counters_read(_Atomic uint64_t *c, uint64_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = atomic_load(&c[i]);
}

#endif
