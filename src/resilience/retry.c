/*
 * retry.c — the retry policy: setters, the delay formulas and jitter, and the
 * decision after each attempt (bw_retry_next) that both the event-loop form and
 * the pipeline's blocking layer use.
 *
 * Design notes: a policy is read-only once shared, except for the built-in
 * random source, a SplitMix64 counter advanced with one atomic add (SplitMix64's
 * state is a plain counter, so an atomic add gives each caller its own value of
 * one deterministic sequence). The success path reads no clock and no random
 * number: begin stores a few fields, next asks the predicate and refunds the
 * budget.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hash.h"
#include "resilience/resilience.h"

#define STATE_LIVE 0x62777274u /* "bwrt" */
#define STATE_DONE 0x62777264u
#define MAX_ATTEMPTS 1000
#define MAX_PATIENT_JITTER (3600 * BW_NS_PER_S)

static void default_sleep(int64_t ns, void *user)
{
    (void)user;
    if (ns <= 0)
        return;
    struct timespec ts = {(time_t)(ns / BW_NS_PER_S), (long)(ns % BW_NS_PER_S)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int bw_retry_new(bw_retry **out)
{
    if (!out)
        return BW_EINVAL;
    void *mem = NULL;
    if (posix_memalign(&mem, alignof(bw_retry), sizeof(bw_retry)) != 0) /* rng's own cache line */
        return BW_ENOMEM;
    bw_retry *r = memset(mem, 0, sizeof(bw_retry));
    r->attempts = 3;
    r->backoff = BW_BACKOFF_EXPONENTIAL;
    r->jitter = BW_JITTER_FULL;
    r->base = 100 * BW_NS_PER_MS;
    r->multiplier = 2.0;
    r->cap = 30 * BW_NS_PER_S;
    r->sleep = default_sleep;
    (void)bw_clock_system(); /* calibrate the inlined system clock before its first use */
    atomic_init(&r->rng, bw__hash_seed(r));
    *out = r;
    return BW_OK;
}

void bw_retry_free(bw_retry *r)
{
    free(r);
}

int bw_retry_set_attempts(bw_retry *r, int attempts, bw_error *err)
{
    if (!r)
        return bw__fail(err, BW_EINVAL, "retry", "retry must not be NULL");
    if (attempts < 1 || attempts > MAX_ATTEMPTS)
        return bw__fail(err, BW_ERANGE, "attempts", "attempts must be in [1, %d], got %d", MAX_ATTEMPTS, attempts);
    r->attempts = attempts;
    return BW_OK;
}

int bw_retry_set_backoff(bw_retry *r, bw_backoff kind, int64_t base_ns, double multiplier, int64_t cap_ns,
                         bw_error *err)
{
    if (!r)
        return bw__fail(err, BW_EINVAL, "retry", "retry must not be NULL");
    if ((unsigned)kind > BW_BACKOFF_EXPONENTIAL)
        return bw__fail(err, BW_EINVAL, "backoff", "backoff must be constant, linear or exponential, got %d",
                        (int)kind);
    int rc = bw__check_duration("base", base_ns, 1, err);
    if (rc != BW_OK)
        return rc;
    if (!(multiplier >= 1.0 && multiplier <= 1000.0))
        return bw__fail(err, BW_ERANGE, "multiplier", "multiplier must be in [1, 1000], got %g", multiplier);
    if ((rc = bw__check_duration("cap", cap_ns, 1, err)) != BW_OK)
        return rc;
    if (cap_ns < base_ns)
        return bw__fail(err, BW_ERANGE, "cap", "cap must be in [base, 365d] = [%lld, %lld] (ns), got %lld",
                        (long long)base_ns, (long long)BW__MAX_DURATION, (long long)cap_ns);
    r->backoff = kind;
    r->base = base_ns;
    r->multiplier = multiplier;
    r->cap = cap_ns;
    return BW_OK;
}

int bw_retry_set_jitter(bw_retry *r, bw_jitter jitter, bw_error *err)
{
    if (!r)
        return bw__fail(err, BW_EINVAL, "retry", "retry must not be NULL");
    if ((unsigned)jitter > BW_JITTER_DECORRELATED)
        return bw__fail(err, BW_EINVAL, "jitter", "jitter must be none, full, equal or decorrelated, got %d",
                        (int)jitter);
    r->jitter = jitter;
    return BW_OK;
}

int bw_retry_set_max_duration(bw_retry *r, int64_t ns, bw_error *err)
{
    if (!r)
        return bw__fail(err, BW_EINVAL, "retry", "retry must not be NULL");
    int rc = bw__check_duration("max_duration", ns, 1, err);
    if (rc == BW_OK)
        r->max_duration = ns;
    return rc;
}

int bw_retry_set_predicate(bw_retry *r, bw_retry_pred fn, void *user)
{
    if (!r)
        return BW_EINVAL;
    r->pred = fn;
    r->pred_user = fn ? user : NULL;
    return BW_OK;
}

int bw_retry_set_budget(bw_retry *r, bw_retry_budget *budget)
{
    if (!r)
        return BW_EINVAL;
    r->budget = budget;
    return BW_OK;
}

int bw_retry_set_patient(bw_retry *r, int enabled, int64_t jitter_ns, bw_error *err)
{
    if (!r)
        return bw__fail(err, BW_EINVAL, "retry", "retry must not be NULL");
    if (jitter_ns < 0 || jitter_ns > MAX_PATIENT_JITTER)
        return bw__fail(err, BW_ERANGE, "patient_jitter", "patient_jitter must be in [0, 1h] (ns), got %lld",
                        (long long)jitter_ns);
    r->patient = enabled != 0;
    r->patient_jitter = jitter_ns;
    return BW_OK;
}

int bw_retry_set_clock(bw_retry *r, bw_clock *clock)
{
    if (!r)
        return BW_EINVAL;
    r->clock = clock && bw__clock_kind(clock) != BW__CLOCK_SYSTEM ? clock : NULL;
    return BW_OK;
}

int bw_retry_set_sleeper(bw_retry *r, bw_sleep_cb fn, void *user)
{
    if (!r)
        return BW_EINVAL;
    r->sleep = fn ? fn : default_sleep;
    r->sleep_user = fn ? user : NULL;
    return BW_OK;
}

int bw_retry_set_random(bw_retry *r, bw_random_cb fn, void *user)
{
    if (!r)
        return BW_EINVAL;
    r->random = fn;
    r->random_user = fn ? user : NULL;
    return BW_OK;
}

int bw_retry_set_seed(bw_retry *r, uint64_t seed)
{
    if (!r)
        return BW_EINVAL;
    atomic_store_explicit(&r->rng, seed, memory_order_relaxed);
    return BW_OK;
}

/* ---- delays ---- */

/* A uniform number in [0, 1) from the policy's random source. */
static double uniform(const bw_retry *r)
{
    uint64_t x;
    if (r->random)
        x = r->random(r->random_user);
    else /* bw__splitmix on a shared state: one atomic add advances it for this caller alone */
        x = bw__splitmix_mix(atomic_fetch_add_explicit(&((bw_retry *)r)->rng, BW__GOLDEN, memory_order_relaxed) +
                             BW__GOLDEN);
    return bw__unit(x);
}

/* The delay before retry number n (1-based); prev is the previous delay of this call. */
static int64_t backoff_delay(const bw_retry *r, int n, int64_t prev)
{
    double base = (double)r->base, cap = (double)r->cap, raw = base;
    if (r->backoff == BW_BACKOFF_LINEAR)
        raw = base * n > cap ? cap : base * n;
    else if (r->backoff == BW_BACKOFF_EXPONENTIAL)
        raw = bw__grow(base, r->multiplier, (uint64_t)(n - 1), cap);
    switch (r->jitter) {
    case BW_JITTER_NONE:
        return (int64_t)raw;
    case BW_JITTER_FULL:
        return (int64_t)(uniform(r) * raw);
    case BW_JITTER_EQUAL:
        return (int64_t)(raw / 2.0 + uniform(r) * (raw / 2.0));
    default: {
        double d = base + uniform(r) * (3.0 * (double)prev - base);
        return (int64_t)(d < cap ? d : cap);
    }
    }
}

static int default_pred(const bw_attempt *a)
{
    return (a->status == BW_OK && a->rc != 0) || a->status == BW_ETIMEDOUT;
}

/* ---- the loop ---- */

void bw__retry_begin(const bw_retry *r, bw_retry_state *st, const bw_clock *clock, int64_t outer)
{
    st->policy_ = r;
    st->clock_ = clock;
    st->attempt_ = 0;
    st->prev_delay_ = r->base;
    st->deadline_ = outer;
    if (r->max_duration) {
        int64_t own = bw__now_on(clock) + r->max_duration;
        if (outer == BW_NO_TIME || own < outer)
            st->deadline_ = own;
    }
    st->magic_ = STATE_LIVE;
}

int bw_retry_begin(const bw_retry *r, bw_retry_state *st)
{
    if (!r || !st)
        return BW_EINVAL;
    bw__retry_begin(r, st, r->clock, BW_NO_TIME);
    return BW_OK;
}

static int stop(bw_retry_state *st, int verdict)
{
    st->magic_ = STATE_DONE;
    return verdict;
}

int bw_retry_next(bw_retry_state *st, const bw_attempt *a, int64_t *delay_ns)
{
    return bw__retry_next(st, a, delay_ns, -1);
}

int bw__retry_next(bw_retry_state *st, const bw_attempt *a, int64_t *delay_ns, int verdict)
{
    if (BW_UNLIKELY(!st || !a || !delay_ns))
        return BW_EINVAL;
    *delay_ns = 0;
    if (BW_UNLIKELY(st->magic_ != STATE_LIVE))
        return st->magic_ == STATE_DONE ? BW_ESTATE : BW_EINVAL;
    const bw_retry *r = st->policy_;
    int n = ++st->attempt_;
    int64_t delay;
    if (a->status == BW_REJECTED) {
        if (!r->patient || a->retry_after_ns < 0)
            return stop(st, BW_RETRY_REJECTED);
        if (n >= r->attempts)
            return stop(st, BW_RETRY_EXHAUSTED);
        delay = a->retry_after_ns;
        if (r->patient_jitter > 0) {
            int64_t j = (int64_t)(uniform(r) * (double)r->patient_jitter);
            delay = delay > INT64_MAX - j ? INT64_MAX : delay + j;
        }
    } else {
        int retry = r->pred ? r->pred(a, r->pred_user) : verdict >= 0 ? verdict : default_pred(a);
        if (BW_LIKELY(!retry)) {
            if (r->budget && a->status == BW_OK)
                bw__budget_success(r->budget);
            return stop(st, BW_RETRY_DONE);
        }
        int allowed = r->budget ? bw__budget_failure(r->budget) : 1;
        if (n >= r->attempts)
            return stop(st, BW_RETRY_EXHAUSTED);
        if (!allowed)
            return stop(st, BW_RETRY_BUDGET);
        delay = a->retry_after_ns >= 0 ? a->retry_after_ns : backoff_delay(r, n, st->prev_delay_);
    }
    /* delay >= deadline - now, written so that a huge result-given delay cannot overflow. */
    if (st->deadline_ != BW_NO_TIME && delay >= st->deadline_ - bw__now_on(st->clock_))
        return stop(st, BW_RETRY_DEADLINE);
    st->prev_delay_ = delay;
    *delay_ns = delay;
    return BW_RETRY_AGAIN;
}

int bw_retry_state_attempts(const bw_retry_state *st)
{
    if (!st || (st->magic_ != STATE_LIVE && st->magic_ != STATE_DONE))
        return BW_EINVAL;
    return st->attempt_;
}
