/*
 * message.h - the one way the library speaks to the user: a line on stderr
 * prefixed "pysample: ", written with one write() so that lines from
 * several processes do not interleave within a line.
 *
 * Never a wait: a line that cannot be written at once (stderr a full pipe
 * nobody reads) is dropped and counted, so that a message on the sampler
 * thread cannot stall sampling, writes and the control socket.
 */
#ifndef PS_MESSAGE_H
#define PS_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

void ps_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* in as ps_say writes it: each control character (C0, DEL, C1 in UTF-8)
 * as \xNN, so that no value quoted in a line can end it or drive a
 * terminal.  out is always terminated and no escape is split; returns the
 * bytes written. */
size_t ps_say_escape(const char *in, char *out, size_t outlen);

/* Lines dropped because stderr would have blocked (PYSAMPLE_STATS). */
uint64_t ps_say_dropped(void);

#endif
