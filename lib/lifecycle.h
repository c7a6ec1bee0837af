/*
 * lifecycle.h - start-up, exit, fork: when profiling starts and when the
 * profile is written (lib/pysample.c).
 */
#ifndef PS_LIFECYCLE_H
#define PS_LIFECYCLE_H

/* The process is ending without atexit (_exit): write the profile now. */
void ps_lifecycle_process_exit(void);

/* Resolves the real libc functions behind our interposers. */
void ps_interpose_init(void);

#endif
