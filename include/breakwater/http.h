/*
 * breakwater/http.h — HTTP on both sides of a breaker, with no HTTP library:
 * reading a dependency's Retry-After, and answering a caller with 503 (or 429)
 * and a Retry-After while a circuit is open.
 *
 * The libcurl integration (per-host circuits for easy and multi handles) is
 * breakwater/curl.h; this header needs nothing but libc, is always built, and
 * serves any HTTP client or server (libmicrohttpd, nginx modules, your own).
 * docs/http.md shows both sides.
 */
#ifndef BREAKWATER_HTTP_H
#define BREAKWATER_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "breaker.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest delay bw_http_parse_retry_after reports: 365 days (a longer one is capped to it). */
#define BW_HTTP_RETRY_AFTER_MAX (INT64_C(365) * 86400 * BW_NS_PER_S)

/*
 * bw_http_parse_retry_after — the delay a Retry-After header value asks for
 * (RFC 9110, 10.2.3): delay-seconds ("120"), or an HTTP-date in any of the
 * three forms a recipient must accept: IMF-fixdate ("Sun, 06 Nov 1994
 * 08:49:37 GMT"), the obsolete RFC 850 form ("Sunday, 06-Nov-94 08:49:37
 * GMT", a two-digit year read as the one nearest the present that is not more
 * than 50 years ahead) and asctime ("Sun Nov  6 08:49:37 1994"). `value` is the
 * field value (len bytes, no NUL needed; leading and trailing spaces and tabs
 * are allowed); `now_unix_ns` is the present as Unix time in ns (a date is
 * counted from it; give the time the response arrived). On BW_OK *delay_ns is
 * the delay, >= 0 (a date in the past is 0), at most BW_HTTP_RETRY_AFTER_MAX.
 * Returns BW_OK; BW_EPARSE for anything else (a negative or fractional number,
 * a bad date, a day that does not exist, trailing text), leaving *delay_ns
 * alone; BW_EINVAL for NULL value or delay_ns. Reads at most len bytes and
 * never more than 64 of a date. Thread safety: any thread.
 */
BW_API int bw_http_parse_retry_after(const char *value, size_t len, int64_t now_unix_ns, int64_t *delay_ns);

/* What to answer a caller that a breaker rejected (bw_http_rejection_reply). */
typedef struct bw_http_reply {
    int status;            /* 503 or 429, as asked */
    int64_t retry_after_s; /* the Retry-After in whole seconds (>= 1), or 0 when there is none to give */
    char retry_after[24];  /* its value as text ("12"), or "" when none */
    const char *reason;    /* the status's reason phrase ("Service Unavailable", "Too Many Requests") */
} bw_http_reply;

/*
 * bw_http_rejection_reply — turn a rejection (bw_acquire's, or a pipeline
 * report's) into the reply a server sends its caller: `status` 503 (the
 * dependency is unavailable) or 429 (the caller should slow down), and a
 * Retry-After of the rejection's retry_after rounded up to whole seconds,
 * never 0 while OPEN (a wait of 1 ns is "1"). A rejection without a wait
 * (HALF_OPEN with no probe free, FORCED_OPEN) gets no Retry-After: send the
 * header only when retry_after_s > 0. Returns BW_OK; BW_EINVAL for NULL
 * arguments or a status other than 503 and 429. Thread safety: any thread.
 */
BW_API int bw_http_rejection_reply(const bw_rejection *why, int status, bw_http_reply *out);

#ifdef __cplusplus
}
#endif
#endif
