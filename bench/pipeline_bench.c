/*
 * pipeline_bench.c — micro-benchmarks of the resilience pipeline's success
 * paths.
 *
 * Prints one line per figure, `BENCH <name> <value> <unit>`, each timed value the
 * median of RUNS runs after a warm-up; lines starting with '#' are comments.
 *
 *   retry_success_ns          bw_retry_begin + bw_retry_next for an attempt that
 *                             needs no retry (default policy: no budget, no deadline)
 *   retry_budget_success_ns   the same with a shared budget (full, so the refund
 *                             is one load)
 *   retry_layer_ns            a pipeline holding only a retry layer, running a call
 *                             that succeeds (execute + layer + call)
 *   bulkhead_ns               bw_bulkhead_acquire + bw_bulkhead_release, free slot
 *   pipeline5_ns              fallback, retry, breaker (default config: slow-call
 *                             detection on, system clock), bulkhead, deadline
 *                             timeout; a call that succeeds
 *   breaker_only_ns           a pipeline holding only the breaker layer, for
 *                             comparison with breaker_bench's closed_success_ns
 *   allocations_per_call      heap allocations per pipeline5 execution after setup
 *
 * Allocations are counted by tests/support/alloc_hook.h; a sanitizer build does not
 * report them.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "breakwater/breakwater.h"

#include "bench.h"

#define ITERS 5000000L
#define ITERS_ALLOC 1000000L

#include "alloc_hook.h"
#define BENCH_COUNT_ALLOCS ALLOC_HOOK

static volatile int sink;

#define TRY(what, expr)                                                                                                \
    do {                                                                                                               \
        int rc_ = (expr);                                                                                              \
        if (rc_ != BW_OK)                                                                                              \
            die_err(what, rc_, &err);                                                                                  \
    } while (0)

static int ok_call(bw_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return 0;
}

/*
 * Kept out of line, one call per iteration: that is how these loads have always
 * been timed. (Their loops were expanded inside main(), too large for the
 * link-time inliner to take the library function in; a small loop function
 * takes it in whole, and retry_success_ns drops from about 4.9 ns to 1.4 ns.)
 */
static __attribute__((noinline)) int retry_next(bw_retry_state *st, const bw_attempt *a, int64_t *delay)
{
    return bw_retry_next(st, a, delay);
}

static __attribute__((noinline)) int execute(bw_pipeline *p)
{
    return bw_pipeline_execute(p, ok_call, NULL, NULL, NULL);
}

static int retry_once(const bw_retry *r)
{
    bw_retry_state st;
    bw_attempt a = {BW_OK, 0, BW_NO_TIME};
    int64_t delay;
    bw_retry_begin(r, &st);
    return retry_next(&st, &a, &delay); /* BW_RETRY_DONE == 0 */
}

static int bulkhead_once(bw_bulkhead *bh)
{
    int rc = bw_bulkhead_acquire(bh);
    return rc | bw_bulkhead_release(bh);
}

/* The loads: `iters` iterations each, counting those that do not succeed. */

static long retry_loop(void *arg, long iters)
{
    const bw_retry *r = arg;
    long bad = 0;
    for (long i = 0; i < iters; i++) {
        bad += retry_once(r) != 0;
        BARRIER();
    }
    return bad;
}

static long bulkhead_loop(void *arg, long iters)
{
    bw_bulkhead *bh = arg;
    long bad = 0;
    for (long i = 0; i < iters; i++) {
        bad += bulkhead_once(bh) != 0;
        BARRIER();
    }
    return bad;
}

static long pipeline_loop(void *arg, long iters)
{
    bw_pipeline *p = arg;
    long bad = 0;
    for (long i = 0; i < iters; i++) {
        bad += execute(p) != 0;
        BARRIER();
    }
    return bad;
}

static int never(const bw_fallback_info *why, void *arg, void *user)
{
    (void)why;
    (void)arg;
    (void)user;
    return 0;
}

int main(void)
{
    bw_error err;
    bench_init("pipeline_bench");

    unsigned long setup_allocs = allocs_now();
    bw_retry *retry = NULL;
    TRY("bw_retry_new", bw_retry_new(&retry));
    if (BENCH_COUNT_ALLOCS && allocs_now() == setup_allocs) {
        fprintf(stderr, "pipeline_bench: the malloc interposition counted nothing\n");
        return 1;
    }
    report("retry_success_ns", bench_median_ns(retry_loop, retry, ITERS, "the retry_success loop"), "ns");

    bw_retry *budgeted = NULL;
    bw_retry_budget *budget = NULL;
    TRY("bw_retry_new", bw_retry_new(&budgeted));
    TRY("bw_retry_budget_new", bw_retry_budget_new(10, 0.1, &budget, &err));
    TRY("bw_retry_set_budget", bw_retry_set_budget(budgeted, budget));
    report("retry_budget_success_ns", bench_median_ns(retry_loop, budgeted, ITERS, "the retry_budget_success loop"),
           "ns");

    bw_pipeline *only_retry = NULL;
    TRY("bw_pipeline_new", bw_pipeline_new("retry-only", &only_retry, &err));
    TRY("bw_pipeline_add_retry", bw_pipeline_add_retry(only_retry, retry, &err));
    report("retry_layer_ns", bench_median_ns(pipeline_loop, only_retry, ITERS, "the retry_layer loop"), "ns");

    bw_bulkhead *bh = NULL;
    TRY("bw_bulkhead_new", bw_bulkhead_new(8, 0, &bh, &err));
    report("bulkhead_ns", bench_median_ns(bulkhead_loop, bh, ITERS, "the bulkhead loop"), "ns");

    /* The recommended order, default breaker (slow-call detection on, system clock). */
    bw_breaker *b = NULL;
    TRY("bw_breaker_new", bw_breaker_new("bench", NULL, &b, &err));
    bw_pipeline *five = NULL;
    TRY("bw_pipeline_new", bw_pipeline_new("five", &five, &err));
    TRY("add_fallback", bw_pipeline_add_fallback(five, BW_FALLBACK_ON_ALL, never, NULL, &err));
    TRY("add_retry", bw_pipeline_add_retry(five, retry, &err));
    TRY("add_breaker", bw_pipeline_add_breaker(five, b, &err));
    TRY("add_bulkhead", bw_pipeline_add_bulkhead(five, bh, &err));
    TRY("add_timeout", bw_pipeline_add_timeout(five, BW_NS_PER_S, NULL, &err));
    report("pipeline5_ns", bench_median_ns(pipeline_loop, five, ITERS, "the pipeline5 loop"), "ns");

    bw_pipeline *only_breaker = NULL;
    TRY("bw_pipeline_new", bw_pipeline_new("breaker-only", &only_breaker, &err));
    TRY("add_breaker", bw_pipeline_add_breaker(only_breaker, b, &err));
    report("breaker_only_ns", bench_median_ns(pipeline_loop, only_breaker, ITERS, "the breaker_only loop"), "ns");

#if BENCH_COUNT_ALLOCS
    unsigned long a0 = allocs_now();
    long bad = 0;
    for (long i = 0; i < ITERS_ALLOC; i++)
        bad += bw_pipeline_execute(five, ok_call, NULL, NULL, NULL) != BW_OK;
    unsigned long a1 = allocs_now();
    sink = (int)bad;
    printf("BENCH allocations_per_call %.6f allocs\n", (double)(a1 - a0) / (double)ITERS_ALLOC);
#else
    printf("# allocations_per_call not measured: sanitizer build\n");
#endif
    if (bw_breaker_state(b) != BW_STATE_CLOSED || bw_bulkhead_in_flight(bh) != 0) {
        fprintf(stderr, "pipeline_bench: the breaker or the bulkhead ended in the wrong state\n");
        return 1;
    }

    bw_pipeline_free(only_breaker);
    bw_pipeline_free(five);
    bw_pipeline_free(only_retry);
    bw_breaker_free(b);
    bw_bulkhead_free(bh);
    bw_retry_free(budgeted);
    bw_retry_budget_free(budget);
    bw_retry_free(retry);
    return 0;
}
