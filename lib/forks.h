/*
 * forks.h - every step of fork() the library takes, in one place and in
 * its order: before it, in the parent after it, and in the child.
 *
 * lifecycle.c registers these with pthread_atfork once profiling is set up
 * (nothing before: the constructor leaves every other process alone).  The
 * lifecycle's own state is its own: the child's run takes the lifecycle's
 * step as an argument, called in its place in the order (for the length
 * of that call only, as qsort takes its comparison).
 */
#ifndef PS_FORKS_H
#define PS_FORKS_H

void ps_fork_prepare(void);

/* counts_threads: the interpreter is CPython 3.12+, which counts the
 * process's threads next (sampler/forkpause.h). */
void ps_fork_parent(int counts_threads);

/* lifecycle: the lifecycle's own part of the child (its lock, its flags,
 * where the interpreter was at the fork). */
void ps_fork_child(void (*lifecycle)(void));

#endif
