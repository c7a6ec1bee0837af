/*
 * ctlwake.h - the wake-up pipe of armed mode: any thread (and signal
 * handlers) ends the sampler thread's wait on the control socket.
 */
#ifndef PS_CTLWAKE_H
#define PS_CTLWAKE_H

/* Makes the pipe (ends moved high, ownfd.h).  0, or a negative errno. */
int ps_ctlwake_make(void);

/* Closes what of it is still ours; forgets it either way. */
void ps_ctlwake_drop(void);

/* 1 if both ends are still the ones made. */
int ps_ctlwake_ours(void);

/* The read end to poll (-1: none). */
int ps_ctlwake_fd(void);

/* Empties the read end (if it is still ours). */
void ps_ctlwake_drain(void);

/* One byte into the write end, if it is still ours.  Any thread;
 * async-signal-safe (fstat, write). */
void ps_ctlwake_signal(void);

#endif
