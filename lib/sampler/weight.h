/*
 * weight.h - how many samples one walked stack counts for: the pure
 * arithmetic of PYSAMPLE_MAX_THREADS_PER_TICK's subset (tick.c) and of
 * PYSAMPLE_MODE=cpu's CPU-time weights (threadinfo.c), apart from the
 * memory and clocks they are read from, so that unit tests reach them.
 */
#ifndef PS_WEIGHT_H
#define PS_WEIGHT_H

#include <stdint.h>

/* PYSAMPLE_MAX_THREADS_PER_TICK's state between ticks (zeroed: none yet). */
struct ps_subset {
    unsigned threads_seen;      /* thread states in the previous tick */
    unsigned rotate;            /* the first of this tick's subset */
    uint64_t rng;               /* xorshift64 state for the weights */
};

/*
 * With k = PYSAMPLE_MAX_THREADS_PER_TICK (0: off) and T thread states
 * the previous tick, each tick walks k of them, a window that rotates
 * by k every tick, so every thread is walked once every ceil(T/k) ticks,
 * in turn, whatever its place in the interpreter's list.  Each walked
 * stack then stands for the T/k ticks of that thread that were not
 * walked: it is counted T/k times, rounded to a whole count at random
 * (floor(T/k), plus one with probability frac(T/k)), so that the expected
 * count of every stack is what sampling every thread every tick would
 * give: the profile is unbiased, its totals right on average, and only
 * its variance grows.  T is the number of thread states of the previous
 * tick (the list is walked once; the tick after the count changed is
 * weighted by the old one).  Returns the weight of the thread at position
 * idx of this tick, or 0 to skip it; all (a tick that samples every
 * thread) gives 1.
 */
uint64_t ps_subset_weight(struct ps_subset *s, unsigned k, unsigned idx, int all);

/* After a tick of n thread states: the next tick's window. */
void ps_subset_next(struct ps_subset *s, unsigned k, unsigned n, int all);

/* PYSAMPLE_MODE=cpu: what the sampler remembers of one thread's clock. */
struct ps_cpu_clock {
    int64_t last_cpu;           /* its CPU clock at the last look, or -1 */
    uint64_t carry_ns;          /* CPU time not yet counted: under a period */
    unsigned run;               /* the sampling run of last_cpu */
};

/*
 * The samples a look at a thread whose CPU clock reads cpu (ns, -1: not
 * readable) stands for: the CPU time since the previous look in whole
 * periods of period_ns, the rest carried to the next look.  0 on the
 * first look in sampling run `run` (a new run starts from the CPU the
 * thread has then), when either reading is missing, and when the clock
 * went back (another thread took the tid over: it starts from here).
 */
uint64_t ps_cpu_clock_weight(struct ps_cpu_clock *c, int64_t cpu, uint64_t period_ns,
                             unsigned run);

#endif
