/*
 * Unit test: the control channel's wire format (ctlproto.c) on good and
 * hostile requests, the reply framing, and the quality lines (quality.c).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "control/ctlproto.h"
#include "sampler/quality.h"

static int parse(const char *line, struct ps_ctl_request *r, char *why)
{
    return ps_ctlproto_parse(line, strlen(line), r, why, 200);
}

static void test_good_requests(void)
{
    struct ps_ctl_request r;
    char why[200];
    CHECK_EQ_INT(parse("pysample/1 dump", &r, why), 0);
    CHECK_EQ_INT(r.verb, PS_CTL_DUMP);
    CHECK_EQ_INT(parse("pysample/1 record duration=30 rate=250", &r, why), 0);
    CHECK_EQ_INT(r.verb, PS_CTL_RECORD);
    CHECK_EQ_INT(r.duration_s, 30);
    CHECK_EQ_INT(r.rate_hz, 250);
    CHECK_EQ_INT(parse("pysample/1  top  interval=500\r", &r, why), 0);  /* spaces, CRLF */
    CHECK_EQ_INT(r.verb, PS_CTL_TOP);
    CHECK_EQ_INT(r.interval_ms, 500);
    CHECK_EQ_INT(parse("pysample/1 top", &r, why), 0);
    CHECK_EQ_INT(r.interval_ms, 1000);
    CHECK_EQ_INT(parse("pysample/1 start", &r, why), 0);
    CHECK_EQ_INT(r.rate_hz, 0);
    CHECK_EQ_INT(parse("pysample/1 stop", &r, why), 0);
    CHECK_EQ_INT(parse("pysample/1 status", &r, why), 0);
    CHECK_EQ_INT(r.verb, PS_CTL_STATUS);
}

static void expect_error(const char *line, size_t len, const char *why_has)
{
    struct ps_ctl_request r;
    char why[200] = "";
    int rc = ps_ctlproto_parse(line, len, &r, why, sizeof why);
    CHECK_EQ_INT(rc, -1);
    if (strstr(why, why_has) == NULL) {
        fprintf(stderr, "for %.40s: expected '%s' in '%s'\n", line, why_has, why);
        check_failures++;
    }
    for (const char *p = why; *p; p++)
        CHECK(*p >= 0x20 && *p < 0x7f);   /* the reason goes to a terminal */
}

static void test_bad_requests(void)
{
#define BAD(s, w) expect_error(s, strlen(s), w)
    BAD("", "not a pysample control request");
    BAD("GET / HTTP/1.0", "not a pysample control request");
    BAD("pysample/2 dump", "not a pysample control request");
    BAD("pysample/1", "without a verb");
    BAD("pysample/1 shutdown", "unknown verb 'shutdown'");
    BAD("pysample/1 record", "record needs duration");
    BAD("pysample/1 record duration=0", "duration must be");
    BAD("pysample/1 record duration=86401", "duration must be");
    BAD("pysample/1 record duration=-5", "duration must be");
    BAD("pysample/1 record duration=5x", "duration must be");
    BAD("pysample/1 record duration=99999999999999999999", "duration must be");
    BAD("pysample/1 record duration=5 duration=6", "given twice");
    BAD("pysample/1 dump rate=0", "rate must be");
    BAD("pysample/1 dump rate=100001", "rate must be");
    BAD("pysample/1 dump rate=", "rate must be");
    BAD("pysample/1 top interval=99", "interval must be");
    BAD("pysample/1 dump verbose", "is not key=value");
    BAD("pysample/1 dump path=/etc/passwd", "unknown key 'path'");
    BAD("pysample/1 dump \x1b[2J", "not printable ASCII");
    BAD("pysample/1 dump caf\xc3\xa9=1", "not printable ASCII");
#undef BAD
    /* A NUL inside the line is a byte like any other, and not printable. */
    expect_error("pysample/1 dump\0rate=5", 22, "0x00");
    /* Over the limit, whatever it holds. */
    char big[PS_CTL_LINE_MAX + 10];
    memset(big, 'a', sizeof big);
    memcpy(big, "pysample/1 dump ", 16);
    expect_error(big, sizeof big, "longer than");
    /* An unknown verb or key is quoted cut short. */
    char longverb[300] = "pysample/1 ";
    memset(longverb + 11, 'v', 200);
    longverb[211] = '\0';
    struct ps_ctl_request r;
    char why[200];
    CHECK_EQ_INT(parse(longverb, &r, why), -1);
    CHECK(strlen(why) < 60);
}

static void test_frames(void)
{
    struct ps_buf b = { 0 };
    CHECK_EQ_INT(ps_ctlproto_frame(&b, "meta", "a 1\n", 4), 0);
    CHECK_EQ_INT(ps_ctlproto_frame(&b, "ok", "", 0), 0);
    CHECK_EQ_INT((long)b.len, (long)strlen("meta 4\na 1\nok 0\n"));
    CHECK(memcmp(b.data, "meta 4\na 1\nok 0\n", b.len) == 0);
    ps_buf_consume(&b, 7);
    CHECK(b.len == 9 && memcmp(b.data, "a 1\nok 0\n", 9) == 0);
    /* A payload larger than the first allocation. */
    char *big = malloc(100000);
    memset(big, 'x', 100000);
    CHECK_EQ_INT(ps_ctlproto_frame(&b, "data", big, 100000), 0);
    CHECK(b.len == 9 + strlen("data 100000\n") + 100000);
    ps_buf_consume(&b, b.len);
    CHECK_EQ_INT((long)b.len, 0);
    free(big);
    ps_buf_free(&b);
}

static void test_quality(void)
{
    struct ps_stats base, now;
    memset(&base, 0, sizeof base);
    memset(&now, 0, sizeof now);
    base.ticks = 100;
    base.samples = 90;
    now.ticks = 300;
    now.samples = 380;
    now.errors = 7;
    now.errors_unreadable = 2;
    now.errors_inconsistent = 4;
    now.truncated = 3;
    now.rate_now_hz = 80;
    now.budget_pct = 1.0;
    now.budget_adjustments = 5;
    struct ps_quality q = { .how = "armed record", .mode = "cpu", .hexversion = 0x030d01f0,
                            .requested_hz = 100 };
    ps_quality_between(&q, &base, &now, 2000000000ull);
    char buf[1024];
    size_t n = ps_quality_format(&q, buf, sizeof buf);
    CHECK(n == strlen(buf));
    CHECK(strstr(buf, "how armed record\n") != NULL);
    CHECK(strstr(buf, "mode cpu\n") != NULL);
    CHECK(strstr(buf, "python 3.13.1\n") != NULL);
    CHECK(strstr(buf, "requested_rate_hz 100\n") != NULL);
    CHECK(strstr(buf, "achieved_rate_hz 100.0\n") != NULL);   /* 200 ticks in 2 s */
    CHECK(strstr(buf, "ticks 200\n") != NULL);
    CHECK(strstr(buf, "samples 290\n") != NULL);
    CHECK(strstr(buf, "dropped_unreadable 2\ndropped_inconsistent 4\ndropped_other 1\n") != NULL);
    CHECK(strstr(buf, "truncated_stacks 3\n") != NULL);
    CHECK(strstr(buf, "budget_pct 1.00\nbudget_adjustments 5\nrate_now_hz 80\n") != NULL);
    /* Too small a buffer: whole lines only. */
    char small[40];
    n = ps_quality_format(&q, small, sizeof small);
    CHECK(n > 0 && n < sizeof small && small[n - 1] == '\n' && small[n] == '\0');
    CHECK_EQ_STR(small, "how armed record\nmode cpu\n");
    /* The library's version, a word: a JSON string in the sidecar (a bare
     * 0.1.0 would make the whole file unreadable JSON). */
    CHECK(strstr(buf, "library " PS_VERSION_STRING "\n") != NULL);
    char json[2048];
    CHECK(ps_quality_json(&q, 42, json, sizeof json) > 0);
    CHECK(strstr(json, "\"library\": \"" PS_VERSION_STRING "\"") != NULL);
    CHECK(strstr(json, "\"python\": \"3.13.1\"") != NULL);
    CHECK(strstr(json, "\"ticks\": 200,") != NULL);
}

int main(void)
{
    test_good_requests();
    test_bad_requests();
    test_frames();
    test_quality();
    CHECK_DONE();
}
