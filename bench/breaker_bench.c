/*
 * breaker_bench.c — micro-benchmarks of the breaker's hot paths.
 *
 * Prints one line per figure, `BENCH <name> <value> <unit>`, each timed value the
 * median of RUNS runs after a warm-up; lines starting with '#' are comments.
 *
 *   closed_success_ns           acquire + settle(SUCCESS), CLOSED, count window of
 *                               100, slow-call detection on, system clock, counters off
 *                               (the default config but for counters: the path before them)
 *   closed_success_counters_ns  the same with counters on (the default config)
 *   closed_success_counters_minus_plain_ns
 *                               closed_success_counters - closed_success, both timed in
 *                               each of RUNS rounds; the median of the rounds' differences
 *   closed_success_noclock_ns   closed_success with slow_call_duration off (no clock read)
 *   open_reject_ns              acquire rejected by an OPEN breaker, with a bw_rejection
 *                               (counters on: the rejection is counted with one atomic addition)
 *   open_reject_nocounters_ns   the same with counters=false
 *   two_threads_one_breaker_ns  2 threads (pinned to 2 CPUs), one breaker
 *                               (window=time:60s), acquire + settle(SUCCESS);
 *                               wall time / total calls
 *   two_threads_count_window_ns the same on the default count window (not
 *                               striped: the threads share one lock)
 *   naive_closed_success_ns     closed_success on the naive reference breaker below
 *   naive_two_threads_ns        two_threads_one_breaker on the naive breaker
 *   two_threads_vs_naive_ratio  two_threads_one_breaker_ns / naive_two_threads_ns:
 *                               breakwater on a striped time window (window=time:60s)
 *                               against the naive breaker's single-mutex count ring
 *                               of 100 calls, not the same window on both sides
 *   oversubscribed_settle_p999_us  64 threads on 2 CPUs, one breaker (default count
 *                               window: one lock), each timing every acquire +
 *                               settle(SUCCESS); the 99.9th percentile over all
 *                               calls of all threads (the worst also printed)
 *   closed_success_vs_noclock_ratio
 *                               closed_success / closed_success_noclock, both timed in
 *                               each of RUNS rounds (the empty loop subtracted in each);
 *                               the median of the rounds' ratios
 *   two_threads_time_window_vs_one_ratio
 *                               the same for two_threads_one_breaker (a striped time window)
 *   two_threads_count_window_vs_one_ratio
 *                               per call, two threads on one count-window breaker over
 *                               one thread on it, both timed in each round; the median
 *                               ratio (1 = no slower per call; 0.5 = twice the throughput)
 *   allocations_per_call        heap allocations per acquire + settle after setup
 *   breaker_bytes               bw_breaker_bytes() of a 100-call count-window breaker
 *
 * Allocations are counted by tests/support/alloc_hook.h, which replaces malloc and
 * friends in this program. Sanitizer builds bring their own allocator, so there
 * the hook is compiled out and allocations_per_call is not reported.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "breakwater/breakwater.h"

#include "bench.h"

/* Iterations per timed run (tuned for roughly 10-20 s in all on a 2-core machine). */
#define ITERS_CLOSED 8000000L
#define ITERS_OPEN 12000000L
#define ITERS_THREADS 2500000L /* per thread */
#define ITERS_NAIVE 4000000L
#define ITERS_NAIVE_THREADS 1500000L /* per thread */
#define ITERS_ALLOC 1000000L

/* ---- allocation counting: tests/support/alloc_hook.h ---- */

#include "alloc_hook.h"
#define BENCH_COUNT_ALLOCS ALLOC_HOOK

/* ---- helpers ---- */

static volatile int sink;

static bw_breaker *make_breaker(const char *name, const char *text, int slow_off)
{
    bw_error err;
    bw_config *cfg = bw_config_new();
    if (!cfg)
        die("bw_config_new", BW_ENOMEM);
    int rc;
    if (text && (rc = bw_config_parse(cfg, text, &err)) != BW_OK) {
        fprintf(stderr, "%s\n", err.message);
        die("bw_config_parse", rc);
    }
    if (slow_off && (rc = bw_config_set_slow_call_duration(cfg, 0, &err)) != BW_OK)
        die("bw_config_set_slow_call_duration", rc);
    bw_breaker *b = NULL;
    if ((rc = bw_breaker_new(name, cfg, &b, &err)) != BW_OK) {
        fprintf(stderr, "%s\n", err.message);
        die("bw_breaker_new", rc);
    }
    bw_config_free(cfg);
    return b;
}

static void expect_state(bw_breaker *b, int state, const char *when)
{
    int st = bw_breaker_state(b);
    if (st != state) {
        fprintf(stderr, "breaker_bench: %s: state %s, expected %s\n", when, bw_state_name((bw_state)st),
                bw_state_name((bw_state)state));
        exit(1);
    }
}

/* ---- breakwater loads ---- */

static long success_loop(void *breaker, long iters)
{
    bw_breaker *b = breaker;
    long bad = 0;
    for (long i = 0; i < iters; i++) {
        bw_permit p;
        bad += bw_acquire(b, &p, NULL);
        bad += bw_settle(b, &p, BW_SUCCESS);
        BARRIER();
    }
    return bad;
}

static long empty_loop(void *unused, long iters)
{
    (void)unused;
    for (long i = 0; i < iters; i++)
        BARRIER();
    return 0;
}

/* ns per iteration of one run of loop. */
static double run_ns(bench_loop loop, void *ctx, long iters, const char *what)
{
    int64_t t0 = mono_ns();
    bench_check(what, loop(ctx, iters));
    return (double)(mono_ns() - t0) / (double)iters;
}

/*
 * The median over RUNS rounds of a / b, where each round times a, b and the
 * empty loop back to back and subtracts the empty loop from both: what a wall
 * figure means on a machine whose speed changes from second to second.
 * two_threads: a runs on two threads (per call: wall time / both threads' calls).
 */
static double ratio_median(bench_loop la, void *ca, bench_loop lb, void *cb, int two_threads, long iters)
{
    double v[RUNS];
    run_ns(la, ca, iters / 4, "a warm-up");
    run_ns(lb, cb, iters / 4, "a warm-up");
    for (int r = 0; r < RUNS; r++) {
        double a = two_threads ? bench_two_threads_ns(la, ca, ca, iters / 2, "the two-thread loop")
                               : run_ns(la, ca, iters, "the success loop");
        double b = run_ns(lb, cb, iters, "the success loop");
        double e = run_ns(empty_loop, NULL, iters, "the empty loop");
        v[r] = (a - e) / (b - e);
    }
    return median(v, RUNS);
}

/* The median over RUNS rounds of (a - b) per call, both timed in each round (the empty loop cancels). */
static double diff_median(bench_loop la, void *ca, bench_loop lb, void *cb, long iters)
{
    double v[RUNS];
    run_ns(la, ca, iters / 4, "a warm-up");
    run_ns(lb, cb, iters / 4, "a warm-up");
    for (int r = 0; r < RUNS; r++) {
        double a = run_ns(la, ca, iters, "the success loop");
        double b = run_ns(lb, cb, iters, "the success loop");
        v[r] = a - b;
    }
    return median(v, RUNS);
}

static double bench_closed(bw_breaker *b, long iters)
{
    double ns = bench_median_ns(success_loop, b, iters, "the success loop");
    expect_state(b, BW_STATE_CLOSED, "after the closed loop");
    return ns;
}

static long reject_loop(void *breaker, long iters)
{
    bw_breaker *b = breaker;
    long admitted = 0;
    for (long i = 0; i < iters; i++) {
        bw_permit p;
        bw_rejection why;
        admitted += bw_acquire(b, &p, &why) != BW_REJECTED;
        BARRIER();
    }
    return admitted;
}

static double bench_open_reject(long iters, const char *text)
{
    bw_breaker *b = make_breaker("bench-open", text, 0);
    for (int i = 0; i < 100 && bw_breaker_state(b) == BW_STATE_CLOSED; i++) {
        bw_permit p;
        if (bw_acquire(b, &p, NULL) == BW_OK)
            bw_settle_ex(b, &p, BW_FAILURE, 503);
    }
    expect_state(b, BW_STATE_OPEN, "after tripping");
    /* The warm-up is a whole run here. */
    double ns = bench_median_ns_warm(reject_loop, b, iters, iters, "the reject loop on the open breaker");
    expect_state(b, BW_STATE_OPEN, "after the reject loop");
    bw_breaker_free(b);
    return ns;
}

/* ---- the naive reference breaker ---- */

/*
 * What a straightforward implementation looks like: one mutex taken by both
 * acquire (to read the state) and settle (to record), a count window of 100 calls
 * as a ring, CLOCK_MONOTONIC read at acquire and at settle, and the failure and
 * slow rates recomputed on every settle. Same thresholds as the defaults.
 */
#define NAIVE_WINDOW 100

typedef struct naive {
    pthread_mutex_t mu;
    int open;
    int64_t open_until;
    unsigned char ring[NAIVE_WINDOW]; /* bit 0 used, bit 1 failed, bit 2 slow */
    unsigned head, total, failed, slow;
} naive;

static void naive_init(naive *n)
{
    memset(n, 0, sizeof *n);
    pthread_mutex_init(&n->mu, NULL);
}

static int naive_acquire(naive *n, int64_t *start)
{
    int64_t now = mono_ns();
    int ok = 1;
    pthread_mutex_lock(&n->mu);
    if (n->open) {
        if (now < n->open_until) {
            ok = 0;
        } else {
            n->open = 0;
            memset(n->ring, 0, sizeof n->ring);
            n->head = n->total = n->failed = n->slow = 0;
        }
    }
    pthread_mutex_unlock(&n->mu);
    *start = now;
    return ok;
}

/* Out of line, as it has always been timed (with one call site left it would be inlined). */
static __attribute__((noinline)) void naive_settle(naive *n, int64_t start, int failed)
{
    int64_t now = mono_ns();
    int slow = now - start >= 60 * BW_NS_PER_S;
    pthread_mutex_lock(&n->mu);
    unsigned char old = n->ring[n->head];
    if (old & 1) {
        n->total--;
        n->failed -= (old >> 1) & 1;
        n->slow -= (old >> 2) & 1;
    }
    n->ring[n->head] = (unsigned char)(1 | (failed ? 2 : 0) | (slow ? 4 : 0));
    n->head = (n->head + 1) % NAIVE_WINDOW;
    n->total++;
    n->failed += (unsigned)(failed != 0);
    n->slow += (unsigned)slow;
    if (!n->open && n->total >= 10 && ((double)n->failed / n->total >= 0.5 || (double)n->slow / n->total >= 1.0)) {
        n->open = 1;
        n->open_until = now + 60 * BW_NS_PER_S;
    }
    pthread_mutex_unlock(&n->mu);
}

static long naive_loop(void *breaker, long iters)
{
    naive *n = breaker;
    long bad = 0;
    for (long i = 0; i < iters; i++) {
        int64_t start;
        if (naive_acquire(n, &start))
            naive_settle(n, start, 0);
        else
            bad++;
        BARRIER();
    }
    return bad;
}

static double bench_naive_closed(long iters)
{
    naive n;
    naive_init(&n);
    double ns = bench_median_ns(naive_loop, &n, iters, "the naive loop");
    pthread_mutex_destroy(&n.mu);
    return ns;
}

/* ---- two threads, one breaker ---- */

/* Wall time of two threads (pinned to 2 CPUs) doing `iters` calls each on b, in ns per call. */
static double two_threads_run(bw_breaker *b, long iters)
{
    return bench_two_threads_ns(success_loop, b, b, iters, "the two-thread loop");
}

static double two_threads_naive_run(naive *n, long iters)
{
    return bench_two_threads_ns(naive_loop, n, n, iters, "the naive two-thread loop");
}

/*
 * The breakwater and naive two-thread loads, their runs interleaved so that both
 * see the same phases of a noisy machine (a VM's vCPUs come and go).
 */
static void bench_two_threads(bw_breaker *b, naive *n, double *bw_ns, double *naive_ns)
{
    double vb[RUNS], vn[RUNS];
    two_threads_run(b, ITERS_THREADS / 4); /* warm-up */
    two_threads_naive_run(n, ITERS_NAIVE_THREADS / 4);
    for (int r = 0; r < RUNS; r++) {
        vb[r] = two_threads_run(b, ITERS_THREADS);
        vn[r] = two_threads_naive_run(n, ITERS_NAIVE_THREADS);
    }
    *bw_ns = median(vb, RUNS);
    *naive_ns = median(vn, RUNS);
}

/* ---- many more threads than CPUs on one lock ---- */

#define OVER_THREADS 64
#define OVER_CALLS 20000L /* per thread */

typedef struct over {
    bw_breaker *b;
    atomic_int *go;
    float *us; /* OVER_CALLS latencies */
} over;

static void *over_main(void *arg)
{
    over *o = arg;
    while (!atomic_load_explicit(o->go, memory_order_acquire))
        sched_yield();
    for (long i = 0; i < OVER_CALLS; i++) {
        int64_t t0 = mono_ns();
        bw_permit p;
        if (bw_acquire(o->b, &p, NULL) == BW_OK)
            bw_settle(o->b, &p, BW_SUCCESS);
        o->us[i] = (float)(mono_ns() - t0) / 1000.0f;
    }
    return NULL;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* p99.9 of one acquire + settle with OVER_THREADS threads on one breaker, in us; *worst the maximum. */
static double bench_oversubscribed(double *worst)
{
    bw_breaker *b = make_breaker("bench-over", NULL, 0);
    float *all = malloc(sizeof(float) * OVER_THREADS * OVER_CALLS);
    if (!all)
        die("malloc", BW_ENOMEM);
    pthread_t th[OVER_THREADS];
    over o[OVER_THREADS];
    atomic_int go = 0;
    for (int i = 0; i < OVER_THREADS; i++) {
        o[i] = (over){b, &go, all + (size_t)i * OVER_CALLS};
        if (pthread_create(&th[i], NULL, over_main, &o[i]) != 0)
            die("pthread_create", BW_ESYS);
    }
    atomic_store_explicit(&go, 1, memory_order_release);
    for (int i = 0; i < OVER_THREADS; i++)
        pthread_join(th[i], NULL);
    expect_state(b, BW_STATE_CLOSED, "after the oversubscribed loop");
    bw_breaker_free(b);
    size_t n = (size_t)OVER_THREADS * OVER_CALLS;
    qsort(all, n, sizeof *all, cmp_float);
    double p999 = all[n - n / 1000 - 1];
    *worst = all[n - 1];
    free(all);
    return p999;
}

/* ---- main ---- */

/* The figures of one lock under contention alone: `breaker_bench contended`. */
static int contended_only(void)
{
    bw_breaker *counted = make_breaker("bench-threads-count", NULL, 0);
    report("two_threads_count_window_ns",
           bench_two_threads_median_ns(success_loop, counted, counted, ITERS_THREADS, "the two-thread loop"), "ns");
    bw_breaker_free(counted);
    double v[RUNS], w[RUNS];
    for (int r = 0; r < RUNS; r++)
        v[r] = bench_oversubscribed(&w[r]);
    report("oversubscribed_settle_p999_us", median(v, RUNS), "us");
    return 0;
}

int main(int argc, char **argv)
{
    bench_init("breaker_bench");
    if (argc > 1 && strcmp(argv[1], "contended") == 0)
        return contended_only();

    /* CLOSED, default config: count window of 100, slow calls at 60 s. */
    unsigned long setup_allocs = allocs_now();
    bw_breaker *closed = make_breaker("bench-closed", "counters=false", 0);
    if (BENCH_COUNT_ALLOCS && allocs_now() == setup_allocs) {
        fprintf(stderr, "breaker_bench: the malloc interposition counted nothing\n");
        return 1;
    }
    report("closed_success_ns", bench_closed(closed, ITERS_CLOSED), "ns");
    bw_breaker *with_counters = make_breaker("bench-counters", NULL, 0);
    report("closed_success_counters_ns", bench_closed(with_counters, ITERS_CLOSED), "ns");
    printf("BENCH closed_success_counters_minus_plain_ns %.2f ns\n",
           diff_median(success_loop, with_counters, success_loop, closed, ITERS_CLOSED / 4));
    bw_breaker_free(with_counters);

    bw_breaker *noclock = make_breaker("bench-noclock", "counters=false", 1);
    report("closed_success_noclock_ns", bench_closed(noclock, ITERS_CLOSED), "ns");
    printf("BENCH closed_success_vs_noclock_ratio %.3f ratio\n",
           ratio_median(success_loop, closed, success_loop, noclock, 0, ITERS_CLOSED / 4));
    bw_breaker_free(noclock);

    report("open_reject_ns", bench_open_reject(ITERS_OPEN, "wait=1h"), "ns");
    report("open_reject_nocounters_ns", bench_open_reject(ITERS_OPEN, "wait=1h counters=false"), "ns");

    bw_breaker *timed = make_breaker("bench-threads", "window=time:60s", 0);
    naive n;
    naive_init(&n);
    double two, naive_two;
    bench_two_threads(timed, &n, &two, &naive_two);
    expect_state(timed, BW_STATE_CLOSED, "after the two-thread loop");
    double two_timed_ratio = ratio_median(success_loop, timed, success_loop, timed, 1, ITERS_THREADS);
    bw_breaker_free(timed);
    pthread_mutex_destroy(&n.mu);
    report("two_threads_one_breaker_ns", two, "ns");
    printf("BENCH two_threads_time_window_vs_one_ratio %.3f ratio\n", two_timed_ratio);

    /* The same load on a count window, which is not striped (one lock). */
    bw_breaker *counted = make_breaker("bench-threads-count", NULL, 0);
    double two_counted =
        bench_two_threads_median_ns(success_loop, counted, counted, ITERS_THREADS, "the two-thread loop");
    report("two_threads_count_window_ns", two_counted, "ns");
    printf("BENCH two_threads_count_window_vs_one_ratio %.3f ratio\n",
           ratio_median(success_loop, counted, success_loop, counted, 1, ITERS_THREADS));
    bw_breaker_free(counted);

    double v[RUNS], w[RUNS];
    for (int r = 0; r < RUNS; r++)
        v[r] = bench_oversubscribed(&w[r]);
    printf("# oversubscribed: %d threads x %ld calls a run; worst single call (median of runs) %.0f us\n", OVER_THREADS,
           OVER_CALLS, median(w, RUNS));
    report("oversubscribed_settle_p999_us", median(v, RUNS), "us");

    report("naive_closed_success_ns", bench_naive_closed(ITERS_NAIVE), "ns");
    report("naive_two_threads_ns", naive_two, "ns");
    printf("BENCH two_threads_vs_naive_ratio %.3f ratio\n", two / naive_two);
    fflush(stdout);

    /* Allocations: the closed breaker is set up and warm; count N calls on it. */
#if BENCH_COUNT_ALLOCS
    success_loop(closed, 1000);
    unsigned long a0 = allocs_now();
    long bad = success_loop(closed, ITERS_ALLOC);
    unsigned long a1 = allocs_now();
    sink = (int)bad;
    printf("BENCH allocations_per_call %.6f allocs\n", (double)(a1 - a0) / (double)ITERS_ALLOC);
#else
    printf("# allocations_per_call not measured: sanitizer build\n");
#endif
    bw_breaker_free(closed);

    bw_breaker *sized = make_breaker("bench-bytes", "window=count:100", 0);
    printf("BENCH breaker_bytes %zu bytes\n", bw_breaker_bytes(sized));
    bw_breaker_free(sized);
    return 0;
}
