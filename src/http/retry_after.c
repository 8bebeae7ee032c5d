/*
 * retry_after.c — Retry-After on both sides (breakwater/http.h): the parser of
 * a dependency's header and the reply a server gives while a circuit is open.
 *
 * The parser reads what stored bytes or a remote server said: every field is
 * bounded (digits counted, names matched against fixed tables, a date's
 * calendar checked, the whole value consumed) and the arithmetic saturates.
 * Dates become Unix seconds by days-from-civil (proleptic Gregorian, the
 * algorithm of H. Hinnant), not timegm, which is not in C11 and reads the
 * process's time zone state.
 */
#include <stdio.h>
#include <string.h>

#include "breakwater/http.h"

#define DATE_MAX 64       /* bytes of a date we read at most (an IMF-fixdate is 29) */
#define NO_DATE INT64_MIN /* not a date (a date before 1970 is a negative number of seconds) */

static const char *const wkday[7] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const weekday[7] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
static const char *const month[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

typedef struct cur {
    const char *p, *end;
} cur;

static int lit(cur *c, const char *s)
{
    size_t n = strlen(s);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

/* One of names[0..n), matched exactly (case-sensitive, as RFC 9110 says): its index, or -1. */
static int name(cur *c, const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        /* the longest name wins: "Sunday" is not "Sun" followed by "day" */
        if ((size_t)(c->end - c->p) >= len && memcmp(c->p, names[i], len) == 0 &&
            (c->p + len == c->end || c->p[len] < 'a' || c->p[len] > 'z')) {
            c->p += len;
            return i;
        }
    }
    return -1;
}

/* Exactly n digits (n <= 4): the number, or -1. */
static int digits(cur *c, int n)
{
    if (c->end - c->p < n)
        return -1;
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (c->p[i] < '0' || c->p[i] > '9')
            return -1;
        v = v * 10 + (c->p[i] - '0');
    }
    c->p += n;
    return v;
}

/* "HH:MM:SS": seconds since midnight, or -1 (a leap second 60 is read as 59: the header is in whole seconds). */
static long hms(cur *c)
{
    int h = digits(c, 2);
    if (h < 0 || h > 23 || !lit(c, ":"))
        return -1;
    int m = digits(c, 2);
    if (m < 0 || m > 59 || !lit(c, ":"))
        return -1;
    int s = digits(c, 2);
    if (s < 0 || s > 60)
        return -1;
    return (long)h * 3600 + m * 60 + (s == 60 ? 59 : s);
}

static int leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to y-m-d (m 1..12), the day already checked against its month. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Unix seconds of a checked date (negative before 1970), or NO_DATE when the day does not exist. */
static int64_t unix_of(int y, int mon, int d, long secs)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mon < 0 || mon > 11 || d < 1 || d > mdays[mon] + (mon == 1 && leap(y)))
        return NO_DATE;
    return days_from_civil(y, mon + 1, d) * 86400 + secs;
}

/* An HTTP-date (one of its three forms) as Unix seconds, or NO_DATE. now_s: for a two-digit year. */
static int64_t http_date(cur *c, int64_t now_s)
{
    cur save = *c;
    /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
    if (name(c, wkday, 7) >= 0 && lit(c, ", ")) {
        int d = digits(c, 2), mon, y;
        long t;
        if (d < 0 || !lit(c, " ") || (mon = name(c, month, 12)) < 0 || !lit(c, " ") || (y = digits(c, 4)) < 0 ||
            !lit(c, " ") || (t = hms(c)) < 0 || !lit(c, " GMT"))
            return NO_DATE;
        return unix_of(y, mon, d, t);
    }
    *c = save;
    /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
    if (name(c, weekday, 7) >= 0 && lit(c, ", ")) {
        int d = digits(c, 2), mon, yy;
        long t;
        if (d < 0 || !lit(c, "-") || (mon = name(c, month, 12)) < 0 || !lit(c, "-") || (yy = digits(c, 2)) < 0 ||
            !lit(c, " ") || (t = hms(c)) < 0 || !lit(c, " GMT"))
            return NO_DATE;
        /* RFC 9110 5.6.7: a year that appears more than 50 years in the future is in the past century. */
        int64_t now_year = 1970 + now_s / (int64_t)31556952; /* close enough to pick the century */
        int64_t y = now_year - now_year % 100 + yy;
        if (y > now_year + 50)
            y -= 100;
        if (y < 0 || y > 9999)
            return NO_DATE;
        return unix_of((int)y, mon, d, t);
    }
    *c = save;
    /* asctime: "Sun Nov  6 08:49:37 1994" (day: two digits, or a space and one digit) */
    if (name(c, wkday, 7) >= 0 && lit(c, " ")) {
        int mon = name(c, month, 12), d, y;
        long t;
        if (mon < 0 || !lit(c, " "))
            return NO_DATE;
        if (lit(c, " "))
            d = digits(c, 1);
        else
            d = digits(c, 2);
        if (d < 0 || !lit(c, " ") || (t = hms(c)) < 0 || !lit(c, " ") || (y = digits(c, 4)) < 0)
            return NO_DATE;
        return unix_of(y, mon, d, t);
    }
    return NO_DATE;
}

int bw_http_parse_retry_after(const char *value, size_t len, int64_t now_unix_ns, int64_t *delay_ns)
{
    if (!value || !delay_ns)
        return BW_EINVAL;
    const char *p = value, *end = value + len;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (p == end)
        return BW_EPARSE;
    if (*p >= '0' && *p <= '9') { /* delay-seconds: 1*DIGIT, any length, capped */
        const int64_t cap_s = BW_HTTP_RETRY_AFTER_MAX / BW_NS_PER_S;
        int64_t s = 0;
        for (const char *q = p; q < end; q++) {
            if (*q < '0' || *q > '9')
                return BW_EPARSE;
            if (s <= cap_s)
                s = s * 10 + (*q - '0');
        }
        *delay_ns = s >= cap_s ? BW_HTTP_RETRY_AFTER_MAX : s * BW_NS_PER_S;
        return BW_OK;
    }
    if (end - p > DATE_MAX)
        return BW_EPARSE;
    int64_t now_s = now_unix_ns / BW_NS_PER_S;
    cur c = {p, end};
    int64_t at = http_date(&c, now_s);
    if (at == NO_DATE || c.p != end)
        return BW_EPARSE;
    int64_t left_s = at - now_s; /* years 0..9999 and a present within int64 ns: no overflow */
    if (left_s > BW_HTTP_RETRY_AFTER_MAX / BW_NS_PER_S) {
        *delay_ns = BW_HTTP_RETRY_AFTER_MAX;
        return BW_OK;
    }
    int64_t frac = now_unix_ns % BW_NS_PER_S; /* the date is a whole second: count from the present's ns */
    int64_t left = left_s <= 0 ? 0 : left_s * BW_NS_PER_S - frac;
    *delay_ns = left > 0 ? left : 0;
    return BW_OK;
}

int bw_http_rejection_reply(const bw_rejection *why, int status, bw_http_reply *out)
{
    if (!why || !out || (status != 503 && status != 429))
        return BW_EINVAL;
    memset(out, 0, sizeof *out);
    out->status = status;
    out->reason = status == 503 ? "Service Unavailable" : "Too Many Requests";
    int64_t ns = why->retry_after_ns;
    if (ns == BW_NO_TIME || ns < 0)
        return BW_OK;
    int64_t s = ns / BW_NS_PER_S + (ns % BW_NS_PER_S != 0); /* up: never tell a caller to come back early */
    if (s < 1)
        s = 1; /* OPEN with its wait just over: "now" would invite a stampede */
    out->retry_after_s = s;
    snprintf(out->retry_after, sizeof out->retry_after, "%lld", (long long)s);
    return BW_OK;
}
