/*
 * statem.h - a state held in one atomic, moved only along a table of
 * allowed moves (the sampler thread's, state.c; the fork pause's,
 * forkpause.c).
 *
 * A move names where it comes from and where it goes: it happens only if
 * the table has it and the state is still `from` (one compare-and-swap),
 * so that a move the design does not draw, or one made on a stale reading
 * of the state, is refused instead of stored.  Lock-free and
 * async-signal-safe.  The tables are checked, move by move, against the
 * drawings of docs/design.md by test/unit/test_statem.c.
 */
#ifndef PS_UTIL_STATEM_H
#define PS_UTIL_STATEM_H

#include <stdatomic.h>
#include <stddef.h>

struct ps_move {
    unsigned char from, to;
};

/* 1 if the table of n moves has from -> to. */
static inline int ps_move_allowed(const struct ps_move *table, size_t n, int from, int to)
{
    for (size_t i = 0; i < n; i++) {
        if (table[i].from == from && table[i].to == to)
            return 1;
    }
    return 0;
}

/* from -> to if the table has it and *state is from: 0; else -1, *state
 * unchanged. */
static inline int ps_move(_Atomic int *state, const struct ps_move *table, size_t n, int from,
                          int to)
{
    if (!ps_move_allowed(table, n, from, to))
        return -1;
    int expected = from;
    return atomic_compare_exchange_strong(state, &expected, to) ? 0 : -1;
}

#endif
