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
 * Allocations are counted by tests/alloc_hook.h; a sanitizer build does not
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

#define RUNS 7
#define ITERS 5000000L
#define ITERS_ALLOC 1000000L

#define BARRIER() __asm__ __volatile__("" ::: "memory")

#include "alloc_hook.h"
#define BENCH_COUNT_ALLOCS ALLOC_HOOK

static volatile int sink;
static int verbose;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what, int rc, const bw_error *err)
{
    fprintf(stderr, "pipeline_bench: %s failed: %s (%d)%s%s\n", what, bw_strerror(rc), rc, err ? ": " : "",
            err ? err->message : "");
    exit(1);
}

#define TRY(what, expr)                                                                                                \
    do {                                                                                                               \
        int rc_ = (expr);                                                                                              \
        if (rc_ != BW_OK)                                                                                              \
            die(what, rc_, &err);                                                                                      \
    } while (0)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (verbose) {
        printf("#  runs:");
        for (int i = 0; i < n; i++)
            printf(" %.2f", v[i]);
        printf("\n");
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void report(const char *name, double value, const char *unit)
{
    printf("BENCH %s %.2f %s\n", name, value, unit);
    fflush(stdout);
}

/* Median ns per iteration of `body` over RUNS runs of `iters`, after a warm-up run. */
#define MEASURE(out, iters, body)                                                                                      \
    do {                                                                                                               \
        double v_[RUNS];                                                                                               \
        long bad_ = 0;                                                                                                 \
        for (int r_ = -1; r_ < RUNS; r_++) {                                                                           \
            long n_ = r_ < 0 ? (iters) / 4 : (iters);                                                                  \
            int64_t t0_ = mono_ns();                                                                                   \
            for (long i_ = 0; i_ < n_; i_++) {                                                                         \
                bad_ += (body) != 0;                                                                                   \
                BARRIER();                                                                                             \
            }                                                                                                          \
            int64_t t1_ = mono_ns();                                                                                   \
            if (r_ >= 0)                                                                                               \
                v_[r_] = (double)(t1_ - t0_) / (double)n_;                                                             \
        }                                                                                                              \
        if (bad_) {                                                                                                    \
            fprintf(stderr, "pipeline_bench: %ld iterations did not succeed\n", bad_);                                 \
            exit(1);                                                                                                   \
        }                                                                                                              \
        out = median(v_, RUNS);                                                                                        \
    } while (0)

static int ok_call(bw_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return 0;
}

static int retry_once(const bw_retry *r)
{
    bw_retry_state st;
    bw_attempt a = {BW_OK, 0, BW_NO_TIME};
    int64_t delay;
    bw_retry_begin(r, &st);
    return bw_retry_next(&st, &a, &delay); /* BW_RETRY_DONE == 0 */
}

static int bulkhead_once(bw_bulkhead *bh)
{
    int rc = bw_bulkhead_acquire(bh);
    return rc | bw_bulkhead_release(bh);
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
    verbose = getenv("BENCH_VERBOSE") != NULL;
    printf("# breakwater %s pipeline_bench: nproc=%ld, %d runs per figure (median), clock=%s\n", bw_version_string(),
           sysconf(_SC_NPROCESSORS_ONLN), RUNS, getenv("BW_CLOCK") ? getenv("BW_CLOCK") : "system");
    fflush(stdout);
    double v;

    bw_retry *retry = NULL;
    TRY("bw_retry_new", bw_retry_new(&retry));
    MEASURE(v, ITERS, retry_once(retry));
    report("retry_success_ns", v, "ns");

    bw_retry *budgeted = NULL;
    bw_retry_budget *budget = NULL;
    TRY("bw_retry_new", bw_retry_new(&budgeted));
    TRY("bw_retry_budget_new", bw_retry_budget_new(10, 0.1, &budget, &err));
    TRY("bw_retry_set_budget", bw_retry_set_budget(budgeted, budget));
    MEASURE(v, ITERS, retry_once(budgeted));
    report("retry_budget_success_ns", v, "ns");

    bw_pipeline *only_retry = NULL;
    TRY("bw_pipeline_new", bw_pipeline_new("retry-only", &only_retry, &err));
    TRY("bw_pipeline_add_retry", bw_pipeline_add_retry(only_retry, retry, &err));
    MEASURE(v, ITERS, bw_pipeline_execute(only_retry, ok_call, NULL, NULL, NULL));
    report("retry_layer_ns", v, "ns");

    bw_bulkhead *bh = NULL;
    TRY("bw_bulkhead_new", bw_bulkhead_new(8, 0, &bh, &err));
    MEASURE(v, ITERS, bulkhead_once(bh));
    report("bulkhead_ns", v, "ns");

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
    MEASURE(v, ITERS, bw_pipeline_execute(five, ok_call, NULL, NULL, NULL));
    report("pipeline5_ns", v, "ns");

    bw_pipeline *only_breaker = NULL;
    TRY("bw_pipeline_new", bw_pipeline_new("breaker-only", &only_breaker, &err));
    TRY("add_breaker", bw_pipeline_add_breaker(only_breaker, b, &err));
    MEASURE(v, ITERS, bw_pipeline_execute(only_breaker, ok_call, NULL, NULL, NULL));
    report("breaker_only_ns", v, "ns");

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
