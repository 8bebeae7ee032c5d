/*
 * test_http.c — breakwater/http.h: the Retry-After parser on every form RFC
 * 9110 names (delay-seconds, IMF-fixdate, RFC 850 with its two-digit year,
 * asctime), on what it must refuse, and the reply a server sends for a
 * rejection (Retry-After rounded up, never 0 while OPEN, none without a wait).
 */
#include <string.h>

#include "harness.h"
#include "breakwater/breakwater.h"

#define S BW_NS_PER_S

/* 2026-12-02 00:00:00 UTC, and half a second after. */
#define NOW (INT64_C(1796169600) * S)

static int64_t parse(const char *v, int64_t now)
{
    int64_t d = -7;
    int rc = bw_http_parse_retry_after(v, strlen(v), now, &d);
    return rc == BW_OK ? d : rc == BW_EPARSE ? -100 : -200;
}

static void test_delay_seconds(void)
{
    CHECK_INT(parse("120", NOW), 120 * S);
    CHECK_INT(parse("0", NOW), 0);
    CHECK_INT(parse("  30\t", NOW), 30 * S);
    CHECK_INT(parse("0000000000000000000000000000000000000042", NOW), 42 * S);    /* leading zeros: still 42 */
    CHECK_INT(parse("31536000", NOW), BW_HTTP_RETRY_AFTER_MAX);                   /* 365 days */
    CHECK_INT(parse("99999999999999999999999999", NOW), BW_HTTP_RETRY_AFTER_MAX); /* capped, no overflow */
    CHECK_INT(parse("-5", NOW), -100);
    CHECK_INT(parse("+5", NOW), -100);
    CHECK_INT(parse("1.5", NOW), -100);
    CHECK_INT(parse("30s", NOW), -100);
    CHECK_INT(parse("3 0", NOW), -100);
    CHECK_INT(parse("", NOW), -100);
    CHECK_INT(parse(" \t ", NOW), -100);
    /* len bounds the read: "12" of "123". */
    int64_t d = 0;
    CHECK_OK(bw_http_parse_retry_after("123", 2, NOW, &d));
    CHECK_INT(d, 12 * S);
    CHECK_RC(bw_http_parse_retry_after(NULL, 2, NOW, &d), BW_EINVAL);
    CHECK_RC(bw_http_parse_retry_after("1", 1, NOW, NULL), BW_EINVAL);
}

static void test_dates(void)
{
    /* The three forms of one instant, 90 s after NOW. */
    CHECK_INT(parse("Wed, 02 Dec 2026 00:01:30 GMT", NOW), 90 * S);
    CHECK_INT(parse("Wednesday, 02-Dec-26 00:01:30 GMT", NOW), 90 * S);
    CHECK_INT(parse("Wed Dec  2 00:01:30 2026", NOW), 90 * S);
    CHECK_INT(parse("Wed Dec 02 00:01:30 2026", NOW), 90 * S); /* a two-digit day in asctime too */
    /* Counted from the present to the ns: half a second in, 90 s away is 89.5 s. */
    CHECK_INT(parse("Wed, 02 Dec 2026 00:01:30 GMT", NOW + S / 2), 89 * S + S / 2);
    /* The past is now. */
    CHECK_INT(parse("Sun, 06 Nov 1994 08:49:37 GMT", NOW), 0);
    CHECK_INT(parse("Wed, 31 Dec 1969 23:59:59 GMT", NOW), 0); /* before 1970: the past too */
    CHECK_INT(parse("Fri, 01 Jan 1960 00:00:00 GMT", NOW), 0);
    CHECK_INT(parse("Sat Jan  1 00:00:00 0000", NOW), 0);
    CHECK_INT(parse("Tue, 01 Dec 2026 23:59:59 GMT", NOW), 0);
    /* Calendar: a leap day exists in 2028, not in 2027; the year 2100 is not a leap year; 2000 was. */
    CHECK_INT(parse("Tue, 29 Feb 2028 00:00:00 GMT", INT64_C(1832976000) * S), 28 * 86400 * S); /* from 2028-02-01 */
    CHECK_INT(parse("Mon, 29 Feb 2027 00:00:00 GMT", NOW), -100);
    CHECK_INT(parse("Mon, 29 Feb 2100 00:00:00 GMT", NOW), -100);
    CHECK_INT(parse("Tue, 29 Feb 2000 00:00:00 GMT", NOW), 0);
    CHECK_INT(parse("Thu, 31 Apr 2027 00:00:00 GMT", NOW), -100);
    /* Far dates are capped. */
    CHECK_INT(parse("Fri, 31 Dec 9999 23:59:59 GMT", NOW), BW_HTTP_RETRY_AFTER_MAX);
    /* RFC 850's two-digit year: the nearest not more than 50 years ahead. */
    CHECK_INT(parse("Sunday, 06-Nov-94 08:49:37 GMT", NOW), 0);                         /* 1994 */
    CHECK_INT(parse("Saturday, 01-Jan-50 00:00:00 GMT", NOW), BW_HTTP_RETRY_AFTER_MAX); /* 2050: capped */
    CHECK_INT(parse("Thursday, 01-Jan-26 00:00:00 GMT", NOW), 0);                       /* 2026 */
    CHECK_INT(parse("Monday, 01-Jan-80 00:00:00 GMT", NOW), 0); /* 2080 is > 50 years ahead: 1980 */
    /* A leap second reads as the second before. */
    CHECK_INT(parse("Wed, 02 Dec 2026 00:00:60 GMT", NOW), 59 * S);
    /* What must be refused. */
    static const char *const bad[] = {
        "Wed, 02 Dec 2026 00:01:30 UTC",       /* only GMT */
        "wed, 02 dec 2026 00:01:30 gmt",       /* case-sensitive names */
        "Wed, 2 Dec 2026 00:01:30 GMT",        /* a two-digit day */
        "Wed, 02 Dec 26 00:01:30 GMT",         /* a four-digit year */
        "Wed, 02 Dec 2026 24:00:00 GMT",       /* hour 24 */
        "Wed, 02 Dec 2026 00:60:00 GMT",       /* minute 60 */
        "Wed, 02 Dec 2026 00:00:61 GMT",       /* second 61 */
        "Wed, 02 Dec 2026 00:01:30 GMT x",     /* trailing text */
        "Wed, 02 Foo 2026 00:01:30 GMT",       /* no such month */
        "Wedn, 02 Dec 2026 00:01:30 GMT",      /* no such day name */
        "Wed, 00 Dec 2026 00:01:30 GMT",       /* day 0 */
        "Wed,02 Dec 2026 00:01:30 GMT",        /* the space */
        "Wednesday, 02 Dec 2026 00:01:30 GMT", /* the long name wants the RFC 850 form */
        "Wed Dec 2 00:01:30 2026",             /* asctime pads the day with a space */
        "Wed, 02 Dec 2026 00:01:30",           /* no zone */
        "Wed, 02 Dec 2026 00:01:30 GMT    Wed, 02 Dec 2026 00:01:30 GMT Wed, 02 Dec 2026", /* longer than a date */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (parse(bad[i], NOW) != -100)
            H_FAIL("'%s' parsed as %lld", bad[i], (long long)parse(bad[i], NOW));
}

static void test_rejection_reply(void)
{
    bw_rejection why;
    memset(&why, 0, sizeof why);
    bw_http_reply r;
    why.state = BW_STATE_OPEN;
    why.retry_after_ns = 12 * S;
    CHECK_OK(bw_http_rejection_reply(&why, 503, &r));
    CHECK_INT(r.status, 503);
    CHECK_INT(r.retry_after_s, 12);
    CHECK_STR(r.retry_after, "12");
    CHECK_STR(r.reason, "Service Unavailable");
    why.retry_after_ns = 12 * S + 1; /* rounded up: never early */
    CHECK_OK(bw_http_rejection_reply(&why, 429, &r));
    CHECK_INT(r.retry_after_s, 13);
    CHECK_STR(r.reason, "Too Many Requests");
    why.retry_after_ns = 1; /* the wait almost over: 1, never 0 */
    CHECK_OK(bw_http_rejection_reply(&why, 503, &r));
    CHECK_STR(r.retry_after, "1");
    why.retry_after_ns = 0;
    CHECK_OK(bw_http_rejection_reply(&why, 503, &r));
    CHECK_INT(r.retry_after_s, 1);
    why.state = BW_STATE_HALF_OPEN; /* no wait to give */
    why.retry_after_ns = BW_NO_TIME;
    CHECK_OK(bw_http_rejection_reply(&why, 503, &r));
    CHECK_INT(r.retry_after_s, 0);
    CHECK_STR(r.retry_after, "");
    CHECK_RC(bw_http_rejection_reply(&why, 500, &r), BW_EINVAL);
    CHECK_RC(bw_http_rejection_reply(NULL, 503, &r), BW_EINVAL);
    CHECK_RC(bw_http_rejection_reply(&why, 503, NULL), BW_EINVAL);
}

int main(void)
{
    RUN(test_delay_seconds);
    RUN(test_dates);
    RUN(test_rejection_reply);
    return TEST_SUMMARY();
}
