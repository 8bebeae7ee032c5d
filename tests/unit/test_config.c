/*
 * test_config.c (tests/unit/) — the configuration object through the public API
 * only: defaults, every typed setter at its range boundaries (with NaN and
 * infinities for the double knobs), error codes and bw_error contents, "a
 * failed call leaves the config unchanged", bw_config_validate's cross-field
 * rules, the text form (bw_config_parse / bw_config_format), copy/free, and
 * bw_breaker_new's config and name checks.
 *
 * "Unchanged" is checked by comparing bw_config_format output before and after.
 * A knob's current value is read back by picking its key=value pair out of the
 * formatted text (kv()).
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakwater/breakwater.h"
#include "harness.h"
#include "recorder.h"

#define S BW_NS_PER_S
#define DAY (86400 * BW_NS_PER_S)
#define MAXDUR (365 * DAY)

/* ---- helpers ---- */

#define FMT_SIZE 2048

/* Format cfg into buf (FMT_SIZE bytes); fails the test if the text does not fit. */
static void fmt(const bw_config *cfg, char *buf)
{
    int n = bw_config_format(cfg, buf, FMT_SIZE);
    if (n < 0 || n >= FMT_SIZE) {
        H_FAIL("bw_config_format returned %d", n);
        buf[0] = 0;
    }
}

/* The value text of `key` in cfg's formatted text ("" if absent). Four rotating buffers. */
static const char *kv(const bw_config *cfg, const char *key)
{
    static char out[4][256];
    static int slot;
    char *r = out[slot++ & 3];
    char text[FMT_SIZE];
    r[0] = 0;
    fmt(cfg, text);
    size_t klen = strlen(key);
    for (char *p = text; *p;) {
        while (*p == ' ')
            p++;
        char *end = p;
        while (*end && *end != ' ')
            end++;
        if ((size_t)(end - p) > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t vlen = (size_t)(end - p) - klen - 1;
            if (vlen >= sizeof out[0])
                vlen = sizeof out[0] - 1;
            memcpy(r, p + klen + 1, vlen);
            r[vlen] = 0;
            return r;
        }
        p = end;
    }
    H_FAIL("key '%s' not found in formatted text", key);
    return r;
}

/* An error struct filled with a recognisable pattern, to see whether a call wrote it. */
static void err_poison(bw_error *e)
{
    e->code = 12345;
    snprintf(e->field, sizeof e->field, "%s", "POISON");
    snprintf(e->message, sizeof e->message, "%s", "POISON");
}

static int err_untouched(const bw_error *e)
{
    return e->code == 12345 && strcmp(e->field, "POISON") == 0 && strcmp(e->message, "POISON") == 0;
}

/* The number after "offset " in msg, or -1. */
static long msg_offset(const char *msg)
{
    const char *p = strstr(msg, "offset ");
    if (!p)
        return -1;
    char *end;
    long v = strtol(p + 7, &end, 10);
    return end == p + 7 ? -1 : v;
}

typedef int (*set_i64_fn)(bw_config *, int64_t, bw_error *);
typedef int (*set_dbl_fn)(bw_config *, double, bw_error *);

static int set_window_count(bw_config *c, int64_t n, bw_error *e)
{
    return bw_config_set_window(c, BW_WINDOW_COUNT, n, e);
}

static int set_window_time(bw_config *c, int64_t n, bw_error *e)
{
    return bw_config_set_window(c, BW_WINDOW_TIME, n, e);
}

/* One setter call: an int64 or a double setter with its value. */
typedef struct setter_call {
    set_i64_fn i64;
    set_dbl_fn dbl;
    int64_t iv;
    double dv;
} setter_call;

static int apply(const setter_call *c, bw_config *cfg, bw_error *e)
{
    return c->i64 ? c->i64(cfg, c->iv, e) : c->dbl(cfg, c->dv, e);
}

/*
 * One setter call on a fresh config; `call` describes it for messages. want_rc
 * BW_OK: the knob then reads want_text and err is untouched. Otherwise: the
 * config is unchanged, err names the field (code, field, message with the field
 * and `range`), and the same call with err NULL gives the same code.
 */
static void setter_case(int line, const setter_call *sc, const char *call, const char *key, int want_rc,
                        const char *want_text, const char *range)
{
    bw_config *cfg = bw_config_new();
    if (!cfg) {
        H_FAIL("line %d: bw_config_new failed", line);
        return;
    }
    char before[FMT_SIZE], after[FMT_SIZE];
    fmt(cfg, before);
    bw_error e;
    err_poison(&e);
    int rc = apply(sc, cfg, &e);
    if (rc != want_rc)
        H_FAIL("line %d: %s returned %d (%s), want %d (%s)", line, call, rc, bw_strerror(rc), want_rc,
               bw_strerror(want_rc));
    if (want_rc == BW_OK) {
        const char *got = kv(cfg, key);
        if (strcmp(got, want_text) != 0)
            H_FAIL("line %d: after %s %s reads \"%s\", want \"%s\"", line, call, key, got, want_text);
        if (!err_untouched(&e))
            H_FAIL("line %d: %s succeeded but wrote err", line, call);
    } else {
        fmt(cfg, after);
        if (strcmp(before, after) != 0)
            H_FAIL("line %d: failed %s changed the config:\n  before %s\n  after  %s", line, call, before, after);
        if (e.code != want_rc || strcmp(e.field, key) != 0 || !strstr(e.message, key) ||
            (range && !strstr(e.message, range)))
            H_FAIL("line %d: %s err = {%d, \"%s\", \"%s\"}, want code %d, field \"%s\", message naming \"%s\" and "
                   "\"%s\"",
                   line, call, e.code, e.field, e.message, want_rc, key, key, range ? range : "");
        rc = apply(sc, cfg, NULL);
        if (rc != want_rc)
            H_FAIL("line %d: %s with err=NULL returned %d, want %d", line, call, rc, want_rc);
        fmt(cfg, after);
        if (strcmp(before, after) != 0)
            H_FAIL("line %d: failed %s with err=NULL changed the config", line, call);
    }
    bw_config_free(cfg);
}

static void i64_case(int line, set_i64_fn set, const char *setname, const char *key, int64_t v, int want_rc,
                     const char *want_text, const char *range)
{
    setter_call sc = {set, NULL, v, 0};
    char call[160];
    snprintf(call, sizeof call, "%s(%" PRId64 ")", setname, v);
    setter_case(line, &sc, call, key, want_rc, want_text, range);
}

/* A double setter; on success the knob must read back exactly v (format writes %.17g). */
static void dbl_case(int line, set_dbl_fn set, const char *setname, const char *key, double v, int want_rc,
                     const char *range)
{
    setter_call sc = {NULL, set, 0, v};
    char call[160], text[64];
    snprintf(call, sizeof call, "%s(%.17g)", setname, v);
    snprintf(text, sizeof text, "%.17g", v);
    setter_case(line, &sc, call, key, want_rc, text, range);
}

#define I64_OK(set, key, v, text) i64_case(__LINE__, set, #set, key, v, BW_OK, text, NULL)
#define I64_BAD(set, key, v, range) i64_case(__LINE__, set, #set, key, v, BW_ERANGE, NULL, range)
#define DBL_OK(set, key, v) dbl_case(__LINE__, set, #set, key, v, BW_OK, NULL)
#define DBL_BAD(set, key, v, range) dbl_case(__LINE__, set, #set, key, v, BW_ERANGE, range)

/* ---- defaults ---- */

static void test_defaults(void)
{
    bw_config *c = bw_config_new();
    CHECK(c != NULL);
    if (!c)
        return;
    CHECK_STR(kv(c, "policy"), "rate");
    CHECK_STR(kv(c, "failure_rate"), "0.5");
    CHECK_STR(kv(c, "slow_call_rate"), "1");
    CHECK_STR(kv(c, "slow_call_duration"), "1m"); /* 60s */
    CHECK_STR(kv(c, "min_calls"), "10");
    CHECK_STR(kv(c, "window"), "count:100");
    CHECK_STR(kv(c, "permitted_probes"), "10");
    CHECK_STR(kv(c, "max_concurrent_probes"), "1");
    CHECK_STR(kv(c, "wait"), "1m"); /* 60s for the rate policy */
    CHECK_STR(kv(c, "wait_multiplier"), "1");
    CHECK_STR(kv(c, "wait_max"), "none");
    CHECK_STR(kv(c, "max_wait_in_half_open"), "1m");
    CHECK_STR(kv(c, "auto_transition"), "false");
    CHECK_STR(kv(c, "unreachable_counts"), "true");
    CHECK_STR(kv(c, "initial_state"), "closed");
    CHECK_STR(kv(c, "error_threshold"), "5");
    CHECK_STR(kv(c, "success_threshold"), "2");
    CHECK_STR(kv(c, "half_open_capacity"), "1");
    CHECK_OK(bw_config_validate(c, NULL));
    /* The consecutive policy's default wait is 30 s. */
    CHECK_OK(bw_config_set_policy(c, BW_POLICY_CONSECUTIVE, NULL));
    CHECK_STR(kv(c, "policy"), "consecutive");
    CHECK_STR(kv(c, "wait"), "30s");
    /* An explicit wait is kept across a policy change. */
    CHECK_OK(bw_config_set_wait(c, 45 * S, NULL));
    CHECK_OK(bw_config_set_policy(c, BW_POLICY_RATE, NULL));
    CHECK_STR(kv(c, "wait"), "45s");
    bw_config_free(c);
}

/* ---- setters: boundaries ---- */

static void test_set_failure_rate(void)
{
    DBL_BAD(bw_config_set_failure_rate, "failure_rate", 0.0, "(0, 1]");
    DBL_BAD(bw_config_set_failure_rate, "failure_rate", -0.0, "(0, 1]");
    DBL_BAD(bw_config_set_failure_rate, "failure_rate", -0.5, "(0, 1]");
    DBL_OK(bw_config_set_failure_rate, "failure_rate", nextafter(0.0, 1.0));
    DBL_OK(bw_config_set_failure_rate, "failure_rate", 1e-9);
    DBL_OK(bw_config_set_failure_rate, "failure_rate", 0.25);
    DBL_OK(bw_config_set_failure_rate, "failure_rate", nextafter(1.0, 0.0));
    DBL_OK(bw_config_set_failure_rate, "failure_rate", 1.0);
    DBL_BAD(bw_config_set_failure_rate, "failure_rate", nextafter(1.0, 2.0), "(0, 1]");
    DBL_BAD(bw_config_set_failure_rate, "failure_rate", 1.5, "(0, 1]");
    DBL_BAD(bw_config_set_failure_rate, "failure_rate", NAN, "(0, 1]");
    DBL_BAD(bw_config_set_failure_rate, "failure_rate", -NAN, "(0, 1]");
    DBL_BAD(bw_config_set_failure_rate, "failure_rate", INFINITY, "(0, 1]");
    DBL_BAD(bw_config_set_failure_rate, "failure_rate", -INFINITY, "(0, 1]");
}

static void test_set_slow_call_rate(void)
{
    DBL_BAD(bw_config_set_slow_call_rate, "slow_call_rate", 0.0, "(0, 1]");
    DBL_BAD(bw_config_set_slow_call_rate, "slow_call_rate", -0.0, "(0, 1]");
    DBL_OK(bw_config_set_slow_call_rate, "slow_call_rate", nextafter(0.0, 1.0));
    DBL_OK(bw_config_set_slow_call_rate, "slow_call_rate", 0.75);
    DBL_OK(bw_config_set_slow_call_rate, "slow_call_rate", nextafter(1.0, 0.0));
    DBL_OK(bw_config_set_slow_call_rate, "slow_call_rate", 1.0);
    DBL_BAD(bw_config_set_slow_call_rate, "slow_call_rate", nextafter(1.0, 2.0), "(0, 1]");
    DBL_BAD(bw_config_set_slow_call_rate, "slow_call_rate", NAN, "(0, 1]");
    DBL_BAD(bw_config_set_slow_call_rate, "slow_call_rate", INFINITY, "(0, 1]");
    DBL_BAD(bw_config_set_slow_call_rate, "slow_call_rate", -INFINITY, "(0, 1]");
}

static void test_set_wait_multiplier(void)
{
    DBL_BAD(bw_config_set_wait_multiplier, "wait_multiplier", 0.0, "[1, 1000]");
    DBL_BAD(bw_config_set_wait_multiplier, "wait_multiplier", -1.0, "[1, 1000]");
    DBL_BAD(bw_config_set_wait_multiplier, "wait_multiplier", nextafter(1.0, 0.0), "[1, 1000]");
    DBL_OK(bw_config_set_wait_multiplier, "wait_multiplier", 1.0);
    DBL_OK(bw_config_set_wait_multiplier, "wait_multiplier", nextafter(1.0, 2.0));
    DBL_OK(bw_config_set_wait_multiplier, "wait_multiplier", 2.5);
    DBL_OK(bw_config_set_wait_multiplier, "wait_multiplier", nextafter(1000.0, 0.0));
    DBL_OK(bw_config_set_wait_multiplier, "wait_multiplier", 1000.0);
    DBL_BAD(bw_config_set_wait_multiplier, "wait_multiplier", nextafter(1000.0, 2000.0), "[1, 1000]");
    DBL_BAD(bw_config_set_wait_multiplier, "wait_multiplier", 1001.0, "[1, 1000]");
    DBL_BAD(bw_config_set_wait_multiplier, "wait_multiplier", NAN, "[1, 1000]");
    DBL_BAD(bw_config_set_wait_multiplier, "wait_multiplier", INFINITY, "[1, 1000]");
    DBL_BAD(bw_config_set_wait_multiplier, "wait_multiplier", -INFINITY, "[1, 1000]");
}

/* Counts in [1, hi]: 1000000000, or 1000000 for the knobs that count probes of one round. */
static void count_knob(set_i64_fn set, const char *name, const char *key, int64_t hi)
{
    char r[40], top[24], below[24], above[24];
    snprintf(r, sizeof r, "[1, %" PRId64 "]", hi);
    snprintf(top, sizeof top, "%" PRId64, hi);
    snprintf(below, sizeof below, "%" PRId64, hi - 1);
    snprintf(above, sizeof above, "%" PRId64, hi + 1);
    i64_case(__LINE__, set, name, key, INT64_MIN, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, -1, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, 0, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, 1, BW_OK, "1", r);
    i64_case(__LINE__, set, name, key, 2, BW_OK, "2", r);
    i64_case(__LINE__, set, name, key, hi - 1, BW_OK, below, r);
    i64_case(__LINE__, set, name, key, hi, BW_OK, top, r);
    i64_case(__LINE__, set, name, key, hi + 1, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, (int64_t)UINT32_MAX + 2, BW_ERANGE, NULL, r); /* would wrap to 1 in 32 bits */
    i64_case(__LINE__, set, name, key, INT64_MAX, BW_ERANGE, NULL, r);
}

static void test_set_counts(void)
{
    count_knob(bw_config_set_min_calls, "bw_config_set_min_calls", "min_calls", 1000000000);
    count_knob(bw_config_set_error_threshold, "bw_config_set_error_threshold", "error_threshold", 1000000000);
    count_knob(bw_config_set_success_threshold, "bw_config_set_success_threshold", "success_threshold", 1000000);
    count_knob(bw_config_set_half_open_capacity, "bw_config_set_half_open_capacity", "half_open_capacity", 1000000);
}

static void test_set_probes(void)
{
    const char *r = "[1, 1000000]";
    I64_BAD(bw_config_set_permitted_probes, "permitted_probes", -1, r);
    I64_BAD(bw_config_set_permitted_probes, "permitted_probes", 0, r);
    I64_OK(bw_config_set_permitted_probes, "permitted_probes", 1, "1");
    I64_OK(bw_config_set_permitted_probes, "permitted_probes", 2, "2");
    I64_OK(bw_config_set_permitted_probes, "permitted_probes", 999999, "999999");
    I64_OK(bw_config_set_permitted_probes, "permitted_probes", 1000000, "1000000");
    I64_BAD(bw_config_set_permitted_probes, "permitted_probes", 1000001, r);
    I64_BAD(bw_config_set_permitted_probes, "permitted_probes", INT64_MAX, r);

    /* max_concurrent_probes: the setter checks [1, ...]; the cap by permitted_probes is validate's job. */
    I64_BAD(bw_config_set_max_concurrent_probes, "max_concurrent_probes", -1, "[1, ");
    I64_BAD(bw_config_set_max_concurrent_probes, "max_concurrent_probes", 0, "[1, ");
    I64_OK(bw_config_set_max_concurrent_probes, "max_concurrent_probes", 1, "1");
    I64_OK(bw_config_set_max_concurrent_probes, "max_concurrent_probes", 2, "2");
    I64_OK(bw_config_set_max_concurrent_probes, "max_concurrent_probes", 11, "11"); /* > default permitted 10 */
    I64_OK(bw_config_set_max_concurrent_probes, "max_concurrent_probes", 1000000, "1000000");
    /* Above the largest permitted_probes it can never be valid. */
    I64_BAD(bw_config_set_max_concurrent_probes, "max_concurrent_probes", 1000001, "[1, ");
    I64_BAD(bw_config_set_max_concurrent_probes, "max_concurrent_probes", INT64_MIN, "[1, ");
}

static void test_set_window(void)
{
    const char *rc = "[1, 1000000]", *rt = "[1, 2592000]"; /* time: up to 30 days */
    I64_BAD(set_window_count, "window", -1, rc);
    I64_BAD(set_window_count, "window", 0, rc);
    I64_OK(set_window_count, "window", 1, "count:1");
    I64_OK(set_window_count, "window", 2, "count:2");
    I64_OK(set_window_count, "window", 999999, "count:999999");
    I64_OK(set_window_count, "window", 1000000, "count:1000000");
    I64_BAD(set_window_count, "window", 1000001, rc);
    I64_BAD(set_window_count, "window", INT64_MAX, rc);

    I64_BAD(set_window_time, "window", -1, rt);
    I64_BAD(set_window_time, "window", 0, rt);
    I64_OK(set_window_time, "window", 1, "time:1s");
    I64_OK(set_window_time, "window", 2, "time:2s");
    I64_OK(set_window_time, "window", 86399, "time:86399s");
    I64_OK(set_window_time, "window", 86400, "time:86400s");
    I64_OK(set_window_time, "window", 86401, "time:86401s");
    I64_OK(set_window_time, "window", 1000000, "time:1000000s"); /* a valid count size, and a valid time size */
    I64_OK(set_window_time, "window", 2592000, "time:2592000s");
    I64_BAD(set_window_time, "window", 2592001, rt);
    I64_BAD(set_window_time, "window", INT64_MIN, rt);

    /* A failed time setting on a count window keeps the count window (kind and size). */
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 7, NULL));
    CHECK_RC(bw_config_set_window(c, BW_WINDOW_TIME, 0, NULL), BW_ERANGE);
    CHECK_STR(kv(c, "window"), "count:7");
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_TIME, 30, NULL));
    CHECK_STR(kv(c, "window"), "time:30s");
    CHECK_RC(bw_config_set_window(c, BW_WINDOW_COUNT, 0, NULL), BW_ERANGE);
    CHECK_STR(kv(c, "window"), "time:30s");

    /* An unknown window kind is BW_EINVAL, config unchanged. */
    char before[FMT_SIZE], after[FMT_SIZE];
    fmt(c, before);
    bw_error e;
    err_poison(&e);
    CHECK_RC(bw_config_set_window(c, (bw_window_kind)2, 10, &e), BW_EINVAL);
    CHECK_INT(e.code, BW_EINVAL);
    CHECK_STR(e.field, "window");
    CHECK(strstr(e.message, "window") != NULL);
    CHECK_RC(bw_config_set_window(c, (bw_window_kind)-1, 10, NULL), BW_EINVAL);
    fmt(c, after);
    CHECK_STR(after, before);
    bw_config_free(c);
}

/* Durations: "off"/"none" (0) only where zero_ok; otherwise (0, 365d]. */
static void duration_knob(set_i64_fn set, const char *name, const char *key, const char *zero_text)
{
    const char *r = "365d";
    if (zero_text)
        i64_case(__LINE__, set, name, key, 0, BW_OK, zero_text, r);
    else
        i64_case(__LINE__, set, name, key, 0, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, INT64_MIN, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, -S, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, -1, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, 1, BW_OK, "1ns", r);
    i64_case(__LINE__, set, name, key, 2, BW_OK, "2ns", r);
    i64_case(__LINE__, set, name, key, 1500 * BW_NS_PER_MS, BW_OK, "1500ms", r);
    i64_case(__LINE__, set, name, key, MAXDUR - DAY, BW_OK, "364d", r);
    i64_case(__LINE__, set, name, key, MAXDUR - 1, BW_OK, "31535999999999999ns", r);
    i64_case(__LINE__, set, name, key, MAXDUR, BW_OK, "365d", r);
    i64_case(__LINE__, set, name, key, MAXDUR + 1, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, MAXDUR + DAY, BW_ERANGE, NULL, r);
    i64_case(__LINE__, set, name, key, INT64_MAX, BW_ERANGE, NULL, r);
}

static void test_set_durations(void)
{
    duration_knob(bw_config_set_slow_call_duration, "bw_config_set_slow_call_duration", "slow_call_duration", "off");
    duration_knob(bw_config_set_wait, "bw_config_set_wait", "wait", NULL);
    duration_knob(bw_config_set_wait_max, "bw_config_set_wait_max", "wait_max", "none");
    duration_knob(bw_config_set_max_wait_in_half_open, "bw_config_set_max_wait_in_half_open", "max_wait_in_half_open",
                  "off");
}

static void test_set_policy(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    err_poison(&e);
    CHECK_OK(bw_config_set_policy(c, BW_POLICY_CONSECUTIVE, &e));
    CHECK_STR(kv(c, "policy"), "consecutive");
    CHECK_OK(bw_config_set_policy(c, BW_POLICY_RATE, &e));
    CHECK_STR(kv(c, "policy"), "rate");
    CHECK(err_untouched(&e));

    CHECK_OK(bw_config_set_policy(c, BW_POLICY_CONSECUTIVE, NULL));
    char before[FMT_SIZE], after[FMT_SIZE];
    fmt(c, before);
    CHECK_RC(bw_config_set_policy(c, (bw_policy)2, &e), BW_EINVAL);
    CHECK_INT(e.code, BW_EINVAL);
    CHECK_STR(e.field, "policy");
    CHECK(strstr(e.message, "policy") != NULL);
    CHECK(strstr(e.message, "rate") != NULL && strstr(e.message, "consecutive") != NULL);
    CHECK_RC(bw_config_set_policy(c, (bw_policy)-1, NULL), BW_EINVAL);
    fmt(c, after);
    CHECK_STR(after, before);
    bw_config_free(c);
}

static void test_set_auto_transition(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    err_poison(&e);
    CHECK_OK(bw_config_set_auto_transition(c, 1, &e));
    CHECK_STR(kv(c, "auto_transition"), "true");
    CHECK_OK(bw_config_set_auto_transition(c, 0, &e));
    CHECK_STR(kv(c, "auto_transition"), "false");
    CHECK_OK(bw_config_set_auto_transition(c, 42, &e));
    CHECK_STR(kv(c, "auto_transition"), "true");
    CHECK_OK(bw_config_set_auto_transition(c, 0, NULL));
    CHECK_OK(bw_config_set_auto_transition(c, -1, NULL));
    CHECK_STR(kv(c, "auto_transition"), "true");
    CHECK(err_untouched(&e));
    bw_config_free(c);
}

static void test_set_unreachable_counts(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_unreachable_counts(c, 0, &e));
    CHECK_STR(kv(c, "unreachable_counts"), "false");
    CHECK_OK(bw_config_parse(c, "unreachable_counts=yes", &e));
    CHECK_STR(kv(c, "unreachable_counts"), "true");
    CHECK_OK(bw_config_parse(c, "unreachable_counts=off", &e));
    CHECK_STR(kv(c, "unreachable_counts"), "false");
    CHECK_RC(bw_config_parse(c, "unreachable_counts=maybe", &e), BW_EPARSE);
    CHECK_RC(bw_config_set_unreachable_counts(NULL, 1, NULL), BW_EINVAL);
    bw_config_free(c);
}

static void test_set_initial_state(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    err_poison(&e);
    static const bw_state ok[] = {BW_STATE_FORCED_OPEN, BW_STATE_DISABLED, BW_STATE_METRICS_ONLY, BW_STATE_CLOSED};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        CHECK_OK(bw_config_set_initial_state(c, ok[i], &e));
        CHECK_STR(kv(c, "initial_state"), bw_state_name(ok[i]));
    }
    CHECK(err_untouched(&e));

    CHECK_OK(bw_config_set_initial_state(c, BW_STATE_METRICS_ONLY, NULL));
    char before[FMT_SIZE], after[FMT_SIZE];
    fmt(c, before);
    /*
     * OPEN and HALF_OPEN are known states outside the allowed set: BW_ERANGE
     * ("outside the range listed above"), config unchanged.
     */
    static const bw_state bad[] = {BW_STATE_OPEN, BW_STATE_HALF_OPEN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_poison(&e);
        int rc = bw_config_set_initial_state(c, bad[i], &e);
        CHECK_RC(rc, BW_ERANGE);
        CHECK_INT(e.code, rc);
        CHECK_STR(e.field, "initial_state");
        CHECK(strstr(e.message, "initial_state") != NULL);
        CHECK(strstr(e.message, "forced_open") != NULL && strstr(e.message, "metrics_only") != NULL);
        CHECK(bw_config_set_initial_state(c, bad[i], NULL) == rc);
        fmt(c, after);
        CHECK_STR(after, before);
    }
    /* Unknown enum values: BW_EINVAL. */
    err_poison(&e);
    CHECK_RC(bw_config_set_initial_state(c, (bw_state)6, &e), BW_EINVAL);
    CHECK_INT(e.code, BW_EINVAL);
    CHECK_STR(e.field, "initial_state");
    CHECK_RC(bw_config_set_initial_state(c, (bw_state)-1, NULL), BW_EINVAL);
    fmt(c, after);
    CHECK_STR(after, before);
    bw_config_free(c);
}

static bw_outcome dummy_classifier(int rc, void *arg, void *user)
{
    (void)rc;
    (void)arg;
    (void)user;
    return BW_SUCCESS;
}

/* Every setter with cfg NULL: BW_EINVAL, err filled (or err NULL accepted). */
static void test_null_config(void)
{
    bw_error e;
#define NULLCFG(call)                                                                                                  \
    do {                                                                                                               \
        err_poison(&e);                                                                                                \
        CHECK_RC(call, BW_EINVAL);                                                                                     \
        CHECK_INT(e.code, BW_EINVAL);                                                                                  \
    } while (0)
    NULLCFG(bw_config_set_policy(NULL, BW_POLICY_RATE, &e));
    NULLCFG(bw_config_set_failure_rate(NULL, 0.5, &e));
    NULLCFG(bw_config_set_slow_call_rate(NULL, 0.5, &e));
    NULLCFG(bw_config_set_slow_call_duration(NULL, S, &e));
    NULLCFG(bw_config_set_min_calls(NULL, 10, &e));
    NULLCFG(bw_config_set_window(NULL, BW_WINDOW_COUNT, 10, &e));
    NULLCFG(bw_config_set_permitted_probes(NULL, 10, &e));
    NULLCFG(bw_config_set_max_concurrent_probes(NULL, 1, &e));
    NULLCFG(bw_config_set_wait(NULL, S, &e));
    NULLCFG(bw_config_set_wait_multiplier(NULL, 2.0, &e));
    NULLCFG(bw_config_set_wait_max(NULL, 0, &e));
    NULLCFG(bw_config_set_max_wait_in_half_open(NULL, 0, &e));
    NULLCFG(bw_config_set_auto_transition(NULL, 1, &e));
    NULLCFG(bw_config_set_initial_state(NULL, BW_STATE_CLOSED, &e));
    NULLCFG(bw_config_set_error_threshold(NULL, 5, &e));
    NULLCFG(bw_config_set_success_threshold(NULL, 5, &e));
    NULLCFG(bw_config_set_half_open_capacity(NULL, 5, &e));
    NULLCFG(bw_config_validate(NULL, &e));
    NULLCFG(bw_config_parse(NULL, "min_calls=5", &e));
#undef NULLCFG
    /* err NULL too. */
    CHECK_RC(bw_config_set_failure_rate(NULL, 0.5, NULL), BW_EINVAL);
    CHECK_RC(bw_config_set_wait(NULL, S, NULL), BW_EINVAL);
    CHECK_RC(bw_config_validate(NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_config_parse(NULL, "", NULL), BW_EINVAL);
    CHECK_RC(bw_config_set_clock(NULL, NULL), BW_EINVAL);
    recorder *heard = rec_new();
    CHECK_RC(bw_config_set_listener(NULL, BW_EVENTS_ALL, rec_listen, heard), BW_EINVAL);
    CHECK_RC(bw_config_set_classifier(NULL, dummy_classifier, NULL), BW_EINVAL);
    char buf[16];
    CHECK_RC(bw_config_format(NULL, buf, sizeof buf), BW_EINVAL);

    /* The non-text setters succeed on a real config and do not touch the text form. */
    bw_config *c = bw_config_new();
    char before[FMT_SIZE], after[FMT_SIZE];
    fmt(c, before);
    CHECK_OK(bw_config_set_clock(c, NULL));
    CHECK_OK(bw_config_set_listener(c, BW_EVENTS_ALL, rec_listen, heard));
    CHECK_OK(bw_config_set_listener(c, 0, NULL, NULL));
    CHECK_OK(bw_config_set_classifier(c, dummy_classifier, NULL));
    CHECK_OK(bw_config_set_classifier(c, NULL, NULL));
    fmt(c, after);
    CHECK_STR(after, before);
    CHECK_INT(rec_count(heard), 0);
    bw_config_free(c);
    rec_free(heard);
}

/* ---- bw_config_validate ---- */

static void test_validate_probes(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    err_poison(&e);
    CHECK_OK(bw_config_validate(c, &e));
    CHECK(err_untouched(&e));

    CHECK_OK(bw_config_set_permitted_probes(c, 5, NULL));
    CHECK_OK(bw_config_set_max_concurrent_probes(c, 4, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_max_concurrent_probes(c, 5, NULL)); /* equal: fine */
    CHECK_OK(bw_config_validate(c, &e));
    CHECK(err_untouched(&e));
    CHECK_OK(bw_config_set_max_concurrent_probes(c, 6, NULL)); /* one above */
    char before[FMT_SIZE], after[FMT_SIZE];
    fmt(c, before);
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_INT(e.code, BW_ERANGE);
    CHECK_STR(e.field, "max_concurrent_probes");
    CHECK(strstr(e.message, "max_concurrent_probes") != NULL);
    CHECK(strstr(e.message, "permitted_probes") != NULL);
    CHECK_RC(bw_config_validate(c, NULL), BW_ERANGE);
    fmt(c, after);
    CHECK_STR(after, before); /* validate does not "fix" anything */

    /* Lowering permitted_probes under max_concurrent_probes is caught too. */
    CHECK_OK(bw_config_set_max_concurrent_probes(c, 5, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_permitted_probes(c, 4, NULL));
    CHECK_RC(bw_config_validate(c, NULL), BW_ERANGE);
    CHECK_OK(bw_config_set_permitted_probes(c, 1000000, NULL));
    CHECK_OK(bw_config_set_max_concurrent_probes(c, 1000000, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    bw_config_free(c);
}

/* A half-open round shorter than the system clock's step could end before its probes answer: refused. */
static void test_validate_half_open_limit(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, BW_NS_PER_MS, NULL)); /* the setter takes it */
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "max_wait_in_half_open");
    CHECK(strstr(e.message, "max_wait_in_half_open=1ms") != NULL && strstr(e.message, "10ms") != NULL);
    bw_breaker *b = NULL;
    CHECK_RC(bw_breaker_new("ho-short", c, &b, NULL), BW_ERANGE);
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 10 * BW_NS_PER_MS, NULL)); /* the clock's step: fine */
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 0, NULL)); /* off */
    CHECK_OK(bw_config_validate(c, NULL));
    /* A manual clock moves as the program says: any limit can be met. */
    bw_clock *m = NULL;
    CHECK_OK(bw_clock_manual_new(0, &m));
    CHECK_OK(bw_config_set_clock(c, m));
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 1, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_clock(c, bw_clock_system())); /* the system clock named: refused as by default */
    CHECK_RC(bw_config_validate(c, NULL), BW_ERANGE);
    bw_config_free(c);
    bw_clock_free(m);
}

static void test_validate_wait_max(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    /* Explicit wait; a multiplier, without which wait_max caps nothing (test_caps_need_growth). */
    CHECK_OK(bw_config_set_wait_multiplier(c, 2, NULL));
    CHECK_OK(bw_config_set_wait(c, 10 * S, NULL));
    CHECK_OK(bw_config_set_wait_max(c, 10 * S, NULL)); /* equal: accepted */
    err_poison(&e);
    CHECK_OK(bw_config_validate(c, &e));
    CHECK(err_untouched(&e));
    CHECK_OK(bw_config_set_wait_max(c, 10 * S + 1, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_wait_max(c, 10 * S - 1, NULL)); /* just below */
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_INT(e.code, BW_ERANGE);
    CHECK_STR(e.field, "wait_max");
    CHECK(strstr(e.message, "wait_max") != NULL);
    CHECK_RC(bw_config_validate(c, NULL), BW_ERANGE);
    CHECK_OK(bw_config_set_wait_max(c, 0, NULL)); /* none */
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_wait_max(c, MAXDUR, NULL));
    CHECK_OK(bw_config_set_wait(c, MAXDUR, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    bw_config_free(c);

    /* wait never set, rate policy: the default wait is 60 s. */
    c = bw_config_new();
    CHECK_OK(bw_config_set_wait_multiplier(c, 2, NULL));
    CHECK_OK(bw_config_set_wait_max(c, 60 * S, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_wait_max(c, 60 * S - 1, NULL));
    err_poison(&e);
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "wait_max");
    CHECK_OK(bw_config_set_wait_max(c, 45 * S, NULL));
    CHECK_RC(bw_config_validate(c, NULL), BW_ERANGE);
    /* ... consecutive policy: 30 s, so 45 s and 30 s are fine, 30 s - 1 ns is not. */
    CHECK_OK(bw_config_set_policy(c, BW_POLICY_CONSECUTIVE, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_wait_max(c, 30 * S, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_wait_max(c, 30 * S - 1, NULL));
    err_poison(&e);
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "wait_max");
    bw_config_free(c);
}

/* ---- bw_config_parse ---- */

/* Parse `text` into a fresh config; it must succeed and `key` must then read `want`. */
static void parse_ok(int line, const char *text, const char *key, const char *want)
{
    bw_config *c = bw_config_new();
    bw_error e;
    err_poison(&e);
    int rc = bw_config_parse(c, text, &e);
    if (rc != BW_OK)
        H_FAIL("line %d: parse(\"%s\") returned %d (%s): %s", line, text, rc, bw_strerror(rc), e.message);
    else if (!err_untouched(&e))
        H_FAIL("line %d: parse(\"%s\") succeeded but wrote err", line, text);
    const char *got = kv(c, key);
    if (strcmp(got, want) != 0)
        H_FAIL("line %d: after parse(\"%s\") %s reads \"%s\", want \"%s\"", line, text, key, got, want);
    bw_config_free(c);
}
#define PARSE_OK(text, key, want) parse_ok(__LINE__, text, key, want)

/* A non-default starting point, so a partial commit would show. */
static const char *const base_text = "policy=consecutive error_threshold=9 wait=45s failure_rate=0.25 window=time:20s "
                                     "auto_transition=true initial_state=disabled";

/*
 * Parse `text` into a config holding base_text; it must fail with want_rc and
 * leave the config unchanged. err: code, field (when want_field is not NULL), the
 * message's "offset N" equal to off_a or off_b, and `sub` in the message.
 */
static void parse_bad(int line, const char *text, int want_rc, const char *want_field, long off_a, long off_b,
                      const char *sub)
{
    bw_config *c = bw_config_new();
    if (bw_config_parse(c, base_text, NULL) != BW_OK)
        H_FAIL("line %d: base text did not parse", line);
    char before[FMT_SIZE], after[FMT_SIZE];
    fmt(c, before);
    bw_error e;
    err_poison(&e);
    int rc = bw_config_parse(c, text, &e);
    if (rc != want_rc)
        H_FAIL("line %d: parse(\"%s\") returned %d (%s), want %d (%s); message \"%s\"", line, text, rc, bw_strerror(rc),
               want_rc, bw_strerror(want_rc), e.message);
    fmt(c, after);
    if (strcmp(before, after) != 0)
        H_FAIL("line %d: failed parse(\"%s\") changed the config:\n  before %s\n  after  %s", line, text, before,
               after);
    if (e.code != rc)
        H_FAIL("line %d: parse(\"%s\") err.code %d != rc %d", line, text, e.code, rc);
    if (want_field && strcmp(e.field, want_field) != 0)
        H_FAIL("line %d: parse(\"%s\") err.field \"%s\", want \"%s\"", line, text, e.field, want_field);
    long off = msg_offset(e.message);
    if (off_a >= 0 && off != off_a && off != off_b)
        H_FAIL("line %d: parse(\"%s\") message \"%s\" gives offset %ld, want %ld%s", line, text, e.message, off, off_a,
               off_b >= 0 ? " (or the value's offset)" : "");
    if (sub && !strstr(e.message, sub))
        H_FAIL("line %d: parse(\"%s\") message \"%s\" does not mention \"%s\"", line, text, e.message, sub);
    /* err NULL: same code, still unchanged. */
    rc = bw_config_parse(c, text, NULL);
    if (rc != want_rc)
        H_FAIL("line %d: parse(\"%s\", err=NULL) returned %d, want %d", line, text, rc, want_rc);
    fmt(c, after);
    if (strcmp(before, after) != 0)
        H_FAIL("line %d: failed parse(\"%s\", err=NULL) changed the config", line, text);
    bw_config_free(c);
}
/* Malformed syntax: offset is where the pair starts. */
#define PARSE_SYNTAX(text, field, off, sub) parse_bad(__LINE__, text, BW_EPARSE, field, off, -1, sub)
/* Bad value: offset of the pair or of its value. */
#define PARSE_VALUE(text, rc, field, pair_off, val_off, sub)                                                           \
    parse_bad(__LINE__, text, rc, field, pair_off, val_off, sub)

static void test_parse_example(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    err_poison(&e);
    CHECK_OK(bw_config_parse(c, "policy=rate failure_rate=0.5 window=time:30s min_calls=20 wait=30s", &e));
    CHECK(err_untouched(&e));
    CHECK_STR(kv(c, "policy"), "rate");
    CHECK_STR(kv(c, "failure_rate"), "0.5");
    CHECK_STR(kv(c, "window"), "time:30s");
    CHECK_STR(kv(c, "min_calls"), "20");
    CHECK_STR(kv(c, "wait"), "30s");
    /* Untouched knobs keep their defaults. */
    CHECK_STR(kv(c, "slow_call_rate"), "1");
    CHECK_STR(kv(c, "permitted_probes"), "10");
    CHECK_STR(kv(c, "wait_max"), "none");
    CHECK_STR(kv(c, "error_threshold"), "5");
    CHECK_OK(bw_config_validate(c, NULL));
    bw_config_free(c);
}

static void test_parse_each_key(void)
{
    PARSE_OK("policy=consecutive", "policy", "consecutive");
    PARSE_OK("policy=rate", "policy", "rate");
    PARSE_OK("failure_rate=0.25", "failure_rate", "0.25");
    PARSE_OK("failure_rate=1", "failure_rate", "1");
    PARSE_OK("slow_call_rate=0.75", "slow_call_rate", "0.75");
    PARSE_OK("slow_call_duration=2s", "slow_call_duration", "2s");
    PARSE_OK("min_calls=20", "min_calls", "20");
    PARSE_OK("min_calls=1000000000", "min_calls", "1000000000");
    PARSE_OK("window=count:50", "window", "count:50");
    PARSE_OK("window=count:1000000", "window", "count:1000000");
    PARSE_OK("window=time:30s", "window", "time:30s");
    PARSE_OK("window=time:2m", "window", "time:120s");
    PARSE_OK("window=time:1d", "window", "time:86400s");
    PARSE_OK("window=time:10m", "window", "time:600s");
    PARSE_OK("window=time:6h", "window", "time:21600s");
    PARSE_OK("window=time:2d", "window", "time:172800s");
    PARSE_OK("window=time:30d", "window", "time:2592000s");
    PARSE_OK("permitted_probes=7", "permitted_probes", "7");
    PARSE_OK("max_concurrent_probes=3", "max_concurrent_probes", "3");
    PARSE_OK("wait=45s", "wait", "45s");
    PARSE_OK("wait_multiplier=2.5", "wait_multiplier", "2.5");
    PARSE_OK("wait_multiplier=1000", "wait_multiplier", "1000");
    PARSE_OK("wait_max=5m", "wait_max", "5m");
    PARSE_OK("max_wait_in_half_open=90s", "max_wait_in_half_open", "90s");
    PARSE_OK("auto_transition=true", "auto_transition", "true");
    PARSE_OK("initial_state=forced_open", "initial_state", "forced_open");
    PARSE_OK("initial_state=disabled", "initial_state", "disabled");
    PARSE_OK("initial_state=metrics_only", "initial_state", "metrics_only");
    PARSE_OK("initial_state=closed", "initial_state", "closed");
    PARSE_OK("error_threshold=9", "error_threshold", "9");
    PARSE_OK("success_threshold=4", "success_threshold", "4");
    PARSE_OK("half_open_capacity=6", "half_open_capacity", "6");
}

static void test_parse_durations(void)
{
    PARSE_OK("wait=7ns", "wait", "7ns");
    PARSE_OK("wait=7us", "wait", "7us");
    PARSE_OK("wait=7ms", "wait", "7ms");
    PARSE_OK("wait=7s", "wait", "7s");
    PARSE_OK("wait=7m", "wait", "7m");
    PARSE_OK("wait=7h", "wait", "7h");
    PARSE_OK("wait=7d", "wait", "7d");
    PARSE_OK("wait=1ns", "wait", "1ns");
    PARSE_OK("wait=365d", "wait", "365d");
    /* Decimals. */
    PARSE_OK("wait=1.5s", "wait", "1500ms");
    PARSE_OK("wait=250ms", "wait", "250ms");
    PARSE_OK("wait=2.5ms", "wait", "2500us");
    PARSE_OK("wait=1.5m", "wait", "90s");
    PARSE_OK("wait=0.5h", "wait", "30m");
    PARSE_OK("wait=1.5d", "wait", "36h");
    PARSE_OK("wait=1.005s", "wait", "1005ms"); /* 1.005 * 1e9 is 1004999999.99... in binary: rounded, not cut */
    /* Bare numbers have no unit: refused (test_bare_durations_refused), but 0 is 0 in every unit. */
    /* Equivalent spellings format the same. */
    PARSE_OK("wait=1000ms", "wait", "1s");
    PARSE_OK("wait=60000000000ns", "wait", "1m");
    /* off / none / 0 for the knobs that allow it. */
    PARSE_OK("slow_call_duration=off", "slow_call_duration", "off");
    PARSE_OK("slow_call_duration=none", "slow_call_duration", "off");
    PARSE_OK("slow_call_duration=0", "slow_call_duration", "off");
    PARSE_OK("wait_max=none", "wait_max", "none");
    PARSE_OK("wait_max=off", "wait_max", "none");
    PARSE_OK("wait_max=0s", "wait_max", "none");
    PARSE_OK("max_wait_in_half_open=off", "max_wait_in_half_open", "off");
    PARSE_OK("max_wait_in_half_open=none", "max_wait_in_half_open", "off");
    PARSE_OK("max_wait_in_half_open=0", "max_wait_in_half_open", "off");
    /* ... but not for wait, whose range excludes 0. */
    PARSE_VALUE("wait=off", BW_ERANGE, "wait", 0, 5, "365d");
    PARSE_VALUE("wait=0s", BW_ERANGE, "wait", 0, 5, "365d");
    PARSE_VALUE("wait=none", BW_ERANGE, "wait", 0, 5, "365d");
}

static void test_parse_booleans(void)
{
    static const char *const yes[] = {"true", "on", "yes", "1"}, *const no[] = {"false", "off", "no", "0"};
    char text[64];
    for (int i = 0; i < 4; i++) {
        snprintf(text, sizeof text, "auto_transition=%s", yes[i]);
        PARSE_OK(text, "auto_transition", "true");
        /* From true back to false. */
        bw_config *c = bw_config_new();
        CHECK_OK(bw_config_set_auto_transition(c, 1, NULL));
        snprintf(text, sizeof text, "auto_transition=%s", no[i]);
        CHECK_OK(bw_config_parse(c, text, NULL));
        CHECK_STR(kv(c, "auto_transition"), "false");
        bw_config_free(c);
    }
    PARSE_VALUE("auto_transition=maybe", BW_EPARSE, "auto_transition", 0, 16, "maybe");
    PARSE_VALUE("auto_transition=2", BW_EPARSE, "auto_transition", 0, 16, "'2'");
    PARSE_VALUE("auto_transition=", BW_EPARSE, "auto_transition", 0, 16, NULL);
}

static void test_parse_syntax_errors(void)
{
    /* Unknown keys: the offset of the key, the key in the message. */
    PARSE_SYNTAX("bogus=1", "bogus", 0, "bogus");
    PARSE_SYNTAX("policy=rate  colour=blue", "colour", 13, "colour");
    PARSE_SYNTAX("min_calls=5 Min_calls=5", "Min_calls", 12, "Min_calls");
    /* Missing '='. */
    PARSE_SYNTAX("policy=rate failure_rate", NULL, 12, "failure_rate");
    PARSE_SYNTAX("garbage", NULL, 0, "garbage");
    PARSE_SYNTAX("min_calls=5\tpolicy rate", NULL, 12, "policy");
    /* No key. */
    PARSE_SYNTAX("min_calls=5 =5", NULL, 12, "=5");
    /* "key = value" is three words; the first has no '='. */
    PARSE_SYNTAX("min_calls = 5", NULL, 0, "min_calls");
    /* A very long word. */
    char longtext[400];
    memset(longtext, 'x', sizeof longtext);
    memcpy(longtext, "min_calls=5 min_calls=", 22);
    longtext[sizeof longtext - 1] = 0;
    PARSE_SYNTAX(longtext, NULL, 12, NULL);
}

static void test_parse_value_errors(void)
{
    PARSE_VALUE("failure_rate=abc", BW_EPARSE, "failure_rate", 0, 13, "abc");
    PARSE_VALUE("failure_rate=0.5x", BW_EPARSE, "failure_rate", 0, 13, "0.5x");
    PARSE_VALUE("policy=rate failure_rate=", BW_EPARSE, "failure_rate", 12, 25, NULL);
    PARSE_VALUE("slow_call_rate=half", BW_EPARSE, "slow_call_rate", 0, 15, "half");
    PARSE_VALUE("min_calls=12x", BW_EPARSE, "min_calls", 0, 10, "12x");
    PARSE_VALUE("min_calls=1.5", BW_EPARSE, "min_calls", 0, 10, "1.5");
    PARSE_VALUE("min_calls=", BW_EPARSE, "min_calls", 0, 10, NULL);
    PARSE_VALUE("wait=5parsecs", BW_EPARSE, "wait", 0, 5, "5parsecs");
    PARSE_VALUE("wait=s", BW_EPARSE, "wait", 0, 5, "'s'");
    PARSE_VALUE("wait=5S", BW_EPARSE, "wait", 0, 5, "5S");
    PARSE_VALUE("wait=", BW_EPARSE, "wait", 0, 5, NULL);
    PARSE_VALUE("slow_call_duration=fast", BW_EPARSE, "slow_call_duration", 0, 19, "fast");
    PARSE_VALUE("wait_multiplier=2x", BW_EPARSE, "wait_multiplier", 0, 16, "2x");
    PARSE_VALUE("policy=fast", BW_EPARSE, "policy", 0, 7, "fast");
    PARSE_VALUE("window=count:", BW_EPARSE, "window", 0, 7, "count:");
    PARSE_VALUE("window=count:abc", BW_EPARSE, "window", 0, 7, "count:abc");
    PARSE_VALUE("window=size:5", BW_EPARSE, "window", 0, 7, "size:5");
    PARSE_VALUE("window=100", BW_EPARSE, "window", 0, 7, "100");
    PARSE_VALUE("window=time:1.5s", BW_EPARSE, "window", 0, 7, "time:1.5s");
    PARSE_VALUE("initial_state=sideways", BW_EPARSE, "initial_state", 0, 14, "sideways");
    PARSE_VALUE("permitted_probes=ten", BW_EPARSE, "permitted_probes", 0, 17, "ten");
    /* The offset counts from the start of the text. */
    PARSE_VALUE("policy=rate\tmin_calls=20  wait=soon", BW_EPARSE, "wait", 26, 31, "soon");
}

static void test_parse_range_errors(void)
{
    PARSE_VALUE("failure_rate=1.5", BW_ERANGE, "failure_rate", 0, 13, "(0, 1]");
    PARSE_VALUE("policy=rate failure_rate=0", BW_ERANGE, "failure_rate", 12, 25, "(0, 1]");
    PARSE_VALUE("failure_rate=nan", BW_ERANGE, "failure_rate", 0, 13, "(0, 1]");
    PARSE_VALUE("slow_call_rate=inf", BW_ERANGE, "slow_call_rate", 0, 15, "(0, 1]");
    PARSE_VALUE("slow_call_rate=1.0000001", BW_ERANGE, "slow_call_rate", 0, 15, "(0, 1]");
    PARSE_VALUE("wait_multiplier=0.5", BW_ERANGE, "wait_multiplier", 0, 16, "[1, 1000]");
    PARSE_VALUE("wait_multiplier=1000.001", BW_ERANGE, "wait_multiplier", 0, 16, "[1, 1000]");
    PARSE_VALUE("min_calls=0", BW_ERANGE, "min_calls", 0, 10, "[1, 1000000000]");
    PARSE_VALUE("min_calls=1000000001", BW_ERANGE, "min_calls", 0, 10, "[1, 1000000000]");
    PARSE_VALUE("min_calls=-5", BW_ERANGE, "min_calls", 0, 10, "[1, 1000000000]");
    PARSE_VALUE("window=count:0", BW_ERANGE, "window", 0, 7, "[1, 1000000]");
    PARSE_VALUE("window=count:1000001", BW_ERANGE, "window", 0, 7, "[1, 1000000]");
    PARSE_VALUE("window=time:0", BW_ERANGE, "window", 0, 7, "[1, 2592000]");
    PARSE_VALUE("window=time:2592001s", BW_ERANGE, "window", 0, 7, "[1, 2592000]");
    PARSE_VALUE("window=time:31d", BW_ERANGE, "window", 0, 7, "[1, 2592000] (1s to 30d)");
    PARSE_VALUE("permitted_probes=1000001", BW_ERANGE, "permitted_probes", 0, 17, "[1, 1000000]");
    PARSE_VALUE("max_concurrent_probes=0", BW_ERANGE, "max_concurrent_probes", 0, 22, "[1, ");
    PARSE_VALUE("wait=366d", BW_ERANGE, "wait", 0, 5, "365d");
    PARSE_VALUE("wait_max=365.5d", BW_ERANGE, "wait_max", 0, 9, "365d");
    PARSE_VALUE("slow_call_duration=8761h", BW_ERANGE, "slow_call_duration", 0, 19, "365d");
    PARSE_VALUE("max_wait_in_half_open=400d", BW_ERANGE, "max_wait_in_half_open", 0, 22, "365d");
    PARSE_VALUE("error_threshold=0", BW_ERANGE, "error_threshold", 0, 16, "[1, 1000000000]");
    PARSE_VALUE("success_threshold=1000000001", BW_ERANGE, "success_threshold", 0, 18, "[1, 1000000]");
    PARSE_VALUE("half_open_capacity=-3", BW_ERANGE, "half_open_capacity", 0, 19, "[1, 1000000]");
    /* Later in the text: the offset counts from the start of the text. */
    PARSE_VALUE("min_calls=5 wait=1s error_threshold=0", BW_ERANGE, "error_threshold", 20, 36, "[1, 1000000000]");
    /* Cross-field checks are not the parser's business. */
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_parse(c, "permitted_probes=2 max_concurrent_probes=5", NULL));
    CHECK_RC(bw_config_validate(c, NULL), BW_ERANGE);
    CHECK_OK(bw_config_parse(c, "wait=1m wait_max=30s", NULL));
    CHECK_OK(bw_config_parse(c, "permitted_probes=5", NULL));
    bw_error e;
    err_poison(&e);
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "wait_max");
    bw_config_free(c);
}

/*
 * Well-formed values whose magnitude is out of range: the documented code for
 * "a value out of range" is BW_ERANGE (BW_EPARSE is for malformed text).
 */
static void test_parse_range_errors_large_and_negative(void)
{
    PARSE_VALUE("wait=1000000d", BW_ERANGE, "wait", 0, 5, "365d");
    PARSE_VALUE("min_calls=10000000000000000000", BW_ERANGE, "min_calls", 0, 10, "[1, 1000000000]");
    PARSE_VALUE("wait=-1s", BW_ERANGE, "wait", 0, 5, "365d");
}

/* initial_state=open names a real but disallowed state: config.h lists BW_EINVAL only for NULL arguments. */
static void test_parse_initial_state_open(void)
{
    static const char *const texts[] = {"initial_state=open", "initial_state=half_open"};
    for (int i = 0; i < 2; i++) {
        bw_config *c = bw_config_new();
        char before[FMT_SIZE], after[FMT_SIZE];
        fmt(c, before);
        bw_error e;
        err_poison(&e);
        int rc = bw_config_parse(c, texts[i], &e);
        if (rc != BW_EPARSE && rc != BW_ERANGE)
            H_FAIL("parse(\"%s\") returned %d (%s), want BW_EPARSE or BW_ERANGE; message \"%s\"", texts[i], rc,
                   bw_strerror(rc), e.message);
        CHECK_INT(e.code, rc);
        CHECK_STR(e.field, "initial_state");
        fmt(c, after);
        CHECK_STR(after, before);
        bw_config_free(c);
    }
}

static void test_parse_all_or_nothing(void)
{
    static const char *const texts[] = {
        "failure_rate=0.9 min_calls=50 wait=bogus",  /* last value malformed */
        "failure_rate=0.9 min_calls=50 min_calls=0", /* last value out of range */
        "failure_rate=0.9 min_calls=50 nosuch=1",    /* last key unknown */
        "failure_rate=0.9 min_calls=50 min_calls",   /* last pair without '=' */
        "policy=rate window=count:7 initial_state=closed auto_transition=false error_threshold=3 x",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        bw_config *c = bw_config_new();
        CHECK_OK(bw_config_parse(c, base_text, NULL));
        char before[FMT_SIZE], after[FMT_SIZE];
        fmt(c, before);
        bw_error e;
        CHECK(bw_config_parse(c, texts[i], &e) < 0);
        fmt(c, after);
        CHECK_STR(after, before);
        CHECK(bw_config_parse(c, texts[i], NULL) < 0);
        fmt(c, after);
        CHECK_STR(after, before);
        bw_config_free(c);
    }
    /* The good prefix on its own does apply. */
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_parse(c, "failure_rate=0.75 min_calls=50", NULL));
    CHECK_STR(kv(c, "failure_rate"), "0.75");
    CHECK_STR(kv(c, "min_calls"), "50");
    bw_config_free(c);
}

static void test_parse_whitespace(void)
{
    bw_config *c = bw_config_new();
    char before[FMT_SIZE], after[FMT_SIZE];
    CHECK_OK(bw_config_parse(c, base_text, NULL));
    fmt(c, before);
    bw_error e;
    err_poison(&e);
    CHECK_OK(bw_config_parse(c, "", &e));
    CHECK_OK(bw_config_parse(c, "   ", &e));
    CHECK_OK(bw_config_parse(c, " \t\n\r\v\f ", &e));
    CHECK(err_untouched(&e));
    fmt(c, after);
    CHECK_STR(after, before);
    CHECK_RC(bw_config_parse(c, NULL, &e), BW_EINVAL);
    CHECK_INT(e.code, BW_EINVAL);
    CHECK_RC(bw_config_parse(c, NULL, NULL), BW_EINVAL);
    fmt(c, after);
    CHECK_STR(after, before);
    bw_config_free(c);

    c = bw_config_new();
    CHECK_OK(bw_config_parse(c, "\tpolicy=consecutive  \t error_threshold=7\n", NULL));
    CHECK_STR(kv(c, "policy"), "consecutive");
    CHECK_STR(kv(c, "error_threshold"), "7");
    CHECK_OK(bw_config_parse(c, "min_calls=3\tsuccess_threshold=4", NULL)); /* a lone tab separates */
    CHECK_STR(kv(c, "min_calls"), "3");
    CHECK_STR(kv(c, "success_threshold"), "4");
    CHECK_OK(bw_config_parse(c, "   wait=2s      wait_max=3s   ", NULL));
    CHECK_STR(kv(c, "wait"), "2s");
    CHECK_STR(kv(c, "wait_max"), "3s");
    CHECK_OK(bw_config_parse(c, "\r\nhalf_open_capacity=8\r\n", NULL));
    CHECK_STR(kv(c, "half_open_capacity"), "8");
    bw_config_free(c);
}

/* ---- bw_config_format ---- */

/* format -> parse into a fresh config -> format must give the same text. */
static void roundtrip(int line, const bw_config *c)
{
    char a[FMT_SIZE], b[FMT_SIZE];
    fmt(c, a);
    bw_config *fresh = bw_config_new();
    bw_error e;
    err_poison(&e);
    int rc = bw_config_parse(fresh, a, &e);
    if (rc != BW_OK)
        H_FAIL("line %d: parse of formatted text failed: %d (%s) %s\n  text: %s", line, rc, bw_strerror(rc), e.message,
               a);
    fmt(fresh, b);
    if (strcmp(a, b) != 0)
        H_FAIL("line %d: round trip differs:\n  first  %s\n  second %s", line, a, b);
    bw_config_free(fresh);
}

static void test_format_roundtrip(void)
{
    bw_config *c = bw_config_new();
    roundtrip(__LINE__, c); /* defaults */

    /* Consecutive policy with its default wait, overrides and thresholds. */
    CHECK_OK(bw_config_set_policy(c, BW_POLICY_CONSECUTIVE, NULL));
    CHECK_OK(bw_config_set_error_threshold(c, 7, NULL));
    CHECK_OK(bw_config_set_success_threshold(c, 3, NULL));
    CHECK_OK(bw_config_set_half_open_capacity(c, 1000000, NULL));
    CHECK_OK(bw_config_set_initial_state(c, BW_STATE_FORCED_OPEN, NULL));
    CHECK_OK(bw_config_set_auto_transition(c, 1, NULL));
    roundtrip(__LINE__, c);
    bw_config_free(c);

    /* Rate policy at many range edges, odd units, awkward decimals. */
    c = bw_config_new();
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_TIME, 86400, NULL));
    CHECK_OK(bw_config_set_failure_rate(c, 0.1, NULL));
    CHECK_OK(bw_config_set_slow_call_rate(c, 0.3, NULL));
    CHECK_OK(bw_config_set_slow_call_duration(c, 1500 * BW_NS_PER_MS, NULL));
    CHECK_OK(bw_config_set_min_calls(c, 1000000000, NULL));
    CHECK_OK(bw_config_set_permitted_probes(c, 1000000, NULL));
    CHECK_OK(bw_config_set_max_concurrent_probes(c, 1000, NULL));
    CHECK_OK(bw_config_set_wait(c, 1, NULL));
    CHECK_OK(bw_config_set_wait_multiplier(c, 1.5, NULL));
    CHECK_OK(bw_config_set_wait_max(c, MAXDUR, NULL));
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 0, NULL));
    CHECK_OK(bw_config_set_initial_state(c, BW_STATE_METRICS_ONLY, NULL));
    roundtrip(__LINE__, c);
    bw_config_free(c);

    /* Slow calls off, 90 s wait, microsecond half-open limit, extreme multiplier. */
    c = bw_config_new();
    CHECK_OK(bw_config_set_slow_call_duration(c, 0, NULL));
    CHECK_OK(bw_config_set_wait(c, 90 * S, NULL));
    CHECK_OK(bw_config_set_wait_max(c, 2 * 3600 * S, NULL));
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 250000, NULL));
    CHECK_OK(bw_config_set_wait_multiplier(c, 1000.0, NULL));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 1, NULL));
    CHECK_OK(bw_config_set_min_calls(c, 1, NULL));
    CHECK_OK(bw_config_set_initial_state(c, BW_STATE_DISABLED, NULL));
    CHECK_OK(bw_config_set_failure_rate(c, 1.0 / 3.0, NULL));
    CHECK_OK(bw_config_set_slow_call_rate(c, nextafter(1.0, 0.0), NULL));
    roundtrip(__LINE__, c);
    /* Same text <=> same values: the parsed copy reads back the exact doubles. */
    bw_config *d = bw_config_new();
    char text[FMT_SIZE];
    fmt(c, text);
    CHECK_OK(bw_config_parse(d, text, NULL));
    CHECK(strtod(kv(d, "failure_rate"), NULL) == 1.0 / 3.0);
    CHECK(strtod(kv(d, "slow_call_rate"), NULL) == nextafter(1.0, 0.0));
    bw_config_free(d);
    bw_config_free(c);

    /* A config parsed from text. */
    c = bw_config_new();
    CHECK_OK(bw_config_parse(c, "policy=rate failure_rate=0.5 window=time:30s min_calls=20 wait=30s", NULL));
    roundtrip(__LINE__, c);
    bw_config_free(c);
}

/* A duration in range but not a whole number of microseconds, above 2^53 ns (~104 days). */
static void test_format_roundtrip_ns_precision(void)
{
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_set_wait(c, MAXDUR - 1, NULL)); /* 365d - 1ns, the N-1 boundary */
    roundtrip(__LINE__, c);
    bw_config_free(c);
    c = bw_config_new();
    CHECK_OK(bw_config_set_slow_call_duration(c, 200 * DAY + 1, NULL));
    roundtrip(__LINE__, c);
    bw_config_free(c);
}

/* The smallest rate the setter accepts (just above 0) must survive the text form too. */
static void test_format_roundtrip_tiny_rate(void)
{
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_set_failure_rate(c, nextafter(0.0, 1.0), NULL));
    roundtrip(__LINE__, c);
    bw_config_free(c);
    c = bw_config_new();
    CHECK_OK(bw_config_set_slow_call_rate(c, 1e-310, NULL));
    roundtrip(__LINE__, c);
    bw_config_free(c);
}

static void test_format_truncation(void)
{
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_parse(c, base_text, NULL));
    char full[FMT_SIZE];
    fmt(c, full);
    int len = (int)strlen(full);
    CHECK(len > 100);
    CHECK_INT(bw_config_format(c, NULL, 0), len); /* size 0: just the length */
    CHECK_RC(bw_config_format(c, NULL, 5), BW_EINVAL);

    char buf[FMT_SIZE];
    size_t sizes[] = {1, 2, 10, (size_t)len - 1, (size_t)len, (size_t)len + 1, (size_t)len + 2};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        memset(buf, '#', sizeof buf);
        CHECK_INT(bw_config_format(c, buf, n), len);
        size_t want = n - 1 < (size_t)len ? n - 1 : (size_t)len; /* bytes of text written */
        CHECK_INT(strlen(buf), want);
        CHECK(strncmp(buf, full, want) == 0);
        CHECK(buf[n] == '#'); /* nothing written past size */
        if (n <= (size_t)len)
            CHECK(buf[n - 1] == '\0');
    }
    /* size 0 with a buffer: nothing written. */
    memset(buf, '#', sizeof buf);
    CHECK_INT(bw_config_format(c, buf, 0), len);
    CHECK(buf[0] == '#');
    /* Exactly enough room: the full text. */
    CHECK_INT(bw_config_format(c, buf, (size_t)len + 1), len);
    CHECK_STR(buf, full);
    bw_config_free(c);
}

/* ---- copy / free ---- */

static void on_nothing(const bw_event *ev, void *user)
{
    (void)ev;
    (void)user;
}

/* Validation that used to be silent or unclear. */
static void test_validation_messages(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    memset(&e, 0, sizeof e);
    CHECK_RC(bw_config_parse(c, "min_calls=99999999999999999999", &e), BW_ERANGE);
    CHECK_STR(e.field, "min_calls");
    CHECK(strstr(e.message, "beyond 64 bits") != NULL);
    CHECK(strstr(e.message, "[1, 1000000000]") != NULL);
    CHECK(strstr(e.message, "9223372036854775807") == NULL);
    CHECK_RC(bw_config_set_store(c, NULL, (bw_store_mode)7, &e), BW_EINVAL);
    CHECK_STR(e.field, "store_mode");
    CHECK_OK(bw_config_set_store(c, NULL, (bw_store_mode)0, &e));        /* no store, no mode */
    CHECK_RC(bw_config_set_listener(c, 0, on_nothing, NULL), BW_EINVAL); /* would receive nothing */
    CHECK_OK(bw_config_set_listener(c, 0, NULL, NULL));                  /* removing one */
    bw_config_free(c);
}

static void test_copy_and_free(void)
{
    bw_config_free(NULL); /* ignored */
    CHECK(bw_config_copy(NULL) == NULL);

    bw_config *a = bw_config_new();
    CHECK_OK(bw_config_parse(a, base_text, NULL));
    bw_config *b = bw_config_copy(a);
    CHECK(b != NULL);
    CHECK(b != a);
    char ta[FMT_SIZE], tb[FMT_SIZE], ta0[FMT_SIZE], tb0[FMT_SIZE];
    fmt(a, ta0);
    fmt(b, tb0);
    CHECK_STR(tb0, ta0); /* equal to the source, non-defaults included */

    /* Changing the source does not change the copy ... */
    CHECK_OK(bw_config_set_min_calls(a, 77, NULL));
    CHECK_OK(bw_config_set_window(a, BW_WINDOW_COUNT, 33, NULL));
    CHECK_OK(bw_config_parse(a, "policy=rate wait_multiplier=3", NULL));
    fmt(b, tb);
    CHECK_STR(tb, tb0);
    /* ... and changing the copy does not change the source. */
    fmt(a, ta);
    CHECK_OK(bw_config_set_failure_rate(b, 0.125, NULL));
    CHECK_OK(bw_config_set_initial_state(b, BW_STATE_FORCED_OPEN, NULL));
    fmt(a, ta0);
    CHECK_STR(ta0, ta);
    CHECK_STR(kv(b, "failure_rate"), "0.125");
    CHECK_STR(kv(a, "failure_rate"), "0.25");

    /* Freeing the source leaves the copy usable. */
    bw_config_free(a);
    CHECK_STR(kv(b, "initial_state"), "forced_open");
    CHECK_STR(kv(b, "min_calls"), "10");
    bw_config *c = bw_config_copy(b);
    bw_config_free(b);
    CHECK_STR(kv(c, "failure_rate"), "0.125");
    bw_config_free(c);
}

/* ---- bw_breaker_new ---- */

static void test_breaker_new_invalid_config(void)
{
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_set_permitted_probes(c, 2, NULL));
    CHECK_OK(bw_config_set_max_concurrent_probes(c, 3, NULL));
    bw_breaker *b = NULL;
    bw_error e;
    err_poison(&e);
    CHECK_RC(bw_breaker_new("svc", c, &b, &e), BW_ERANGE);
    CHECK(b == NULL);
    CHECK_INT(e.code, BW_ERANGE);
    CHECK_STR(e.field, "max_concurrent_probes");
    CHECK_RC(bw_breaker_new("svc", c, &b, NULL), BW_ERANGE);

    CHECK_OK(bw_config_set_max_concurrent_probes(c, 2, NULL));
    CHECK_OK(bw_config_set_wait(c, 10 * S, NULL));
    CHECK_OK(bw_config_set_wait_multiplier(c, 2, NULL));
    CHECK_OK(bw_config_set_wait_max(c, 5 * S, NULL));
    err_poison(&e);
    CHECK_RC(bw_breaker_new("svc", c, &b, &e), BW_ERANGE);
    CHECK_INT(e.code, BW_ERANGE);
    CHECK_STR(e.field, "wait_max");
    CHECK(b == NULL);

    /* Fixed: accepted; the config may then be changed or freed. */
    CHECK_OK(bw_config_set_wait_max(c, 10 * S, NULL));
    b = NULL;
    CHECK_OK(bw_breaker_new("svc", c, &b, &e));
    CHECK(b != NULL);
    CHECK_STR(bw_breaker_name(b), "svc");
    bw_config_free(c);
    bw_breaker_free(b);

    /* NULL config: defaults. */
    b = NULL;
    CHECK_OK(bw_breaker_new("defaults", NULL, &b, NULL));
    CHECK(b != NULL);
    bw_breaker_free(b);
}

static void name_bad(int line, const char *name, const char *what)
{
    bw_breaker *b = NULL;
    bw_error e;
    err_poison(&e);
    int rc = bw_breaker_new(name, NULL, &b, &e);
    if (rc != BW_EINVAL || b != NULL || e.code != BW_EINVAL || strcmp(e.field, "name") != 0 ||
        !strstr(e.message, "name"))
        H_FAIL("line %d: name %s: rc %d (%s), breaker %p, err {%d, \"%s\", \"%s\"}; want BW_EINVAL, field \"name\"",
               line, what, rc, bw_strerror(rc), (void *)b, e.code, e.field, e.message);
    if (rc == BW_OK)
        bw_breaker_free(b);
    b = NULL;
    rc = bw_breaker_new(name, NULL, &b, NULL);
    if (rc != BW_EINVAL)
        H_FAIL("line %d: name %s with err NULL: rc %d, want BW_EINVAL", line, what, rc);
    if (rc == BW_OK)
        bw_breaker_free(b);
}

static void test_breaker_new_names(void)
{
    char name[300];
    name_bad(__LINE__, NULL, "NULL");
    name_bad(__LINE__, "", "empty");
    memset(name, 'a', 256);
    name[256] = 0;
    name_bad(__LINE__, name, "256 bytes");
    memset(name, 'a', 299);
    name[299] = 0;
    name_bad(__LINE__, name, "299 bytes");
    name_bad(__LINE__, "my service", "with a space");
    name_bad(__LINE__, " svc", "leading space");
    name_bad(__LINE__, "svc\x01", "control byte 0x01");
    name_bad(__LINE__, "svc\tx", "tab");
    name_bad(__LINE__, "svc\n", "newline");
    name_bad(__LINE__, "svc\x7f", "DEL");
    name_bad(__LINE__, "caf\xc3\xa9", "UTF-8 non-ASCII");
    name_bad(__LINE__, "\xff", "byte 0xff");

    /* 255 bytes (the maximum) and 1 byte are accepted; the name is kept exactly. */
    bw_breaker *b = NULL;
    memset(name, 'z', 255);
    name[254] = '~'; /* last printable ASCII byte value */
    name[0] = '!';   /* first printable, non-space */
    name[255] = 0;
    bw_error e;
    err_poison(&e);
    CHECK_OK(bw_breaker_new(name, NULL, &b, &e));
    CHECK(err_untouched(&e));
    CHECK(b != NULL);
    if (b) {
        CHECK_STR(bw_breaker_name(b), name);
        CHECK(bw_breaker_name(b) != name); /* a copy */
        bw_breaker_free(b);
    }
    b = NULL;
    CHECK_OK(bw_breaker_new("x", NULL, &b, NULL));
    CHECK(b != NULL);
    if (b)
        CHECK_STR(bw_breaker_name(b), "x");
    bw_breaker_free(b);

    /* out NULL. */
    CHECK_RC(bw_breaker_new("svc", NULL, NULL, NULL), BW_EINVAL);
}

/* ---- bw_config_parse_env ---- */

/* Variables by prefix, any case; unknown knobs and bad values fail all or nothing, naming the variable. */
static void test_parse_env(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    char before[FMT_SIZE], after[FMT_SIZE];
    CHECK_OK(bw_config_parse_env(c, "BWTEST_NONE_", &e)); /* no variable: nothing changes */
    setenv("BWTEST_PAY_FAILURE_RATE", "0.25", 1);
    setenv("BWTEST_PAY_window", "time:30s", 1);
    setenv("BWTEST_PAY_Min_Calls", "7", 1);
    setenv("BWTEST_PAYMENTS", "not mine: no underscore after the prefix", 1);
    setenv("BWTEST_OTHER_MIN_CALLS", "9", 1);
    CHECK_OK(bw_config_parse_env(c, "BWTEST_PAY_", &e));
    CHECK_STR(kv(c, "failure_rate"), "0.25");
    CHECK_STR(kv(c, "window"), "time:30s");
    CHECK_STR(kv(c, "min_calls"), "7");

    /* A malformed value: BW_EPARSE naming the variable; the config is unchanged (all or nothing). */
    setenv("BWTEST_PAY_WAIT", "soon", 1);
    fmt(c, before);
    CHECK_RC(bw_config_parse_env(c, "BWTEST_PAY_", &e), BW_EPARSE);
    CHECK(strstr(e.message, "BWTEST_PAY_WAIT") != NULL);
    CHECK_STR(e.field, "wait");
    fmt(c, after);
    CHECK_STR(after, before);
    /* Out of range: BW_ERANGE, the variable and the range in the message. */
    setenv("BWTEST_PAY_WAIT", "10s", 1);
    setenv("BWTEST_PAY_FAILURE_RATE", "1.5", 1);
    CHECK_RC(bw_config_parse_env(c, "BWTEST_PAY_", &e), BW_ERANGE);
    CHECK(strstr(e.message, "BWTEST_PAY_FAILURE_RATE") != NULL);
    CHECK(strstr(e.message, "(0, 1]") != NULL);
    CHECK_STR(kv(c, "failure_rate"), "0.25");
    setenv("BWTEST_PAY_FAILURE_RATE", "0.25", 1);
    /* A typo is an error, not silence. */
    setenv("BWTEST_PAY_FAILURE_RAT", "0.5", 1);
    CHECK_RC(bw_config_parse_env(c, "BWTEST_PAY_", &e), BW_EPARSE);
    CHECK(strstr(e.message, "BWTEST_PAY_FAILURE_RAT") != NULL && strstr(e.message, "unknown setting") != NULL);
    unsetenv("BWTEST_PAY_FAILURE_RAT");
    CHECK_OK(bw_config_parse_env(c, "BWTEST_PAY_", &e));
    CHECK_STR(kv(c, "wait"), "10s");
    /* Arguments. */
    CHECK_RC(bw_config_parse_env(NULL, "X_", &e), BW_EINVAL);
    CHECK_RC(bw_config_parse_env(c, NULL, &e), BW_EINVAL);
    CHECK_RC(bw_config_parse_env(c, "", &e), BW_EINVAL);
    CHECK_RC(bw_config_parse_env(c, "BWTEST_PAY_WAIT", NULL), BW_OK); /* nothing after the prefix: not a knob */
    bw_config_free(c);
}

/* ---- issue 25: every configuration protects, nothing is silently ignored, messages in the user's words ---- */

/* A fresh config from `text` (which must parse), or NULL after a failed check. */
static bw_config *parsed(int line, const char *text)
{
    bw_config *c = bw_config_new();
    bw_error e;
    if (!c || bw_config_parse(c, text, &e) != BW_OK) {
        H_FAIL("line %d: parse(\"%s\") failed: %s", line, text, c ? e.message : "no config");
        bw_config_free(c);
        return NULL;
    }
    return c;
}

/* `text` parses and validates, and a breaker can be made from it. */
static void valid(int line, const char *text)
{
    bw_config *c = parsed(line, text);
    if (!c)
        return;
    bw_error e;
    err_poison(&e);
    int rc = bw_config_validate(c, &e);
    if (rc != BW_OK)
        H_FAIL("line %d: validate(\"%s\") returned %d (%s): %s", line, text, rc, bw_strerror(rc), e.message);
    bw_breaker *b = NULL;
    rc = bw_breaker_new("svc", c, &b, &e);
    if (rc != BW_OK)
        H_FAIL("line %d: bw_breaker_new(\"%s\") returned %d (%s): %s", line, text, rc, bw_strerror(rc), e.message);
    bw_breaker_free(b);
    bw_config_free(c);
}
#define VALID(text) valid(__LINE__, text)

/*
 * `text` parses, but bw_config_validate and bw_breaker_new refuse it with
 * BW_ERANGE naming `field`, the message holding `a` and `b` (the two fields
 * at odds, or a field and the fix) and fitting its array.
 */
static void refused(int line, const char *text, const char *field, const char *a, const char *b)
{
    bw_config *c = parsed(line, text);
    if (!c)
        return;
    bw_error e;
    err_poison(&e);
    int rc = bw_config_validate(c, &e);
    if (rc != BW_ERANGE || e.code != BW_ERANGE || strcmp(e.field, field) != 0 || !strstr(e.message, a) ||
        !strstr(e.message, b))
        H_FAIL("line %d: validate(\"%s\") = %d {\"%s\", \"%s\"}; want BW_ERANGE, field \"%s\", message naming \"%s\" "
               "and \"%s\"",
               line, text, rc, e.field, e.message, field, a, b);
    if (!memchr(e.message, 0, sizeof e.message))
        H_FAIL("line %d: message not terminated", line);
    bw_breaker *br = NULL;
    err_poison(&e);
    rc = bw_breaker_new("svc", c, &br, &e);
    if (rc != BW_ERANGE || br != NULL || strcmp(e.field, field) != 0)
        H_FAIL("line %d: bw_breaker_new(\"%s\") = %d, field \"%s\"; want BW_ERANGE naming %s", line, text, rc, e.field,
               field);
    bw_breaker_free(br);
    bw_config_free(c);
}
#define REFUSED(text, field, a, b) refused(__LINE__, text, field, a, b)

/*
 * A count window smaller than min_calls could never trip (15 failures in a row
 * stayed CLOSED at a failure rate of 1.0). Left at its default, min_calls
 * follows a smaller count window (resilience4j's clamp); set explicitly above
 * it, the configuration is refused, naming both knobs. Order does not matter.
 */
static void test_min_calls_fits_count_window(void)
{
    bw_config *c = parsed(__LINE__, "window=count:5");
    if (c) {
        CHECK_STR(kv(c, "min_calls"), "5"); /* the default, 10, follows the window */
        CHECK_OK(bw_config_validate(c, NULL));
        bw_breaker *b = NULL;
        CHECK_OK(bw_breaker_new("small", c, &b, NULL));
        if (b) {
            h_calls(b, 4, BW_FAILURE);
            CHECK_STATE(b, BW_STATE_CLOSED);
            h_calls(b, 1, BW_FAILURE); /* the fifth failure fills the window: rate 1.0 */
            CHECK_STATE(b, BW_STATE_OPEN);
            bw_breaker_free(b);
        }
        /* A wider window gets the default back. */
        CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 50, NULL));
        CHECK_STR(kv(c, "min_calls"), "10");
        CHECK_OK(bw_config_set_window(c, BW_WINDOW_TIME, 1, NULL)); /* a time window holds any number of calls */
        CHECK_STR(kv(c, "min_calls"), "10");
        bw_config_free(c);
    }
    REFUSED("window=count:5 min_calls=20", "min_calls", "min_calls=20", "window=count:5");
    REFUSED("min_calls=20 window=count:5", "min_calls", "min_calls=20", "window=count:5");
    REFUSED("min_calls=10 window=count:9", "min_calls", "min_calls=10", "window=count:9"); /* explicit 10 too */
    VALID("window=count:5 min_calls=5");
    VALID("window=count:5 min_calls=2");
    VALID("window=time:1s min_calls=1000");
    VALID("window=count:1");
    /* The C setters, in either order. */
    c = bw_config_new();
    CHECK_OK(bw_config_set_min_calls(c, 7, NULL));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 6, NULL));
    bw_error e;
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "min_calls");
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 7, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    bw_config_free(c);
    /* A formatted config parses back to one that validates (min_calls written as it applies). */
    c = parsed(__LINE__, "window=count:3");
    if (c) {
        char text[FMT_SIZE];
        fmt(c, text);
        VALID(text);
        bw_config_free(c);
    }
}

/*
 * A consecutive round closes after success_threshold successes in a row, but
 * a round ends undecided after 1,000,000 probes: a larger threshold could
 * never close. half_open_capacity above 1,000,000 admitted no more than that.
 * Both now take [1, 1000000], as permitted_probes and max_concurrent_probes do.
 */
static void test_probe_counts_can_complete(void)
{
    const char *r = "[1, 1000000]";
    I64_OK(bw_config_set_success_threshold, "success_threshold", 1000000, "1000000");
    I64_BAD(bw_config_set_success_threshold, "success_threshold", 1000001, r);
    I64_BAD(bw_config_set_success_threshold, "success_threshold", 1000000000, r);
    I64_OK(bw_config_set_half_open_capacity, "half_open_capacity", 1000000, "1000000");
    I64_BAD(bw_config_set_half_open_capacity, "half_open_capacity", 1000001, r);
    PARSE_VALUE("policy=consecutive success_threshold=1000001", BW_ERANGE, "success_threshold", 19, 37, r);
}

/* A knob of the other trip policy is read by nothing: refused, naming it and the policy. */
static void test_other_policy_knobs_refused(void)
{
    static const char *const rate_only[][2] = {
        {"failure_rate=0.3", "failure_rate"},
        {"slow_call_rate=0.5", "slow_call_rate"},
        {"min_calls=20", "min_calls"},
        {"window=time:30s", "window"},
        {"window=count:50", "window"},
        {"permitted_probes=3", "permitted_probes"},
        {"max_concurrent_probes=1 permitted_probes=4", "permitted_probes"},
        {"max_concurrent_probes=2", "max_concurrent_probes"},
    };
    char text[200];
    for (size_t i = 0; i < sizeof rate_only / sizeof rate_only[0]; i++) {
        snprintf(text, sizeof text, "policy=consecutive %s", rate_only[i][0]);
        refused(__LINE__, text, rate_only[i][1], rate_only[i][1], "policy=rate");
        snprintf(text, sizeof text, "%s policy=consecutive", rate_only[i][0]); /* order does not matter */
        refused(__LINE__, text, rate_only[i][1], "policy=consecutive", "policy=rate");
        snprintf(text, sizeof text, "policy=rate %s", rate_only[i][0]);
        valid(__LINE__, text);
    }
    static const char *const consecutive_only[][2] = {
        {"error_threshold=3", "error_threshold"},
        {"success_threshold=1", "success_threshold"},
        {"half_open_capacity=2", "half_open_capacity"},
    };
    for (size_t i = 0; i < sizeof consecutive_only / sizeof consecutive_only[0]; i++) {
        snprintf(text, sizeof text, "%s", consecutive_only[i][0]); /* rate: the default policy */
        refused(__LINE__, text, consecutive_only[i][1], consecutive_only[i][1], "policy=consecutive");
        snprintf(text, sizeof text, "%s policy=rate", consecutive_only[i][0]);
        refused(__LINE__, text, consecutive_only[i][1], "policy=rate", "policy=consecutive");
        snprintf(text, sizeof text, "policy=consecutive %s", consecutive_only[i][0]);
        valid(__LINE__, text);
    }
    /* A value equal to the default changes nothing, so it is no mistake: the formatted text of either policy
       (which writes every knob) makes a breaker again. */
    VALID("policy=consecutive failure_rate=0.5 window=count:100 min_calls=10 permitted_probes=10");
    VALID("policy=rate error_threshold=5 success_threshold=2 half_open_capacity=1");
    static const char *const shapes[] = {"policy=consecutive error_threshold=3", "policy=rate failure_rate=0.3",
                                         "policy=rate window=count:5"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        bw_config *c = parsed(__LINE__, shapes[i]);
        if (!c)
            continue;
        char f[FMT_SIZE];
        fmt(c, f);
        valid(__LINE__, f);
        bw_config_free(c);
    }
    /* The C setters, in either order. */
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_set_error_threshold(c, 3, NULL));
    CHECK_RC(bw_config_validate(c, NULL), BW_ERANGE);
    CHECK_OK(bw_config_set_policy(c, BW_POLICY_CONSECUTIVE, NULL));
    CHECK_OK(bw_config_validate(c, NULL));
    CHECK_OK(bw_config_set_failure_rate(c, 0.2, NULL));
    bw_error e;
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "failure_rate");
    bw_config_free(c);
}

/* slow_call_rate reads slow calls; with slow_call_duration=off there are none. */
static void test_slow_call_rate_needs_slow_calls(void)
{
    REFUSED("slow_call_duration=off slow_call_rate=0.5", "slow_call_rate", "slow_call_rate=0.5",
            "slow_call_duration=off");
    REFUSED("slow_call_rate=0.5 slow_call_duration=0", "slow_call_rate", "slow_call_rate=0.5",
            "slow_call_duration=off");
    VALID("slow_call_duration=off");                  /* slow_call_rate at its default */
    VALID("slow_call_duration=off slow_call_rate=1"); /* ... or set to it */
    VALID("slow_call_duration=2s slow_call_rate=0.5");
    VALID("policy=consecutive slow_call_duration=2s"); /* the slow flag of CALL events */
}

/* A cap on a delay that never grows caps nothing. */
static void test_caps_need_growth(void)
{
    REFUSED("wait=10s wait_max=5m", "wait_max", "wait_max=5m", "wait_multiplier=1");
    REFUSED("wait_max=5m wait=10s wait_multiplier=1", "wait_max", "wait_max=5m", "wait_multiplier=1");
    VALID("wait=10s wait_multiplier=2 wait_max=5m");
    VALID("wait=10s wait_multiplier=1 wait_max=none");
    REFUSED("store_retry_multiplier=1 store_retry_max=2m", "store_retry_max", "store_retry_max=2m",
            "store_retry_multiplier=1");
    REFUSED("store_retry_multiplier=1 store_retry_max=none", "store_retry_max", "store_retry_max=none",
            "store_retry_multiplier=1");
    VALID("store_retry_multiplier=1");                    /* store_retry_max at its default */
    VALID("store_retry_multiplier=1 store_retry_max=1m"); /* ... or set to it */
    VALID("store_retry_multiplier=3 store_retry_max=2m");
}

/*
 * What is not refused: a knob that applies whenever the breaker has a part
 * that is not written in the text (keyed circuits, a store) — a
 * configuration is a template for both. config.h says why.
 */
static void test_template_knobs_allowed(void)
{
    VALID("keyed_maxsize=10 keyed_idle=1m keyed_history_idle=2h");
    VALID("store_ttl=2d store_poll=100ms store_queue=16 store_retry=1s store_close_timeout=1s");
}

/* Durations in messages: in the unit the user wrote (text) or in human units (C), never "-1 ns". */
static void test_duration_messages(void)
{
    bw_error e;
    bw_config *c = bw_config_new();
    err_poison(&e);
    CHECK_RC(bw_config_parse(c, "wait=-5m", &e), BW_ERANGE);
    CHECK(strstr(e.message, "got '-5m'") != NULL);
    CHECK(strstr(e.message, "(0, 365d]") != NULL);
    CHECK(strstr(e.message, " ns") == NULL && strstr(e.message, "-1") == NULL);
    CHECK_RC(bw_config_parse(c, "wait_max=1000000d", &e), BW_ERANGE);
    CHECK(strstr(e.message, "got '1000000d'") != NULL);
    CHECK(strstr(e.message, "9223372036854775807") == NULL);
    CHECK_RC(bw_config_parse(c, "window=time:31d", &e), BW_ERANGE);
    CHECK(strstr(e.message, "got 'time:31d'") != NULL);
    /* The C setters: the value in the largest unit that is exact. */
    CHECK_RC(bw_config_set_wait(c, -5 * 60 * S, &e), BW_ERANGE);
    CHECK(strstr(e.message, "got -5m") != NULL);
    CHECK(strstr(e.message, "nanoseconds") == NULL && strstr(e.message, " ns") == NULL);
    CHECK_RC(bw_config_set_slow_call_duration(c, 366 * DAY, &e), BW_ERANGE);
    CHECK(strstr(e.message, "got 366d") != NULL);
    CHECK_RC(bw_config_set_window(c, BW_WINDOW_TIME, 2592001, &e), BW_ERANGE);
    CHECK(strstr(e.message, "got time:2592001s") != NULL);
    CHECK(strstr(e.message, "(1s to 30d)") != NULL);
    CHECK_RC(bw_config_set_window(c, BW_WINDOW_COUNT, 0, &e), BW_ERANGE);
    CHECK(strstr(e.message, "got count:0") != NULL);
    /* Cross-field bounds. */
    CHECK_OK(bw_config_parse(c, "wait=1h wait_multiplier=2 wait_max=30m", NULL));
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "wait_max");
    CHECK(strstr(e.message, "1h") != NULL && strstr(e.message, "30m") != NULL);
    CHECK(strstr(e.message, " ns") == NULL);
    bw_config_free(c);
    c = bw_config_new();
    CHECK_OK(bw_config_parse(c, "store_retry=2m store_retry_max=90s", NULL));
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK(strstr(e.message, "2m") != NULL && strstr(e.message, "90s") != NULL && strstr(e.message, " ns") == NULL);
    bw_config_free(c);
    c = bw_config_new();
    CHECK_OK(bw_config_parse(c, "keyed_idle=2h keyed_history_idle=1h", NULL));
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK(strstr(e.message, "2h") != NULL && strstr(e.message, "1h") != NULL && strstr(e.message, " ns") == NULL);
    bw_config_free(c);
}

/* An unknown key: the knob another library's name means, or the nearest knob name (a typo). */
static void test_unknown_key_suggestions(void)
{
    static const char *const cases[][2] = {
        {"failureRateThreshold=50", "did you mean failure_rate?"},    /* resilience4j */
        {"slidingWindowSize=100", "did you mean window?"},            /* resilience4j */
        {"waitDurationInOpenState=60s", "did you mean wait?"},        /* resilience4j */
        {"minimumNumberOfCalls=5", "did you mean min_calls?"},        /* resilience4j */
        {"failure_rate_threshold=0.5", "did you mean failure_rate?"}, /* interlock */
        {"FailureRatio=0.1", "did you mean failure_rate?"},           /* Polly */
        {"BreakDuration=5s", "did you mean wait?"},                   /* Polly */
        {"MinimumThroughput=100", "did you mean min_calls?"},         /* Polly */
        {"failure_threshold=5", "did you mean error_threshold?"},     /* circuitbreaker */
        {"recovery_timeout=30s", "did you mean wait?"},               /* circuitbreaker */
        {"fail_max=5", "did you mean error_threshold?"},              /* pybreaker */
        {"reset_timeout=30s", "did you mean wait?"},                  /* pybreaker, grelmicro */
        {"MaxRequests=1", "did you mean permitted_probes?"},          /* gobreaker */
        {"failure_rat=0.5", "did you mean failure_rate?"},            /* typos */
        {"windw=count:5", "did you mean window?"},
        {"min_call=5", "did you mean min_calls?"},
        {"wiat=5s", "did you mean wait?"},
        {"Min_Calls=5", "did you mean min_calls?"},
        {"slow-call-duration=2s", "did you mean slow_call_duration?"},
        {"store_tll=1d", "did you mean store_ttl?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bw_config *c = bw_config_new();
        bw_error e;
        err_poison(&e);
        int rc = bw_config_parse(c, cases[i][0], &e);
        const char *eq = strchr(cases[i][0], '=');
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - cases[i][0]), cases[i][0]);
        if (rc != BW_EPARSE || strcmp(e.field, key) != 0 || !strstr(e.message, cases[i][1]) ||
            !strstr(e.message, "unknown setting") || msg_offset(e.message) != 0)
            H_FAIL("parse(\"%s\") = %d {\"%s\", \"%s\"}; want BW_EPARSE, field \"%s\", \"%s\"", cases[i][0], rc,
                   e.field, e.message, key, cases[i][1]);
        bw_config_free(c);
    }
    /* No knob is near: no guess. */
    static const char *const far[] = {"bogus=1", "colour=blue", "x=1"};
    for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
        bw_config *c = bw_config_new();
        bw_error e;
        CHECK_RC(bw_config_parse(c, far[i], &e), BW_EPARSE);
        CHECK(strstr(e.message, "did you mean") == NULL);
        bw_config_free(c);
    }
    /* A percentage name says the unit changes. */
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_RC(bw_config_parse(c, "failureRateThreshold=50", &e), BW_EPARSE);
    CHECK(strstr(e.message, "0.5") != NULL);
    /* The longest key still fits, the advice kept. */
    char text[300];
    memset(text, 'q', sizeof text);
    memcpy(text, "failure_ratee", 13);
    snprintf(text + 240, sizeof text - 240, "=1");
    CHECK_RC(bw_config_parse(c, text, &e), BW_EPARSE);
    CHECK(memchr(e.message, 0, sizeof e.message) != NULL);
    /* In the environment: the variable to set. */
    setenv("BWTEST_SUG_FAILURE_RAT", "0.5", 1);
    CHECK_RC(bw_config_parse_env(c, "BWTEST_SUG_", &e), BW_EPARSE);
    CHECK(strstr(e.message, "did you mean BWTEST_SUG_FAILURE_RATE?") != NULL);
    unsetenv("BWTEST_SUG_FAILURE_RAT");
    setenv("BWTEST_SUG_WAITDURATIONINOPENSTATE", "60s", 1);
    CHECK_RC(bw_config_parse_env(c, "BWTEST_SUG_", &e), BW_EPARSE);
    CHECK(strstr(e.message, "did you mean BWTEST_SUG_WAIT?") != NULL);
    unsetenv("BWTEST_SUG_WAITDURATIONINOPENSTATE");
    bw_config_free(c);
}

/*
 * A bare number was seconds in configuration text (slow_call_duration=2000
 * silently meant 33 minutes) and in store URLs: now a duration needs its
 * unit, except 0, which is 0 in any unit. Whole-number knobs stay bare.
 */
static void test_bare_durations_refused(void)
{
    PARSE_VALUE("slow_call_duration=2000", BW_EPARSE, "slow_call_duration", 0, 19, "2000ms or 2000s");
    PARSE_VALUE("wait=30", BW_EPARSE, "wait", 0, 5, "30ms or 30s");
    PARSE_VALUE("wait=1.5", BW_EPARSE, "wait", 0, 5, "1.5ms or 1.5s");
    PARSE_VALUE("wait=-5", BW_EPARSE, "wait", 0, 5, "unit");
    PARSE_VALUE("store_ttl=86400", BW_EPARSE, "store_ttl", 0, 10, "86400ms or 86400s");
    PARSE_VALUE("window=time:30", BW_EPARSE, "window", 0, 7, "time:30s or time:30m");
    PARSE_OK("slow_call_duration=0", "slow_call_duration", "off");
    PARSE_OK("wait_max=0.0", "wait_max", "none");
    PARSE_OK("min_calls=20", "min_calls", "20"); /* counts stay bare */
    bw_config *c = bw_config_new();
    bw_error e;
    setenv("BWTEST_BARE_WAIT", "30", 1);
    CHECK_RC(bw_config_parse_env(c, "BWTEST_BARE_", &e), BW_EPARSE);
    CHECK(strstr(e.message, "30ms or 30s") != NULL);
    unsetenv("BWTEST_BARE_WAIT");
    bw_config_free(c);
}

/* bw_duration_parse: the configuration text's durations one at a time, a bare number refused or counted in a unit. */
static void test_duration_parse(void)
{
    static const struct {
        const char *text;
        int64_t bare_unit, ns;
    } ok[] = {{"250ms", 0, 250 * BW_NS_PER_MS},
              {"1.5s", 0, 1500 * BW_NS_PER_MS},
              {"2m", 0, 120 * BW_NS_PER_S},
              {"1.005s", 0, 1005 * BW_NS_PER_MS},
              {"0.1ns", 0, 1}, /* a positive value below 1 ns is 1 ns, not off */
              {"365d", 0, 365 * 86400 * BW_NS_PER_S},
              {"off", 0, 0},
              {"none", BW_NS_PER_S, 0},
              {"0", 0, 0},
              {"30", BW_NS_PER_S, 30 * BW_NS_PER_S},
              {"1.5", BW_NS_PER_S, 1500 * BW_NS_PER_MS},
              {"30", BW_NS_PER_MS, 30 * BW_NS_PER_MS},
              {"30ms", BW_NS_PER_S, 30 * BW_NS_PER_MS}}; /* a unit written wins over bare_unit */
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t ns = -7;
        CHECK_OK(bw_duration_parse(ok[i].text, ok[i].bare_unit, &ns, NULL));
        CHECK_INT(ns, ok[i].ns);
    }
    static const struct {
        const char *text;
        int64_t bare_unit;
        int code;
        const char *says;
    } bad[] = {{"30", 0, BW_EPARSE, "30ms or 30s?"},
               {"1e3s", BW_NS_PER_S, BW_EPARSE, "such as 1.5s"},
               {" 5s", BW_NS_PER_S, BW_EPARSE, "' 5s'"},
               {"5 s", BW_NS_PER_S, BW_EPARSE, "'5 s'"},
               {"5sec", 0, BW_EPARSE, "'5sec'"},
               {"", BW_NS_PER_S, BW_EPARSE, "unit"},
               {"-5s", 0, BW_ERANGE, "[0, 365d], got '-5s'"},
               {"366d", 0, BW_ERANGE, "[0, 365d], got '366d'"},
               {"99999999999999999999999d", BW_NS_PER_S, BW_ERANGE, "[0, 365d]"},
               {"400", 86400 * BW_NS_PER_S, BW_ERANGE, "[0, 365d], got '400'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ns = -7;
        bw_error e = {0};
        CHECK_RC(bw_duration_parse(bad[i].text, bad[i].bare_unit, &ns, &e), bad[i].code);
        CHECK_INT(e.code, bad[i].code);
        CHECK_STR(e.field, "duration");
        CHECK(strstr(e.message, bad[i].says) != NULL);
        CHECK_INT(ns, -7); /* untouched on error */
    }
    int64_t ns = 0;
    CHECK_RC(bw_duration_parse(NULL, 0, &ns, NULL), BW_EINVAL);
    CHECK_RC(bw_duration_parse("1s", 0, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_duration_parse("1s", -1, &ns, NULL), BW_EINVAL);
}

int main(void)
{
    RUN(test_defaults);
    RUN(test_set_failure_rate);
    RUN(test_set_slow_call_rate);
    RUN(test_set_wait_multiplier);
    RUN(test_set_counts);
    RUN(test_set_probes);
    RUN(test_set_window);
    RUN(test_set_durations);
    RUN(test_set_policy);
    RUN(test_set_auto_transition);
    RUN(test_set_unreachable_counts);
    RUN(test_set_initial_state);
    RUN(test_null_config);
    RUN(test_validate_probes);
    RUN(test_validate_half_open_limit);
    RUN(test_validate_wait_max);
    RUN(test_parse_example);
    RUN(test_parse_each_key);
    RUN(test_parse_durations);
    RUN(test_parse_booleans);
    RUN(test_parse_syntax_errors);
    RUN(test_parse_value_errors);
    RUN(test_parse_range_errors);
    RUN(test_parse_range_errors_large_and_negative);
    RUN(test_parse_initial_state_open);
    RUN(test_parse_all_or_nothing);
    RUN(test_parse_whitespace);
    RUN(test_parse_env);
    RUN(test_format_roundtrip);
    RUN(test_format_roundtrip_ns_precision);
    RUN(test_format_roundtrip_tiny_rate);
    RUN(test_format_truncation);
    RUN(test_validation_messages);
    RUN(test_copy_and_free);
    RUN(test_breaker_new_invalid_config);
    RUN(test_breaker_new_names);
    RUN(test_min_calls_fits_count_window);
    RUN(test_probe_counts_can_complete);
    RUN(test_other_policy_knobs_refused);
    RUN(test_slow_call_rate_needs_slow_calls);
    RUN(test_caps_need_growth);
    RUN(test_template_knobs_allowed);
    RUN(test_duration_messages);
    RUN(test_unknown_key_suggestions);
    RUN(test_bare_durations_refused);
    RUN(test_duration_parse);
    return TEST_SUMMARY();
}
