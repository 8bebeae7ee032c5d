/*
 * config.c — the configuration object: defaults, typed setters with range checks,
 * the cross-field validation, and the text form (parse and format).
 *
 * Design notes: one table of knobs drives the text parser, so every text key goes
 * through the very setter a C caller would use and the two can never disagree on
 * a range. Parsing works on a copy and commits only when the whole text is good.
 * A knob left at its default is what bw_config_new holds: the validation calls
 * a knob "set" when it differs from that (so a formatted configuration, which
 * writes every knob, validates as its source did); min_calls and wait keep 0
 * for "the default", which depends on the window and the policy.
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
#include "time/clock.h"

#define DAY_NS (86400 * BW_NS_PER_S)
#define MAX_COUNT INT64_C(1000000000)
#define MAX_WINDOW_CALLS INT64_C(1000000)
#define MAX_WINDOW_SECONDS ((int64_t)BW__WINDOW_SECONDS_MAX) /* 30 days (machine/window.h) */
#define MAX_PROBES ((int64_t)BW__PROBES_MAX)
#define DEFAULT_MIN_CALLS 10u

static const bw_config defaults = {
    .m =
        {
            .policy = BW_POLICY_RATE,
            .window_kind = BW_WINDOW_COUNT,
            .initial_state = BW_STATE_CLOSED,
            .window_size = 100,
            .min_calls = 0, /* DEFAULT_MIN_CALLS, or a smaller count window's size */
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

/* The open wait: as set, or the policy's default. */
static int64_t config_wait(const bw_config *cfg)
{
    if (cfg->m.wait)
        return cfg->m.wait;
    return cfg->m.policy == BW_POLICY_CONSECUTIVE ? 30 * BW_NS_PER_S : 60 * BW_NS_PER_S;
}

/* min_calls: as set, or the default, no more than a count window holds (resilience4j's clamp). */
static uint32_t config_min_calls(const bw_config *cfg)
{
    if (cfg->m.min_calls)
        return cfg->m.min_calls;
    if (cfg->m.window_kind == BW_WINDOW_COUNT && cfg->m.window_size < DEFAULT_MIN_CALLS)
        return cfg->m.window_size;
    return DEFAULT_MIN_CALLS;
}

bw__mcfg bw__config_mcfg(const bw_config *cfg)
{
    bw__mcfg m = cfg->m;
    m.wait = config_wait(cfg);
    m.min_calls = config_min_calls(cfg);
    return m;
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
    if (!cfg)
        return null_cfg(err);
    if (kind != BW_WINDOW_COUNT && kind != BW_WINDOW_TIME)
        return bw__fail(err, BW_EINVAL, "window", "window kind must be count or time, got %d", (int)kind);
    if (kind == BW_WINDOW_COUNT && (size < 1 || size > MAX_WINDOW_CALLS))
        return bw__fail(err, BW_ERANGE, "window",
                        "window must be count:N with N in [1, %" PRId64 "], got count:%" PRId64, MAX_WINDOW_CALLS,
                        size);
    if (kind == BW_WINDOW_TIME && (size < 1 || size > MAX_WINDOW_SECONDS))
        return bw__fail(err, BW_ERANGE, "window",
                        "window must be time:Ns with N in [1, %" PRId64 "] (1s to 30d), got time:%" PRId64 "s",
                        MAX_WINDOW_SECONDS, size);
    cfg->m.window_kind = (uint8_t)kind;
    cfg->m.window_size = (uint32_t)size;
    return BW_OK;
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

/* A round ends undecided after MAX_PROBES probes: more successes in a row could never close it. */
int bw_config_set_success_threshold(bw_config *cfg, int64_t count, bw_error *err)
{
    return set_count(cfg, "success_threshold", count, MAX_PROBES, FIELD(m.success_threshold), err);
}

/* A round admits at most MAX_PROBES probes: a larger capacity would admit no more. */
int bw_config_set_half_open_capacity(bw_config *cfg, int64_t count, bw_error *err)
{
    return set_count(cfg, "half_open_capacity", count, MAX_PROBES, FIELD(m.half_open_capacity), err);
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

/* The text of knob `key`'s value, as bw_config_format writes it ("0.3", "count:5", "5m"), into buf. */
static const char *knob_text(const bw_config *cfg, const char *key, char *buf, size_t n)
{
    char text[2048];
    int len = bw_config_format(cfg, text, sizeof text);
    size_t kl = strlen(key);
    buf[0] = 0;
    for (const char *p = text; len > 0 && (size_t)len < sizeof text && p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            snprintf(buf, n, "%.*s", (int)strcspn(p + kl + 1, " "), p + kl + 1);
            char *end;
            double x = strtod(buf, &end);
            if (end != buf && !*end) /* a number: as a person writes it (0.3, not 0.29999999999999999) */
                snprintf(buf, n, "%.15g", x);
            break;
        }
        p = strchr(p, ' ');
        p = p ? p + 1 : NULL;
    }
    return buf;
}

/* The first knob of the rate policy that differs from its default, or NULL. */
static const char *rate_knob_set(const bw_config *cfg)
{
    const bw__mcfg *m = &cfg->m, *d = &defaults.m;
    if (m->failure_rate != d->failure_rate)
        return "failure_rate";
    if (m->slow_rate != d->slow_rate)
        return "slow_call_rate";
    /* The window first: a formatted config writes min_calls as it applies, a smaller count window's size. */
    if (m->window_kind != d->window_kind || m->window_size != d->window_size)
        return "window";
    if (m->min_calls != 0 && m->min_calls != DEFAULT_MIN_CALLS)
        return "min_calls";
    if (m->permitted != d->permitted)
        return "permitted_probes";
    if (m->max_concurrent != d->max_concurrent)
        return "max_concurrent_probes";
    return NULL;
}

/* The first knob of the consecutive policy that differs from its default, or NULL. */
static const char *consecutive_knob_set(const bw_config *cfg)
{
    const bw__mcfg *m = &cfg->m, *d = &defaults.m;
    if (m->error_threshold != d->error_threshold)
        return "error_threshold";
    if (m->success_threshold != d->success_threshold)
        return "success_threshold";
    if (m->half_open_capacity != d->half_open_capacity)
        return "half_open_capacity";
    return NULL;
}

/*
 * The checks that involve two knobs (config.h lists them). A knob no breaker
 * made from cfg could read is refused, naming it and the knob that makes it
 * unread, with the fix first; the bounds one knob sets another are given in
 * human units.
 */
int bw_config_validate(const bw_config *cfg, bw_error *err)
{
    if (!cfg)
        return null_cfg(err);
    char a[40], b[40];
    const char *k;
    if (cfg->m.policy == BW_POLICY_CONSECUTIVE && (k = rate_knob_set(cfg)) != NULL)
        return bw__fail(err, BW_ERANGE, k,
                        "remove %s=%s or set policy=rate: policy=consecutive never reads %s (it trips on "
                        "error_threshold consecutive failures)",
                        k, knob_text(cfg, k, a, sizeof a), k);
    if (cfg->m.policy == BW_POLICY_RATE && (k = consecutive_knob_set(cfg)) != NULL)
        return bw__fail(err, BW_ERANGE, k,
                        "remove %s=%s or set policy=consecutive: policy=rate never reads %s (it trips on the failure "
                        "and slow-call rates over the window)",
                        k, knob_text(cfg, k, a, sizeof a), k);
    if (cfg->m.max_wait_ho > 0 && cfg->m.max_wait_ho < 10 * BW_NS_PER_MS &&
        (!cfg->clock || bw__clock_kind(cfg->clock) == BW__CLOCK_SYSTEM))
        return bw__fail(err, BW_ERANGE, "max_wait_in_half_open",
                        "raise max_wait_in_half_open=%s to at least 10ms, or set it off: the system clock that times "
                        "a round moves in steps of up to 10ms, so every round could end before its probes answer "
                        "and the breaker could never close",
                        knob_text(cfg, "max_wait_in_half_open", a, sizeof a));
    if (cfg->m.max_concurrent > cfg->m.permitted)
        return bw__fail(err, BW_ERANGE, "max_concurrent_probes",
                        "max_concurrent_probes must be in [1, permitted_probes = %u], got %u", cfg->m.permitted,
                        cfg->m.max_concurrent);
    if (cfg->m.min_calls && cfg->m.window_kind == BW_WINDOW_COUNT && cfg->m.min_calls > cfg->m.window_size)
        return bw__fail(err, BW_ERANGE, "min_calls",
                        "lower min_calls=%u to at most %u or widen window=count:%u: the window never holds %u calls, "
                        "so the breaker could never trip",
                        cfg->m.min_calls, cfg->m.window_size, cfg->m.window_size, cfg->m.min_calls);
    if (cfg->slow_ns == 0 && cfg->m.slow_rate != defaults.m.slow_rate)
        return bw__fail(err, BW_ERANGE, "slow_call_rate",
                        "set slow_call_duration or remove slow_call_rate=%s: with slow_call_duration=off no call is "
                        "slow, so slow_call_rate has no effect",
                        knob_text(cfg, "slow_call_rate", a, sizeof a));
    int64_t wait = config_wait(cfg);
    if (cfg->m.wait_max != 0 && cfg->m.wait_max < wait) {
        bw__fmt_duration(a, sizeof a, wait, "0s");
        bw__fmt_duration(b, sizeof b, cfg->m.wait_max, "none");
        return bw__fail(err, BW_ERANGE, "wait_max", "wait_max must be none or at least wait = %s, got %s", a, b);
    }
    if (cfg->m.wait_max != 0 && cfg->m.wait_multiplier == 1.0)
        return bw__fail(err, BW_ERANGE, "wait_max",
                        "set wait_multiplier above 1 or remove wait_max=%s: with wait_multiplier=1 the wait never "
                        "grows, so wait_max has no effect",
                        knob_text(cfg, "wait_max", a, sizeof a));
    if (cfg->keyed_max == 0 && cfg->keyed_limit != 0)
        return bw__fail(err, BW_ERANGE, "keyed_limit",
                        "keyed_limit must be 0 when keyed_maxsize is 0 (unbounded), got %u", cfg->keyed_limit);
    if (cfg->keyed_limit != 0 && cfg->keyed_limit < cfg->keyed_max)
        return bw__fail(err, BW_ERANGE, "keyed_limit",
                        "keyed_limit must be 0 (twice keyed_maxsize) or in [keyed_maxsize = %u, %" PRId64 "], got %u",
                        cfg->keyed_max, MAX_COUNT, cfg->keyed_limit);
    if (cfg->store_retry_max != 0 && cfg->store_retry_max < cfg->store_retry) {
        bw__fmt_duration(a, sizeof a, cfg->store_retry, "0s");
        bw__fmt_duration(b, sizeof b, cfg->store_retry_max, "none");
        return bw__fail(err, BW_ERANGE, "store_retry_max",
                        "store_retry_max must be none or at least store_retry = %s, got %s", a, b);
    }
    if (cfg->store_retry_max != defaults.store_retry_max && cfg->store_retry_multiplier == 1.0)
        return bw__fail(err, BW_ERANGE, "store_retry_max",
                        "set store_retry_multiplier above 1 or remove store_retry_max=%s: with "
                        "store_retry_multiplier=1 the delay never grows, so store_retry_max has no effect",
                        knob_text(cfg, "store_retry_max", a, sizeof a));
    if (cfg->store && cfg->m.max_wait_ho == 0)
        return bw__fail(err, BW_ERANGE, "max_wait_in_half_open",
                        "max_wait_in_half_open must not be off with a store: it is what expires a probe that never "
                        "comes back");
    if (cfg->store_quorum > 1 && (!cfg->store || cfg->store_mode != BW_STORE_COORDINATED))
        return bw__fail(err, BW_ERANGE, "store_quorum",
                        "store_quorum above 1 needs a store in coordinated mode (a quorum counts the local trips of "
                        "instances sharing one circuit), got %u",
                        cfg->store_quorum);
    if (cfg->keyed_hidle < cfg->keyed_idle) {
        bw__fmt_duration(a, sizeof a, cfg->keyed_idle, "0s");
        bw__fmt_duration(b, sizeof b, cfg->keyed_hidle, "0s");
        return bw__fail(err, BW_ERANGE, "keyed_history_idle",
                        "keyed_history_idle must be at least keyed_idle = %s, got %s", a, b);
    }
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

/* A malformed value: what k takes, and what was written. */
static int malformed(const knob *k, const char *v, bw_error *err)
{
    return bw__fail(err, BW_EPARSE, k->key, "%s must be %s, got '%.40s'", k->key, k->expect, v);
}

/*
 * A setter's range error (rc), reported with the value as it was written
 * rather than as the setter saw it: "-5m", not -300000000000 ns; "1000000d",
 * not a saturated 64-bit number; `note` after it. Setter messages end with
 * ", got <value>".
 */
static int as_written(int rc, const char *v, const char *note, bw_error *err)
{
    char *got = rc != BW_OK && err ? strstr(err->message, ", got ") : NULL;
    while (got && strstr(got + 1, ", got "))
        got = strstr(got + 1, ", got ");
    if (got)
        snprintf(got, sizeof err->message - (size_t)(got - err->message), ", got '%.40s'%s", v, note);
    return rc;
}

/* Apply value v to knob k of c; on error, fill *err (the message without its place) and return the code. */
static int apply(bw_config *c, const knob *k, const char *v, bw_error *err)
{
    double d;
    int64_t i;
    int b;
    switch (k->kind) {
    case K_RATE:
    case K_MULT:
        return parse_double(v, &d) ? malformed(k, v, err) : k->set_double(c, d, err);
    case K_COUNT:
        b = bw__parse_int(v, &i); /* 1: beyond 64 bits, i saturated */
        if (b < 0)
            return malformed(k, v, err);
        if (!b)
            return k->set_int(c, i, err);
        if (k->set_int(c, i, err) ==
            BW_OK) /* no count setter takes INT64_MAX; should one, the text still did not fit */
            return bw__fail(err, BW_ERANGE, k->key, "%s got '%.40s', beyond 64 bits", k->key, v);
        return as_written(BW_ERANGE, v, " (beyond 64 bits)", err);
    case K_DURATION:
        b = bw__parse_duration(v, 0, &i);
        if (b == BW__DURATION_BARE)
            return bw__duration_bare(err, BW_EPARSE, k->key, "", v, "ms", "s");
        return b ? malformed(k, v, err) : as_written(k->set_int(c, i, err), v, "", err);
    case K_BOOL:
        return parse_bool(v, &b) ? malformed(k, v, err) : k->set_int(c, b, err);
    case K_POLICY:
        if (strcmp(v, "rate") == 0)
            return bw_config_set_policy(c, BW_POLICY_RATE, err);
        if (strcmp(v, "consecutive") == 0)
            return bw_config_set_policy(c, BW_POLICY_CONSECUTIVE, err);
        return malformed(k, v, err);
    case K_STATE:
        for (int s = BW_STATE_CLOSED; s <= BW_STATE_METRICS_ONLY; s++)
            if (strcmp(v, bw_state_name((bw_state)s)) == 0)
                return bw_config_set_initial_state(c, (bw_state)s, err);
        return malformed(k, v, err);
    case K_WINDOW:
        if (strncmp(v, "count:", 6) == 0)
            return parse_int(v + 6, &i) ? malformed(k, v, err)
                                        : as_written(bw_config_set_window(c, BW_WINDOW_COUNT, i, err), v, "", err);
        if (strncmp(v, "time:", 5) == 0) {
            b = bw__parse_duration(v + 5, 0, &i);
            if (b == BW__DURATION_BARE)
                return bw__duration_bare(err, BW_EPARSE, k->key, "time:", v + 5, "s", "m");
            if (b || (i % BW_NS_PER_S != 0 && i != INT64_MAX && i != -INT64_MAX)) /* whole seconds, or too many */
                return malformed(k, v, err);
            return as_written(bw_config_set_window(c, BW_WINDOW_TIME, i / BW_NS_PER_S, err), v, "", err);
        }
        return malformed(k, v, err);
    }
    return malformed(k, v, err);
}

static int placed(int code, bw_error *err, const char *fmt, ...) BW_PRINTF(3, 4);
static int placed(int code, bw_error *err, const char *fmt, ...)
{
    if (code != BW_OK && err) {
        char msg[sizeof err->message];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof msg)
            snprintf(msg + n, sizeof msg - (size_t)n, "%s", err->message);
        memcpy(err->message, msg, sizeof msg);
    }
    return code;
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
        size_t len = (size_t)(p - start), at = (size_t)(start - text);
        char tok[256];
        if (len >= sizeof tok)
            return bw__fail(err, BW_EPARSE, "", "at offset %zu: setting is too long (%zu bytes)", at, len);
        memcpy(tok, start, len);
        tok[len] = 0;
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return bw__fail(err, BW_EPARSE, "", "at offset %zu: expected key=value, got '%s'", at, tok);
        *eq = 0;
        const char *val = eq + 1;
        const knob *k = NULL;
        for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
            if (strcmp(knobs[i].key, tok) == 0)
                k = &knobs[i];
        if (!k)
            return bw__config_unknown_key(err, at, tok);
        /* A malformed value is placed at the value, a value out of range at its setting. */
        int rc = apply(&work, k, val, err);
        if (rc != BW_OK)
            return placed(rc, err, "at offset %zu: ", rc == BW_EPARSE ? at + (size_t)(val - tok) : at);
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
    bw__fmt_duration(wait, sizeof wait, config_wait(cfg), "0s");
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
        m->policy == BW_POLICY_RATE ? "rate" : "consecutive", m->failure_rate, m->slow_rate, slow,
        config_min_calls(cfg), m->window_kind == BW_WINDOW_COUNT ? "count" : "time", m->window_size,
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
        const char *hint = NULL, *guess = kl < sizeof key && !k ? bw__config_suggest(key, &hint) : NULL;
        if (!k && guess) { /* the variable to set instead (the name in the message is the key already) */
            char name[96];
            size_t gl = strlen(guess);
            if (pl + gl < sizeof name) {
                memcpy(name, prefix, pl);
                for (size_t i = 0; i <= gl; i++)
                    name[pl + i] = (char)toupper((unsigned char)guess[i]);
            } else {
                snprintf(name, sizeof name, "the prefix and %s in capitals", guess);
            }
            return bw__fail(err, BW_EPARSE, "", "environment variable %.*s: unknown setting; did you mean %s?%s%s%s",
                            (int)(vl > 64 ? 64 : vl), var, name, hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
        }
        if (!k)
            return bw__fail(err, BW_EPARSE, "", "environment variable %.*s: unknown setting '%.*s'",
                            (int)(vl > 120 ? 120 : vl), var, (int)(kl > 60 ? 60 : kl), var + pl);
        int rc = apply(&work, k, eq + 1, err);
        if (rc != BW_OK)
            return placed(rc, err, "environment variable %.*s: ", (int)(vl > 64 ? 64 : vl), var);
    }
    *cfg = work;
    return BW_OK;
}

const char *bw__config_knob_name(size_t i)
{
    return i < sizeof knobs / sizeof knobs[0] ? knobs[i].key : NULL;
}
