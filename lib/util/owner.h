/*
 * owner.h - whether the caller runs in the process the library's state
 * belongs to (lib/util/owner.c).
 *
 * A vfork() child (posix_spawn, subprocess) shares our memory until it
 * execs or _exits: it sees our state but must neither write a profile nor
 * change that state, nor the signal actions we keep for the program, in
 * the parent's stead.  The lifecycle claims the process once it is set up,
 * and again in a fork() child (a process of its own); the C library
 * stand-ins ask before doing more than forwarding.  Below the lifecycle,
 * so that a stand-in needs nothing of it to answer.
 */
#ifndef PS_OWNER_H
#define PS_OWNER_H

/* This process is the one our state belongs to.  Async-signal-safe. */
void ps_owner_claim(void);

/* 1 if a process claimed our state and the caller runs in it; 0 before
 * any claim and in a vfork() child.  Async-signal-safe: an atomic load
 * and getpid(). */
int ps_owner_here(void);

#endif
