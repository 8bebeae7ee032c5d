/*
 * resilience.h — what the pipeline's source files share (not installed): the
 * retry policy's layout, the budget's inner calls, the limiter's job interface.
 */
#ifndef BW_RESILIENCE_H
#define BW_RESILIENCE_H

#include <stdalign.h>
#include <stdatomic.h>

#include "base/compiler.h"
#include "base/duration.h"
#include "base/error.h"
#include "base/name.h"
#include "base/systime.h"
#include "core/core.h"
#include "time/clock.h"
#include "breakwater/bulkhead.h"
#include "breakwater/pipeline.h"
#include "breakwater/retry.h"
#include "breakwater/timeout.h"

struct bw_retry {
    int attempts;
    bw_backoff backoff;
    bw_jitter jitter;
    int patient;
    int64_t base, cap, max_duration, patient_jitter;
    double multiplier;
    bw_retry_pred pred;
    void *pred_user;
    bw_retry_budget *budget;
    bw_clock *clock; /* NULL = system */
    bw_sleep_cb sleep;
    void *sleep_user;
    bw_random_cb random;
    void *random_user;
    /* SplitMix64 state (bw__splitmix), on its own cache line: jitter's atomic
       add must not invalidate the line of the fields every retry reads. */
    alignas(64) _Atomic uint64_t rng;
};

/* Start a retry loop on `clock` (NULL = system) whose deadline is also at most
 * `outer` (BW_NO_TIME = none). */
void bw__retry_begin(const bw_retry *r, bw_retry_state *st, const bw_clock *clock, int64_t outer);
/*
 * bw_retry_next, where a policy without a predicate of its own takes `verdict`
 * (1 retry, 0 not; a pipeline's classifier decided) instead of the default
 * predicate; -1 for the default (retry.c).
 */
int bw__retry_next(bw_retry_state *st, const bw_attempt *a, int64_t *delay_ns, int verdict);

/* The budget (budget.c): a success refund, and a failure's cost, which returns
 * 1 when a retry is still allowed afterwards. */
void bw__budget_success(bw_retry_budget *b);
int bw__budget_failure(bw_retry_budget *b);

/* Time on a clock, with the system clock inlined; NULL means the system clock. */
static inline int64_t bw__now_on(const bw_clock *c)
{
    return c ? bw_clock_now(c) : bw__sys_now();
}

/*
 * The limiter's job interface (limiter.c): run(payload) on a worker, where
 * payload is a copy of `size` bytes (at most BW__JOB_BYTES) made at submission.
 * Waits up to timeout_ns of real time. On BW_OK the worker's payload is copied
 * back into `payload` and run's return value into *rc (rc may be NULL). On
 * BW_ETIMEDOUT the work is abandoned: the limiter's abandoned callback later
 * receives `arg` and run's return value.
 */
#define BW__JOB_BYTES 512
int bw__limiter_submit(bw_limiter *lim, int64_t timeout_ns, int (*run)(void *payload), void *payload, size_t size,
                       void *arg, int *rc);

#endif
