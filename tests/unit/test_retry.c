/*
 * test_retry.c (tests/unit/) — the retry policy without a pipeline: every delay
 * formula and jitter mode against an independent SplitMix64 and against
 * hand-computed values, result-given delays, fail-fast and patient rejections,
 * the overall deadline on a manual clock, the predicate, the budget's
 * arithmetic at its boundaries, both shared by threads (exact results), and bad
 * arguments.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"

#define MS BW_NS_PER_MS

/* SplitMix64 written out again here, as retry.h documents it. */
static uint64_t sm_state;

static uint64_t sm_next(void)
{
    uint64_t z = (sm_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double sm_u(void)
{
    return (double)(sm_next() >> 11) * 0x1.0p-53;
}

static bw_retry *policy(int attempts, bw_backoff kind, int64_t base, double mult, int64_t cap, bw_jitter jitter)
{
    bw_retry *r = NULL;
    CHECK_OK(bw_retry_new(&r));
    CHECK_OK(bw_retry_set_attempts(r, attempts, NULL));
    CHECK_OK(bw_retry_set_backoff(r, kind, base, mult, cap, NULL));
    CHECK_OK(bw_retry_set_jitter(r, jitter, NULL));
    return r;
}

/* Feed failing attempts (rc 1) until the loop stops; the delays go to out. */
static int delays_of(bw_retry *r, int64_t *out, int max, int *verdict)
{
    bw_retry_state st;
    CHECK_OK(bw_retry_begin(r, &st));
    int n = 0;
    for (;;) {
        bw_attempt a = {BW_OK, 1, BW_NO_TIME};
        int64_t d = -1;
        int v = bw_retry_next(&st, &a, &d);
        if (v != BW_RETRY_AGAIN) {
            CHECK_INT(d, 0);
            if (verdict)
                *verdict = v;
            break;
        }
        if (n < max)
            out[n] = d;
        n++;
    }
    return n;
}

static void test_formulas_without_jitter(void)
{
    int64_t d[8];
    int v;
    bw_retry *r = policy(5, BW_BACKOFF_CONSTANT, 250 * MS, 1, 250 * MS, BW_JITTER_NONE);
    CHECK_INT(delays_of(r, d, 8, &v), 4);
    CHECK_INT(v, BW_RETRY_EXHAUSTED);
    for (int i = 0; i < 4; i++)
        CHECK_INT(d[i], 250 * MS);
    bw_retry_free(r);

    r = policy(6, BW_BACKOFF_LINEAR, 100 * MS, 1, 350 * MS, BW_JITTER_NONE);
    CHECK_INT(delays_of(r, d, 8, &v), 5);
    const int64_t linear[] = {100 * MS, 200 * MS, 300 * MS, 350 * MS, 350 * MS};
    for (int i = 0; i < 5; i++)
        CHECK_INT(d[i], linear[i]);
    bw_retry_free(r);

    r = policy(6, BW_BACKOFF_EXPONENTIAL, 100 * MS, 3, 1000 * MS, BW_JITTER_NONE);
    CHECK_INT(delays_of(r, d, 8, &v), 5);
    const int64_t expo[] = {100 * MS, 300 * MS, 900 * MS, 1000 * MS, 1000 * MS};
    for (int i = 0; i < 5; i++)
        CHECK_INT(d[i], expo[i]);
    bw_retry_free(r);

    /* A huge attempt count never overflows: the power stops at the cap. */
    r = policy(1000, BW_BACKOFF_EXPONENTIAL, 1, 1000, 30 * BW_NS_PER_S, BW_JITTER_NONE);
    int64_t big[1000];
    CHECK_INT(delays_of(r, big, 1000, &v), 999);
    CHECK_INT(big[0], 1);
    CHECK_INT(big[1], 1000);
    CHECK_INT(big[998], 30 * BW_NS_PER_S);
    bw_retry_free(r);
}

/* Every jitter mode against the seeded source, computed independently. */
static void test_jitter_against_seeded_source(void)
{
    const bw_jitter modes[] = {BW_JITTER_FULL, BW_JITTER_EQUAL, BW_JITTER_DECORRELATED};
    for (int m = 0; m < 3; m++) {
        bw_retry *r = policy(8, BW_BACKOFF_EXPONENTIAL, 100 * MS, 2, 1500 * MS, modes[m]);
        CHECK_OK(bw_retry_set_seed(r, 12345));
        int64_t d[8];
        CHECK_INT(delays_of(r, d, 8, NULL), 7);
        sm_state = 12345;
        double base = 100.0 * MS, cap = 1500.0 * MS, raw = base;
        int64_t prev = 100 * MS;
        for (int n = 1; n <= 7; n++) {
            int64_t want;
            if (modes[m] == BW_JITTER_FULL) {
                want = (int64_t)(sm_u() * raw);
            } else if (modes[m] == BW_JITTER_EQUAL) {
                want = (int64_t)(raw / 2.0 + sm_u() * (raw / 2.0));
            } else {
                double x = base + sm_u() * (3.0 * (double)prev - base);
                want = (int64_t)(x < cap ? x : cap);
            }
            CHECK_INT(d[n - 1], want);
            prev = want;
            raw = raw * 2 < cap ? raw * 2 : cap;
        }
        bw_retry_free(r);
    }
}

/* A random source fixed at u = 0.5 gives values easy to compute by hand. */
static uint64_t half(void *user)
{
    (*(int *)user)++;
    return UINT64_C(1) << 63;
}

static void test_jitter_by_hand(void)
{
    int calls = 0;
    int64_t d[8];
    bw_retry *r = policy(4, BW_BACKOFF_EXPONENTIAL, 100 * MS, 2, 10 * BW_NS_PER_S, BW_JITTER_FULL);
    CHECK_OK(bw_retry_set_random(r, half, &calls));
    CHECK_INT(delays_of(r, d, 8, NULL), 3);
    CHECK_INT(d[0], 50 * MS);
    CHECK_INT(d[1], 100 * MS);
    CHECK_INT(d[2], 200 * MS);
    CHECK_INT(calls, 3);
    CHECK_OK(bw_retry_set_jitter(r, BW_JITTER_EQUAL, NULL));
    CHECK_INT(delays_of(r, d, 8, NULL), 3);
    CHECK_INT(d[0], 75 * MS);
    CHECK_INT(d[1], 150 * MS);
    CHECK_INT(d[2], 300 * MS);
    /* decorrelated: 100 + 0.5 * (3 * prev - 100), prev starting at base. */
    CHECK_OK(bw_retry_set_jitter(r, BW_JITTER_DECORRELATED, NULL));
    CHECK_OK(bw_retry_set_attempts(r, 5, NULL));
    CHECK_INT(delays_of(r, d, 8, NULL), 4);
    CHECK_INT(d[0], 200 * MS);
    CHECK_INT(d[1], 350 * MS);
    CHECK_INT(d[2], 575 * MS);
    CHECK_INT(d[3], 912500 * 1000);
    /* No jitter draws no random number. */
    calls = 0;
    CHECK_OK(bw_retry_set_jitter(r, BW_JITTER_NONE, NULL));
    delays_of(r, d, 8, NULL);
    CHECK_INT(calls, 0);
    bw_retry_free(r);
}

static void test_success_and_predicate(void)
{
    bw_retry *r = policy(3, BW_BACKOFF_CONSTANT, 10 * MS, 1, 10 * MS, BW_JITTER_NONE);
    bw_retry_state st;
    int64_t d;
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_state_attempts(&st), 0);
    bw_attempt ok = {BW_OK, 0, BW_NO_TIME};
    CHECK_INT(bw_retry_next(&st, &ok, &d), BW_RETRY_DONE);
    CHECK_INT(bw_retry_state_attempts(&st), 1);
    CHECK_RC(bw_retry_next(&st, &ok, &d), BW_ESTATE); /* the loop has ended */

    /* The default predicate: a timeout is retried, a full bulkhead is not. */
    bw_attempt timeout = {BW_ETIMEDOUT, 0, BW_NO_TIME}, full = {BW_EFULL, 0, BW_NO_TIME};
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &timeout, &d), BW_RETRY_AGAIN);
    CHECK_INT(d, 10 * MS);
    CHECK_INT(bw_retry_next(&st, &full, &d), BW_RETRY_DONE);
    bw_retry_free(r);
}

static int only_42(const bw_attempt *a, void *user)
{
    (*(int *)user)++;
    return a->status == BW_OK && a->rc == 42;
}

static void test_custom_predicate(void)
{
    int asked = 0;
    bw_retry *r = policy(3, BW_BACKOFF_CONSTANT, 10 * MS, 1, 10 * MS, BW_JITTER_NONE);
    CHECK_OK(bw_retry_set_predicate(r, only_42, &asked));
    bw_retry_state st;
    int64_t d;
    bw_attempt a42 = {BW_OK, 42, BW_NO_TIME}, a7 = {BW_OK, 7, BW_NO_TIME};
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &a42, &d), BW_RETRY_AGAIN);
    CHECK_INT(bw_retry_next(&st, &a7, &d), BW_RETRY_DONE);
    CHECK_INT(asked, 2);
    /* A rejection never reaches the predicate. */
    bw_attempt rej = {BW_REJECTED, 0, 5 * BW_NS_PER_S};
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &rej, &d), BW_RETRY_REJECTED);
    CHECK_INT(asked, 2);
    CHECK_OK(bw_retry_set_predicate(r, NULL, NULL)); /* the default again: rc 7 is retried */
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &a7, &d), BW_RETRY_AGAIN);
    bw_retry_free(r);
}

static void test_result_given_delay(void)
{
    bw_retry *r = policy(4, BW_BACKOFF_CONSTANT, 10 * MS, 1, 10 * MS, BW_JITTER_FULL);
    bw_retry_state st;
    int64_t d;
    bw_attempt hinted = {BW_OK, 503, 7 * BW_NS_PER_S}; /* beyond the cap: taken as given */
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &hinted, &d), BW_RETRY_AGAIN);
    CHECK_INT(d, 7 * BW_NS_PER_S);
    hinted.retry_after_ns = 0;
    CHECK_INT(bw_retry_next(&st, &hinted, &d), BW_RETRY_AGAIN);
    CHECK_INT(d, 0);
    hinted.retry_after_ns = INT64_MAX; /* taken as given, without overflow */
    CHECK_INT(bw_retry_next(&st, &hinted, &d), BW_RETRY_AGAIN);
    CHECK_INT(d, INT64_MAX);
    bw_attempt ok_hinted = {BW_OK, 0, 7 * BW_NS_PER_S}; /* a hint on a success changes nothing */
    CHECK_INT(bw_retry_next(&st, &ok_hinted, &d), BW_RETRY_DONE);
    bw_retry_free(r);
}

static void test_rejections(void)
{
    bw_retry *r = policy(3, BW_BACKOFF_CONSTANT, 10 * MS, 1, 10 * MS, BW_JITTER_NONE);
    bw_retry_state st;
    int64_t d;
    bw_attempt open = {BW_REJECTED, 0, 10 * BW_NS_PER_S}, forced = {BW_REJECTED, 0, BW_NO_TIME};
    /* Fail-fast (the default): never retried. */
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &open, &d), BW_RETRY_REJECTED);
    CHECK_INT(d, 0);
    /* Patient: exactly retry_after... */
    CHECK_OK(bw_retry_set_patient(r, 1, 0, NULL));
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &open, &d), BW_RETRY_AGAIN);
    CHECK_INT(d, 10 * BW_NS_PER_S);
    /* ...but not past the last attempt, and never for FORCED_OPEN (no retry_after). */
    CHECK_INT(bw_retry_next(&st, &open, &d), BW_RETRY_AGAIN);
    CHECK_INT(bw_retry_next(&st, &open, &d), BW_RETRY_EXHAUSTED);
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &forced, &d), BW_RETRY_REJECTED);
    /* ...plus a uniform jitter in [0, jitter). */
    CHECK_OK(bw_retry_set_patient(r, 1, 100 * MS, NULL));
    CHECK_OK(bw_retry_set_seed(r, 99));
    sm_state = 99;
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &open, &d), BW_RETRY_AGAIN);
    CHECK_INT(d, 10 * BW_NS_PER_S + (int64_t)(sm_u() * (double)(100 * MS)));
    bw_retry_free(r);
}

static void test_deadline_on_manual_clock(void)
{
    bw_clock *clk = NULL;
    CHECK_OK(bw_clock_manual_new(0, &clk));
    bw_retry *r = policy(10, BW_BACKOFF_CONSTANT, 400 * MS, 1, 400 * MS, BW_JITTER_NONE);
    CHECK_OK(bw_retry_set_clock(r, clk));
    CHECK_OK(bw_retry_set_max_duration(r, 1000 * MS, NULL));
    bw_retry_state st;
    int64_t d;
    bw_attempt fail = {BW_OK, 1, BW_NO_TIME};
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &fail, &d), BW_RETRY_AGAIN); /* 0 + 400 < 1000 */
    CHECK_OK(bw_clock_manual_advance(clk, 599 * MS));
    CHECK_INT(bw_retry_next(&st, &fail, &d), BW_RETRY_AGAIN); /* 599 + 400 < 1000 */
    CHECK_OK(bw_clock_manual_advance(clk, 1 * MS));
    CHECK_INT(bw_retry_next(&st, &fail, &d), BW_RETRY_DEADLINE); /* 600 + 400 reaches it */
    CHECK_INT(bw_retry_state_attempts(&st), 3);
    /* The deadline counts from begin, not from the clock's origin. */
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &fail, &d), BW_RETRY_AGAIN);
    /* A result-given delay far past the deadline ends the loop (no overflow). */
    bw_attempt far = {BW_OK, 1, INT64_MAX};
    CHECK_INT(bw_retry_next(&st, &far, &d), BW_RETRY_DEADLINE);
    /* Patient waits saturate instead of overflowing. */
    CHECK_OK(bw_retry_set_max_duration(r, 0, NULL));
    CHECK_OK(bw_retry_set_patient(r, 1, 1000, NULL));
    bw_attempt open = {BW_REJECTED, 0, INT64_MAX};
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &open, &d), BW_RETRY_AGAIN);
    CHECK(d >= INT64_MAX - 1000);
    bw_retry_free(r);
    bw_clock_free(clk);
}

static void test_budget_arithmetic(void)
{
    bw_retry_budget *b = NULL;
    CHECK_OK(bw_retry_budget_new(10, 0.1, &b, NULL));
    CHECK_DBL(bw_retry_budget_tokens(b), 10);
    /* A success on a full budget stays capped at max. */
    CHECK_OK(bw_retry_budget_record(b, 1));
    CHECK_DBL(bw_retry_budget_tokens(b), 10);
    for (int i = 0; i < 4; i++)
        CHECK_OK(bw_retry_budget_record(b, 0));
    CHECK_DBL(bw_retry_budget_tokens(b), 6);
    CHECK_INT(bw_retry_budget_can_retry(b), 1);
    CHECK_OK(bw_retry_budget_record(b, 0));
    CHECK_DBL(bw_retry_budget_tokens(b), 5); /* exactly max/2: no retry */
    CHECK_INT(bw_retry_budget_can_retry(b), 0);
    CHECK_OK(bw_retry_budget_record(b, 1));
    CHECK_DBL(bw_retry_budget_tokens(b), 5.1); /* one refund above max/2: retries again */
    CHECK_INT(bw_retry_budget_can_retry(b), 1);
    for (int i = 0; i < 20; i++)
        CHECK_OK(bw_retry_budget_record(b, 0));
    CHECK_DBL(bw_retry_budget_tokens(b), 0); /* floored at 0 */
    for (int i = 0; i < 99; i++)
        CHECK_OK(bw_retry_budget_record(b, 1));
    CHECK_DBL(bw_retry_budget_tokens(b), 9.9);
    CHECK_OK(bw_retry_budget_record(b, 1));
    CHECK_OK(bw_retry_budget_record(b, 1));
    CHECK_DBL(bw_retry_budget_tokens(b), 10); /* capped at max */
    bw_retry_budget_free(b);

    /* Odd max: max/2 = 1.5, so 2 tokens allow a retry and 1 does not. */
    CHECK_OK(bw_retry_budget_new(3, 1, &b, NULL));
    CHECK_OK(bw_retry_budget_record(b, 0));
    CHECK_INT(bw_retry_budget_can_retry(b), 1);
    CHECK_OK(bw_retry_budget_record(b, 0));
    CHECK_INT(bw_retry_budget_can_retry(b), 0);
    bw_retry_budget_free(b);
}

static void test_budget_in_the_loop(void)
{
    bw_retry_budget *b = NULL;
    CHECK_OK(bw_retry_budget_new(10, 0.5, &b, NULL));
    bw_retry *r = policy(100, BW_BACKOFF_CONSTANT, 1, 1, 1, BW_JITTER_NONE);
    CHECK_OK(bw_retry_set_budget(r, b));
    int64_t d[100];
    int v;
    /* Tokens 10 -> 9, 8, 7, 6 allow retries; the fifth failure leaves exactly 5. */
    CHECK_INT(delays_of(r, d, 100, &v), 4);
    CHECK_INT(v, BW_RETRY_BUDGET);
    CHECK_DBL(bw_retry_budget_tokens(b), 5);
    /* A success refunds; a non-retryable outcome that never ran (BW_EFULL) neither costs nor refunds. */
    bw_retry_state st;
    int64_t delay;
    bw_attempt ok = {BW_OK, 0, BW_NO_TIME}, full = {BW_EFULL, 0, BW_NO_TIME};
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &ok, &delay), BW_RETRY_DONE);
    CHECK_DBL(bw_retry_budget_tokens(b), 5.5);
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_INT(bw_retry_next(&st, &full, &delay), BW_RETRY_DONE);
    CHECK_DBL(bw_retry_budget_tokens(b), 5.5);
    /* Attempts run out before the budget is asked: the last failure still costs. */
    CHECK_OK(bw_retry_set_attempts(r, 1, NULL));
    CHECK_INT(delays_of(r, d, 100, &v), 0);
    CHECK_INT(v, BW_RETRY_EXHAUSTED);
    CHECK_DBL(bw_retry_budget_tokens(b), 4.5);
    bw_retry_free(r);
    bw_retry_budget_free(b);
}

/* ---- threads: the shared budget and random source stay exact ---- */

#define THREADS 4
#define PER_THREAD 1000

typedef struct shared {
    pthread_barrier_t barrier;
    bw_retry_budget *budget;
    bw_retry *policy;
    int64_t delays[THREADS][PER_THREAD];
    _Atomic int bad;
} shared;

typedef struct worker_arg {
    shared *s;
    int id;
} worker_arg;

static void *budget_worker(void *p)
{
    worker_arg *w = p;
    shared *s = w->s;
    for (int i = 0; i < PER_THREAD / 10; i++)
        s->bad += bw_retry_budget_record(s->budget, 0) != BW_OK;
    pthread_barrier_wait(&s->barrier); /* every failure before any success: no clamping */
    for (int i = 0; i < PER_THREAD / 10; i++)
        s->bad += bw_retry_budget_record(s->budget, 1) != BW_OK;
    return NULL;
}

static void *random_worker(void *p)
{
    worker_arg *w = p;
    shared *s = w->s;
    bw_attempt fail = {BW_OK, 1, BW_NO_TIME};
    for (int i = 0; i < PER_THREAD; i++) {
        bw_retry_state st;
        bw_retry_begin(s->policy, &st);
        if (bw_retry_next(&st, &fail, &s->delays[w->id][i]) != BW_RETRY_AGAIN)
            s->delays[w->id][i] = -1;
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void run_workers(shared *s, void *(*fn)(void *))
{
    pthread_t t[THREADS];
    worker_arg w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i].s = s;
        w[i].id = i;
        CHECK_INT(pthread_create(&t[i], NULL, fn, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

static void test_threads(void)
{
    static shared s;
    memset(&s, 0, sizeof s);
    pthread_barrier_init(&s.barrier, NULL, THREADS);
    /* 400 failures then 400 refunds of 1 token: back to exactly 1000. */
    CHECK_OK(bw_retry_budget_new(1000, 1, &s.budget, NULL));
    run_workers(&s, budget_worker);
    CHECK_INT(s.bad, 0);
    CHECK_DBL(bw_retry_budget_tokens(s.budget), 1000);
    bw_retry_budget_free(s.budget);
    pthread_barrier_destroy(&s.barrier);

    /* Full jitter over a raw delay of 2^53 ns makes each delay the random draw >> 11:
     * the threads together drew exactly the first 4000 numbers of the sequence. */
    s.policy = policy(2, BW_BACKOFF_CONSTANT, INT64_C(1) << 53, 1, INT64_C(1) << 53, BW_JITTER_FULL);
    CHECK_OK(bw_retry_set_seed(s.policy, 7));
    run_workers(&s, random_worker);
    int64_t *got = &s.delays[0][0];
    qsort(got, THREADS * PER_THREAD, sizeof *got, cmp_i64);
    static int64_t want[THREADS * PER_THREAD];
    sm_state = 7;
    for (int i = 0; i < THREADS * PER_THREAD; i++)
        want[i] = (int64_t)(sm_next() >> 11);
    qsort(want, THREADS * PER_THREAD, sizeof *want, cmp_i64);
    int same = 1;
    for (int i = 0; i < THREADS * PER_THREAD; i++)
        same &= got[i] == want[i];
    CHECK(same);
    bw_retry_free(s.policy);
}

static void test_bad_arguments(void)
{
    bw_error err;
    bw_retry *r = NULL;
    CHECK_RC(bw_retry_new(NULL), BW_EINVAL);
    CHECK_OK(bw_retry_new(&r));
    CHECK_RC(bw_retry_set_attempts(r, 0, &err), BW_ERANGE);
    CHECK_STR(err.field, "attempts");
    CHECK_RC(bw_retry_set_attempts(r, 1001, &err), BW_ERANGE);
    CHECK_RC(bw_retry_set_attempts(NULL, 3, &err), BW_EINVAL);
    CHECK_RC(bw_retry_set_backoff(r, (bw_backoff)3, 1, 1, 1, &err), BW_EINVAL);
    CHECK_STR(err.field, "backoff");
    CHECK_RC(bw_retry_set_backoff(r, BW_BACKOFF_EXPONENTIAL, -1, 2, 10, &err), BW_ERANGE);
    CHECK_STR(err.field, "base");
    CHECK_RC(bw_retry_set_backoff(r, BW_BACKOFF_EXPONENTIAL, 10, 0.5, 10, &err), BW_ERANGE);
    CHECK_STR(err.field, "multiplier");
    CHECK_RC(bw_retry_set_backoff(r, BW_BACKOFF_EXPONENTIAL, 10, NAN, 10, &err), BW_ERANGE);
    CHECK_RC(bw_retry_set_backoff(r, BW_BACKOFF_EXPONENTIAL, 10, 2, 9, &err), BW_ERANGE);
    CHECK_STR(err.field, "cap");
    CHECK(strstr(err.message, "[base, 365d]") != NULL);
    CHECK_RC(bw_retry_set_jitter(r, (bw_jitter)4, &err), BW_EINVAL);
    CHECK_STR(err.field, "jitter");
    CHECK_RC(bw_retry_set_max_duration(r, -1, &err), BW_ERANGE);
    CHECK_STR(err.field, "max_duration");
    CHECK_RC(bw_retry_set_patient(r, 1, -1, &err), BW_ERANGE);
    CHECK_STR(err.field, "patient_jitter");
    CHECK_RC(bw_retry_set_predicate(NULL, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_retry_set_budget(NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_retry_set_clock(NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_retry_set_sleeper(NULL, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_retry_set_random(NULL, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_retry_set_seed(NULL, 1), BW_EINVAL);
    bw_retry_state st;
    memset(&st, 0, sizeof st);
    int64_t d;
    bw_attempt a = {BW_OK, 0, BW_NO_TIME};
    CHECK_RC(bw_retry_next(&st, &a, &d), BW_EINVAL); /* never begun */
    CHECK_RC(bw_retry_state_attempts(&st), BW_EINVAL);
    CHECK_RC(bw_retry_begin(NULL, &st), BW_EINVAL);
    CHECK_RC(bw_retry_begin(r, NULL), BW_EINVAL);
    CHECK_OK(bw_retry_begin(r, &st));
    CHECK_RC(bw_retry_next(&st, NULL, &d), BW_EINVAL);
    CHECK_RC(bw_retry_next(&st, &a, NULL), BW_EINVAL);
    CHECK_RC(bw_retry_next(NULL, &a, &d), BW_EINVAL);
    bw_retry_free(r);
    bw_retry_free(NULL);

    bw_retry_budget *b = NULL;
    CHECK_RC(bw_retry_budget_new(0.0004, 0.1, &b, &err), BW_ERANGE);
    CHECK_STR(err.field, "max_tokens");
    CHECK_RC(bw_retry_budget_new(1000.1, 0.1, &b, &err), BW_ERANGE);
    CHECK_RC(bw_retry_budget_new(NAN, 0.1, &b, &err), BW_ERANGE);
    CHECK_RC(bw_retry_budget_new(10, 0, &b, &err), BW_ERANGE);
    CHECK_STR(err.field, "token_ratio");
    CHECK_RC(bw_retry_budget_new(10, 0.1, NULL, &err), BW_EINVAL);
    CHECK_OK(bw_retry_budget_new(0.001, 1000, &b, &err));
    CHECK_DBL(bw_retry_budget_tokens(b), 0.001);
    bw_retry_budget_free(b);
    CHECK_DBL(bw_retry_budget_tokens(NULL), -1);
    CHECK_RC(bw_retry_budget_record(NULL, 1), BW_EINVAL);
    CHECK_RC(bw_retry_budget_can_retry(NULL), BW_EINVAL);
    bw_retry_budget_free(NULL);
}

int main(void)
{
    RUN(test_formulas_without_jitter);
    RUN(test_jitter_against_seeded_source);
    RUN(test_jitter_by_hand);
    RUN(test_success_and_predicate);
    RUN(test_custom_predicate);
    RUN(test_result_given_delay);
    RUN(test_rejections);
    RUN(test_deadline_on_manual_clock);
    RUN(test_budget_arithmetic);
    RUN(test_budget_in_the_loop);
    RUN(test_threads);
    RUN(test_bad_arguments);
    return TEST_SUMMARY();
}
