/*
 * budget.c — the retry budget: gRPC-style retry throttling over one atomic
 * counter of thousandths of a token.
 *
 * Design notes: the counter is an integer so the "tokens > max / 2" test and the
 * cap at max are exact (gRPC keeps tokens in thousandths for the same reason).
 * A success on a full budget, the common case, only loads the counter: no write,
 * so callers on many threads do not bounce its cache line.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "resilience/resilience.h"

#define MILLI_MIN 1
#define MILLI_MAX 1000000

struct bw_retry_budget {
    _Atomic int64_t tokens; /* thousandths */
    int64_t max;            /* thousandths */
    int64_t ratio;          /* thousandths */
};

static int to_milli(double v, const char *field, int64_t *out, bw_error *err)
{
    double m = v * 1000.0;
    if (!(m >= MILLI_MIN - 0.5 && m < MILLI_MAX + 0.5)) /* NaN fails too */
        return bw__fail(err, BW_ERANGE, field, "%s must be in [0.001, 1000], got %g", field, v);
    *out = (int64_t)(m + 0.5);
    return BW_OK;
}

int bw_retry_budget_new(double max_tokens, double token_ratio, bw_retry_budget **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    int64_t max = 0, ratio = 0;
    int rc;
    if ((rc = to_milli(max_tokens, "max_tokens", &max, err)) != BW_OK ||
        (rc = to_milli(token_ratio, "token_ratio", &ratio, err)) != BW_OK)
        return rc;
    bw_retry_budget *b = malloc(sizeof *b);
    if (!b)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    atomic_init(&b->tokens, max);
    b->max = max;
    b->ratio = ratio;
    *out = b;
    return BW_OK;
}

void bw_retry_budget_free(bw_retry_budget *b)
{
    free(b);
}

double bw_retry_budget_tokens(const bw_retry_budget *b)
{
    if (!b)
        return -1;
    return (double)atomic_load_explicit(&((bw_retry_budget *)b)->tokens, memory_order_relaxed) / 1000.0;
}

void bw__budget_success(bw_retry_budget *b)
{
    int64_t t = atomic_load_explicit(&b->tokens, memory_order_relaxed);
    while (t < b->max) {
        int64_t n = t + b->ratio < b->max ? t + b->ratio : b->max;
        if (atomic_compare_exchange_weak_explicit(&b->tokens, &t, n, memory_order_relaxed, memory_order_relaxed))
            return;
    }
}

int bw__budget_failure(bw_retry_budget *b)
{
    int64_t t = atomic_load_explicit(&b->tokens, memory_order_relaxed);
    int64_t n;
    do {
        if (t == 0)
            return 0; /* already empty: no write, like a success on a full budget */
        n = t >= 1000 ? t - 1000 : 0;
    } while (!atomic_compare_exchange_weak_explicit(&b->tokens, &t, n, memory_order_relaxed, memory_order_relaxed));
    return n * 2 > b->max;
}

int bw_retry_budget_record(bw_retry_budget *b, int success)
{
    if (!b)
        return BW_EINVAL;
    if (success)
        bw__budget_success(b);
    else
        bw__budget_failure(b);
    return BW_OK;
}

int bw_retry_budget_can_retry(const bw_retry_budget *b)
{
    if (!b)
        return BW_EINVAL;
    return atomic_load_explicit(&((bw_retry_budget *)b)->tokens, memory_order_relaxed) * 2 > b->max;
}
