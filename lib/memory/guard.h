/*
 * guard.h - what the read path (memread.c) and the program's fault view
 * (faultview.c) share: the read mode and the guard of a read in flight.
 * Internal to lib/memory/.
 */
#ifndef PS_GUARD_H
#define PS_GUARD_H

#include <setjmp.h>

#include "memory/memread.h"

/* For our fault handler, on the faulting thread: the recovery point of
 * the guarded copy this thread is inside, or NULL when the fault is not
 * one of our reads.  Async-signal-safe (two loads). */
sigjmp_buf *ps_mem_fault_recovery(void);

/* The direct path: taken unless given up (a yield may race; memread.c
 * says how the order of stores settles it), given up for good, or asked
 * whether it was. */
void ps_mem_go_direct(void);
void ps_mem_give_up_direct(void);
int ps_mem_direct_given_up(void);
void ps_mem_set_mode(enum ps_read_mode m);

/* Waits (bounded) until no other thread is inside a direct read. */
void ps_mem_wait_readers(void);

/* In a fork child: no read is in flight any more. */
void ps_mem_read_after_fork(void);

#endif
