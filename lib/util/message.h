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

/* A failure that may come back on every write (a full disk, a planted
 * link): said when it begins and once when it ends, not on every write
 * meanwhile (the timeline's disk-full line came ~2 900 times a day). */
struct ps_episode {
    _Atomic int failing;
};

/* Records the outcome rc (0: success) of one attempt: 1 if it begins a
 * failure or ends one, when the caller says so; 0 if nothing changed. */
int ps_episode_turn(struct ps_episode *e, int rc);

/* Lines dropped because stderr would have blocked (PYSAMPLE_STATS). */
uint64_t ps_say_dropped(void);

#endif
