/*
 * config.c — the configuration object: defaults, typed setters with range checks,
 * the cross-field validation, and the text form (parse and format).
 *
 * Design notes: one table of knobs drives the text parser, so every text key goes
 * through the very setter a C caller would use and the two can never disagree on
 * a range. Parsing works on a copy and commits only when the whole text is good.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/duration.h"
#include "base/error.h"
#include "core/config.h"

#define DAY_NS (86400 * BW_NS_PER_S)
#define MAX_COUNT INT64_C(1000000000)
#define MAX_WINDOW_CALLS INT64_C(1000000)
#define MAX_WINDOW_SECONDS ((int64_t)BW__WINDOW_SECONDS_MAX) /* 30 days (machine/window.h) */
#define MAX_PROBES ((int64_t)BW__PROBES_MAX)

static const bw_config defaults = {
    .m =
        {
            .policy = BW_POLICY_RATE,
            .window_kind = BW_WINDOW_COUNT,
            .initial_state = BW_STATE_CLOSED,
            .window_size = 100,
            .min_calls = 10,
            .permitted = 10,
            .max_concurrent = 1,
            .error_threshold = 5,
            .success_threshold = 2,
            .half_open_capacity = 1,
            .failure_rate = 0.5,
            .slow_rate = 1.0,
            .wait_multiplier = 1.0,
            .wait = 0, /* policy default */
            .wait_max = 0,
            .max_wait_ho = 60 * BW_NS_PER_S,
        },
    .slow_ns = 60 * BW_NS_PER_S,
    .counters = 1,
    .keyed_max = 1024,
    .keyed_limit = 0,
    .keyed_idle = 300 * BW_NS_PER_S,
    .keyed_hidle = 3600 * BW_NS_PER_S,
    .store_ttl = DAY_NS,
    .store_poll = BW_NS_PER_S,
    .store_retry = 5 * BW_NS_PER_S,
    .store_retry_max = 60 * BW_NS_PER_S,
    .store_close_timeout = 5 * BW_NS_PER_S,
    .store_retry_multiplier = 2.0,
    .store_retry_jitter = 0.2,
    .store_queue = 128,
    .store_quorum = 1,
};

bw_config *bw_config_new(void)
{
    bw_config *c = malloc(sizeof *c);
    if (c)
        *c = defaults;
    return c;
}

bw_config *bw_config_copy(const bw_config *src)
{
    if (!src)
        return NULL;
    bw_config *c = malloc(sizeof *c);
    if (c)
        *c = *src;
    return c;
}

void bw_config_free(bw_config *cfg)
{
    free(cfg);
}

int64_t bw__config_wait(const bw_config *cfg)
{
    if (cfg->m.wait)
        return cfg->m.wait;
    return cfg->m.policy == BW_POLICY_CONSECUTIVE ? 30 * BW_NS_PER_S : 60 * BW_NS_PER_S;
}

/* ---- typed setters: each is a range check and a store ---- */

static int null_cfg(bw_error *err)
{
    return bw__fail(err, BW_EINVAL, "", "config is NULL");
}

/* A rate in (0, 1]; the negated test also rejects NaN. */
static int set_rate(bw_config *cfg, const char *field, double v, double *dst, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    if (!(v > 0.0 && v <= 1.0))
        return bw__fail(err, BW_ERANGE, field, "%s must be in (0, 1], got %g", field, v);
    *dst = v;
    return BW_OK;
}

/* A whole number in [lo, hi]. */
static int set_range(bw_config *cfg, const char *field, int64_t v, int64_t lo, int64_t hi, uint32_t *dst, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    if (v < lo || v > hi)
        return bw__fail(err, BW_ERANGE, field, "%s must be in [%" PRId64 ", %" PRId64 "], got %" PRId64, field, lo, hi,
                        v);
    *dst = (uint32_t)v;
    return BW_OK;
}

/* A whole number in [1, hi]. */
static int set_count(bw_config *cfg, const char *field, int64_t v, int64_t hi, uint32_t *dst, bw_error *err)
{
    return set_range(cfg, field, v, 1, hi, dst, err);
}

/* A duration in (0, 365d], or 0 where `zero_ok` (meaning off / none). */
static int set_duration(bw_config *cfg, const char *field, int64_t ns, int zero_ok, int64_t *dst, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    int rc = bw__check_duration(field, ns, zero_ok, err);
    if (rc == BW_OK)
        *dst = ns;
    return rc;
}

/* A double in [lo, hi]; the negated test also rejects NaN. */
static int set_real(bw_config *cfg, const char *field, double v, double lo, double hi, double *dst, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    if (!(v >= lo && v <= hi))
        return bw__fail(err, BW_ERANGE, field, "%s must be in [%g, %g], got %g", field, lo, hi, v);
    *dst = v;
    return BW_OK;
}

/* `cfg ? &cfg->member : NULL`, so that a NULL cfg reaches the helper's check. */
#define FIELD(member) (cfg ? &cfg->member : NULL)

int bw_config_set_policy(bw_config *cfg, bw_policy policy, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    if (policy != BW_POLICY_RATE && policy != BW_POLICY_CONSECUTIVE)
        return bw__fail(err, BW_EINVAL, "policy", "policy must be rate or consecutive, got %d", (int)policy);
    cfg->m.policy = (uint8_t)policy;
    return BW_OK;
}

int bw_config_set_failure_rate(bw_config *cfg, double rate, bw_error *err)
{
    return set_rate(cfg, "failure_rate", rate, FIELD(m.failure_rate), err);
}

int bw_config_set_slow_call_rate(bw_config *cfg, double rate, bw_error *err)
{
    return set_rate(cfg, "slow_call_rate", rate, FIELD(m.slow_rate), err);
}

int bw_config_set_slow_call_duration(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "slow_call_duration", ns, 1, FIELD(slow_ns), err);
}

int bw_config_set_min_calls(bw_config *cfg, int64_t calls, bw_error *err)
{
    return set_count(cfg, "min_calls", calls, MAX_COUNT, FIELD(m.min_calls), err);
}

int bw_config_set_window(bw_config *cfg, bw_window_kind kind, int64_t size, bw_error *err)
{
    if (cfg && kind != BW_WINDOW_COUNT && kind != BW_WINDOW_TIME)
        return bw__fail(err, BW_EINVAL, "window", "window kind must be count or time, got %d", (int)kind);
    int rc = set_count(cfg, "window", size, kind == BW_WINDOW_COUNT ? MAX_WINDOW_CALLS : MAX_WINDOW_SECONDS,
                       FIELD(m.window_size), err);
    if (rc == BW_OK)
        cfg->m.window_kind = (uint8_t)kind;
    return rc;
}

int bw_config_set_permitted_probes(bw_config *cfg, int64_t probes, bw_error *err)
{
    return set_count(cfg, "permitted_probes", probes, MAX_PROBES, FIELD(m.permitted), err);
}

int bw_config_set_max_concurrent_probes(bw_config *cfg, int64_t probes, bw_error *err)
{
    return set_count(cfg, "max_concurrent_probes", probes, MAX_PROBES, FIELD(m.max_concurrent), err);
}

int bw_config_set_wait(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "wait", ns, 0, FIELD(m.wait), err);
}

int bw_config_set_wait_multiplier(bw_config *cfg, double multiplier, bw_error *err)
{
    return set_real(cfg, "wait_multiplier", multiplier, 1.0, 1000.0, FIELD(m.wait_multiplier), err);
}

int bw_config_set_wait_max(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "wait_max", ns, 1, FIELD(m.wait_max), err);
}

int bw_config_set_max_wait_in_half_open(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "max_wait_in_half_open", ns, 1, FIELD(m.max_wait_ho), err);
}

int bw_config_set_auto_transition(bw_config *cfg, int enabled, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    cfg->auto_transition = enabled != 0;
    return BW_OK;
}

int bw_config_set_counters(bw_config *cfg, int enabled, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    cfg->counters = enabled != 0;
    return BW_OK;
}

int bw_config_set_unreachable_counts(bw_config *cfg, int counts, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    cfg->m.ignore_unreachable = counts == 0;
    return BW_OK;
}

int bw_config_set_initial_state(bw_config *cfg, bw_state state, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    if ((unsigned)state > BW_STATE_METRICS_ONLY)
        return bw__fail(err, BW_EINVAL, "initial_state", "initial_state must be a bw_state, got %d", (int)state);
    if (state == BW_STATE_OPEN || state == BW_STATE_HALF_OPEN)
        return bw__fail(err, BW_ERANGE, "initial_state",
                        "initial_state must be one of closed, forced_open, disabled, metrics_only, got %s",
                        bw_state_name(state));
    cfg->m.initial_state = (uint8_t)state;
    return BW_OK;
}

int bw_config_set_error_threshold(bw_config *cfg, int64_t count, bw_error *err)
{
    return set_count(cfg, "error_threshold", count, MAX_COUNT, FIELD(m.error_threshold), err);
}

int bw_config_set_success_threshold(bw_config *cfg, int64_t count, bw_error *err)
{
    return set_count(cfg, "success_threshold", count, MAX_COUNT, FIELD(m.success_threshold), err);
}

int bw_config_set_half_open_capacity(bw_config *cfg, int64_t count, bw_error *err)
{
    return set_count(cfg, "half_open_capacity", count, MAX_COUNT, FIELD(m.half_open_capacity), err);
}

int bw_config_set_keyed_maxsize(bw_config *cfg, int64_t circuits, bw_error *err)
{
    return set_range(cfg, "keyed_maxsize", circuits, 0, MAX_COUNT, FIELD(keyed_max), err);
}

int bw_config_set_keyed_limit(bw_config *cfg, int64_t circuits, bw_error *err)
{
    return set_range(cfg, "keyed_limit", circuits, 0, MAX_COUNT, FIELD(keyed_limit), err);
}

int bw_config_set_keyed_idle(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "keyed_idle", ns, 1, FIELD(keyed_idle), err);
}

int bw_config_set_keyed_history_idle(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "keyed_history_idle", ns, 0, FIELD(keyed_hidle), err);
}

int bw_config_set_store(bw_config *cfg, bw_store *store, bw_store_mode mode, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    if (mode != BW_STORE_COORDINATED && mode != BW_STORE_STORED && !(store == NULL && mode == 0))
        return bw__fail(err, BW_EINVAL, "store_mode",
                        "store mode must be BW_STORE_COORDINATED or BW_STORE_STORED (0 only with a NULL store), "
                        "got %d",
                        (int)mode);
    cfg->store = store;
    cfg->store_mode = store ? (int)mode : 0;
    return BW_OK;
}

int bw_config_set_store_ttl(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "store_ttl", ns, 0, FIELD(store_ttl), err);
}

int bw_config_set_store_poll(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "store_poll", ns, 0, FIELD(store_poll), err);
}

int bw_config_set_store_queue(bw_config *cfg, int64_t writes, bw_error *err)
{
    return set_count(cfg, "store_queue", writes, 1000000, FIELD(store_queue), err);
}

int bw_config_set_store_quorum(bw_config *cfg, int64_t instances, bw_error *err)
{
    return set_count(cfg, "store_quorum", instances, BW_STORE_QUORUM_MAX, FIELD(store_quorum), err);
}

int bw_config_set_store_retry(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "store_retry", ns, 0, FIELD(store_retry), err);
}

int bw_config_set_store_retry_multiplier(bw_config *cfg, double multiplier, bw_error *err)
{
    return set_real(cfg, "store_retry_multiplier", multiplier, 1.0, 1000.0, FIELD(store_retry_multiplier), err);
}

int bw_config_set_store_retry_max(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "store_retry_max", ns, 1, FIELD(store_retry_max), err);
}

int bw_config_set_store_retry_jitter(bw_config *cfg, double jitter, bw_error *err)
{
    return set_real(cfg, "store_retry_jitter", jitter, 0.0, 1.0, FIELD(store_retry_jitter), err);
}

int bw_config_set_store_close_timeout(bw_config *cfg, int64_t ns, bw_error *err)
{
    return set_duration(cfg, "store_close_timeout", ns, 1, FIELD(store_close_timeout), err);
}

int bw_config_set_clock(bw_config *cfg, bw_clock *clock)
{
    if (!cfg)
        return BW_EINVAL;
    cfg->clock = clock;
    return BW_OK;
}

int bw_config_set_listener(bw_config *cfg, unsigned mask, bw_listener_cb fn, void *user)
{
    if (!cfg || (fn && mask == 0))
        return BW_EINVAL; /* a listener that wants no event is a mistake: remove it with fn NULL */
    cfg->listener = fn;
    cfg->listener_mask = fn ? mask : 0;
    cfg->listener_user = user;
    return BW_OK;
}

int bw_config_set_classifier(bw_config *cfg, bw_classifier_cb fn, void *user)
{
    if (!cfg)
        return BW_EINVAL;
    cfg->classifier = fn;
    cfg->classifier_user = user;
    return BW_OK;
}

int bw_config_validate(const bw_config *cfg, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    if (cfg->m.max_concurrent > cfg->m.permitted)
        return bw__fail(err, BW_ERANGE, "max_concurrent_probes",
                        "max_concurrent_probes must be in [1, permitted_probes = %u], got %u", cfg->m.permitted,
                        cfg->m.max_concurrent);
    int64_t wait = bw__config_wait(cfg);
    if (cfg->m.wait_max != 0 && cfg->m.wait_max < wait)
        return bw__fail(err, BW_ERANGE, "wait_max",
                        "wait_max must be none or in [wait = %" PRId64 " ns, 365d], got %" PRId64 " ns", wait,
                        cfg->m.wait_max);
    if (cfg->keyed_max == 0 && cfg->keyed_limit != 0)
        return bw__fail(err, BW_ERANGE, "keyed_limit",
                        "keyed_limit must be 0 when keyed_maxsize is 0 (unbounded), got %u", cfg->keyed_limit);
    if (cfg->keyed_limit != 0 && cfg->keyed_limit < cfg->keyed_max)
        return bw__fail(err, BW_ERANGE, "keyed_limit",
                        "keyed_limit must be 0 (twice keyed_maxsize) or in [keyed_maxsize = %u, %" PRId64 "], got %u",
                        cfg->keyed_max, MAX_COUNT, cfg->keyed_limit);
    if (cfg->store_retry_max != 0 && cfg->store_retry_max < cfg->store_retry)
        return bw__fail(err, BW_ERANGE, "store_retry_max",
                        "store_retry_max must be none or in [store_retry = %" PRId64 " ns, 365d], got %" PRId64 " ns",
                        cfg->store_retry, cfg->store_retry_max);
    if (cfg->store && cfg->m.max_wait_ho == 0)
        return bw__fail(err, BW_ERANGE, "max_wait_in_half_open",
                        "max_wait_in_half_open must not be off with a store: it is what expires a probe that never "
                        "comes back");
    if (cfg->store_quorum > 1 && (!cfg->store || cfg->store_mode != BW_STORE_COORDINATED))
        return bw__fail(err, BW_ERANGE, "store_quorum",
                        "store_quorum above 1 needs a store in coordinated mode (a quorum counts the local trips of "
                        "instances sharing one circuit), got %u",
                        cfg->store_quorum);
    if (cfg->keyed_hidle < cfg->keyed_idle)
        return bw__fail(err, BW_ERANGE, "keyed_history_idle",
                        "keyed_history_idle must be in [keyed_idle = %" PRId64 " ns, 365d], got %" PRId64 " ns",
                        cfg->keyed_idle, cfg->keyed_hidle);
    return BW_OK;
}

/* ---- text form ---- */

/* A whole number as the setters take it: one beyond int64 saturates, so that the setter reports the range. */
static int parse_int(const char *v, int64_t *out)
{
    return bw__parse_int(v, out) < 0 ? -1 : 0;
}

/* A number; the setter rejects NaN, infinities (overflow) and ranges. */
static int parse_double(const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || isspace((unsigned char)*v))
        return -1;
    *out = x; /* a subnormal result is still a number */
    return 0;
}

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"true", "on", "yes", "1"}, *const no[] = {"false", "off", "no", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

typedef enum { K_RATE, K_COUNT, K_DURATION, K_BOOL, K_MULT, K_POLICY, K_WINDOW, K_STATE } kind_t;

typedef struct knob {
    const char *key;
    kind_t kind;
    int (*set_double)(bw_config *, double, bw_error *);
    int (*set_int)(bw_config *, int64_t, bw_error *);
    const char *expect; /* what a well-formed value looks like, for messages */
} knob;

static int set_auto(bw_config *c, int64_t v, bw_error *e)
{
    return bw_config_set_auto_transition(c, (int)v, e);
}

static int set_counters(bw_config *c, int64_t v, bw_error *e)
{
    return bw_config_set_counters(c, (int)v, e);
}

static int set_unreachable(bw_config *c, int64_t v, bw_error *e)
{
    return bw_config_set_unreachable_counts(c, (int)v, e);
}

static const knob knobs[] = {
    {"policy", K_POLICY, 0, 0, "rate or consecutive"},
    {"failure_rate", K_RATE, bw_config_set_failure_rate, 0, "a number such as 0.5"},
    {"slow_call_rate", K_RATE, bw_config_set_slow_call_rate, 0, "a number such as 0.8"},
    {"slow_call_duration", K_DURATION, 0, bw_config_set_slow_call_duration, "a duration such as 2s, or off"},
    {"min_calls", K_COUNT, 0, bw_config_set_min_calls, "a whole number"},
    {"window", K_WINDOW, 0, 0, "count:N or time:Ns"},
    {"permitted_probes", K_COUNT, 0, bw_config_set_permitted_probes, "a whole number"},
    {"max_concurrent_probes", K_COUNT, 0, bw_config_set_max_concurrent_probes, "a whole number"},
    {"wait", K_DURATION, 0, bw_config_set_wait, "a duration such as 30s"},
    {"wait_multiplier", K_MULT, bw_config_set_wait_multiplier, 0, "a number such as 2"},
    {"wait_max", K_DURATION, 0, bw_config_set_wait_max, "a duration such as 5m, or none"},
    {"max_wait_in_half_open", K_DURATION, 0, bw_config_set_max_wait_in_half_open, "a duration such as 60s, or off"},
    {"auto_transition", K_BOOL, 0, set_auto, "true or false"},
    {"counters", K_BOOL, 0, set_counters, "true or false"},
    {"unreachable_counts", K_BOOL, 0, set_unreachable, "true or false"},
    {"initial_state", K_STATE, 0, 0, "closed, forced_open, disabled or metrics_only"},
    {"error_threshold", K_COUNT, 0, bw_config_set_error_threshold, "a whole number"},
    {"success_threshold", K_COUNT, 0, bw_config_set_success_threshold, "a whole number"},
    {"half_open_capacity", K_COUNT, 0, bw_config_set_half_open_capacity, "a whole number"},
    {"keyed_maxsize", K_COUNT, 0, bw_config_set_keyed_maxsize, "a whole number"},
    {"keyed_limit", K_COUNT, 0, bw_config_set_keyed_limit, "a whole number"},
    {"keyed_idle", K_DURATION, 0, bw_config_set_keyed_idle, "a duration such as 300s"},
    {"keyed_history_idle", K_DURATION, 0, bw_config_set_keyed_history_idle, "a duration such as 1h"},
    {"store_ttl", K_DURATION, 0, bw_config_set_store_ttl, "a duration such as 1d"},
    {"store_poll", K_DURATION, 0, bw_config_set_store_poll, "a duration such as 1s"},
    {"store_queue", K_COUNT, 0, bw_config_set_store_queue, "a whole number"},
    {"store_quorum", K_COUNT, 0, bw_config_set_store_quorum, "a whole number"},
    {"store_retry", K_DURATION, 0, bw_config_set_store_retry, "a duration such as 5s"},
    {"store_retry_multiplier", K_MULT, bw_config_set_store_retry_multiplier, 0, "a number such as 2"},
    {"store_retry_max", K_DURATION, 0, bw_config_set_store_retry_max, "a duration such as 1m, or none"},
    {"store_retry_jitter", K_MULT, bw_config_set_store_retry_jitter, 0, "a number such as 0.2"},
    {"store_close_timeout", K_DURATION, 0, bw_config_set_store_close_timeout, "a duration such as 5s"},
};

/* A count whose text overflowed 64 bits: the setter's range error, saying what was written instead of the saturated
 * value. */
static int count_overflow(bw_config *c, const knob *k, const char *v, int64_t saturated, bw_error *err)
{
    int rc = k->set_int(c, saturated, err);
    if (rc == BW_OK) /* no count setter takes INT64_MAX; should one, the text still did not fit */
        return bw__fail(err, BW_ERANGE, k->key, "%s got '%.40s', beyond 64 bits", k->key, v);
    char *got = err ? strstr(err->message, ", got ") : NULL;
    if (got)
        snprintf(got, sizeof err->message - (size_t)(got - err->message), ", got '%.40s' (beyond 64 bits)", v);
    return rc;
}

static int apply(bw_config *c, const knob *k, const char *v, bw_error *err)
{
    double d;
    int64_t i;
    int b;
    switch (k->kind) {
    case K_RATE:
    case K_MULT:
        return parse_double(v, &d) ? BW_EPARSE : k->set_double(c, d, err);
    case K_COUNT:
        b = bw__parse_int(v, &i); /* 1: beyond 64 bits, i saturated */
        return b < 0 ? BW_EPARSE : b ? count_overflow(c, k, v, i, err) : k->set_int(c, i, err);
    case K_DURATION:
        return bw__parse_duration(v, &i) ? BW_EPARSE : k->set_int(c, i, err);
    case K_BOOL:
        return parse_bool(v, &b) ? BW_EPARSE : k->set_int(c, b, err);
    case K_POLICY:
        if (strcmp(v, "rate") == 0)
            return bw_config_set_policy(c, BW_POLICY_RATE, err);
        if (strcmp(v, "consecutive") == 0)
            return bw_config_set_policy(c, BW_POLICY_CONSECUTIVE, err);
        return BW_EPARSE;
    case K_STATE:
        for (int s = BW_STATE_CLOSED; s <= BW_STATE_METRICS_ONLY; s++)
            if (strcmp(v, bw_state_name((bw_state)s)) == 0)
                return bw_config_set_initial_state(c, (bw_state)s, err);
        return BW_EPARSE;
    case K_WINDOW:
        if (strncmp(v, "count:", 6) == 0)
            return parse_int(v + 6, &i) ? BW_EPARSE : bw_config_set_window(c, BW_WINDOW_COUNT, i, err);
        if (strncmp(v, "time:", 5) == 0) {
            if (bw__parse_duration(v + 5, &i) || i % BW_NS_PER_S != 0)
                return BW_EPARSE;
            return bw_config_set_window(c, BW_WINDOW_TIME, i / BW_NS_PER_S, err);
        }
        return BW_EPARSE;
    }
    return BW_EPARSE;
}

int bw_config_parse(bw_config *cfg, const char *text, bw_error *err)
{
    if (!cfg || !text)
        return bw__fail(err, BW_EINVAL, "", "config and text must not be NULL");
    bw_config work = *cfg;
    const char *p = text;
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        const char *start = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        size_t len = (size_t)(p - start);
        char tok[256];
        if (len >= sizeof tok)
            return bw__fail(err, BW_EPARSE, "", "at offset %zu: setting is too long (%zu bytes)",
                            (size_t)(start - text), len);
        memcpy(tok, start, len);
        tok[len] = 0;
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return bw__fail(err, BW_EPARSE, "", "at offset %zu: expected key=value, got '%s'", (size_t)(start - text),
                            tok);
        *eq = 0;
        const char *val = eq + 1;
        const knob *k = NULL;
        for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
            if (strcmp(knobs[i].key, tok) == 0)
                k = &knobs[i];
        if (!k)
            return bw__fail(err, BW_EPARSE, tok, "at offset %zu: unknown setting '%s'", (size_t)(start - text), tok);
        int rc = apply(&work, k, val, err);
        if (rc == BW_EPARSE)
            return bw__fail(err, BW_EPARSE, k->key, "at offset %zu: %s must be %s, got '%s'",
                            (size_t)(eq + 1 - tok + (start - text)), k->key, k->expect, val);
        if (rc != BW_OK) {
            if (err) { /* prefix the setter's range message with the position */
                char msg[sizeof err->message];
                snprintf(msg, sizeof msg, "at offset %zu: %.180s", (size_t)(start - text), err->message);
                memcpy(err->message, msg, sizeof msg);
            }
            return rc;
        }
    }
    *cfg = work;
    return BW_OK;
}

int bw_config_format(const bw_config *cfg, char *buf, size_t size)
{
    if (!cfg || (!buf && size))
        return BW_EINVAL;
    char slow[32], wait[32], wmax[32], mwho[32], kidle[32], khidle[32], sttl[32], spoll[32], sretry[32], smax[32],
        sclose[32];
    bw__fmt_duration(slow, sizeof slow, cfg->slow_ns, "off");
    bw__fmt_duration(wait, sizeof wait, bw__config_wait(cfg), "0s");
    bw__fmt_duration(wmax, sizeof wmax, cfg->m.wait_max, "none");
    bw__fmt_duration(mwho, sizeof mwho, cfg->m.max_wait_ho, "off");
    bw__fmt_duration(kidle, sizeof kidle, cfg->keyed_idle, "0s");
    bw__fmt_duration(khidle, sizeof khidle, cfg->keyed_hidle, "0s");
    bw__fmt_duration(sttl, sizeof sttl, cfg->store_ttl, "0s");
    bw__fmt_duration(spoll, sizeof spoll, cfg->store_poll, "0s");
    bw__fmt_duration(sretry, sizeof sretry, cfg->store_retry, "0s");
    bw__fmt_duration(smax, sizeof smax, cfg->store_retry_max, "none");
    bw__fmt_duration(sclose, sizeof sclose, cfg->store_close_timeout, "0s");
    const bw__mcfg *m = &cfg->m;
    int n = snprintf(
        buf, size,
        "policy=%s failure_rate=%.17g slow_call_rate=%.17g slow_call_duration=%s min_calls=%u "
        "window=%s:%u%s permitted_probes=%u max_concurrent_probes=%u wait=%s wait_multiplier=%.17g "
        "wait_max=%s max_wait_in_half_open=%s auto_transition=%s counters=%s unreachable_counts=%s initial_state=%s "
        "error_threshold=%u "
        "success_threshold=%u half_open_capacity=%u keyed_maxsize=%u keyed_limit=%u keyed_idle=%s "
        "keyed_history_idle=%s store_ttl=%s store_poll=%s store_queue=%u store_quorum=%u store_retry=%s "
        "store_retry_multiplier=%.17g store_retry_max=%s store_retry_jitter=%.17g store_close_timeout=%s",
        m->policy == BW_POLICY_RATE ? "rate" : "consecutive", m->failure_rate, m->slow_rate, slow, m->min_calls,
        m->window_kind == BW_WINDOW_COUNT ? "count" : "time", m->window_size,
        m->window_kind == BW_WINDOW_COUNT ? "" : "s", m->permitted, m->max_concurrent, wait, m->wait_multiplier, wmax,
        mwho, cfg->auto_transition ? "true" : "false", cfg->counters ? "true" : "false",
        m->ignore_unreachable ? "false" : "true", bw_state_name((bw_state)m->initial_state), m->error_threshold,
        m->success_threshold, m->half_open_capacity, cfg->keyed_max, cfg->keyed_limit, kidle, khidle, sttl, spoll,
        cfg->store_queue, cfg->store_quorum, sretry, cfg->store_retry_multiplier, smax, cfg->store_retry_jitter,
        sclose);
    return n;
}

/* ---- the environment ---- */

extern char **environ;

int bw_config_parse_env(bw_config *cfg, const char *prefix, bw_error *err)
{
    if (!cfg || !prefix)
        return bw__fail(err, BW_EINVAL, "", "config and prefix must not be NULL");
    size_t pl = strlen(prefix);
    if (pl == 0 || pl > 200)
        return bw__fail(err, BW_EINVAL, "prefix", "prefix must be 1 to 200 bytes, got %zu", pl);
    bw_config work = *cfg;
    for (char **e = environ; e && *e; e++) {
        const char *var = *e, *eq = strchr(var, '=');
        if (!eq || strncmp(var, prefix, pl) != 0 || (size_t)(eq - var) <= pl)
            continue;
        size_t kl = (size_t)(eq - var) - pl, vl = (size_t)(eq - var);
        char key[64];
        const knob *k = NULL;
        if (kl < sizeof key) {
            for (size_t i = 0; i < kl; i++)
                key[i] = (char)tolower((unsigned char)var[pl + i]);
            key[kl] = 0;
            for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
                if (strcmp(knobs[i].key, key) == 0)
                    k = &knobs[i];
        }
        if (!k)
            return bw__fail(err, BW_EPARSE, "", "environment variable %.*s: unknown setting '%.*s'",
                            (int)(vl > 120 ? 120 : vl), var, (int)(kl > 60 ? 60 : kl), var + pl);
        const char *val = eq + 1;
        int rc = apply(&work, k, val, err);
        if (rc == BW_EPARSE)
            return bw__fail(err, BW_EPARSE, k->key, "environment variable %.*s: %s must be %s, got '%.40s'",
                            (int)(vl > 100 ? 100 : vl), var, k->key, k->expect, val);
        if (rc != BW_OK) {
            if (err) { /* prefix the setter's range message with the variable */
                char msg[sizeof err->message];
                snprintf(msg, sizeof msg, "environment variable %.*s: %.150s", (int)(vl > 60 ? 60 : vl), var,
                         err->message);
                memcpy(err->message, msg, sizeof msg);
            }
            return rc;
        }
    }
    *cfg = work;
    return BW_OK;
}
