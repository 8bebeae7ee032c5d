/*
 * fuzz_retry_after.c — a libFuzzer target for the Retry-After parser
 * (bw_http_parse_retry_after, src/http/retry_after.c): what a remote server
 * sends. Input: 8 bytes of "now" (Unix ns, little-endian), then the header
 * value. Any input must run without a crash, a sanitizer report or a long
 * loop, and:
 * - BW_OK gives a delay in [0, BW_HTTP_RETRY_AFTER_MAX]; BW_EPARSE leaves it alone;
 * - the answer does not depend on bytes past len (the value is parsed again
 *   inside a larger buffer of junk);
 * - a value of digits alone parses, as the number of seconds (capped);
 * - spaces and tabs around a value change nothing.
 * Built as a fuzzer with clang (-DBW_FUZZ=ON); without it, replay.c drives the
 * checked-in corpus (tests/fuzz/corpus/retry_after/) under ctest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "breakwater/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8 || size > 8 + 4096)
        return 0;
    int64_t now = 0;
    for (int i = 7; i >= 0; i--)
        now = (int64_t)((uint64_t)now << 8 | data[i]);
    if (now < 0) /* the present: any time from 1970 on that int64 ns hold (to 2262) */
        now = -(now + 1);
    const char *v = (const char *)data + 8;
    size_t n = size - 8;
    const int64_t untouched = -12345;
    int64_t d = untouched;
    int rc = bw_http_parse_retry_after(v, n, now, &d);
    if (rc == BW_OK && (d < 0 || d > BW_HTTP_RETRY_AFTER_MAX))
        abort();
    if (rc != BW_OK && (rc != BW_EPARSE || d != untouched))
        abort();
    /* The same bytes followed by junk, parsed with the same length. */
    static char buf[4096 + 64];
    memcpy(buf, v, n);
    memset(buf + n, '7', 64);
    int64_t d2 = untouched;
    if (bw_http_parse_retry_after(buf, n, now, &d2) != rc || d2 != d)
        abort();
    /* Digits alone are seconds. */
    int all_digits = n > 0;
    int64_t s = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            all_digits = 0;
        else if (s < BW_HTTP_RETRY_AFTER_MAX / BW_NS_PER_S)
            s = s * 10 + (v[i] - '0');
    }
    if (all_digits) {
        int64_t want = s >= BW_HTTP_RETRY_AFTER_MAX / BW_NS_PER_S ? BW_HTTP_RETRY_AFTER_MAX : s * BW_NS_PER_S;
        if (rc != BW_OK || d != want)
            abort();
    }
    /* Surrounding spaces and tabs change nothing. */
    if (n <= 4096 - 4) {
        buf[0] = ' ';
        buf[1] = '\t';
        memcpy(buf + 2, v, n);
        buf[n + 2] = '\t';
        buf[n + 3] = ' ';
        int64_t d3 = untouched;
        if (bw_http_parse_retry_after(buf, n + 4, now, &d3) != rc || d3 != d)
            abort();
    }
    return 0;
}
