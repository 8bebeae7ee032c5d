/*
 * breakwater/retry.h — retry policies with backoff and jitter, and a retry
 * budget shared across callers.
 *
 * A bw_retry is a policy: how many attempts (the first call included), which
 * outcomes to retry, how long to wait between attempts, and what may stop the
 * loop early (an overall deadline, a shared budget, an open circuit). It runs in
 * two forms:
 *
 * - blocking, as a layer of a pipeline (pipeline.h): the layer sleeps between
 *   attempts with the policy's sleeper;
 * - non-blocking, for event loops: bw_retry_begin, then after each attempt
 *   bw_retry_next says whether to try again and after what delay; the loop
 *   schedules the next attempt itself. The pipeline layer is built on exactly
 *   these two calls.
 *
 *     bw_retry_state st;
 *     bw_retry_begin(policy, &st);
 *     for (;;) {
 *         bw_attempt a = {BW_OK, do_call(), BW_NO_TIME};
 *         int64_t delay;
 *         if (bw_retry_next(&st, &a, &delay) != BW_RETRY_AGAIN)
 *             break;                      // a.rc is the answer
 *         schedule_in(delay);             // or sleep
 *     }
 *
 * Delays. Retry number n = 1, 2, ... is the retry after attempt n. The raw delay:
 *   constant     base
 *   linear       min(cap, base * n)
 *   exponential  min(cap, base * multiplier^(n-1)), the power computed as
 *                n-1 multiplications in double, stopping once at or above cap
 * then the jitter, with u a uniform random number in [0, 1):
 *   none          raw
 *   full          u * raw                               (AWS "full jitter")
 *   equal         raw/2 + u * raw/2                     (a minimum wait of raw/2)
 *   decorrelated  min(cap, base + u * (3 * prev - base)), prev = the previous
 *                 delay of this call, base for the first retry (AWS
 *                 "decorrelated jitter"; it uses base and cap only)
 * Arithmetic is in double and truncated to whole nanoseconds. u is
 * (r >> 11) * 2^-53 for the next 64-bit random number r. The default random
 * source is SplitMix64 (state += 0x9e3779b97f4a7c15, then the standard mix)
 * seeded with bw_retry_set_seed, advanced with one atomic add so a policy
 * shared by threads stays lock-free; bw_retry_set_random replaces it.
 *
 * A delay may come from the call's result instead: an attempt carrying
 * retry_after_ns >= 0 (an HTTP Retry-After, see bw_ctx_set_retry_after) waits
 * exactly that, without jitter or cap.
 *
 * Breaker rejections (status BW_REJECTED) are never retried by default: the
 * circuit is open and retrying only burns attempts. In patient mode a rejection
 * that carries a retry_after (OPEN, not FORCED_OPEN) is retried after exactly
 * retry_after plus a uniform jitter in [0, patient_jitter). The retry predicate
 * is not asked about rejections, and they neither cost nor refund budget.
 *
 * Thread safety: a policy is configured by one thread before it is shared (the
 * setters must not run while any call uses it); after that any number of
 * threads may run calls with it at once, lock-free. A bw_retry_state belongs to
 * one call.
 */
#ifndef BREAKWATER_RETRY_H
#define BREAKWATER_RETRY_H

#include "clock.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_retry bw_retry;
typedef struct bw_retry_budget bw_retry_budget;

typedef enum bw_backoff {
    BW_BACKOFF_CONSTANT = 0,   /* base every time */
    BW_BACKOFF_LINEAR = 1,     /* base * n, capped */
    BW_BACKOFF_EXPONENTIAL = 2 /* base * multiplier^(n-1), capped */
} bw_backoff;

typedef enum bw_jitter {
    BW_JITTER_NONE = 0,
    BW_JITTER_FULL = 1,
    BW_JITTER_EQUAL = 2,
    BW_JITTER_DECORRELATED = 3
} bw_jitter;

/* How one attempt ended, as bw_retry_next and the retry predicate see it. */
typedef struct bw_attempt {
    int status;             /* BW_OK when the call ran (rc says how it went); else what stopped
                               it: BW_REJECTED, BW_EFULL, BW_ETIMEDOUT, ... */
    int rc;                 /* the call's return code (meaningful when status is BW_OK) */
    int64_t retry_after_ns; /* BW_REJECTED: the rejection's retry_after (BW_NO_TIME in
                               FORCED_OPEN); otherwise a delay the result asks for, or BW_NO_TIME */
} bw_attempt;

/*
 * A retry predicate: nonzero to retry this attempt. The default retries a call
 * that ran and returned rc != 0, and a BW_ETIMEDOUT; never BW_EFULL (a full
 * bulkhead is this process's overload: retrying adds load). It is not asked
 * about BW_REJECTED (see above). Runs on the thread that calls bw_retry_next.
 */
typedef int (*bw_retry_pred)(const bw_attempt *attempt, void *user);

/* A sleeper: wait ns nanoseconds (>= 0). The default uses nanosleep. */
typedef void (*bw_sleep_cb)(int64_t ns, void *user);

/* A random source: any 64-bit value, uniformly distributed. Must be thread-safe
 * if the policy is shared. */
typedef uint64_t (*bw_random_cb)(void *user);

/*
 * bw_retry_new — a policy with the defaults: 3 attempts; exponential backoff
 * from 100 ms, multiplier 2, cap 30 s; full jitter; the default predicate; no
 * overall deadline; no budget; fail-fast on rejections; the system clock;
 * nanosleep; SplitMix64 seeded from the policy's address, the time and a counter.
 * Returns BW_OK and stores it in *out (free with bw_retry_free); BW_EINVAL for
 * a NULL out; BW_ENOMEM. Thread safety: any thread.
 */
BW_API int bw_retry_new(bw_retry **out);

/* bw_retry_free — release a policy; NULL is ignored. Thread safety: no call may still use it. */
BW_API void bw_retry_free(bw_retry *r);

/*
 * Setters. Each returns BW_OK; BW_EINVAL when r is NULL or an enum value is
 * unknown; BW_ERANGE when a value is out of range, with *err (may be NULL)
 * naming the field and the allowed range; on error the policy is unchanged.
 * Thread safety: not while any call uses the policy.
 */

/* bw_retry_set_attempts — total attempts including the first, in [1, 1000]. */
BW_API int bw_retry_set_attempts(bw_retry *r, int attempts, bw_error *err);

/*
 * bw_retry_set_backoff — the delay formula (see the top of this file).
 * base_ns in [0, 365d]; multiplier in [1, 1000] (used by exponential only);
 * cap_ns in [base_ns, 365d] (used by linear, exponential and decorrelated jitter).
 */
BW_API int bw_retry_set_backoff(bw_retry *r, bw_backoff kind, int64_t base_ns, double multiplier, int64_t cap_ns,
                                bw_error *err);

/* bw_retry_set_jitter — none, full, equal or decorrelated. */
BW_API int bw_retry_set_jitter(bw_retry *r, bw_jitter jitter, bw_error *err);

/*
 * bw_retry_set_max_duration — an overall deadline for all attempts, measured
 * from bw_retry_begin: no retry is scheduled whose delay would end at or past it
 * (verdict BW_RETRY_DEADLINE). In a pipeline the inner layers and the call see
 * it as their deadline (bw_ctx_remaining_ns). ns in [0, 365d]; 0 = none.
 */
BW_API int bw_retry_set_max_duration(bw_retry *r, int64_t ns, bw_error *err);

/*
 * bw_retry_set_predicate — which outcomes to retry; NULL restores the default.
 * `user` is borrowed. The predicate runs on every thread that uses the policy:
 * it must be thread-safe if the policy is shared by threads (as bw_random_cb).
 * Returns BW_OK; BW_EINVAL for a NULL r.
 */
BW_API int bw_retry_set_predicate(bw_retry *r, bw_retry_pred fn, void *user);

/*
 * bw_retry_set_budget — share a retry budget (below) with other policies and
 * callers; NULL removes it. The budget is borrowed: it must outlive the policy's
 * use.
 */
BW_API int bw_retry_set_budget(bw_retry *r, bw_retry_budget *budget);

/*
 * bw_retry_set_patient — patient mode on (nonzero) or off: retry a rejection
 * that carries a retry_after after exactly retry_after + uniform[0, jitter_ns).
 * jitter_ns in [0, 1h].
 */
BW_API int bw_retry_set_patient(bw_retry *r, int enabled, int64_t jitter_ns, bw_error *err);

/*
 * bw_retry_set_clock — the clock of the overall deadline for bw_retry_begin
 * (NULL = system clock; borrowed). A pipeline layer uses the pipeline's clock.
 */
BW_API int bw_retry_set_clock(bw_retry *r, bw_clock *clock);

/*
 * bw_retry_set_sleeper — how a blocking retry waits; NULL restores nanosleep.
 * `user` is borrowed. The sleeper runs on every thread that retries with the
 * policy: it must be thread-safe if the policy is shared by threads (as
 * bw_random_cb). Returns BW_OK; BW_EINVAL for a NULL r.
 */
BW_API int bw_retry_set_sleeper(bw_retry *r, bw_sleep_cb fn, void *user);

/* bw_retry_set_random — the random source of the jitter; NULL restores SplitMix64. `user` is borrowed. */
BW_API int bw_retry_set_random(bw_retry *r, bw_random_cb fn, void *user);

/* bw_retry_set_seed — restart the built-in SplitMix64 source from `seed`. */
BW_API int bw_retry_set_seed(bw_retry *r, uint64_t seed);

/* What bw_retry_next decided. Every value but AGAIN ends the loop. */
typedef enum bw_retry_verdict {
    BW_RETRY_DONE = 0,      /* the attempt is final: it succeeded or is not retryable */
    BW_RETRY_AGAIN = 1,     /* run another attempt after *delay_ns */
    BW_RETRY_EXHAUSTED = 2, /* retryable, but every attempt is used */
    BW_RETRY_BUDGET = 3,    /* retryable, but the shared budget is at or below half */
    BW_RETRY_DEADLINE = 4,  /* retryable, but the delay would end past the deadline */
    BW_RETRY_REJECTED = 5   /* a breaker rejection, not retried (fail-fast mode, or no
                               retry_after to wait for) */
} bw_retry_verdict;

/* The state of one call's retry loop: caller-owned, private fields. */
typedef struct bw_retry_state {
    const struct bw_retry *policy_; /* private */
    int64_t deadline_;              /* private */
    int64_t prev_delay_;            /* private */
    const bw_clock *clock_;         /* private */
    int attempt_;                   /* private */
    uint32_t magic_;                /* private */
} bw_retry_state;

/*
 * bw_retry_begin — start one call's retry loop. Reads the clock only when the
 * policy has an overall deadline. Returns BW_OK; BW_EINVAL for NULL arguments.
 * Thread safety: any number of threads at once on one policy.
 */
BW_API int bw_retry_begin(const bw_retry *r, bw_retry_state *st);

/*
 * bw_retry_next — report how an attempt ended and learn what to do: returns a
 * bw_retry_verdict (>= 0), with *delay_ns set for BW_RETRY_AGAIN (0 otherwise);
 * BW_EINVAL for NULL arguments or a state never begun; BW_ESTATE when the loop
 * already ended. Updates the budget: a retryable attempt costs one token, a
 * call that ran (BW_OK) and is not retryable refunds the budget's ratio.
 * Success costs a predicate call and, with a budget below its maximum, one
 * compare-and-swap; no lock, no allocation, no clock read.
 * Thread safety: as bw_retry_begin; one state is used by one thread at a time.
 */
BW_API int bw_retry_next(bw_retry_state *st, const bw_attempt *attempt, int64_t *delay_ns);

/* bw_retry_state_attempts — attempts reported so far to this state (0 before the first); BW_EINVAL for NULL
 * or a state never begun. Thread safety: the thread that owns the state. */
BW_API int bw_retry_state_attempts(const bw_retry_state *st);

/*
 * A retry budget, gRPC-style retry throttling, shared by every caller of one
 * dependency. Tokens start at max_tokens; each retryable failed attempt costs 1
 * (floored at 0); each success refunds token_ratio (capped at max_tokens); a
 * retry is allowed only while tokens > max_tokens / 2. When most calls fail,
 * retries stop, so the load on the dependency stays near one call per request
 * instead of attempts per request. Tokens are kept in thousandths, as gRPC does,
 * so the arithmetic is exact: both values are rounded to 3 decimals.
 *
 * Thread safety: every function may run on any number of threads at once,
 * except bw_retry_budget_free. A success on a full budget is one atomic load;
 * everything else one compare-and-swap loop. No lock.
 */

/*
 * bw_retry_budget_new — a full budget. max_tokens in [0.001, 1000] and
 * token_ratio in [0.001, 1000] (gRPC's ranges, after rounding to thousandths).
 * Returns BW_OK and *out (free with bw_retry_budget_free); BW_EINVAL for a NULL
 * out; BW_ERANGE with *err naming the field; BW_ENOMEM.
 */
BW_API int bw_retry_budget_new(double max_tokens, double token_ratio, bw_retry_budget **out, bw_error *err);

/* bw_retry_budget_free — NULL is ignored. Thread safety: no policy or call may still use it. */
BW_API void bw_retry_budget_free(bw_retry_budget *b);

/* bw_retry_budget_tokens — the tokens now (a multiple of 0.001); -1 for NULL. */
BW_API double bw_retry_budget_tokens(const bw_retry_budget *b);

/*
 * bw_retry_budget_record — record one attempt by hand (bw_retry_next does this
 * itself): success nonzero refunds the ratio, zero costs one token. Returns
 * BW_OK or BW_EINVAL.
 */
BW_API int bw_retry_budget_record(bw_retry_budget *b, int success);

/* bw_retry_budget_can_retry — 1 while tokens > max_tokens / 2, else 0; BW_EINVAL for NULL. */
BW_API int bw_retry_budget_can_retry(const bw_retry_budget *b);

#ifdef __cplusplus
}
#endif
#endif
