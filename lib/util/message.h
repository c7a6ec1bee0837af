/*
 * message.h - the one way the library speaks to the user: a line on stderr
 * prefixed "pysample: ", written with one write() so that lines from
 * several processes do not interleave within a line.
 */
#ifndef PS_MESSAGE_H
#define PS_MESSAGE_H

void ps_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
