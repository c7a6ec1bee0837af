/*
 * ctlproto.h - the control channel's wire format (docs/design.md,
 * "Control channel"), parsed defensively: the bytes come from another
 * process, and a malformed request gets one error frame, never a crash or
 * a stall of the sampler thread.
 *
 * Request: one line of at most PS_CTL_LINE_MAX bytes, printable ASCII,
 *     pysample/1 VERB [key=value ...]\n
 *   VERB: dump | record | top | start | stop | status
 *   keys: rate=1..100000 (Hz), duration=1..86400 (s, record),
 *         interval=100..60000 (ms, top), and for the session (or dump)
 *         cpu=0|1 (PYSAMPLE_MODE wall or cpu), native=0|1|2 (off, on,
 *         all), async=0|1; a key not given: the process's own setting
 * Response: frames, each "KIND LENGTH\n" followed by LENGTH bytes:
 *   meta   "key value" lines: what the profile is worth (quality.h)
 *   data   collapsed stacks (docs/format.md)
 *   started  record: the session has begun (text for the user)
 *   ok     the request is done (text for the user, may be empty)
 *   err    the request failed: one line for the user
 * A request ends with one ok or err frame; top sends meta+data frames
 * until the client disconnects.
 */
#ifndef PS_CTLPROTO_H
#define PS_CTLPROTO_H

#include <stddef.h>

#define PS_CTL_LINE_MAX 512
#define PS_CTL_MAGIC "pysample/1"

enum ps_ctl_verb { PS_CTL_DUMP = 1, PS_CTL_RECORD, PS_CTL_TOP, PS_CTL_START, PS_CTL_STOP,
                   PS_CTL_STATUS };

struct ps_ctl_request {
    enum ps_ctl_verb verb;
    int rate_hz;        /* 0: the process's PYSAMPLE_RATE */
    int duration_s;     /* record: 0 = not given (an error) */
    int interval_ms;    /* top: 0 = 1000 */
    int cpu, native, async_tasks;  /* -1: not given (the process's setting) */
};

/*
 * Parses one request line (without its '\n').  0, or -1 with a one-line
 * reason in why.
 */
int ps_ctlproto_parse(const char *line, size_t len, struct ps_ctl_request *req, char *why,
                      size_t whylen);

/* A growable byte buffer (the reply being sent). */
struct ps_buf {
    char *data;
    size_t len, cap;
};

/* Appends a frame.  0, or -1 (out of memory: buf unchanged). */
int ps_ctlproto_frame(struct ps_buf *buf, const char *kind, const char *data, size_t len);
void ps_buf_free(struct ps_buf *buf);
/* Drops the first n bytes. */
void ps_buf_consume(struct ps_buf *buf, size_t n);

#endif
