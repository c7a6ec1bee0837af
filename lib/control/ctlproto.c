/*
 * ctlproto.c - parsing requests and framing replies (ctlproto.h).
 *
 * Nothing here trusts the input: the line is bounded by the caller, every
 * byte is checked to be printable ASCII, every number is range-checked
 * whole, every key may appear once, and anything unknown is an error that
 * names it (cut short and made printable, so a hostile line cannot put
 * control characters into the program's stderr).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctlproto.h"
#include "util/grow.h"

static const struct { const char *name; enum ps_ctl_verb verb; } verbs[] = {
    { "dump", PS_CTL_DUMP },   { "record", PS_CTL_RECORD }, { "top", PS_CTL_TOP },
    { "start", PS_CTL_START }, { "stop", PS_CTL_STOP },     { "status", PS_CTL_STATUS },
};

/* The key=value words a request may carry, in the order of the fields
 * they set (key_field): an int within a range, given at most once. */
static const struct {
    const char *name;
    long lo, hi;
    const char *unit;
} keys[] = {
    { "rate", 1, 100000, "samples per second" },
    { "duration", 1, 86400, "seconds" },
    { "interval", 100, 60000, "milliseconds" },
    { "cpu", 0, 1, "(0: wall-clock, 1: CPU mode)" },
    { "native", 0, 2, "(0: Python frames, 1: native too, 2: all native)" },
    { "async", 0, 1, "(0 or 1)" },
};

/* A whole decimal number in [lo, hi] from s[0..n). */
static int number(const char *s, size_t n, long lo, long hi, long *out)
{
    if (n == 0 || n > 9)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The next space-separated word of line[*pos..len): start and length. */
static int next_word(const char *line, size_t len, size_t *pos, const char **w, size_t *wlen)
{
    while (*pos < len && line[*pos] == ' ')
        (*pos)++;
    if (*pos >= len)
        return 0;
    *w = line + *pos;
    size_t start = *pos;
    while (*pos < len && line[*pos] != ' ')
        (*pos)++;
    *wlen = *pos - start;
    return 1;
}

static int word_is(const char *w, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(w, s, n) == 0;
}

/* Drops a final '\r' from *len, then refuses a line too long or with a
 * byte that is not printable ASCII (which would reach stderr in a
 * message). */
static int line_acceptable(const char *line, size_t *len, char *why, size_t whylen)
{
    if (*len > 0 && line[*len - 1] == '\r')
        (*len)--;
    if (*len >= PS_CTL_LINE_MAX) {
        snprintf(why, whylen, "request longer than %d bytes", PS_CTL_LINE_MAX - 1);
        return -1;
    }
    for (size_t i = 0; i < *len; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c < 0x20 || c > 0x7e) {
            snprintf(why, whylen, "request has a byte 0x%02x that is not printable ASCII", c);
            return -1;
        }
    }
    return 0;
}

/* The magic word, then the verb into req->verb. */
static int parse_verb(const char *line, size_t len, size_t *pos, struct ps_ctl_request *req,
                      char *why, size_t whylen)
{
    size_t wlen;
    const char *w;
    if (!next_word(line, len, pos, &w, &wlen) || !word_is(w, wlen, PS_CTL_MAGIC)) {
        snprintf(why, whylen, "not a pysample control request (expected '%s VERB ...')",
                 PS_CTL_MAGIC);
        return -1;
    }
    if (!next_word(line, len, pos, &w, &wlen)) {
        snprintf(why, whylen, "request without a verb");
        return -1;
    }
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (word_is(w, wlen, verbs[i].name))
            req->verb = verbs[i].verb;
    if (req->verb == 0) {
        snprintf(why, whylen, "unknown verb '%.*s'", (int)(wlen > 32 ? 32 : wlen), w);
        return -1;
    }
    return 0;
}

/* The field keys[k] sets. */
static int *key_field(struct ps_ctl_request *req, size_t k)
{
    int *const field[sizeof keys / sizeof keys[0]] = { &req->rate_hz, &req->duration_s,
                                                        &req->interval_ms, &req->cpu,
                                                        &req->native, &req->async_tasks };
    return field[k];
}

/* One key=value word w[0..wlen) into its field; *seen has a bit per key
 * already given. */
static int parse_pair(const char *w, size_t wlen, struct ps_ctl_request *req, unsigned *seen,
                      char *why, size_t whylen)
{
    const char *eq = memchr(w, '=', wlen);
    if (eq == NULL) {
        snprintf(why, whylen, "'%.*s' is not key=value", (int)(wlen > 32 ? 32 : wlen), w);
        return -1;
    }
    size_t klen = (size_t)(eq - w), vlen = wlen - klen - 1, k = 0;
    long x;
    while (k < sizeof keys / sizeof keys[0] && !word_is(w, klen, keys[k].name))
        k++;
    if (k == sizeof keys / sizeof keys[0]) {
        snprintf(why, whylen, "unknown key '%.*s'", (int)(klen > 32 ? 32 : klen), w);
        return -1;
    }
    if (number(eq + 1, vlen, keys[k].lo, keys[k].hi, &x) != 0) {
        snprintf(why, whylen, "%s must be %ld..%ld %s", keys[k].name, keys[k].lo, keys[k].hi,
                 keys[k].unit);
        return -1;
    }
    *key_field(req, k) = (int)x;
    if (*seen & (1u << k)) {
        snprintf(why, whylen, "key '%.*s' given twice", (int)klen, w);
        return -1;
    }
    *seen |= 1u << k;
    return 0;
}

/* What a verb needs, and its defaults. */
static int verb_complete(struct ps_ctl_request *req, char *why, size_t whylen)
{
    if (req->verb == PS_CTL_RECORD && req->duration_s == 0) {
        snprintf(why, whylen, "record needs duration=SECONDS");
        return -1;
    }
    if (req->verb == PS_CTL_TOP && req->interval_ms == 0)
        req->interval_ms = 1000;
    return 0;
}

int ps_ctlproto_parse(const char *line, size_t len, struct ps_ctl_request *req, char *why,
                      size_t whylen)
{
    size_t pos = 0, wlen;
    const char *w;
    unsigned seen = 0;

    memset(req, 0, sizeof *req);
    if (line_acceptable(line, &len, why, whylen) != 0 ||
        parse_verb(line, len, &pos, req, why, whylen) != 0)
        return -1;
    req->cpu = req->native = req->async_tasks = -1;
    while (next_word(line, len, &pos, &w, &wlen))
        if (parse_pair(w, wlen, req, &seen, why, whylen) != 0)
            return -1;
    return verb_complete(req, why, whylen);
}

static int reserve(struct ps_buf *buf, size_t more)
{
    if (buf->len + more <= buf->cap)
        return 0;
    char *d = ps_grow(buf->data, &buf->cap, buf->len + more, 1, 4096);
    if (d == NULL)
        return -1;
    buf->data = d;
    return 0;
}

int ps_ctlproto_frame(struct ps_buf *buf, const char *kind, const char *data, size_t len)
{
    char head[64];
    int n = snprintf(head, sizeof head, "%s %zu\n", kind, len);
    if (n < 0 || (size_t)n >= sizeof head || reserve(buf, (size_t)n + len) != 0)
        return -1;
    memcpy(buf->data + buf->len, head, (size_t)n);
    if (len)
        memcpy(buf->data + buf->len + (size_t)n, data, len);
    buf->len += (size_t)n + len;
    return 0;
}

void ps_buf_free(struct ps_buf *buf)
{
    free(buf->data);
    memset(buf, 0, sizeof *buf);
}

void ps_buf_consume(struct ps_buf *buf, size_t n)
{
    if (n >= buf->len) {
        buf->len = 0;
        return;
    }
    memmove(buf->data, buf->data + n, buf->len - n);
    buf->len -= n;
}
