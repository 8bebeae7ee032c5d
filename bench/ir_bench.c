/*
 * ir_bench.c — one hot path, run under valgrind's callgrind, which counts
 * instructions (and, with its cache simulation, L1 misses): figures that the
 * noise of a virtual machine cannot move. `make bench-ir` runs it once per
 * path (scripts/bench_ir.sh) and prints what each call costs.
 *
 *   ir_bench PATH ITERS
 *
 * sets up PATH outside the measured part, warms it up, then runs ITERS
 * iterations of its loop with callgrind's collection switched on around the
 * loop only (CALLGRIND_TOGGLE_COLLECT; the script starts callgrind with
 * --collect-atstart=no). The path `empty` is the reference: the same loop with
 * nothing in it, which the script subtracts.
 *
 * Paths (the table; every breaker has the default configuration unless
 * said otherwise: a 100-call count window, slow-call detection at 60 s):
 *   empty                     the loop alone
 *   closed_success            acquire + settle(SUCCESS), CLOSED (counters on, the default)
 *   closed_success_nocounters the same with counters=false (the path before counters)
 *   closed_success_noclock    the same with slow_call_duration=off counters=false (nothing needs the clock)
 *   closed_failure            acquire + settle(FAILURE) where the trip test runs and does not trip:
 *                             63 calls in 64 fail, failure_rate=1, so the window
 *                             holds about 98 % failures and the test runs on nearly every call
 *   time_window_failure       acquire + settle(FAILURE) on window=time:60s holding 100,000 successes,
 *                             so that the rate stays far below its threshold (50 %)
 *   open_reject               acquire in OPEN, filling a bw_rejection
 *   half_open_probe           acquire + settle(SUCCESS) of a probe in a round that stays open
 *                             (permitted_probes=1000000, max_concurrent_probes=1000; a manual clock)
 *   keyed_hot                 bw_keyed_acquire + bw_settle on one resident key
 *   pipeline5                 a five-layer pipeline (fallback, retry, breaker, bulkhead, deadline), success
 *   stored_shm                acquire + settle(SUCCESS) in stored mode on shm:, one process
 *   round_robin_100k          acquire + settle on 100,000 breakers in turn (for L1 misses a call)
 *   keyed_random_100k         keyed acquire + settle on a random one of 100,000 resident keys
 *   registry_random_1m        bw_registry_get of a random one of 1,000,000 names
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#include "breakwater/breakwater.h"

#define BARRIER() __asm__ __volatile__("" ::: "memory")

static void die(const char *what, int rc, const bw_error *err)
{
    fprintf(stderr, "ir_bench: %s failed: %s%s%s\n", what, bw_strerror(rc), err ? ": " : "", err ? err->message : "");
    exit(1);
}

static bw_breaker *make(const char *name, const char *text)
{
    bw_config *c = bw_config_new();
    bw_error e;
    int rc;
    if (!c)
        die("bw_config_new", BW_ENOMEM, NULL);
    if (text && (rc = bw_config_parse(c, text, &e)) != BW_OK)
        die("bw_config_parse", rc, &e);
    bw_breaker *b = NULL;
    if ((rc = bw_breaker_new(name, c, &b, &e)) != BW_OK)
        die("bw_breaker_new", rc, &e);
    bw_config_free(c);
    return b;
}

/* acquire + settle, inlined into each loop so that no frame of the bench's own is counted. */
static inline __attribute__((always_inline)) void call(bw_breaker *b, bw_outcome o)
{
    bw_permit p;
    if (bw_acquire(b, &p, NULL) == BW_OK)
        bw_settle(b, &p, o);
}

/* A fixed pseudo-random sequence (xorshift), so that every run measures the same calls. */
static uint32_t rnd_state = 2463534242u;

static uint32_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 17;
    rnd_state ^= rnd_state << 5;
    return rnd_state;
}

/* An index sequence of n random picks from [0, range), precomputed outside the measured loop. */
static uint32_t *picks(long n, uint32_t range)
{
    uint32_t *v = malloc((size_t)n * sizeof *v);
    if (!v)
        die("malloc", BW_ENOMEM, NULL);
    for (long i = 0; i < n; i++)
        v[i] = rnd() % range;
    return v;
}

/*
 * The names picked, copied in the order of the picks into one array of 32-byte
 * slots: the loop then reads the caller's names in order, so that the misses
 * counted are the library's, not those of the bench's own scattered strings.
 */
#define PICKED 32
static char *in_order(char **nm, const uint32_t *pick, long n)
{
    char *v = malloc((size_t)n * PICKED);
    if (!v)
        die("malloc", BW_ENOMEM, NULL);
    for (long i = 0; i < n; i++)
        snprintf(v + i * PICKED, PICKED, "%s", nm[pick[i]]);
    return v;
}

static char **names(uint32_t n, const char *prefix)
{
    char **v = malloc(n * sizeof *v);
    if (!v)
        die("malloc", BW_ENOMEM, NULL);
    for (uint32_t i = 0; i < n; i++) {
        char buf[48];
        snprintf(buf, sizeof buf, "%s-%u", prefix, i);
        v[i] = strdup(buf);
        if (!v[i])
            die("strdup", BW_ENOMEM, NULL);
    }
    return v;
}

/* ---- the pipeline's task and fallback ---- */

static int task_ok(bw_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return 0;
}

static int never(const bw_fallback_info *why, void *arg, void *user)
{
    (void)why;
    (void)arg;
    (void)user;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: ir_bench PATH ITERS\n");
        return 2;
    }
    const char *path = argv[1];
    long n = atol(argv[2]);
    bw_error e;
    int rc;

#define MEASURE(body)                                                                                                  \
    do {                                                                                                               \
        for (long i = 0; i < n / 10 + 1; i++) { /* warm-up */                                                          \
            body;                                                                                                      \
            BARRIER();                                                                                                 \
        }                                                                                                              \
        CALLGRIND_TOGGLE_COLLECT;                                                                                      \
        for (long i = 0; i < n; i++) {                                                                                 \
            body;                                                                                                      \
            BARRIER();                                                                                                 \
        }                                                                                                              \
        CALLGRIND_TOGGLE_COLLECT;                                                                                      \
    } while (0)

    if (strcmp(path, "empty") == 0) {
        MEASURE((void)0);
    } else if (strcmp(path, "closed_success") == 0) {
        bw_breaker *b = make("svc", NULL);
        MEASURE(call(b, BW_SUCCESS));
    } else if (strcmp(path, "closed_success_nocounters") == 0) {
        bw_breaker *b = make("svc", "counters=false");
        MEASURE(call(b, BW_SUCCESS));
    } else if (strcmp(path, "closed_success_noclock") == 0) {
        bw_breaker *b = make("svc", "slow_call_duration=off counters=false");
        MEASURE(call(b, BW_SUCCESS));
    } else if (strcmp(path, "closed_failure") == 0) {
        bw_breaker *b = make("svc", "failure_rate=1");
        for (int i = 0; i < 100; i++) /* a window of successes to start from */
            call(b, BW_SUCCESS);
        /* One success in 64 calls keeps the rate below 100 %; the mask divides nothing. */
        MEASURE(call(b, (i & 63) == 0 ? BW_SUCCESS : BW_FAILURE));
    } else if (strcmp(path, "time_window_failure") == 0) {
        bw_breaker *b = make("svc", "window=time:60s");
        for (int i = 0; i < 100000; i++) /* 100,000 successes: 20,000 failures stay below 50 % */
            call(b, BW_SUCCESS);
        MEASURE(call(b, BW_FAILURE));
    } else if (strcmp(path, "open_reject") == 0) {
        bw_breaker *b = make("svc", "wait=1h");
        bw_breaker_force_open(b);
        bw_breaker_reset(b);
        for (int i = 0; i < 100; i++)
            call(b, BW_FAILURE);
        bw_permit p;
        bw_rejection why;
        MEASURE(bw_acquire(b, &p, &why));
    } else if (strcmp(path, "half_open_probe") == 0) {
        bw_clock *clk = NULL;
        if ((rc = bw_clock_manual_new(0, &clk)) != BW_OK)
            die("bw_clock_manual_new", rc, NULL);
        bw_config *c = bw_config_new();
        if ((rc = bw_config_parse(c, "permitted_probes=1000000 max_concurrent_probes=1000 wait=1s", &e)) != BW_OK)
            die("bw_config_parse", rc, &e);
        bw_config_set_clock(c, clk);
        bw_breaker *b = NULL;
        if ((rc = bw_breaker_new("svc", c, &b, &e)) != BW_OK)
            die("bw_breaker_new", rc, &e);
        bw_config_free(c);
        for (int i = 0; i < 100; i++)
            call(b, BW_FAILURE);
        bw_clock_manual_advance(clk, 2 * BW_NS_PER_S); /* the next acquire opens the round */
        if (n + n / 10 + 1 >= 1000000)
            die("half_open_probe: the round of 1000000 probes would end", BW_ERANGE, NULL);
        MEASURE(call(b, BW_SUCCESS));
        if (bw_breaker_state(b) != BW_STATE_HALF_OPEN)
            die("half_open_probe: the round did not stay open", BW_ESTATE, NULL);
    } else if (strcmp(path, "keyed_hot") == 0) {
        bw_breaker *b = make("svc", NULL);
        MEASURE({
            bw_permit p;
            if (bw_keyed_acquire(b, "tenant-1", &p, NULL) == BW_OK)
                bw_settle(b, &p, BW_SUCCESS);
        });
    } else if (strcmp(path, "pipeline5") == 0) { /* as bench/pipeline_bench.c's pipeline5 */
        bw_breaker *b = make("svc", NULL);
        bw_retry *r = NULL;
        bw_bulkhead *bh = NULL;
        bw_pipeline *p = NULL;
        if ((rc = bw_retry_new(&r)) != BW_OK || (rc = bw_bulkhead_new(8, 0, &bh, &e)) != BW_OK ||
            (rc = bw_pipeline_new("five", &p, &e)) != BW_OK)
            die("the pipeline's parts", rc, &e);
        if ((rc = bw_pipeline_add_fallback(p, BW_FALLBACK_ON_ALL, never, NULL, &e)) != BW_OK ||
            (rc = bw_pipeline_add_retry(p, r, &e)) != BW_OK || (rc = bw_pipeline_add_breaker(p, b, &e)) != BW_OK ||
            (rc = bw_pipeline_add_bulkhead(p, bh, &e)) != BW_OK ||
            (rc = bw_pipeline_add_timeout(p, BW_NS_PER_S, NULL, &e)) != BW_OK)
            die("bw_pipeline_add_*", rc, &e);
        MEASURE(bw_pipeline_execute(p, task_ok, NULL, NULL, NULL));
    } else if (strcmp(path, "stored_shm") == 0) {
        char url[64];
        snprintf(url, sizeof url, "shm:bw-ir-%ld", (long)getpid());
        bw_store *s = NULL;
        if ((rc = bw_store_open(url, &s, &e)) != BW_OK)
            die("bw_store_open", rc, &e);
        bw_config *c = bw_config_new();
        bw_config_set_store(c, s, BW_STORE_STORED, &e);
        bw_breaker *b = NULL;
        if ((rc = bw_breaker_new("svc", c, &b, &e)) != BW_OK)
            die("bw_breaker_new", rc, &e);
        bw_config_free(c);
        MEASURE(call(b, BW_SUCCESS));
        snprintf(url, sizeof url, "/bw-ir-%ld", (long)getpid());
        shm_unlink(url);
    } else if (strcmp(path, "round_robin_100k") == 0) {
        enum { N = 100000 };
        bw_breaker **bs = malloc(N * sizeof *bs);
        char **nm = names(N, "rr");
        for (int i = 0; i < N; i++)
            bs[i] = make(nm[i], NULL);
        long at = 0;
        MEASURE({
            call(bs[at], BW_SUCCESS);
            if (++at == N) /* no division in the loop: it would be counted */
                at = 0;
        });
    } else if (strcmp(path, "keyed_random_100k") == 0) {
        enum { N = 100000 };
        bw_config *c = bw_config_new();
        bw_config_set_keyed_maxsize(c, 0, &e); /* all resident */
        bw_breaker *b = NULL;
        if ((rc = bw_breaker_new("svc", c, &b, &e)) != BW_OK)
            die("bw_breaker_new", rc, &e);
        bw_config_free(c);
        char **keys = names(N, "tenant");
        for (int i = 0; i < N; i++) {
            bw_permit p;
            if (bw_keyed_acquire(b, keys[i], &p, NULL) == BW_OK)
                bw_settle(b, &p, BW_SUCCESS);
        }
        char *seq = in_order(keys, picks(n + n / 10 + 1, N), n + n / 10 + 1);
        long at = 0;
        MEASURE({
            bw_permit p;
            if (bw_keyed_acquire(b, seq + PICKED * at++, &p, NULL) == BW_OK)
                bw_settle(b, &p, BW_SUCCESS);
        });
    } else if (strcmp(path, "registry_random_1m") == 0) {
        enum { N = 1000000 };
        bw_registry *r = NULL;
        if ((rc = bw_registry_new(NULL, &r, &e)) != BW_OK)
            die("bw_registry_new", rc, &e);
        char **nm = names(N, "dep");
        bw_breaker *b;
        for (int i = 0; i < N; i++)
            if ((rc = bw_registry_get(r, nm[i], NULL, &b, &e)) != BW_OK)
                die("bw_registry_get", rc, &e);
        char *seq = in_order(nm, picks(n + n / 10 + 1, N), n + n / 10 + 1);
        long at = 0;
        MEASURE(bw_registry_get(r, seq + PICKED * at++, NULL, &b, NULL));
    } else {
        fprintf(stderr, "ir_bench: unknown path '%s'\n", path);
        return 2;
    }
    return 0;
}
