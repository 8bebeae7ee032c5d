/*
 * test_pipeline.c (tests/unit/) — pipelines in interlock's orders: retry
 * stopping at an open circuit (fail-fast) and waiting exactly retry_after
 * (patient), fallback on a rejection, a timeout counted as a slow failure, a
 * full bulkhead counted as unreachable, fallback above a metrics-only breaker,
 * result-given delays and deadlines seen by the call, a time limiter with real
 * threads, custom strategies, events, no allocation when executing, threads,
 * bad arguments. Time is a manual clock moved by the call and by a fake
 * sleeper, except where real threads are the point.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "alloc_hook.h"
#include "harness.h"
#include "clockfix.h"
#include "recorder.h"

#define MS BW_NS_PER_MS
#define S BW_NS_PER_S

/* ---- the fake sleeper and the event log ---- */

static int64_t slept[16];
static int nslept;

static void fake_sleep(int64_t ns, void *user)
{
    (void)user;
    if (nslept < 16)
        slept[nslept] = ns;
    nslept++;
    pump(ns);
}

/* What the pipelines of pipeline() emit. */
static recorder *events;

static void reset_logs(void)
{
    nslept = 0;
    rec_clear(events);
}

/* ---- builders ---- */

static bw_breaker *breaker(const char *text, bw_clock *clock)
{
    bw_error err;
    bw_config *cfg = bw_config_new();
    CHECK(cfg != NULL);
    if (bw_config_parse(cfg, text, &err) != BW_OK)
        H_FAIL("parse: %s", err.message);
    CHECK_OK(bw_config_set_clock(cfg, clock));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("dep", cfg, &b, &err));
    bw_config_free(cfg);
    return b;
}

static bw_retry *retry(int attempts, int64_t delay)
{
    bw_retry *r = NULL;
    CHECK_OK(bw_retry_new(&r));
    CHECK_OK(bw_retry_set_attempts(r, attempts, NULL));
    CHECK_OK(bw_retry_set_backoff(r, BW_BACKOFF_CONSTANT, delay, 1, delay, NULL));
    CHECK_OK(bw_retry_set_jitter(r, BW_JITTER_NONE, NULL));
    CHECK_OK(bw_retry_set_sleeper(r, fake_sleep, NULL));
    CHECK_OK(bw_retry_set_clock(r, clk));
    return r;
}

static bw_pipeline *pipeline(void)
{
    bw_pipeline *p = NULL;
    CHECK_OK(bw_pipeline_new("orders", &p, NULL));
    CHECK_OK(bw_pipeline_set_clock(p, clk));
    CHECK_OK(bw_pipeline_set_listener(p, BW_EVENTS_ALL, rec_listen, events));
    return p;
}

/* ---- calls ---- */

typedef struct dep {
    int calls;
    int fail_first; /* this many calls fail (rc 1), the rest succeed */
    int64_t takes;  /* each call advances the manual clock by this much */
    int64_t remaining[8];
    int attempt[8];
    int64_t ask_delay; /* >= 0: each failing call asks for this retry delay */
    int value;         /* the "result" the call or a fallback writes */
} dep;

static int call_dep(bw_ctx *ctx, void *arg)
{
    dep *d = arg;
    if (d->calls < 8) {
        d->remaining[d->calls] = bw_ctx_remaining_ns(ctx);
        d->attempt[d->calls] = bw_ctx_attempt(ctx);
    }
    d->calls++;
    if (d->takes)
        pump(d->takes);
    if (d->calls <= d->fail_first) {
        if (d->ask_delay >= 0)
            bw_ctx_set_retry_after(ctx, d->ask_delay);
        return 1;
    }
    d->value = 100;
    return 0;
}

static dep new_dep(int fail_first)
{
    dep d;
    memset(&d, 0, sizeof d);
    d.fail_first = fail_first;
    d.ask_delay = -1;
    return d;
}

/* interlock's fail-fast composition: attempts 1-2 fail and trip, attempt 3 is
 * rejected and not retried; the dependency was reached twice. */
static void test_retry_stops_at_open_circuit(void)
{
    reset_logs();
    bw_breaker *b = breaker("min_calls=2 failure_rate=0.5 wait=10s permitted_probes=1 max_concurrent_probes=1", clk);
    bw_retry *r = retry(5, 500 * MS);
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    dep d = new_dep(1000);
    int rc = -1;
    bw_report rep;
    CHECK_RC(bw_pipeline_execute(p, call_dep, &d, &rc, &rep), BW_REJECTED);
    CHECK_INT(d.calls, 2);
    CHECK_INT(rc, 0); /* the last attempt never ran */
    CHECK_INT(rep.attempts, 3);
    CHECK_INT(rep.retry_verdict, BW_RETRY_REJECTED);
    CHECK_INT(rep.has_rejection, 1);
    CHECK_INT(rep.rejection.state, BW_STATE_OPEN);
    CHECK_INT(rep.rejection.retry_after_ns, 9500 * MS); /* opened at 0.5 s, rejected at 1 s */
    CHECK_INT(rep.fallback, 0);
    CHECK_STATE(b, BW_STATE_OPEN);
    CHECK_INT(nslept, 2);
    CHECK_INT(rec_count(events), 2);
    for (int i = 0; i < 2; i++) {
        CHECK_INT(rec_nth(events, i)->type, BW_EVENT_RETRY);
        CHECK_STR(rec_nth(events, i)->name, "orders");
        CHECK(rec_nth(events, i)->breaker == NULL);
        CHECK_INT(rec_nth(events, i)->attempt, i + 1);
        CHECK_INT(rec_nth(events, i)->delay_ns, 500 * MS);
        CHECK_INT(rec_nth(events, i)->status, BW_OK);
        CHECK_INT(rec_nth(events, i)->rc, 1);
    }
    /* The callee saw attempts 1 and 2. */
    CHECK_INT(d.attempt[0], 1);
    CHECK_INT(d.attempt[1], 2);
    bw_pipeline_free(p);
    bw_retry_free(r);
    bw_breaker_free(b);
}

/* interlock's patient composition: attempt 3 is rejected with retry_after 10 s,
 * the loop sleeps exactly that, attempt 4 is the probe and closes the circuit. */
static void test_patient_retry_waits_for_the_probe(void)
{
    reset_logs();
    bw_breaker *b = breaker("min_calls=2 failure_rate=0.5 wait=10s permitted_probes=1 max_concurrent_probes=1", clk);
    bw_retry *r = retry(5, 0);
    CHECK_OK(bw_retry_set_patient(r, 1, 0, NULL));
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    dep d = new_dep(2);
    int rc = -1;
    bw_report rep;
    CHECK_OK(bw_pipeline_execute(p, call_dep, &d, &rc, &rep));
    CHECK_INT(rc, 0);
    CHECK_INT(d.calls, 3);
    CHECK_INT(rep.attempts, 4);
    CHECK_INT(rep.retry_verdict, BW_RETRY_DONE);
    CHECK_INT(rep.has_rejection, 1);
    CHECK_INT(nslept, 3);
    CHECK_INT(slept[0], 0);
    CHECK_INT(slept[1], 0);
    CHECK_INT(slept[2], 10 * S);
    CHECK_INT(rec_nth(events, 2)->status, BW_REJECTED);
    CHECK_INT(rec_nth(events, 2)->delay_ns, 10 * S);
    CHECK_STATE(b, BW_STATE_CLOSED);
    bw_pipeline_free(p);
    bw_retry_free(r);
    bw_breaker_free(b);
}

static int serve_cached(const bw_fallback_info *why, void *arg, void *user)
{
    dep *d = arg;
    d->value = 7;
    *(bw_fallback_info *)user = *why;
    return 5;
}

static void test_fallback_on_rejection(void)
{
    reset_logs();
    bw_breaker *b = breaker("wait=10s", clk);
    bw_retry *r = retry(3, 100 * MS);
    bw_fallback_info why;
    memset(&why, 0, sizeof why);
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_fallback(p, BW_FALLBACK_ON_REJECTED, serve_cached, &why, NULL));
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    CHECK_OK(bw_breaker_force_open(b));
    dep d = new_dep(0);
    int rc = -1;
    bw_report rep;
    CHECK_OK(bw_pipeline_execute(p, call_dep, &d, &rc, &rep));
    CHECK_INT(rc, 5);
    CHECK_INT(d.value, 7);
    CHECK_INT(d.calls, 0);
    CHECK_INT(rep.fallback, BW_FALLBACK_ON_REJECTED);
    CHECK_INT(why.reason, BW_FALLBACK_ON_REJECTED);
    CHECK_INT(why.status, BW_REJECTED);
    CHECK_INT(why.attempts, 1); /* a rejection is not retried */
    CHECK_INT(why.rejection.state, BW_STATE_FORCED_OPEN);
    CHECK_INT(why.rejection.retry_after_ns, BW_NO_TIME);
    CHECK_INT(rec_count(events), 1);
    CHECK_INT(rec_nth(events, 0)->type, BW_EVENT_FALLBACK);
    CHECK_INT(rec_nth(events, 0)->fallback_reason, BW_FALLBACK_ON_REJECTED);
    CHECK_INT(rec_nth(events, 0)->status, BW_REJECTED);

    /* A failure is not in the mask: it passes unchanged, after the retries. */
    CHECK_OK(bw_breaker_reset(b));
    reset_logs();
    d = new_dep(1000);
    CHECK_OK(bw_pipeline_execute(p, call_dep, &d, &rc, &rep));
    CHECK_INT(rc, 1);
    CHECK_INT(d.calls, 3);
    CHECK_INT(rep.fallback, 0);
    CHECK_INT(rep.retry_verdict, BW_RETRY_EXHAUSTED);
    bw_pipeline_free(p);
    bw_retry_free(r);
    bw_breaker_free(b);
}

static void test_timeout_is_a_slow_failure(void)
{
    reset_logs();
    /* Slow from 1 s, timeout 50 ms: only bw_settle_timeout can make the call slow. */
    bw_breaker *b = breaker("slow_call_duration=1s", clk);
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    CHECK_OK(bw_pipeline_add_timeout(p, 50 * MS, NULL, NULL));
    dep d = new_dep(0);
    d.takes = 60 * MS;
    int rc = -1;
    CHECK_RC(bw_pipeline_execute(p, call_dep, &d, &rc, NULL), BW_ETIMEDOUT);
    CHECK_INT(d.remaining[0], 50 * MS);
    CHECK_INT(rc, 0); /* the call's own code, kept */
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.total_calls, 1);
    CHECK_INT(s.failed_calls, 1);
    CHECK_INT(s.slow_calls, 1);
    int code = 0;
    CHECK_OK(bw_breaker_last_failure(b, &code));
    CHECK_INT(code, BW_ETIMEDOUT);
    /* Exactly at the deadline is late; one nanosecond before is in time. */
    d = new_dep(0);
    d.takes = 50 * MS;
    CHECK_RC(bw_pipeline_execute(p, call_dep, &d, &rc, NULL), BW_ETIMEDOUT);
    d = new_dep(0);
    d.takes = 50 * MS - 1;
    CHECK_OK(bw_pipeline_execute(p, call_dep, &d, &rc, NULL));
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.total_calls, 3);
    CHECK_INT(s.failed_calls, 2);
    CHECK_INT(s.slow_calls, 2);
    bw_pipeline_free(p);
    bw_breaker_free(b);
}

/* A call that times out by itself (its own I/O deadline) and says so. */
static int own_timeout(bw_ctx *ctx, void *arg)
{
    dep *d = arg;
    d->calls++;
    if (d->calls <= d->fail_first) {
        CHECK_OK(bw_ctx_set_timed_out(ctx));
        return 28; /* CURLE_OPERATION_TIMEDOUT, say */
    }
    return 0;
}

static int timeout_fallback(const bw_fallback_info *why, void *arg, void *user)
{
    (void)user;
    CHECK_INT(why->reason, BW_FALLBACK_ON_TIMEOUT);
    CHECK_INT(why->status, BW_ETIMEDOUT);
    ((dep *)arg)->value = 7;
    return 70;
}

/*
 * bw_ctx_set_timed_out: the layers outside see the call as a timeout, as if a
 * timeout layer had ended it: the breaker records a slow failure with code
 * BW_ETIMEDOUT, the retry retries it, the status is BW_ETIMEDOUT with the
 * call's code kept, a fallback on timeouts stands in; it holds for one attempt.
 */
static void test_call_declares_timeout(void)
{
    reset_logs();
    bw_breaker *b = breaker("slow_call_duration=1s min_calls=100", clk);
    bw_retry *r = retry(3, 10 * MS);
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    dep d = new_dep(5);
    int rc = -1;
    CHECK_RC(bw_pipeline_execute(p, own_timeout, &d, &rc, NULL), BW_ETIMEDOUT);
    CHECK_INT(d.calls, 3); /* retried as a timeout */
    CHECK_INT(rc, 28);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.total_calls, 3);
    CHECK_INT(s.failed_calls, 3);
    CHECK_INT(s.slow_calls, 3); /* a timeout, not a plain failure */
    int code = 0;
    CHECK_OK(bw_breaker_last_failure(b, &code));
    CHECK_INT(code, BW_ETIMEDOUT);
    /* Per attempt: the third succeeds. */
    d = new_dep(2);
    CHECK_OK(bw_pipeline_execute(p, own_timeout, &d, &rc, NULL));
    CHECK_INT(d.calls, 3);
    CHECK_INT(rc, 0);
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.failed_calls, 5);
    CHECK_INT(s.slow_calls, 5);
    bw_pipeline_free(p);
    /* A fallback on timeouts stands in. */
    p = pipeline();
    CHECK_OK(bw_pipeline_add_fallback(p, BW_FALLBACK_ON_TIMEOUT, timeout_fallback, NULL, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    d = new_dep(1);
    CHECK_OK(bw_pipeline_execute(p, own_timeout, &d, &rc, NULL));
    CHECK_INT(rc, 70);
    CHECK_INT(d.value, 7);
    CHECK_RC(bw_ctx_set_timed_out(NULL), BW_EINVAL);
    bw_pipeline_free(p);
    bw_retry_free(r);
    bw_breaker_free(b);
}

/*
 * A full bulkhead is local saturation, not an outcome of the dependency: the
 * breaker around it records nothing in CLOSED (its window stays empty, however
 * often it happens), a probe in HALF_OPEN hands its slot back with no verdict,
 * and the pipeline emits BW_EVENT_SHED.
 */
static void test_bulkhead_full_is_not_an_outcome(void)
{
    reset_logs();
    recorder *calls = rec_new(); /* the breaker's own CALL events */
    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_set_clock(cfg, clk));
    CHECK_OK(bw_config_parse(cfg, "min_calls=2 window=count:4 wait=10s", NULL));
    CHECK_OK(bw_config_set_listener(cfg, BW_EVENT_MASK(BW_EVENT_CALL), rec_listen, calls));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("dep", cfg, &b, NULL));
    bw_config_free(cfg);
    bw_bulkhead *bh = NULL;
    CHECK_OK(bw_bulkhead_new(1, 0, &bh, NULL));
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    CHECK_OK(bw_pipeline_add_bulkhead(p, bh, NULL));
    CHECK_OK(bw_bulkhead_try_acquire(bh)); /* someone else holds the only slot */
    dep d = new_dep(0);
    for (int i = 0; i < 10; i++)
        CHECK_RC(bw_pipeline_execute(p, call_dep, &d, NULL, NULL), BW_EFULL);
    CHECK_INT(d.calls, 0);
    CHECK_INT(rec_count_line(calls, 0, "call ignored"), 10); /* each shed call settled as IGNORED */
    CHECK_INT(rec_count(calls), 10);
    CHECK_INT(rec_count(events), 20);
    CHECK_INT(rec_nth(events, 0)->type, BW_EVENT_BULKHEAD_REJECTED);
    CHECK_INT(rec_nth(events, 0)->status, BW_EFULL);
    CHECK_INT(rec_nth(events, 1)->type, BW_EVENT_SHED);
    CHECK_INT(rec_nth(events, 1)->status, BW_EFULL);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.total_calls, 0);
    CHECK_STATE(b, BW_STATE_CLOSED); /* a healthy dependency is never cut off by this process's load */
    CHECK_OK(bw_bulkhead_release(bh));
    CHECK_OK(bw_pipeline_execute(p, call_dep, &d, NULL, NULL));
    CHECK_INT(d.calls, 1);
    CHECK_INT(rec_count(calls), 11);
    CHECK_INT(rec_nth(calls, 10)->outcome, BW_SUCCESS);
    CHECK_INT(bw_bulkhead_in_flight(bh), 0); /* released after the call */

    /* HALF_OPEN: the shed probe gives its slot back; the next call probes. */
    CHECK_OK(bw_breaker_force_open(b));
    CHECK_OK(bw_breaker_reset(b));
    h_calls(b, 2, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_OPEN);
    pump(10 * S);
    CHECK_OK(bw_bulkhead_try_acquire(bh));
    CHECK_RC(bw_pipeline_execute(p, call_dep, &d, NULL, NULL), BW_EFULL);
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.state, BW_STATE_HALF_OPEN);
    CHECK_INT(s.probes_admitted, 0);
    CHECK_INT(s.probes_in_flight, 0);
    CHECK_INT(s.probes_inconclusive, 0);
    CHECK_OK(bw_bulkhead_release(bh));
    CHECK_OK(bw_pipeline_execute(p, call_dep, &d, NULL, NULL));
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.probes_completed, 1);
    bw_pipeline_free(p);
    bw_bulkhead_free(bh);
    bw_breaker_free(b);
    rec_free(calls);
}

/* A breaker further in refusing is local too: the outer breaker records nothing. */
static void test_inner_rejection_is_not_an_outcome(void)
{
    reset_logs();
    bw_breaker *outer = breaker("min_calls=1 window=count:2", clk);
    bw_breaker *inner = breaker("", clk);
    CHECK_OK(bw_breaker_force_open(inner));
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_breaker(p, outer, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, inner, NULL));
    dep d = new_dep(0);
    CHECK_RC(bw_pipeline_execute(p, call_dep, &d, NULL, NULL), BW_REJECTED);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(outer, &s));
    CHECK_INT(s.total_calls, 0);
    CHECK_STATE(outer, BW_STATE_CLOSED);
    CHECK_INT(rec_count(events), 1);
    CHECK_INT(rec_nth(events, 0)->type, BW_EVENT_SHED);
    CHECK_INT(rec_nth(events, 0)->status, BW_REJECTED);
    bw_pipeline_free(p);
    bw_breaker_free(outer);
    bw_breaker_free(inner);
}

/* A strategy that refuses by itself: the fallback sees a zeroed rejection, or the one it set. */
static int refuse_exec(void *state, bw_ctx *ctx)
{
    const bw_rejection *why = state;
    if (why)
        CHECK_OK(bw_ctx_set_rejection(ctx, why));
    return BW_REJECTED;
}

static bw_fallback_info last_why;

static int note_fallback(const bw_fallback_info *why, void *arg, void *user)
{
    (void)arg;
    (void)user;
    last_why = *why;
    return 7;
}

static void test_strategy_rejection(void)
{
    static const bw_strategy refuse = {BW_STRATEGY_VERSION, "refuse", refuse_exec, NULL};
    for (int k = 0; k < 2; k++) {
        bw_rejection set = {BW_STATE_OPEN, 3 * S, 1, 42};
        bw_pipeline *p = pipeline();
        CHECK_OK(bw_pipeline_add_fallback(p, BW_FALLBACK_ON_REJECTED, note_fallback, NULL, NULL));
        CHECK_OK(bw_pipeline_add(p, &refuse, k ? &set : NULL, NULL));
        int rc = 0;
        bw_report rep;
        CHECK_OK(bw_pipeline_execute(p, call_dep, NULL, &rc, &rep));
        CHECK_INT(rc, 7);
        CHECK_INT(last_why.reason, BW_FALLBACK_ON_REJECTED);
        CHECK_INT(last_why.rejection.retry_after_ns, k ? 3 * S : BW_NO_TIME);
        CHECK_INT(last_why.rejection.has_last_failure, k ? 1 : 0);
        CHECK_INT(last_why.rejection.last_failure, k ? 42 : 0);
        CHECK_INT(last_why.rejection.state, k ? BW_STATE_OPEN : 0);
        CHECK_INT(rep.has_rejection, k);
        bw_pipeline_free(p);
    }
    CHECK_RC(bw_ctx_set_rejection(NULL, NULL), BW_EINVAL);
}

/* Refuses twice: the first time with a reason (1 ms), the second without one. */
static int refuse_twice_exec(void *state, bw_ctx *ctx)
{
    int *n = state;
    if ((*n)++ == 0) {
        bw_rejection why = {BW_STATE_OPEN, 1 * MS, 1, 7};
        CHECK_OK(bw_ctx_set_rejection(ctx, &why));
    }
    return BW_REJECTED;
}

/*
 * A rejection describes one attempt only: a patient retry waits out the first
 * one's 1 ms, and the second attempt, refused without a reason, is neither
 * retried on the first one's retry_after nor reported to the fallback with it.
 */
static void test_rejection_is_per_attempt(void)
{
    static const bw_strategy refuse = {BW_STRATEGY_VERSION, "refuse-twice", refuse_twice_exec, NULL};
    reset_logs();
    int n = 0;
    bw_retry *r = retry(5, 100 * MS);
    CHECK_OK(bw_retry_set_patient(r, 1, 0, NULL));
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_fallback(p, BW_FALLBACK_ON_REJECTED, note_fallback, NULL, NULL));
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    CHECK_OK(bw_pipeline_add(p, &refuse, &n, NULL));
    int rc = 0;
    bw_report rep;
    CHECK_OK(bw_pipeline_execute(p, call_dep, NULL, &rc, &rep));
    CHECK_INT(n, 2);
    CHECK_INT(nslept, 1);
    CHECK_INT(slept[0], 1 * MS);
    CHECK_INT(rep.retry_verdict, BW_RETRY_REJECTED);
    CHECK_INT(last_why.rejection.retry_after_ns, BW_NO_TIME);
    CHECK_INT(last_why.rejection.has_last_failure, 0);
    CHECK_INT(rep.has_rejection, 1); /* the report: some attempt was rejected */
    bw_pipeline_free(p);
    bw_retry_free(r);
}

static int zero_fallback(const bw_fallback_info *why, void *arg, void *user)
{
    (void)why;
    (void)arg;
    (*(int *)user)++;
    return 0;
}

/* interlock: a fallback above a METRICS_ONLY breaker still lets it record every failure. */
static void test_fallback_keeps_shadow_statistics(void)
{
    bw_breaker *b = breaker("initial_state=metrics_only", clk);
    int used = 0;
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_fallback(p, BW_FALLBACK_ON_ALL, zero_fallback, &used, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    for (int i = 0; i < 3; i++) {
        dep d = new_dep(1);
        int rc = -1;
        CHECK_OK(bw_pipeline_execute(p, call_dep, &d, &rc, NULL));
        CHECK_INT(rc, 0);
    }
    CHECK_INT(used, 3);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.total_calls, 3);
    CHECK_INT(s.failed_calls, 3);
    CHECK_STATE(b, BW_STATE_METRICS_ONLY);
    bw_pipeline_free(p);
    bw_breaker_free(b);
}

static bw_outcome http_status(int rc, void *arg, void *user)
{
    (void)arg;
    (*(int *)user)++;
    if (rc == 404)
        return BW_IGNORED;
    if (rc == 999)
        return (bw_outcome)42; /* not an outcome: counts as a failure */
    return rc >= 500 ? BW_FAILURE : BW_SUCCESS;
}

static int return_code(bw_ctx *ctx, void *arg)
{
    (void)ctx;
    return *(int *)arg;
}

static void test_fallback_with_a_classifier(void)
{
    int used = 0, asked = 0;
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_fallback_ex(p, BW_FALLBACK_ON_FAILURE, http_status, &asked, zero_fallback, &used, NULL));
    const int codes[] = {200, 404, 503, 999};
    const int want_rc[] = {200, 404, 0, 0};
    for (int i = 0; i < 4; i++) {
        int code = codes[i], rc = -1;
        CHECK_OK(bw_pipeline_execute(p, return_code, &code, &rc, NULL));
        CHECK_INT(rc, want_rc[i]);
    }
    CHECK_INT(asked, 4);
    CHECK_INT(used, 2);
    bw_pipeline_free(p);
    /* Without ON_FAILURE in the mask the classifier is never asked. */
    asked = 0;
    p = pipeline();
    CHECK_OK(bw_pipeline_add_fallback_ex(p, BW_FALLBACK_ON_REJECTED, http_status, &asked, zero_fallback, &used, NULL));
    int code = 503, rc = -1;
    CHECK_OK(bw_pipeline_execute(p, return_code, &code, &rc, NULL));
    CHECK_INT(rc, 503);
    CHECK_INT(asked, 0);
    bw_pipeline_free(p);
}

static void test_result_delay_and_deadlines(void)
{
    reset_logs();
    bw_retry *r = retry(4, 100 * MS);
    CHECK_OK(bw_retry_set_max_duration(r, 5 * S, NULL));
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    CHECK_OK(bw_pipeline_add_timeout(p, 2 * S, NULL, NULL));
    dep d = new_dep(2);
    d.ask_delay = 1500 * MS; /* an HTTP Retry-After */
    int rc = -1;
    bw_report rep;
    CHECK_OK(bw_pipeline_execute(p, call_dep, &d, &rc, &rep));
    CHECK_INT(d.calls, 3);
    CHECK_INT(nslept, 2);
    CHECK_INT(slept[0], 1500 * MS);
    CHECK_INT(slept[1], 1500 * MS);
    /* The call's deadline: the timeout's 2 s, then only what is left of the retry's 5 s. */
    CHECK_INT(d.remaining[0], 2 * S);
    CHECK_INT(d.remaining[1], 2 * S);
    CHECK_INT(d.remaining[2], 2 * S);
    CHECK_INT(d.attempt[2], 3);

    /* With 3.5 s of the 5 s gone, the timeout is capped by what remains, and a
     * delay reaching past the 5 s ends the loop. */
    reset_logs();
    d = new_dep(1000);
    d.ask_delay = 1700 * MS;
    CHECK_OK(bw_pipeline_execute(p, call_dep, &d, &rc, &rep));
    CHECK_INT(d.calls, 3);
    CHECK_INT(d.remaining[2], 1600 * MS);
    CHECK_INT(rep.retry_verdict, BW_RETRY_DEADLINE);
    CHECK_INT(rc, 1);
    bw_pipeline_free(p);
    bw_retry_free(r);
}

/* ---- the time limiter in a pipeline (real threads) ---- */

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, done, abandoned;
} gate;

static int wait_gate(bw_ctx *ctx, void *arg)
{
    gate *g = arg;
    int64_t left = bw_ctx_remaining_ns(ctx);
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return left > 0 ? 3 : -3;
}

static void gate_abandoned(void *arg, int rc, void *user)
{
    gate *g = arg;
    (void)user;
    pthread_mutex_lock(&g->mu);
    g->abandoned = rc;
    g->done = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static int quick(bw_ctx *ctx, void *arg)
{
    (void)arg;
    return bw_ctx_remaining_ns(ctx) > 0 ? 0 : -11;
}

static void test_limiter_in_a_pipeline(void)
{
    bw_breaker *b = breaker("slow_call_duration=60s", NULL); /* the system clock */
    bw_limiter *lim = NULL;
    CHECK_OK(bw_limiter_new(1, &lim, NULL));
    CHECK_OK(bw_limiter_set_abandoned(lim, gate_abandoned, NULL));
    bw_pipeline *p = NULL;
    CHECK_OK(bw_pipeline_new("limited", &p, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    CHECK_OK(bw_pipeline_add_timeout(p, 40 * MS, lim, NULL));
    int rc = -1;
    CHECK_OK(bw_pipeline_execute(p, quick, NULL, &rc, NULL));
    CHECK_INT(rc, 0); /* ran on a worker, with the deadline in its context */

    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    CHECK_RC(bw_pipeline_execute(p, wait_gate, &g, &rc, NULL), BW_ETIMEDOUT);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.total_calls, 2);
    CHECK_INT(s.failed_calls, 1);
    CHECK_INT(s.slow_calls, 1); /* 40 ms, far below 60 s, yet slow: it timed out */
    /* The only worker is still busy with the abandoned call: refused, local saturation: nothing recorded. */
    CHECK_RC(bw_pipeline_execute(p, quick, NULL, &rc, NULL), BW_EFULL);
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.total_calls, 2);
    CHECK_INT(s.failed_calls, 1);
    CHECK_INT(s.slow_calls, 1);
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    while (!g.done)
        pthread_cond_wait(&g.cv, &g.mu);
    CHECK_INT(g.abandoned, 3); /* the abandoned call's own code, handed to the callback */
    pthread_mutex_unlock(&g.mu);
    bw_limiter_free(lim); /* first: it waits for abandoned work */
    bw_pipeline_free(p);
    bw_breaker_free(b);
}

/* ---- custom strategies ---- */

typedef struct cache {
    int hits, misses, destroyed;
} cache;

static int cache_exec(void *state, bw_ctx *ctx)
{
    cache *c = state;
    if (*(int *)bw_ctx_arg(ctx) == 1) {
        c->hits++;
        bw_ctx_set_rc(ctx, 99);
        return BW_OK;
    }
    c->misses++;
    int64_t prev = bw_ctx_set_deadline(ctx, bw_ctx_now(ctx) + 3 * S);
    int status = bw_ctx_next(ctx);
    bw_ctx_restore_deadline(ctx, prev);
    if (status == BW_OK)
        bw_ctx_set_rc(ctx, bw_ctx_rc(ctx) + 1);
    return status;
}

static void cache_destroy(void *state)
{
    ((cache *)state)->destroyed++;
}

static int report_deadline(bw_ctx *ctx, void *arg)
{
    (void)arg;
    return (int)(bw_ctx_remaining_ns(ctx) / MS);
}

static void test_custom_strategy(void)
{
    static const bw_strategy cache_strategy = {BW_STRATEGY_VERSION, "cache", cache_exec, cache_destroy};
    cache c = {0, 0, 0};
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add(p, &cache_strategy, &c, NULL));
    CHECK_OK(bw_pipeline_add_timeout(p, 5 * S, NULL, NULL));
    CHECK_INT(bw_pipeline_layers(p), 2);
    CHECK_STR(bw_pipeline_layer_name(p, 0), "cache");
    CHECK_STR(bw_pipeline_layer_name(p, 1), "timeout");
    CHECK(bw_pipeline_layer_name(p, 2) == NULL);
    CHECK(bw_pipeline_layer_name(p, -1) == NULL);
    int key = 1, rc = -1;
    CHECK_OK(bw_pipeline_execute(p, report_deadline, &key, &rc, NULL));
    CHECK_INT(rc, 99);
    key = 2;
    CHECK_OK(bw_pipeline_execute(p, report_deadline, &key, &rc, NULL));
    CHECK_INT(rc, 3001); /* the strategy's 3 s beat the timeout's 5 s; then +1 */
    CHECK_INT(c.hits, 1);
    CHECK_INT(c.misses, 1);
    bw_pipeline_free(p);
    CHECK_INT(c.destroyed, 1);
}

/* A call that fails for one host and succeeds for the others; it sees its key. */
static int per_host(bw_ctx *ctx, void *arg)
{
    int *calls = arg;
    (*calls)++;
    return strcmp(bw_ctx_key(ctx), "bad.example") == 0 ? 1 : 0;
}

/*
 * One pipeline for every host: the registry layer picks the breaker of the
 * call's name, the keyed layer the circuit of its key. A failing host trips
 * only its own circuit; a call with no key is refused before the call runs.
 */
static void test_per_call_breakers(void)
{
    bw_config *cfg = bw_config_new();
    bw_error err;
    CHECK_OK(bw_config_parse(cfg, "min_calls=2 window=count:4 wait=10s", &err));
    CHECK_OK(bw_config_set_clock(cfg, clk));
    bw_registry *r = NULL;
    CHECK_OK(bw_registry_new(cfg, &r, &err));
    bw_breaker *parent = NULL;
    CHECK_OK(bw_breaker_new("tenants", cfg, &parent, &err));
    bw_config_free(cfg);
    for (int layer = 0; layer < 2; layer++) {
        bw_pipeline *p = pipeline();
        if (layer == 0)
            CHECK_OK(bw_pipeline_add_registry(p, r, &err));
        else
            CHECK_OK(bw_pipeline_add_keyed(p, parent, &err));
        int calls = 0, rc = 0;
        for (int i = 0; i < 4; i++) {
            CHECK_RC(bw_pipeline_execute_key(p, "bad.example", per_host, &calls, &rc, NULL),
                     i < 2 ? BW_OK : BW_REJECTED);
            CHECK_OK(bw_pipeline_execute_key(p, "good.example", per_host, &calls, &rc, NULL));
            CHECK_INT(rc, 0);
        }
        CHECK_RC(bw_pipeline_execute_key(p, "bad.example", per_host, &calls, &rc, NULL), BW_REJECTED);
        CHECK_INT(calls, 2 + 4); /* bad.example tripped after two calls */
        CHECK_RC(bw_pipeline_execute(p, per_host, &calls, &rc, NULL), BW_EINVAL);
        CHECK_INT(calls, 6);
        bw_pipeline_free(p);
    }
    CHECK_INT(bw_registry_count(r), 2);
    CHECK_STATE(bw_registry_get_existing(r, "bad.example"), BW_STATE_OPEN);
    CHECK_STATE(bw_registry_get_existing(r, "good.example"), BW_STATE_CLOSED);
    CHECK_INT(bw_keyed_count(parent), 2);
    bw_breaker *h = bw_keyed_find(parent, "bad.example");
    CHECK(h != NULL);
    CHECK_STATE(h, BW_STATE_OPEN);
    bw_keyed_release(h);
    CHECK_STATE(parent, BW_STATE_CLOSED); /* the parent's own circuit saw nothing */
    bw_pipeline *p = pipeline();
    CHECK_RC(bw_pipeline_add_registry(p, NULL, &err), BW_EINVAL);
    CHECK_RC(bw_pipeline_add_keyed(p, NULL, &err), BW_EINVAL);
    bw_pipeline_free(p);
    bw_breaker_free(parent);
    bw_registry_free(r);
}

/* HTTP status codes as return codes: 2xx success, 404 ignored, anything else a failure. */
static bw_outcome http_class(int rc, void *arg, void *user)
{
    (void)arg;
    (void)user;
    return rc >= 200 && rc < 300 ? BW_SUCCESS : rc == 404 ? BW_IGNORED : BW_FAILURE;
}

typedef struct statuses {
    int n, calls;
    int codes[8];
} statuses;

static int http_call(bw_ctx *ctx, void *arg)
{
    (void)ctx;
    statuses *s = arg;
    int i = s->calls < s->n ? s->calls : s->n - 1;
    s->calls++;
    return s->codes[i];
}

/* One classifier for the whole pipeline: breaker, retry and fallback all take it. */
static void test_pipeline_classifier(void)
{
    bw_breaker *b = breaker("min_calls=100", clk); /* never trips here */
    bw_retry *r = retry(3, 100 * MS);
    int fallbacks = 0;
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_set_classifier(p, http_class, NULL));
    CHECK_OK(bw_pipeline_add_fallback(p, BW_FALLBACK_ON_FAILURE, zero_fallback, &fallbacks, NULL));
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    int rc = 0;
    statuses ok = {1, 0, {200}};
    CHECK_OK(bw_pipeline_execute(p, http_call, &ok, &rc, NULL));
    CHECK_INT(rc, 200); /* a 200 is a success everywhere: no retry, no fallback */
    CHECK_INT(ok.calls, 1);
    statuses flaky = {3, 0, {503, 503, 201}};
    CHECK_OK(bw_pipeline_execute(p, http_call, &flaky, &rc, NULL));
    CHECK_INT(rc, 201);
    CHECK_INT(flaky.calls, 3); /* the retry took 503 as a failure */
    statuses missing = {1, 0, {404}};
    CHECK_OK(bw_pipeline_execute(p, http_call, &missing, &rc, NULL));
    CHECK_INT(rc, 404); /* ignored: not retried, no fallback */
    CHECK_INT(missing.calls, 1);
    statuses down = {1, 0, {500}};
    CHECK_OK(bw_pipeline_execute(p, http_call, &down, &rc, NULL));
    CHECK_INT(rc, 0); /* the fallback's */
    CHECK_INT(down.calls, 3);
    CHECK_INT(fallbacks, 1);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.total_calls, 1 + 3 + 3); /* the 404 recorded nothing */
    CHECK_INT(s.failed_calls, 2 + 3);
    CHECK_RC(bw_pipeline_set_classifier(p, NULL, NULL), BW_ESTATE); /* executed already */
    CHECK_RC(bw_pipeline_set_classifier(NULL, NULL, NULL), BW_EINVAL);
    bw_pipeline_free(p);
    bw_retry_free(r);
    bw_breaker_free(b);
}

/* A patient retry around a strategy that refuses without a reason: no garbage delay; it stops. */
static void test_patient_retry_unset_rejection(void)
{
    static const bw_strategy refuse = {BW_STRATEGY_VERSION, "refuse", refuse_exec, NULL};
    reset_logs();
    bw_retry *r = retry(3, 100 * MS);
    CHECK_OK(bw_retry_set_patient(r, 1, 0, NULL));
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    CHECK_OK(bw_pipeline_add(p, &refuse, NULL, NULL));
    bw_report rep;
    CHECK_RC(bw_pipeline_execute(p, call_dep, NULL, NULL, &rep), BW_REJECTED);
    CHECK_INT(rep.retry_verdict, BW_RETRY_REJECTED); /* no retry_after: nothing to wait for */
    CHECK_INT(nslept, 0);
    bw_pipeline_free(p);
    bw_retry_free(r);
}

/* The keyed layer's own refusals (a full table, a missing key) are not failures of the dependency. */
static void test_keyed_layer_errors_are_local(void)
{
    bw_breaker *outer = breaker("min_calls=2 window=count:4", clk);
    bw_breaker *parent = breaker("keyed_maxsize=1 keyed_limit=1", clk);
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_add_breaker(p, outer, NULL));
    CHECK_OK(bw_pipeline_add_keyed(p, parent, NULL));
    int calls = 0, rc = 0;
    bw_breaker *held = NULL;
    CHECK_OK(bw_keyed_get(parent, "resident", &held, NULL)); /* pinned: the table stays full */
    for (int i = 0; i < 4; i++) {
        CHECK_RC(bw_pipeline_execute_key(p, "new-tenant", per_host, &calls, &rc, NULL), BW_ELIMIT);
        CHECK_RC(bw_pipeline_execute(p, per_host, &calls, &rc, NULL), BW_EINVAL);
    }
    CHECK_INT(calls, 0);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(outer, &s));
    CHECK_INT(s.total_calls, 0);
    CHECK_STATE(outer, BW_STATE_CLOSED);
    bw_keyed_release(held);
    bw_pipeline_free(p);
    bw_breaker_free(parent);
    bw_breaker_free(outer);
}

/* A retry policy's own predicate beats the pipeline's classifier. */
static int never_retry(const bw_attempt *a, void *user)
{
    (void)a;
    (void)user;
    return 0;
}

static void test_own_predicate_wins(void)
{
    bw_retry *r = retry(3, 100 * MS);
    CHECK_OK(bw_retry_set_predicate(r, never_retry, NULL));
    bw_pipeline *p = pipeline();
    CHECK_OK(bw_pipeline_set_classifier(p, http_class, NULL));
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    statuses down = {1, 0, {503}};
    int rc = 0;
    CHECK_OK(bw_pipeline_execute(p, http_call, &down, &rc, NULL));
    CHECK_INT(down.calls, 1);
    bw_pipeline_free(p);
    bw_retry_free(r);
}

static void test_empty_pipeline(void)
{
    bw_pipeline *p = NULL;
    CHECK_OK(bw_pipeline_new("plain", &p, NULL));
    CHECK_INT(bw_pipeline_layers(p), 0);
    dep d = new_dep(1);
    int rc = -1;
    bw_report rep;
    CHECK_OK(bw_pipeline_execute(p, call_dep, &d, &rc, &rep));
    CHECK_INT(rc, 1);
    CHECK_INT(d.remaining[0], BW_NO_TIME);
    CHECK_INT(d.attempt[0], 1);
    CHECK_INT(rep.attempts, 1);
    CHECK_INT(rep.retry_verdict, -1);
    CHECK_INT(rep.fallback, 0);
    CHECK_INT(rep.has_rejection, 0);
    CHECK_INT(rep.rejection.retry_after_ns, BW_NO_TIME);
    bw_pipeline_free(p);
}

static int succeed(bw_ctx *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
    return 0;
}

static void test_no_allocation_when_executing(void)
{
#if ALLOC_HOOK
    /* The benchmark's five layers on the system clock. */
    bw_breaker *b = breaker("wait=10s", NULL);
    bw_retry *r = NULL;
    CHECK_OK(bw_retry_new(&r));
    bw_bulkhead *bh = NULL;
    CHECK_OK(bw_bulkhead_new(8, 0, &bh, NULL));
    bw_pipeline *p = NULL;
    int used = 0;
    CHECK_OK(bw_pipeline_new("five", &p, NULL));
    CHECK_OK(bw_pipeline_add_fallback(p, BW_FALLBACK_ON_ALL, zero_fallback, &used, NULL));
    CHECK_OK(bw_pipeline_add_retry(p, r, NULL));
    CHECK_OK(bw_pipeline_add_breaker(p, b, NULL));
    CHECK_OK(bw_pipeline_add_bulkhead(p, bh, NULL));
    CHECK_OK(bw_pipeline_add_timeout(p, S, NULL, NULL));
    CHECK_OK(bw_pipeline_execute(p, succeed, NULL, NULL, NULL));
    unsigned long before = allocs_now();
    for (int i = 0; i < 1000; i++)
        CHECK_OK(bw_pipeline_execute(p, succeed, NULL, NULL, NULL));
    CHECK_INT(allocs_now() - before, 0);
    bw_pipeline_free(p);
    bw_bulkhead_free(bh);
    bw_retry_free(r);
    bw_breaker_free(b);
#endif
}

/* ---- threads: one pipeline executed at once from several threads ---- */

typedef struct crowd {
    bw_pipeline *p;
    _Atomic int inside, max_inside, ok, full, other;
} crowd;

static int crowded(bw_ctx *ctx, void *arg)
{
    (void)ctx;
    crowd *c = arg;
    int now = atomic_fetch_add(&c->inside, 1) + 1;
    int m = atomic_load(&c->max_inside);
    while (now > m && !atomic_compare_exchange_weak(&c->max_inside, &m, now))
        ;
    atomic_fetch_sub(&c->inside, 1);
    return 0;
}

static void *crowd_worker(void *arg)
{
    crowd *c = arg;
    for (int i = 0; i < 2000; i++) {
        int st = bw_pipeline_execute(c->p, crowded, c, NULL, NULL);
        atomic_fetch_add(st == BW_OK ? &c->ok : st == BW_EFULL ? &c->full : &c->other, 1);
    }
    return NULL;
}

static void test_threads(void)
{
    /* A full bulkhead reaches the breaker as UNREACHABLE, which counts as failed: with four
       threads on two slots it would trip, and this test is about the layers under threads. */
    bw_breaker *b = breaker("wait=10s window=count:1000000 min_calls=1000000", NULL);
    bw_bulkhead *bh = NULL;
    CHECK_OK(bw_bulkhead_new(2, 0, &bh, NULL));
    crowd c;
    memset(&c, 0, sizeof c);
    CHECK_OK(bw_pipeline_new("crowd", &c.p, NULL));
    CHECK_OK(bw_pipeline_add_breaker(c.p, b, NULL));
    CHECK_OK(bw_pipeline_add_bulkhead(c.p, bh, NULL));
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK_INT(pthread_create(&t[i], NULL, crowd_worker, &c), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&c.max_inside) <= 2);
    CHECK_INT(atomic_load(&c.ok) + atomic_load(&c.full), 8000);
    CHECK_INT(atomic_load(&c.other), 0);
    CHECK_INT(bw_bulkhead_in_flight(bh), 0);
    bw_pipeline_free(c.p);
    bw_bulkhead_free(bh);
    bw_breaker_free(b);
}

static int never(const bw_fallback_info *why, void *arg, void *user)
{
    (void)why;
    (void)arg;
    (void)user;
    return 0;
}

static void test_bad_arguments(void)
{
    bw_error err;
    bw_pipeline *p = NULL;
    CHECK_RC(bw_pipeline_new("orders", NULL, &err), BW_EINVAL);
    CHECK_RC(bw_pipeline_new(NULL, &p, &err), BW_EINVAL);
    CHECK_STR(err.field, "name");
    CHECK_RC(bw_pipeline_new("", &p, &err), BW_EINVAL);
    CHECK_RC(bw_pipeline_new("has space", &p, &err), BW_EINVAL);
    CHECK(p == NULL);
    CHECK_OK(bw_pipeline_new("orders", &p, &err));
    CHECK_RC(bw_pipeline_add_breaker(p, NULL, &err), BW_EINVAL);
    CHECK_STR(err.field, "breaker");
    CHECK_RC(bw_pipeline_add_retry(p, NULL, &err), BW_EINVAL);
    CHECK_STR(err.field, "retry");
    CHECK_RC(bw_pipeline_add_bulkhead(p, NULL, &err), BW_EINVAL);
    CHECK_STR(err.field, "bulkhead");
    CHECK_RC(bw_pipeline_add_timeout(p, 0, NULL, &err), BW_ERANGE);
    CHECK_STR(err.field, "timeout");
    CHECK_RC(bw_pipeline_add_timeout(p, 366 * 86400 * S, NULL, &err), BW_ERANGE);
    CHECK_RC(bw_pipeline_add_fallback(p, 0, never, NULL, &err), BW_ERANGE);
    CHECK_STR(err.field, "on");
    CHECK_RC(bw_pipeline_add_fallback(p, 0x10, never, NULL, &err), BW_ERANGE);
    CHECK_RC(bw_pipeline_add_fallback(p, BW_FALLBACK_ON_ALL, NULL, NULL, &err), BW_EINVAL);
    CHECK_STR(err.field, "fallback");
    CHECK_RC(bw_pipeline_add_fallback_ex(p, 0, NULL, NULL, never, NULL, &err), BW_ERANGE);
    CHECK_STR(err.field, "on");
    bw_strategy bad = {0, "old", NULL, NULL};
    CHECK_RC(bw_pipeline_add(p, &bad, NULL, &err), BW_EINVAL);
    CHECK_STR(err.field, "version");
    bad.version = BW_STRATEGY_VERSION;
    CHECK_RC(bw_pipeline_add(p, &bad, NULL, &err), BW_EINVAL);
    CHECK_STR(err.field, "execute");
    CHECK_RC(bw_pipeline_add(p, NULL, NULL, &err), BW_EINVAL);
    CHECK_RC(bw_pipeline_add_breaker(NULL, NULL, &err), BW_EINVAL);
    CHECK_STR(err.field, "pipeline");
    CHECK_INT(bw_pipeline_layers(p), 0); /* nothing was added */
    /* At most 32 layers. */
    for (int i = 0; i < 32; i++)
        CHECK_OK(bw_pipeline_add_timeout(p, S, NULL, NULL));
    CHECK_RC(bw_pipeline_add_timeout(p, S, NULL, &err), BW_ESTATE);
    CHECK_RC(bw_pipeline_execute(p, NULL, NULL, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_pipeline_execute(NULL, succeed, NULL, NULL, NULL), BW_EINVAL);
    bw_pipeline_free(p);

    /* A pipeline that has executed is sealed. */
    CHECK_OK(bw_pipeline_new("sealed", &p, &err));
    CHECK_OK(bw_pipeline_execute(p, succeed, NULL, NULL, NULL));
    CHECK_RC(bw_pipeline_add_timeout(p, S, NULL, &err), BW_ESTATE);
    CHECK(strstr(err.message, "executed") != NULL);
    CHECK_RC(bw_pipeline_set_clock(p, NULL), BW_ESTATE);
    CHECK_RC(bw_pipeline_set_listener(p, 0, NULL, NULL), BW_ESTATE);
    bw_pipeline_free(p);
    bw_pipeline_free(NULL);
    CHECK_RC(bw_pipeline_set_clock(NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_pipeline_set_listener(NULL, 0, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_pipeline_layers(NULL), BW_EINVAL);

    /* Context accessors given NULL. */
    CHECK_RC(bw_ctx_next(NULL), BW_EINVAL);
    CHECK_INT(bw_ctx_remaining_ns(NULL), BW_NO_TIME);
    CHECK_INT(bw_ctx_deadline(NULL), BW_NO_TIME);
    CHECK_RC(bw_ctx_attempt(NULL), BW_EINVAL);
    CHECK_RC(bw_ctx_set_retry_after(NULL, 1), BW_EINVAL);
    CHECK_RC(bw_ctx_set_rc(NULL, 1), BW_EINVAL);
    CHECK_INT(bw_ctx_rc(NULL), 0);
    CHECK(bw_ctx_arg(NULL) == NULL);
    CHECK_INT(bw_ctx_set_deadline(NULL, 1), BW_NO_TIME);
    CHECK_RC(bw_ctx_restore_deadline(NULL, 1), BW_EINVAL);
    CHECK_INT(bw_ctx_now(NULL), 0);
}

static int negative_delay(bw_ctx *ctx, void *arg)
{
    (void)arg;
    return bw_ctx_set_retry_after(ctx, -1);
}

static void test_ctx_rejects_negative_delay(void)
{
    bw_pipeline *p = NULL;
    CHECK_OK(bw_pipeline_new("neg", &p, NULL));
    int rc = 0;
    CHECK_OK(bw_pipeline_execute(p, negative_delay, NULL, &rc, NULL));
    CHECK_INT(rc, BW_EINVAL);
    bw_pipeline_free(p);
}

int main(void)
{
    clock_fresh(0);
    events = rec_new();
    RUN(test_retry_stops_at_open_circuit);
    RUN(test_patient_retry_waits_for_the_probe);
    RUN(test_fallback_on_rejection);
    RUN(test_timeout_is_a_slow_failure);
    RUN(test_call_declares_timeout);
    RUN(test_bulkhead_full_is_not_an_outcome);
    RUN(test_inner_rejection_is_not_an_outcome);
    RUN(test_strategy_rejection);
    RUN(test_rejection_is_per_attempt);
    RUN(test_per_call_breakers);
    RUN(test_pipeline_classifier);
    RUN(test_patient_retry_unset_rejection);
    RUN(test_keyed_layer_errors_are_local);
    RUN(test_own_predicate_wins);
    RUN(test_fallback_keeps_shadow_statistics);
    RUN(test_fallback_with_a_classifier);
    RUN(test_result_delay_and_deadlines);
    RUN(test_limiter_in_a_pipeline);
    RUN(test_custom_strategy);
    RUN(test_empty_pipeline);
    RUN(test_no_allocation_when_executing);
    RUN(test_threads);
    RUN(test_bad_arguments);
    RUN(test_ctx_rejects_negative_delay);
    clock_done();
    rec_free(events);
    return TEST_SUMMARY();
}
