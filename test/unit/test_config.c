/* Unit test: PYSAMPLE_* parsing, validation messages and path templates. */
#include <stdlib.h>
#include <signal.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "util/message.h"

struct env {
    const char *kv[16];
    int warnings;
    char last[512];
};

static const char *get(const char *name, void *ctx)
{
    struct env *e = ctx;
    size_t n = strlen(name);
    for (int i = 0; e->kv[i]; i++)
        if (strncmp(e->kv[i], name, n) == 0 && e->kv[i][n] == '=')
            return e->kv[i] + n + 1;
    return NULL;
}

static void warn(void *ctx, const char *msg)
{
    struct env *e = ctx;
    e->warnings++;
    snprintf(e->last, sizeof e->last, "%s", msg);
}

static void parse(struct env *e, struct ps_config *c)
{
    e->warnings = 0;
    e->last[0] = '\0';
    ps_config_parse(c, get, e, warn);
}

/* Unknown PYSAMPLE_ names (issue #35): one line each, the closest setting
 * when it is close; the settings, the tool's names and the project's test
 * and build switches are known. */
static void check_names(void)
{
    char msg[256];
    static const char *const known[] = {
        "PYSAMPLE_OUTPUT=/tmp/p", "PYSAMPLE_RATE=5", "PYSAMPLE_TIMELINE_MAX=3",
        "PYSAMPLE_READ_MODE=pipe", "PYSAMPLE_SERVICE=web", "PYSAMPLE_LIB=/x.so",
        "PYSAMPLE_TEST_FAULTPROBE=1", "PYSAMPLE_ARM64_ROOT=/r", "PYSAMPLE_SKIP_CROSS=1",
        "PYSAMPLE_BENCH_PEER=x", "OTHER=PYSAMPLE_OUPUT", "PATH=/bin", NULL,
    };
    for (int i = 0; known[i]; i++)
        CHECK_EQ_INT(ps_config_name_check(known[i], msg, sizeof msg), 0);
    static const char *const cases[][2] = {
        { "PYSAMPLE_OUPUT=/tmp/x", "unknown setting PYSAMPLE_OUPUT (did you mean PYSAMPLE_OUTPUT?)" },
        { "PYSAMPLE_RAET=5", "unknown setting PYSAMPLE_RAET (did you mean PYSAMPLE_RATE?)" },
        { "PYSAMPLE_NATVE=1", "unknown setting PYSAMPLE_NATVE (did you mean PYSAMPLE_NATIVE?)" },
        { "PYSAMPLE_AMR=1", "unknown setting PYSAMPLE_AMR (did you mean PYSAMPLE_ARM?)" },
        { "PYSAMPLE_TIMELINE_MX=9",
          "unknown setting PYSAMPLE_TIMELINE_MX (did you mean PYSAMPLE_TIMELINE_MAX?)" },
        { "pysample_output=/p", "unknown setting pysample_output (did you mean PYSAMPLE_OUTPUT?)" },
        { "PYSAMPLE_WOBBLE=1", "unknown setting PYSAMPLE_WOBBLE" },
        { "PYSAMPLE_XY=1", "unknown setting PYSAMPLE_XY" },
        { "PYSAMPLE_=1", "unknown setting PYSAMPLE_" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        msg[0] = '\0';
        CHECK_EQ_INT(ps_config_name_check(cases[i][0], msg, sizeof msg), 1);
        CHECK_EQ_STR(msg, cases[i][1]);
    }
    /* A name far longer than any setting: said, shortened, no suggestion. */
    char longname[300];
    snprintf(longname, sizeof longname, "PYSAMPLE_%0250d=1", 7);
    CHECK_EQ_INT(ps_config_name_check(longname, msg, sizeof msg), 1);
    CHECK(strlen(msg) < 130 && strstr(msg, "did you mean") == NULL);
}

/* The numeric settings the checks below look at. */
struct settings {
    int rate_hz, mode, lines, max_depth, flush_interval_s, file_mode;
};

static const struct settings defaults = {
    .rate_hz = 100, .mode = PS_MODE_WALL, .lines = 1, .max_depth = PS_DEFAULT_MAX_DEPTH,
    .flush_interval_s = PS_DEFAULT_FLUSH_S, .file_mode = 0600,
};

/* c's settings against want; a failure also says which case it was. */
static void check_settings(const struct ps_config *c, const struct settings *want,
                           const char *what)
{
    int before = check_failures;
    CHECK_EQ_INT(c->rate_hz, want->rate_hz);
    CHECK_EQ_INT(c->mode, want->mode);
    CHECK_EQ_INT(c->lines, want->lines);
    CHECK_EQ_INT(c->max_depth, want->max_depth);
    CHECK_EQ_INT(c->flush_interval_s, want->flush_interval_s);
    CHECK_EQ_INT(c->file_mode, want->file_mode);
    if (check_failures != before)
        fprintf(stderr, "  (in: %s)\n", what);
}

/* A value quoted in a message line cannot end the line or drive a
 * terminal (message.h): C0, DEL and UTF-8's C1 escaped, other UTF-8 kept,
 * no escape split at the end of the buffer. */
/* PYSAMPLE_CPU_BUDGET: a percent of one core, 0.01..100, as a share;
 * anything else is one warning and no budget. */
static void check_cpu_budget(void)
{
    static const struct { const char *kv; double share; } cases[] = {
        { "PYSAMPLE_CPU_BUDGET=1%", 0.01 }, { "PYSAMPLE_CPU_BUDGET=0.5", 0.005 },
        { "PYSAMPLE_CPU_BUDGET=100%", 1.0 }, { "PYSAMPLE_CPU_BUDGET=0.01%", 0.0001 },
        { "PYSAMPLE_CPU_BUDGET=0%", 0 }, { "PYSAMPLE_CPU_BUDGET=101%", 0 },
        { "PYSAMPLE_CPU_BUDGET=1%%", 0 }, { "PYSAMPLE_CPU_BUDGET=one", 0 },
        { "PYSAMPLE_CPU_BUDGET=nan", 0 }, { "PYSAMPLE_CPU_BUDGET=-1%", 0 },
        { "PYSAMPLE_CPU_BUDGET=", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ps_config c;
        struct env e = { { cases[i].kv, NULL }, 0, "" };
        parse(&e, &c);
        double want = cases[i].share;
        CHECK(c.cpu_budget >= want * 0.999 && c.cpu_budget <= want * 1.001);
        /* An empty value is no setting: only a bad one warns. */
        int bad = want == 0 && strchr(cases[i].kv, '=')[1] != '\0';
        CHECK_EQ_INT(e.warnings, bad);
        if (bad)
            CHECK(strstr(e.last, "PYSAMPLE_CPU_BUDGET") != NULL);
    }
}

static void check_message_escape(void)
{
    char out[64];
    ps_say_escape("5\npysample: x", out, sizeof out);
    CHECK_EQ_STR(out, "5\\x0apysample: x");
    ps_say_escape("\x1b[2J\r\x7f", out, sizeof out);
    CHECK_EQ_STR(out, "\\x1b[2J\\x0d\\x7f");
    ps_say_escape("\xc2\x9b" "31m \xc3\xa9", out, sizeof out);
    CHECK_EQ_STR(out, "\\xc2\\x9b31m \xc3\xa9");
    CHECK_EQ_INT((int)ps_say_escape("ab\n", out, 6), 2);
    CHECK_EQ_STR(out, "ab");
    /* A lone 0xC2 at the end is no C1 control. */
    ps_say_escape("a\xc2", out, sizeof out);
    CHECK_EQ_STR(out, "a\xc2");
}

int main(void)
{
    struct ps_config c;
    struct env e = { { NULL }, 0, "" };

    check_message_escape();
    check_cpu_budget();

    /* Defaults, and profiling off without PYSAMPLE_OUTPUT. */
    parse(&e, &c);
    CHECK_EQ_INT(e.warnings, 0);
    CHECK_EQ_STR(c.output, "");
    check_settings(&c, &defaults, "the defaults");

    /* Valid values at the edges of their ranges. */
    struct env ok = { { "PYSAMPLE_OUTPUT=/tmp/x.%p", "PYSAMPLE_RATE=100000", "PYSAMPLE_MODE=cpu",
                        "PYSAMPLE_LINES=0", "PYSAMPLE_MAX_DEPTH=1", "PYSAMPLE_FLUSH_INTERVAL=0",
                        "PYSAMPLE_FILE_MODE=0644", NULL }, 0, "" };
    parse(&ok, &c);
    CHECK_EQ_INT(ok.warnings, 0);
    CHECK_EQ_STR(c.output, "/tmp/x.%p");
    static const struct settings edges = {
        .rate_hz = 100000, .mode = PS_MODE_CPU, .lines = 0, .max_depth = 1,
        .flush_interval_s = 0, .file_mode = 0644,
    };
    check_settings(&c, &edges, "values at the edges of their ranges");

    /* Each invalid value: one message naming it, and its default. */
    static const struct { const char *kv; const char *name; } bad[] = {
        { "PYSAMPLE_NATIVE=maybe", "PYSAMPLE_NATIVE='maybe'" },
        { "PYSAMPLE_RATE=abc", "PYSAMPLE_RATE='abc'" },
        { "PYSAMPLE_RATE=0", "PYSAMPLE_RATE='0'" },
        { "PYSAMPLE_RATE=100001", "PYSAMPLE_RATE='100001'" },
        { "PYSAMPLE_RATE=12x", "PYSAMPLE_RATE='12x'" },
        { "PYSAMPLE_RATE=", "PYSAMPLE_RATE=''" },
        { "PYSAMPLE_RATE=99999999999999999999", "PYSAMPLE_RATE=" },
        { "PYSAMPLE_MODE=gpu", "PYSAMPLE_MODE='gpu'" },
        { "PYSAMPLE_LINES=2", "PYSAMPLE_LINES='2'" },
        { "PYSAMPLE_MAX_DEPTH=-1", "PYSAMPLE_MAX_DEPTH='-1'" },
        { "PYSAMPLE_FLUSH_INTERVAL=1.5", "PYSAMPLE_FLUSH_INTERVAL='1.5'" },
        { "PYSAMPLE_FILE_MODE=999", "PYSAMPLE_FILE_MODE='999'" },
        { "PYSAMPLE_FILE_MODE=0044", "PYSAMPLE_FILE_MODE='0044'" },
        { "PYSAMPLE_FORMAT=json", "PYSAMPLE_FORMAT='json'" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct env b = { { bad[i].kv, NULL }, 0, "" };
        parse(&b, &c);
        CHECK_EQ_INT(b.warnings, 1);
        if (strstr(b.last, bad[i].name) == NULL)
            fprintf(stderr, "message for %s does not name it: %s\n", bad[i].kv, b.last);
        CHECK(strstr(b.last, bad[i].name) != NULL);
        CHECK(strstr(b.last, "using") != NULL || strstr(b.last, "writing") != NULL);
        check_settings(&c, &defaults, bad[i].kv);
    }

    /* Enumerated values are read in any case; yes/no also as on/off. */
    struct env cased = { { "PYSAMPLE_MODE=CPU", "PYSAMPLE_ASYNC=On", "PYSAMPLE_LINES=OFF",
                           "PYSAMPLE_NATIVE=ALL", "PYSAMPLE_SIGNAL=sigusr2", "PYSAMPLE_GIL=TRUE",
                           "PYSAMPLE_FORMAT=Collapsed", NULL }, 0, "" };
    parse(&cased, &c);
    CHECK_EQ_INT(cased.warnings, 0);
    CHECK_EQ_INT(c.mode, PS_MODE_CPU);
    CHECK_EQ_INT(c.async_tasks, 1);
    CHECK_EQ_INT(c.lines, 0);
    CHECK_EQ_INT(c.native, PS_NATIVE_ALL);
    CHECK_EQ_INT(c.write_signal, SIGUSR2);
    CHECK_EQ_INT(c.gil_only, 1);

    /* PYSAMPLE_NATIVE takes every yes/no word, or all. */
    const struct { const char *kv; enum ps_native_mode want; } natives[] = {
        { "PYSAMPLE_NATIVE=yes", PS_NATIVE_ON }, { "PYSAMPLE_NATIVE=ON", PS_NATIVE_ON },
        { "PYSAMPLE_NATIVE=1", PS_NATIVE_ON }, { "PYSAMPLE_NATIVE=false", PS_NATIVE_OFF },
        { "PYSAMPLE_NATIVE=Off", PS_NATIVE_OFF }, { "PYSAMPLE_NATIVE=", PS_NATIVE_OFF },
        { "PYSAMPLE_NATIVE=all", PS_NATIVE_ALL },
    };
    for (size_t i = 0; i < sizeof natives / sizeof natives[0]; i++) {
        struct env n = { { natives[i].kv, NULL }, 0, "" };
        parse(&n, &c);
        CHECK_EQ_INT(n.warnings, 0);
        CHECK_EQ_INT(c.native, natives[i].want);
    }

    /* A refusal says what is wrong with the value: a yes/no variable lists
     * every word it takes; a mode without owner-read is a mode, refused
     * because nobody could read the profile. */
    struct env async_bad = { { "PYSAMPLE_ASYNC=maybe", NULL }, 0, "" };
    parse(&async_bad, &c);
    CHECK_EQ_INT(async_bad.warnings, 1);
    CHECK(strstr(async_bad.last, "1/yes/true/on") != NULL &&
          strstr(async_bad.last, "0/no/false/off") != NULL);
    struct env wonly = { { "PYSAMPLE_FILE_MODE=0200", NULL }, 0, "" };
    parse(&wonly, &c);
    CHECK_EQ_INT(wonly.warnings, 1);
    CHECK(strstr(wonly.last, "not an octal") == NULL && strstr(wonly.last, "read") != NULL);
    CHECK_EQ_INT(c.file_mode, 0600);

    /* Path templates. */
    char out[64];
    CHECK_EQ_INT(ps_expand_path("/t/p.%p.%h.%t.%%.txt", 42, "box", 1700000000, out, sizeof out), 0);
    CHECK_EQ_STR(out, "/t/p.42.box.1700000000.%.txt");
    CHECK_EQ_INT(ps_expand_path("plain", 1, "h", 2, out, sizeof out), 0);
    CHECK_EQ_STR(out, "plain");
    CHECK_EQ_INT(ps_expand_path("bad.%q", 1, "h", 2, out, sizeof out), -1);
    CHECK_EQ_INT(ps_expand_path("trailing%", 1, "h", 2, out, sizeof out), -1);
    CHECK_EQ_INT(ps_expand_path("%p%p%p%p%p%p%p%p%p%p%p%p", 1234567, "h", 2, out, 16), -1);
    CHECK_EQ_INT(ps_template_has_pid("a.%p"), 1);
    CHECK_EQ_INT(ps_template_has_pid("a.%%p"), 0);
    CHECK_EQ_INT(ps_template_has_pid("a.%h"), 0);
    /* PYSAMPLE_TIMELINE: off by default, its bound 1000000 records; a bad
     * bound is said and the default kept. */
    parse(&e, &c);
    CHECK_EQ_INT(c.timeline, 0);
    CHECK_EQ_INT(c.timeline_max, PS_DEFAULT_TIMELINE_MAX);
    struct env tl = { { "PYSAMPLE_TIMELINE=1", "PYSAMPLE_TIMELINE_MAX=100", NULL }, 0, "" };
    parse(&tl, &c);
    CHECK_EQ_INT(tl.warnings, 0);
    CHECK_EQ_INT(c.timeline, 1);
    CHECK_EQ_INT(c.timeline_max, 100);
    struct env tl_bad = { { "PYSAMPLE_TIMELINE=maybe", "PYSAMPLE_TIMELINE_MAX=0", NULL }, 0, "" };
    parse(&tl_bad, &c);
    CHECK_EQ_INT(tl_bad.warnings, 2);
    CHECK_EQ_STR(tl_bad.last, "PYSAMPLE_TIMELINE_MAX='0' is not a record count from 1 to 100000000; "
                              "using 1000000");
    CHECK_EQ_INT(c.timeline, 0);
    CHECK_EQ_INT(c.timeline_max, PS_DEFAULT_TIMELINE_MAX);
    check_names();

    CHECK_DONE();
}
