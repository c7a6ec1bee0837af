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
    uint64_t last_look;         /* that reading's before (monotonic ns), 0: none */
    uint64_t credit_ns;         /* CPU time used and not yet charged */
    uint64_t time_ns;           /* time since the last charge, under a period */
    uint64_t allow_ns;          /* the look under way: time it stands for */
    int waiting;                /* found waiting, and used no CPU since */
    int busy;                   /* on a CPU all but a slack of the last interval */
    unsigned run;               /* the sampling run of last_cpu */
};

/* One reading of a thread's CPU clock: cpu (ns, -1: not readable), read
 * between before and after on the monotonic clock. */
struct ps_cpu_reading {
    int64_t cpu;
    uint64_t before, after;
};

/*
 * Where a thread's CPU time is charged (issue 36).  The CPU a thread used
 * since the last look was spent wherever it ran meanwhile, not
 * necessarily where it is now: charged to the stack it has now, a thread
 * that burns 25 ms, then sleeps 15 ms, gave the sleep a quarter of its
 * CPU at 100 Hz.  So a look charges only a thread found on a CPU (running,
 * or runnable and waiting for one), and charges it the time it stands
 * for, the time since the thread's previous look, as a wall-mode sample
 * of a running thread would: a look lands in a stack with a probability
 * proportional to the CPU time spent there, so each stack's expected
 * count is its CPU time / the period, wherever the waits fall.
 *
 * The CPU clock bounds it: what is charged never exceeds the CPU time
 * the thread used (its credit: used and not yet charged), so a thread
 * found runnable but kept waiting for a CPU on a loaded machine is
 * charged its CPU, not the wall time.  The credit is kept up to
 * PS_CPU_CREDIT_PERIODS periods from one charge to the next (a thread
 * that runs 1 % of the time is found on a CPU one look in a hundred, and
 * then charged the time since its previous look, which its credit
 * covers); CPU time spent in bursts too short for any look to find is
 * not charged beyond that.  A thread found waiting that has used no CPU
 * since is still in that wait (woken, it may be runnable and waiting for
 * a CPU on a loaded machine, but its stack is the wait's): not charged.
 *
 * A look is two steps: ps_cpu_clock_due with a reading of the thread's
 * CPU clock gives the periods of period_ns it may be charged; only if
 * that is not 0 need the caller find out whether the thread is on a CPU
 * and tell ps_cpu_clock_settle, which charges them if it is.  The clock
 * often says so itself (c->busy): a thread whose CPU clock advanced by
 * all but a slack of the time between two readings (the most that can
 * lie between them: the first's before to the second's after) was off
 * the CPU for at most that slack since the previous look; if it is
 * waiting now, it began to within the slack of the look.  The slack,
 * 1/256 of the interval or PS_CPU_BUSY_SLACK_NS, whichever is more,
 * covers the interrupts a running thread's clock does not count and the
 * sampler's own tick on a CPU the thread shares (pinned to one core, a
 * running thread is off it while the sampler looks at it): a skew of
 * that order, as any sample's read takes time.  Then the caller need not
 * ask the OS (a /proc read, ~3 us, most of a running thread's look in
 * cpu mode).
 * 0 on the first look in sampling run `run` (a new run starts from the
 * CPU the thread has then), when either reading is missing, and when the
 * clock went back (another thread took the tid over: it starts from here).
 */
#define PS_CPU_CREDIT_PERIODS 16
#define PS_CPU_BUSY_SLACK_NS 20000

uint64_t ps_cpu_clock_due(struct ps_cpu_clock *c, const struct ps_cpu_reading *r,
                          uint64_t period_ns, unsigned run);

/* Whether the thread ps_cpu_clock_due gave n (not 0) periods of
 * period_ns for is on a CPU: the periods charged, n if it is, else 0. */
uint64_t ps_cpu_clock_settle(struct ps_cpu_clock *c, uint64_t n, int on_cpu, uint64_t period_ns);

#endif
