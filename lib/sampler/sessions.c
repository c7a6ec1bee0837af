/*
 * sessions.c - armed mode's commands and sessions (sessions.h), on the
 * sampler thread: the commands control.c queued are drained here after
 * each wait, and answered through control.c.  Calls go down only: to the
 * control server, the profile, and the sampler's own switches (sampler.h).
 *
 * Sessions.  The process has one profile (profile.h).  A session borrows
 * it: record, top and start empty it, switch the sampler's ticks on at the
 * asked rate (and mode, native and asyncio settings, ps_settings_use)
 * and give it back empty when they end; so only one runs at a time and
 * the others are told "busy" (so is everything while the process profiles
 * to PYSAMPLE_OUTPUT or through pysample_start(), whose profile is not
 * ours to empty).  dump needs no session: one tick of every thread, into
 * the empty profile, rendered and emptied again; beside a session, that
 * tick is one of the session's (every thread, as a wall-clock tick takes
 * them) and the dump is what it added.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/control.h"
#include "platform/platform.h"
#include "profile/profile.h"
#include "sampler/context.h"
#include "sampler/quality.h"
#include "sampler/state.h"
#include "sampler/sessions.h"
#include "settings.h"


static const char *session_name(enum ps_session_kind v)
{
    return v == SES_RECORD ? "record" : v == SES_TOP ? "top" : v == SES_STARTED ? "start" : "none";
}

static void quality_now(struct ps_quality *q, const char *how, const struct ps_stats *base,
                        uint64_t since, int rate)
{
    struct ps_stats now;
    ps_sampler_stats(&now);
    ps_sampler_quality(q, how, base, &now, ps_now_ns() - since, rate);
}

/* meta and data frames of a profile, then ok. */
static void send_profile(int conn, const struct ps_quality *q, const char *data, size_t len,
                         int last)
{
    char meta[1024];
    size_t mlen = ps_quality_format(q, meta, sizeof meta);
    if (ps_control_frame(conn, "meta", meta, mlen) == 0 &&
        ps_control_frame(conn, "data", data, len) == 0 && last)
        ps_control_finish(conn, "ok", "");
}

static void send_rendered(int conn, const struct ps_quality *q, int last)
{
    char *data;
    size_t len;
    if (ps_profile_render(&data, &len) != 0) {
        ps_control_finish(conn, "err", "out of memory while rendering the profile");
        return;
    }
    send_profile(conn, q, data, len, last);
    free(data);
}

/* Why no tick can be taken now, or NULL. */
static const char *cannot_tick(void)
{
    if (!ps_sampler_ready())
        return "the interpreter is not initialised yet; try again";
    if (ps_sampler_finished())
        return "the interpreter is shutting down";
    return NULL;
}

/* Why no session can start now, or NULL. */
static const char *cannot_sample(struct ps_session *s)
{
    char *why = s->why;
    const char *no = cannot_tick();
    if (no != NULL)
        return no;
    if (s->ses != SES_NONE) {
        snprintf(why, sizeof s->why, "busy: a `pysample %s` of this process is under way",
                 session_name(s->ses));
        return why;
    }
    if (ps_sampler_sampling())
        return "busy: this process is already profiled (PYSAMPLE_OUTPUT or pysample_start())";
    return NULL;
}

static const char *begin_session(struct ps_session *s, enum ps_session_kind v, int conn,
                                 const struct ps_ctl_request *r)
{
    const char *why = cannot_sample(s);
    if (why != NULL)
        return why;
    if ((why = ps_settings_use(r->cpu, r->native, r->async_tasks)) != NULL)
        return why;
    if (ps_profile_lend(1) != 0) {
        ps_settings_use(-1, -1, -1);
        return "out of memory";
    }
    s->ses = v;
    s->conn = conn;
    s->rate = r->rate_hz > 0 ? r->rate_hz : ps_settings_process()->rate_hz;
    s->cpu = r->cpu;
    s->native = r->native;
    s->async_tasks = r->async_tasks;
    s->start = ps_now_ns();
    ps_sampler_stats(&s->base);
    ps_sampler_set_rate(s->rate);
    ps_sampler_set_active(1);
    ps_control_note_session(1);
    return NULL;
}

/* Ends the session; its profile goes to connection send_to (-1: nobody). */
static void end_session(struct ps_session *s, int send_to)
{
    if (s->ses == SES_NONE)
        return;
    ps_sampler_set_active(0);
    if (send_to >= 0 && ps_control_open(send_to)) {
        struct ps_quality q;
        char how[32];
        snprintf(how, sizeof how, "armed %s", session_name(s->ses));
        quality_now(&q, how, &s->base, s->start, s->rate);
        send_rendered(send_to, &q, 1);
    }
    s->ses = SES_NONE;
    s->conn = -1;
    ps_settings_use(-1, -1, -1);
    ps_sampler_set_rate(ps_settings_process()->rate_hz);
    ps_profile_lend(0);
    ps_control_note_session(0);
}

/* ---- dump ------------------------------------------------------------------ */

struct line {
    const char *text;
    size_t stack;         /* length of the stack: the line up to its last space */
    unsigned long long count;
};

static int by_stack(const void *a, const void *b)
{
    const struct line *x = a, *y = b;
    size_t n = x->stack < y->stack ? x->stack : y->stack;
    int c = memcmp(x->text, y->text, n);
    return c != 0 ? c : (x->stack > y->stack) - (x->stack < y->stack);
}

/* The lines of a collapsed text: an array to free, and *n of them. */
static struct line *lines_of(const char *text, size_t len, size_t *n)
{
    size_t cap = 1;
    for (size_t i = 0; i < len; i++)
        cap += text[i] == '\n';
    struct line *v = malloc(cap * sizeof *v);
    *n = 0;
    for (const char *p = text, *end = text + len; v != NULL && p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl != NULL ? nl : end;
        const char *sp = e;
        while (sp > p && sp[-1] != ' ')
            sp--;
        if (sp > p)
            v[(*n)++] = (struct line){ p, (size_t)(sp - 1 - p), strtoull(sp, NULL, 10) };
        p = e + 1;
    }
    return v;
}

/* What after has more of than before ("stack count" lines), into *out. */
static int added(const char *before, size_t blen, const char *after, size_t alen, char **out,
                 size_t *outlen)
{
    size_t nb, na;
    struct line *b = lines_of(before, blen, &nb), *a = lines_of(after, alen, &na);
    char *o = malloc(alen + 1);
    size_t len = 0;
    if (b == NULL || a == NULL || o == NULL) {
        free(b), free(a), free(o);
        return -1;
    }
    qsort(b, nb, sizeof *b, by_stack);
    for (size_t i = 0; i < na; i++) {
        struct line *was = bsearch(&a[i], b, nb, sizeof *b, by_stack);
        unsigned long long more = a[i].count - (was != NULL ? was->count : 0);
        if (more == 0 || (was != NULL && was->count > a[i].count))
            continue;
        /* "stack more\n" is never longer than the line it comes from. */
        len += (size_t)snprintf(o + len, alen + 1 - len, "%.*s %llu\n", (int)a[i].stack, a[i].text,
                                more);
    }
    free(b), free(a);
    *out = o;
    *outlen = len;
    return 0;
}

/* dump beside a session: the stacks one tick of every thread adds to it. */
static void dump_beside(struct ps_sampler_ctx *ctx, int conn, const struct ps_ctl_request *r)
{
    const struct ps_session *s = &ctx->session;
    if ((r->cpu >= 0 && r->cpu != s->cpu) || (r->native >= 0 && r->native != s->native) ||
        (r->async_tasks >= 0 && r->async_tasks != s->async_tasks)) {
        ps_control_finish(conn, "err",
                          "busy: a session with other --mode/--native/--async settings "
                          "is under way");
        return;
    }
    char *before, *after, *diff;
    size_t blen, alen, dlen;
    struct ps_stats base;
    ps_sampler_stats(&base);
    uint64_t t0 = ps_now_ns();
    if (ps_profile_render(&before, &blen) != 0) {
        ps_control_finish(conn, "err", "out of memory");
        return;
    }
    ps_sampler_tick_all(ctx);
    int rc = ps_profile_render(&after, &alen);
    if (rc == 0) {
        rc = added(before, blen, after, alen, &diff, &dlen);
        free(after);
    }
    free(before);
    if (rc != 0) {
        ps_control_finish(conn, "err", "out of memory");
        return;
    }
    struct ps_quality q;
    quality_now(&q, "armed dump", &base, t0, 0);
    q.mode = "wall";
    send_profile(conn, &q, diff, dlen, 1);
    free(diff);
}

static void dump(struct ps_sampler_ctx *ctx, int conn, const struct ps_ctl_request *r)
{
    const struct ps_session *s = &ctx->session;
    const char *why = cannot_tick();
    if (why == NULL && s->ses != SES_NONE) {
        dump_beside(ctx, conn, r);
        return;
    }
    if (why == NULL && ps_sampler_sampling())
        why = "busy: this process is already profiled (PYSAMPLE_OUTPUT or pysample_start())";
    if (why == NULL)
        why = ps_settings_use(-1, r->native, r->async_tasks);
    if (why != NULL) {
        ps_control_finish(conn, "err", why);
        return;
    }
    if (ps_profile_reset() != 0) {
        ps_control_finish(conn, "err", "out of memory");
    } else {
        struct ps_stats base;
        ps_sampler_stats(&base);
        uint64_t t0 = ps_now_ns();
        ps_sampler_tick_all(ctx);
        struct ps_quality q;
        quality_now(&q, "armed dump", &base, t0, 0);
        q.mode = "wall";
        send_rendered(conn, &q, 1);
        ps_profile_reset();
    }
    ps_settings_use(-1, -1, -1);
}

/* ---- the other commands -------------------------------------------------------- */

static void status(const struct ps_session *s, int conn)
{
    struct ps_quality q;
    struct ps_stats zero;
    memset(&zero, 0, sizeof zero);
    char how[64];
    snprintf(how, sizeof how, "armed %s", session_name(s->ses));
    if (s->ses != SES_NONE)
        quality_now(&q, how, &s->base, s->start, s->rate);
    else
        quality_now(&q, how, &zero, ps_now_ns(), 0);
    char meta[1024];
    size_t mlen = ps_quality_format(&q, meta, sizeof meta);
    if (ps_control_frame(conn, "meta", meta, mlen) == 0)
        ps_control_finish(conn, "ok", "");
}

static void stop(struct ps_session *s, int conn)
{
    char why[200];
    if (s->ses == SES_STARTED) {
        end_session(s, conn);
        return;
    }
    int busy = s->ses != SES_NONE;
    snprintf(why, sizeof why, "not started: run `pysample start --pid %ld` first%s%s%s",
             (long)getpid(), busy ? " (a `pysample " : "", busy ? session_name(s->ses) : "",
             busy ? "` is under way)" : "");
    ps_control_finish(conn, "err", why);
}

static void request(struct ps_sampler_ctx *ctx, int conn, const struct ps_ctl_request *r)
{
    struct ps_session *s = &ctx->session;
    const char *no;
    char why[200];
    switch (r->verb) {
    case PS_CTL_STATUS:
        status(s, conn);
        return;
    case PS_CTL_DUMP:
        dump(ctx, conn, r);
        return;
    case PS_CTL_RECORD:
    case PS_CTL_TOP:
        no = begin_session(s, r->verb == PS_CTL_RECORD ? SES_RECORD : SES_TOP, conn, r);
        if (no != NULL) {
            ps_control_finish(conn, "err", no);
            return;
        }
        if (r->verb == PS_CTL_RECORD) {
            s->end = s->start + (uint64_t)r->duration_s * 1000000000ull;
            snprintf(why, sizeof why, "sampling at %d Hz for %d s", s->rate, r->duration_s);
            ps_control_frame(conn, "started", why, strlen(why));
        } else {
            s->interval = (uint64_t)r->interval_ms * 1000000ull;
            s->next = s->start + s->interval;
        }
        return;
    case PS_CTL_START:
        if ((no = begin_session(s, SES_STARTED, -1, r)) != NULL) {
            ps_control_finish(conn, "err", no);
            return;
        }
        snprintf(why, sizeof why, "sampling at %d Hz until `pysample stop --pid %ld`", s->rate,
                 (long)getpid());
        ps_control_finish(conn, "ok", why);
        return;
    case PS_CTL_STOP:
        stop(s, conn);
        return;
    }
}

/* The session's moments: the end of a record, the next frame of top. */
static void timers(struct ps_session *s, uint64_t now)
{
    if (s->ses == SES_RECORD && now >= s->end) {
        end_session(s, s->conn);
    } else if (s->ses == SES_TOP && now >= s->next) {
        /* A client still reading the previous frame skips this one. */
        if (!ps_control_sending(s->conn)) {
            struct ps_quality q;
            quality_now(&q, "armed top", &s->base, s->start, s->rate);
            send_rendered(s->conn, &q, 0);
        }
        while (s->ses == SES_TOP && s->next <= now)
            s->next += s->interval;
    }
}

uint64_t ps_sessions_deadline(const struct ps_session *s)
{
    return s->ses == SES_RECORD ? s->end : s->ses == SES_TOP ? s->next : UINT64_MAX;
}

void ps_sessions_serve(struct ps_sampler_ctx *ctx)
{
    struct ps_ctl_cmd cmd;
    while (ps_control_next(&cmd)) {
        if (cmd.kind == PS_CTL_CMD_REQUEST)
            request(ctx, cmd.conn, &cmd.req);
        else if (ctx->session.ses != SES_NONE && cmd.conn == ctx->session.conn)
            end_session(&ctx->session, -1);  /* its client went away */
    }
    timers(&ctx->session, ps_now_ns());
}

void ps_sessions_child_after_fork(struct ps_session *s)
{
    if (s->ses != SES_NONE)
        ps_settings_use(-1, -1, -1);
    s->ses = SES_NONE;
    s->conn = -1;
}
