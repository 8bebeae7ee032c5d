/*
 * harness.h — the tiny test harness every test executable uses (one of the
 * shared test helpers in tests/support/).
 *
 * A test is a function; RUN() calls it and counts it as failed if any CHECK in it
 * failed. Failed checks print both sides (and bw_strerror of a status), with the
 * file and line. main() ends with TEST_SUMMARY(), which prints
 * "N passed, N failed" (and ", N skipped") and returns non-zero on any failure.
 *
 * One case by name: BW_TEST=NAME in the environment runs the test NAME alone,
 * in any test executable (`BW_TEST=test_open_for ./tests/test_breaker`, or
 * `BW_TEST=test_open_for ctest -R '^test_breaker$'`); an executable that
 * names none of its tests NAME fails. A main(argc, argv) that calls
 * H_ARGS(argc, argv) first also takes the name as its argument. RUN_ALONE()
 * registers a test that runs only so (its own ctest entry, bw_test_case in
 * tests/CMakeLists.txt), e.g. one that needs root. A test that cannot run here
 * calls H_SKIP("why") and returns: it counts as skipped, and an executable
 * whose every test that ran was skipped exits 77, which ctest shows as
 * skipped (SKIP_RETURN_CODE), never as passed.
 */
#ifndef BW_TEST_HARNESS_H
#define BW_TEST_HARNESS_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakwater/breakwater.h"

#include <stdatomic.h>

/* Checks may fail on several threads at once: the failure count is atomic. */
static _Atomic int h_failed_checks;
static int h_tests_passed, h_tests_failed, h_tests_skipped, h_skip;
static const char *h_current;
static const char *h_only; /* the one test to run (H_ARGS), or NULL: all but the RUN_ALONE ones */

#define H_ARGS(argc, argv) (h_only = (argc) > 1 ? (argv)[1] : NULL)

/* The one test to run: H_ARGS's, else BW_TEST's (read once), else NULL. */
static inline const char *h_named(void)
{
    static int h_env_read;
    if (!h_only && !h_env_read) {
        const char *e = getenv("BW_TEST");
        h_only = e && *e ? e : NULL;
        h_env_read = 1;
    }
    return h_only;
}

/* The running test cannot run here: say why; it counts as skipped (return from it after). */
#define H_SKIP(...)                                                                                                    \
    do {                                                                                                               \
        h_skip = 1;                                                                                                    \
        fprintf(stderr, "SKIP %s: ", h_current);                                                                       \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fputc('\n', stderr);                                                                                           \
    } while (0)

#define H_FAIL(...)                                                                                                    \
    do {                                                                                                               \
        h_failed_checks++;                                                                                             \
        fprintf(stderr, "%s:%d: [%s] ", __FILE__, __LINE__, h_current);                                                \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fputc('\n', stderr);                                                                                           \
    } while (0)

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            H_FAIL("check failed: %s", #cond);                                                                         \
    } while (0)

#define CHECK_INT(a, b)                                                                                                \
    do {                                                                                                               \
        long long h_a = (long long)(a), h_b = (long long)(b);                                                          \
        if (h_a != h_b)                                                                                                \
            H_FAIL("%s == %s: %lld != %lld", #a, #b, h_a, h_b);                                                        \
    } while (0)

#define CHECK_DBL(a, b)                                                                                                \
    do {                                                                                                               \
        double h_a = (double)(a), h_b = (double)(b);                                                                   \
        if (!(fabs(h_a - h_b) <= 1e-12 * (fabs(h_a) + fabs(h_b) + 1)))                                                 \
            H_FAIL("%s == %s: %.17g != %.17g", #a, #b, h_a, h_b);                                                      \
    } while (0)

#define CHECK_STR(a, b)                                                                                                \
    do {                                                                                                               \
        const char *h_a = (a), *h_b = (b);                                                                             \
        if (!h_a || !h_b || strcmp(h_a, h_b) != 0)                                                                     \
            H_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, h_a ? h_a : "(null)", h_b ? h_b : "(null)");                  \
    } while (0)

/* A status check: prints both codes and their bw_strerror. */
#define CHECK_RC(expr, want)                                                                                           \
    do {                                                                                                               \
        int h_rc = (expr), h_want = (want);                                                                            \
        if (h_rc != h_want)                                                                                            \
            H_FAIL("%s: got %d (%s), want %d (%s)", #expr, h_rc, bw_strerror(h_rc), h_want, bw_strerror(h_want));      \
    } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, BW_OK)

#define CHECK_STATE(b, s)                                                                                              \
    do {                                                                                                               \
        int h_s = bw_breaker_state(b);                                                                                 \
        if (h_s != (int)(s))                                                                                           \
            H_FAIL("state of %s: got %s, want %s", #b, bw_state_name((bw_state)h_s), bw_state_name(s));                \
    } while (0)

/* n admitted calls on b, each settled with outcome o (a rejection is a failed check). */
static inline void h_calls(bw_breaker *b, int n, bw_outcome o)
{
    for (int i = 0; i < n; i++) {
        bw_permit p;
        CHECK_OK(bw_acquire(b, &p, NULL));
        CHECK_OK(bw_settle(b, &p, o));
    }
}

#define H_RUN(fn, alone)                                                                                               \
    do {                                                                                                               \
        if (h_named() ? strcmp(h_named(), #fn) != 0 : (alone))                                                         \
            break;                                                                                                     \
        int h_before = h_failed_checks;                                                                                \
        h_current = #fn;                                                                                               \
        h_skip = 0;                                                                                                    \
        fn();                                                                                                          \
        if (h_failed_checks != h_before) {                                                                             \
            h_tests_failed++;                                                                                          \
            fprintf(stderr, "FAIL %s\n", #fn);                                                                         \
        } else if (h_skip) {                                                                                           \
            h_tests_skipped++;                                                                                         \
        } else {                                                                                                       \
            h_tests_passed++;                                                                                          \
        }                                                                                                              \
    } while (0)

#define RUN(fn) H_RUN(fn, 0)
/* A test that runs only when named (H_ARGS): its own ctest entry. */
#define RUN_ALONE(fn) H_RUN(fn, 1)

/* 0 when every test that ran passed; 77 when all were skipped; 1 on a failure, or when the test named ran none. */
static inline int h_summary(void)
{
    int ran = h_tests_passed + h_tests_failed + h_tests_skipped;
    if (h_tests_skipped)
        printf("%d passed, %d failed, %d skipped\n", h_tests_passed, h_tests_failed, h_tests_skipped);
    else
        printf("%d passed, %d failed\n", h_tests_passed, h_tests_failed);
    if (h_named() && ran == 0) {
        fprintf(stderr, "no test named %s\n", h_only);
        return 1;
    }
    return h_tests_failed ? 1 : ran > 0 && h_tests_skipped == ran ? 77 : 0;
}

#define TEST_SUMMARY() h_summary()

#endif
