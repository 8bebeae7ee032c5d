/*
 * test_breaker.c (tests/unit/) — the breaker engine through the public API:
 * permits, events and their order, retry_after, last failure, slow-call timing,
 * operator verbs, the auto-transition timer (manual and custom clocks), and bad
 * input. Every timing rule runs on a manual clock.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "harness.h"
#include "clockfix.h"
#include "recorder.h"

#define S BW_NS_PER_S
#define MS BW_NS_PER_MS

/* The listener that calls back into a breaker (test_listener_may_reenter), through the recorder's hook. */
static void reenter(const bw_event *e, void *arg)
{
    bw_breaker *b = arg;
    if (e->type == BW_EVENT_STATE_CHANGE) {
        bw_snapshot s;
        bw_permit p;
        bw_breaker_snapshot(b, &s); /* must not deadlock */
        if (bw_acquire(b, &p, NULL) == BW_OK)
            bw_settle(b, &p, BW_IGNORED);
    }
}

/* ---- fixtures ---- */

static bw_breaker *make(const char *text, recorder *r)
{
    bw_config *c = bw_config_new();
    bw_error err = {0};
    bw_breaker *b = NULL;
    CHECK(c != NULL);
    CHECK_OK(bw_config_parse(c, text, &err));
    if (err.code)
        fprintf(stderr, "config: %s\n", err.message);
    bw_config_set_clock(c, clk);
    if (r)
        bw_config_set_listener(c, BW_EVENTS_ALL, rec_listen, r);
    CHECK_OK(bw_breaker_new("svc", c, &b, &err));
    bw_config_free(c);
    return b;
}

static void call(bw_breaker *b, bw_outcome o)
{
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle(b, &p, o));
}

/* Each test starts on a fresh manual clock. */
static void setup(void)
{
    clock_fresh(CLOCKFIX_START);
}

/* ---- tests ---- */

/* interlock's verified event order (spec §5.4). */
static void test_event_order(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=2 failure_rate=0.5 wait=10s permitted_probes=1", r);
    call(b, BW_FAILURE);
    call(b, BW_FAILURE);
    CHECK_STR(rec_since(r, 0), "call failure, call failure, state closed->open");
    int mark = rec_count(r);
    bw_permit p;
    bw_rejection why;
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_STR(rec_since(r, mark), "rejected open");
    mark = rec_count(r);
    pump(10 * S);
    call(b, BW_SUCCESS);
    CHECK_STR(rec_since(r, mark), "state open->half_open, call success, state half_open->closed");
    mark = rec_count(r);
    bw_breaker_reset(b);
    CHECK_STR(rec_since(r, mark), "reset");
    mark = rec_count(r);
    bw_breaker_force_open(b);
    bw_breaker_force_open(b);
    CHECK_STR(rec_since(r, mark), "state closed->forced_open");
    mark = rec_count(r);
    bw_breaker_reset(b);
    CHECK_STR(rec_since(r, mark), "state forced_open->closed, reset");
    bw_breaker_free(b);
    rec_free(r);
}

static void test_rejection_details(void)
{
    setup();
    bw_breaker *b = make("min_calls=1 failure_rate=1 wait=5s", NULL);
    bw_permit p;
    bw_rejection why;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle_ex(b, &p, BW_FAILURE, 503));
    CHECK_STATE(b, BW_STATE_OPEN);
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 5 * S);
    CHECK_INT(why.has_last_failure, 1);
    CHECK_INT(why.last_failure, 503);
    pump(5 * S - 1);
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 1);
    CHECK_RC(bw_acquire(b, &p, NULL), BW_REJECTED); /* why may be NULL */
    bw_breaker_force_open(b);
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_FORCED_OPEN);
    CHECK_INT(why.retry_after_ns, BW_NO_TIME);
    CHECK_INT(why.last_failure, 503);
    int code = 0;
    CHECK_OK(bw_breaker_last_failure(b, &code));
    CHECK_INT(code, 503);
    bw_breaker_reset(b);
    CHECK_RC(bw_breaker_last_failure(b, &code), BW_ESTATE);
    bw_breaker_free(b);
}

/*
 * bw_breaker_open_for: CLOSED -> OPEN for exactly the asked wait (reason
 * retry_after), an OPEN ending sooner starts a new period, one ending later is
 * left alone, HALF_OPEN -> OPEN ends the round (its probe stale) without
 * growing the backoff, recovery then goes as usual; an operator state wins.
 */
static void test_open_for(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=2 failure_rate=0.5 wait=10s wait_multiplier=2 permitted_probes=1", r);
    CHECK_OK(bw_breaker_open_for(b, 30 * S));
    CHECK_STATE(b, BW_STATE_OPEN);
    CHECK_STR(rec_since(r, 0), "state closed->open");
    bw_counters k;
    CHECK_OK(bw_breaker_counters(b, &k));
    CHECK_INT(k.reason, BW_REASON_RETRY_AFTER);
    CHECK_STR(bw_reason_name(BW_REASON_RETRY_AFTER), "retry_after");
    CHECK_STR(bw_reason_name(BW_REASON_STORE_DOWN), "store_down");
    bw_permit p;
    bw_rejection why;
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 30 * S);
    pump(10 * S);
    CHECK_OK(bw_breaker_open_for(b, 5 * S)); /* ends in 20 s already: left alone */
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 20 * S);
    CHECK_OK(bw_breaker_open_for(b, 25 * S)); /* longer: a new period */
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 25 * S);
    pump(25 * S);
    CHECK_OK(bw_acquire(b, &p, NULL)); /* the wait over: a probe */
    CHECK_STATE(b, BW_STATE_HALF_OPEN);
    CHECK_OK(bw_breaker_open_for(b, 3 * S)); /* the round ends: its probe is stale */
    CHECK_STATE(b, BW_STATE_OPEN);
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.state, BW_STATE_OPEN);
    CHECK_INT(s.failed_rounds, 0); /* not a failed round */
    CHECK_INT(s.retry_after_ns, 3 * S);
    CHECK_OK(bw_breaker_counters(b, &k));
    CHECK_INT(k.calls[BW_CALL_STALE], 1);
    CHECK_INT(k.transitions[BW_STATE_HALF_OPEN][BW_STATE_OPEN], 1);
    CHECK_INT(k.rounds_failed, 0); /* nor counted as one */
    pump(3 * S);
    call(b, BW_SUCCESS); /* recovery as usual */
    CHECK_STATE(b, BW_STATE_CLOSED);
    /* Operator states win; bad arguments. */
    CHECK_OK(bw_breaker_force_open(b));
    CHECK_RC(bw_breaker_open_for(b, S), BW_ESTATE);
    CHECK_STATE(b, BW_STATE_FORCED_OPEN);
    CHECK_RC(bw_breaker_open_for(b, 0), BW_ERANGE);
    CHECK_RC(bw_breaker_open_for(b, 366 * 86400 * S), BW_ERANGE);
    CHECK_RC(bw_breaker_open_for(NULL, S), BW_EINVAL);
    bw_breaker_free(b);
    rec_free(r);
}

static void test_half_open_caps_reject_without_retry_after(void)
{
    setup();
    bw_breaker *b = make("min_calls=1 failure_rate=1 wait=1s permitted_probes=2 max_concurrent_probes=1", NULL);
    call(b, BW_FAILURE);
    pump(S);
    bw_permit p1, p2;
    bw_rejection why;
    CHECK_OK(bw_acquire(b, &p1, NULL));
    CHECK_STATE(b, BW_STATE_HALF_OPEN);
    CHECK_RC(bw_acquire(b, &p2, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_HALF_OPEN);
    CHECK_INT(why.retry_after_ns, BW_NO_TIME);
    CHECK_OK(bw_settle(b, &p1, BW_SUCCESS));
    CHECK_OK(bw_acquire(b, &p2, NULL));
    CHECK_OK(bw_settle(b, &p2, BW_SUCCESS));
    CHECK_STATE(b, BW_STATE_CLOSED);
    bw_breaker_free(b);
}

static void test_permit_misuse(void)
{
    setup();
    bw_breaker *a = make("min_calls=1", NULL);
    bw_breaker *b = make("min_calls=1", NULL);
    bw_permit p;
    CHECK_OK(bw_acquire(a, &p, NULL));
    CHECK_RC(bw_settle(b, &p, BW_FAILURE), BW_EPERMIT); /* wrong breaker */
    CHECK_RC(bw_settle(a, &p, (bw_outcome)7), BW_EINVAL);
    CHECK_OK(bw_settle(a, &p, BW_SUCCESS));
    CHECK_RC(bw_settle(a, &p, BW_FAILURE), BW_EPERMIT); /* twice */
    bw_permit never;
    memset(&never, 0, sizeof never);
    CHECK_RC(bw_settle(a, &never, BW_FAILURE), BW_EPERMIT);
    CHECK_RC(bw_settle(NULL, &p, BW_FAILURE), BW_EINVAL);
    CHECK_RC(bw_settle(a, NULL, BW_FAILURE), BW_EINVAL);
    CHECK_RC(bw_acquire(NULL, &p, NULL), BW_EINVAL);
    CHECK_RC(bw_acquire(a, NULL, NULL), BW_EINVAL);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(a, &s));
    CHECK_INT(s.total_calls, 1); /* only the one honest settle counted */
    CHECK_INT(s.failed_calls, 0);
    CHECK_OK(bw_breaker_snapshot(b, &s));
    CHECK_INT(s.total_calls, 0);
    /* A rejected acquire leaves a permit that cannot be settled. */
    bw_breaker_force_open(a);
    CHECK_RC(bw_acquire(a, &p, NULL), BW_REJECTED);
    CHECK_RC(bw_settle(a, &p, BW_FAILURE), BW_EPERMIT);
    bw_breaker_free(a);
    bw_breaker_free(b);
}

static void test_slow_call_boundary(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("slow_call_duration=1s min_calls=100", r);
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    pump(S - 1);
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK_OK(bw_acquire(b, &p, NULL));
    pump(S);
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK_OK(bw_acquire(b, &p, NULL));
    pump(S + 1);
    CHECK_OK(bw_settle(b, &p, BW_FAILURE));
    CHECK_STR(rec_since(r, 0), "call success, call success slow, call failure slow");
    CHECK_INT(rec_nth(r, 0)->duration_ns, S - 1);
    CHECK_INT(rec_nth(r, 1)->duration_ns, S);
    CHECK_INT(rec_nth(r, 2)->duration_ns, S + 1);
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.total_calls, 3);
    CHECK_INT(s.slow_calls, 2);
    CHECK_INT(s.failed_calls, 1);
    CHECK_DBL(s.slow_call_rate, 2.0 / 3.0);
    bw_breaker_free(b);
    rec_free(r);
}

/* Slowness alone trips with the default slow_call_rate of 1.0 (interlock §11 item 1). */
static void test_all_slow_trips(void)
{
    setup();
    bw_breaker *b = make("slow_call_duration=100ms min_calls=3", NULL);
    for (int i = 0; i < 3; i++) {
        bw_permit p;
        CHECK_OK(bw_acquire(b, &p, NULL));
        pump(100 * MS);
        CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
        CHECK_STATE(b, i < 2 ? BW_STATE_CLOSED : BW_STATE_OPEN);
    }
    bw_breaker_free(b);
}

static void test_stale_outcome_after_trip(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=1 failure_rate=1", r);
    bw_permit early, late;
    CHECK_OK(bw_acquire(b, &early, NULL));
    CHECK_OK(bw_acquire(b, &late, NULL));
    CHECK_OK(bw_settle(b, &early, BW_FAILURE));
    CHECK_STATE(b, BW_STATE_OPEN);
    int mark = rec_count(r);
    CHECK_OK(bw_settle(b, &late, BW_SUCCESS));
    CHECK_STR(rec_since(r, mark), "call success stale");
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.total_calls, 1);
    CHECK_INT(s.failed_calls, 1);
    bw_breaker_free(b);
    rec_free(r);
}

/* unreachable_counts=false: UNREACHABLE is not recorded in CLOSED; in HALF_OPEN it is no verdict, as by default. */
static void test_unreachable_counts_off(void)
{
    for (int counts = 0; counts < 2; counts++) {
        clock_fresh(0);
        bw_config *cfg = bw_config_new();
        bw_error err;
        CHECK_OK(bw_config_parse(cfg, "min_calls=2 window=count:4 wait=1s permitted_probes=1", &err));
        CHECK_OK(bw_config_set_unreachable_counts(cfg, counts, &err));
        CHECK_OK(bw_config_set_clock(cfg, clk));
        bw_breaker *b = NULL;
        CHECK_OK(bw_breaker_new("unreach", cfg, &b, &err));
        bw_config_free(cfg);
        for (int i = 0; i < 4; i++) {
            bw_permit p;
            if (bw_acquire(b, &p, NULL) == BW_OK)
                CHECK_OK(bw_settle(b, &p, BW_UNREACHABLE));
        }
        bw_snapshot s;
        CHECK_OK(bw_breaker_snapshot(b, &s));
        if (counts) {
            CHECK_INT(s.state, BW_STATE_OPEN); /* the default: failures */
        } else {
            CHECK_INT(s.state, BW_STATE_CLOSED);
            CHECK_INT(s.total_calls, 0);
            CHECK_OK(bw_breaker_force_open(b));
            CHECK_OK(bw_breaker_reset(b));
            h_calls(b, 2, BW_FAILURE);
        }
        CHECK_STATE(b, BW_STATE_OPEN);
        pump(1 * BW_NS_PER_S);
        bw_permit p;
        CHECK_OK(bw_acquire(b, &p, NULL)); /* the probe */
        CHECK_OK(bw_settle(b, &p, BW_UNREACHABLE));
        CHECK_STATE(b, BW_STATE_OPEN); /* an all-inconclusive round reopens, either way */
        CHECK_OK(bw_breaker_snapshot(b, &s));
        CHECK_INT(s.failed_rounds, 0);
        bw_breaker_free(b);
    }
}

static void test_disabled_and_metrics_only(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=2 failure_rate=0.5", r);
    call(b, BW_FAILURE);
    call(b, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_OPEN);
    /* metrics_only after OPEN keeps adding to the tripped window (interlock §2.6). */
    bw_breaker_metrics_only(b);
    call(b, BW_SUCCESS);
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.total_calls, 3);
    CHECK_INT(s.failed_calls, 2);
    for (int i = 0; i < 10; i++)
        call(b, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_METRICS_ONLY); /* never trips */
    bw_breaker_disable(b);
    int mark = rec_count(r);
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle_ex(b, &p, BW_FAILURE, 77));
    CHECK_STR(rec_since(r, mark), "call failure"); /* the event still fires */
    bw_snapshot s2;
    bw_breaker_snapshot(b, &s2);
    CHECK_INT(s2.total_calls, 13); /* nothing recorded while disabled */
    int code;
    CHECK_OK(bw_breaker_last_failure(b, &code));
    CHECK_INT(code, 77); /* but the last failure is */
    bw_breaker_free(b);
    rec_free(r);
}

static void test_initial_states(void)
{
    setup();
    bw_breaker *b = make("initial_state=forced_open", NULL);
    CHECK_STATE(b, BW_STATE_FORCED_OPEN);
    bw_permit p;
    CHECK_RC(bw_acquire(b, &p, NULL), BW_REJECTED);
    bw_breaker_free(b);
    recorder *r = rec_new();
    b = make("initial_state=metrics_only min_calls=1", r);
    CHECK_INT(rec_count(r), 0); /* construction emits nothing */
    call(b, BW_FAILURE);
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.total_calls, 1);
    CHECK_STATE(b, BW_STATE_METRICS_ONLY);
    bw_breaker_free(b);
    rec_free(r);
    b = make("initial_state=disabled", NULL);
    CHECK_STATE(b, BW_STATE_DISABLED);
    bw_breaker_free(b);
}

static int ok_fn(void *arg)
{
    (void)arg;
    return 0;
}

static int fail_fn(void *arg)
{
    return *(int *)arg;
}

static bw_outcome http_classifier(int rc, void *arg, void *user)
{
    (void)arg;
    (void)user;
    if (rc == 404)
        return BW_IGNORED;
    if (rc == 999)
        return (bw_outcome)42; /* a buggy classifier */
    return rc >= 500 ? BW_FAILURE : BW_SUCCESS;
}

static void test_call_helper(void)
{
    setup();
    bw_config *c = bw_config_new();
    bw_config_parse(c, "min_calls=100", NULL);
    bw_config_set_clock(c, clk);
    bw_config_set_classifier(c, http_classifier, NULL);
    bw_breaker *b;
    CHECK_OK(bw_breaker_new("http", c, &b, NULL));
    bw_config_free(c);
    int rc = -1, code;
    CHECK_OK(bw_breaker_call(b, ok_fn, NULL, &rc, NULL));
    CHECK_INT(rc, 0);
    code = 404;
    CHECK_OK(bw_breaker_call(b, fail_fn, &code, &rc, NULL));
    CHECK_INT(rc, 404);
    code = 503;
    CHECK_OK(bw_breaker_call(b, fail_fn, &code, NULL, NULL));
    code = 999;
    CHECK_OK(bw_breaker_call(b, fail_fn, &code, NULL, NULL));
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.total_calls, 3);  /* 404 ignored */
    CHECK_INT(s.failed_calls, 2); /* 503 and the unknown outcome */
    CHECK_OK(bw_breaker_last_failure(b, &code));
    CHECK_INT(code, 999);
    CHECK_RC(bw_breaker_call(b, NULL, NULL, NULL, NULL), BW_EINVAL);
    bw_breaker_force_open(b);
    bw_rejection why;
    rc = -1;
    CHECK_RC(bw_breaker_call(b, ok_fn, NULL, &rc, &why), BW_REJECTED);
    CHECK_INT(rc, -1); /* not run */
    CHECK_INT(why.state, BW_STATE_FORCED_OPEN);
    bw_breaker_free(b);
}

static void test_auto_transition_manual_clock(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=1 failure_rate=1 wait=30s auto_transition=true", r);
    call(b, BW_FAILURE);
    int mark = rec_count(r);
    pump(30 * S - 1);
    CHECK_STATE(b, BW_STATE_OPEN);
    CHECK_STR(rec_since(r, mark), "");
    pump(1);
    CHECK_STATE(b, BW_STATE_HALF_OPEN);
    CHECK_STR(rec_since(r, mark), "state open->half_open");
    pump(S);
    CHECK_STR(rec_since(r, mark), "state open->half_open"); /* exactly once */
    /* The timer admitted nobody: the first call is still probe 1. */
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.probes_admitted, 0);
    bw_breaker_free(b);
    rec_free(r);
}

/* The timer moves first; the next call is then probe 1 of that round, and no second event fires. */
static void test_auto_transition_then_call(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=1 failure_rate=1 wait=30s auto_transition=true permitted_probes=1", r);
    call(b, BW_FAILURE);
    int mark = rec_count(r);
    pump(30 * S);
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK_STR(rec_since(r, mark), "state open->half_open, call success, state half_open->closed");
    bw_breaker_free(b);
    rec_free(r);
}

static void test_auto_transition_cancelled_by_reset(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=1 failure_rate=1 wait=30s auto_transition=true", r);
    call(b, BW_FAILURE);
    bw_breaker_reset(b);
    int mark = rec_count(r);
    pump(60 * S);
    CHECK_STR(rec_since(r, mark), "");
    CHECK_STATE(b, BW_STATE_CLOSED);
    call(b, BW_FAILURE);
    bw_breaker_force_open(b);
    mark = rec_count(r);
    pump(60 * S);
    CHECK_STR(rec_since(r, mark), "");
    CHECK_STATE(b, BW_STATE_FORCED_OPEN);
    bw_breaker_free(b);
    /* A freed breaker is no longer driven by the clock (ASan would catch a use after free). */
    pump(60 * S);
    rec_free(r);
}

static void test_half_open_deadline(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=1 failure_rate=1 wait=10s permitted_probes=2 max_wait_in_half_open=5s "
                         "wait_multiplier=2",
                         r);
    call(b, BW_FAILURE);
    pump(10 * S);
    bw_permit hung;
    CHECK_OK(bw_acquire(b, &hung, NULL)); /* a probe that never comes back */
    pump(5 * S - 1);
    bw_permit p;
    bw_rejection why;
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_HALF_OPEN);
    pump(1);
    int mark = rec_count(r);
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 20 * S); /* a failed round doubles the wait */
    CHECK_STR(rec_since(r, mark), "state half_open->open, rejected open");
    CHECK_OK(bw_settle(b, &hung, BW_SUCCESS)); /* late: stale */
    CHECK_STATE(b, BW_STATE_OPEN);
    bw_breaker_free(b);
    rec_free(r);
}

static void test_half_open_deadline_by_timer(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=1 failure_rate=1 wait=10s max_wait_in_half_open=5s auto_transition=true", r);
    call(b, BW_FAILURE);
    pump(10 * S);
    int mark = rec_count(r);
    bw_permit hung;
    CHECK_OK(bw_acquire(b, &hung, NULL));
    pump(5 * S);
    CHECK_STR(rec_since(r, mark), "state half_open->open");
    bw_breaker_free(b);
    rec_free(r);
}

static void test_listener_may_reenter(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("min_calls=1 failure_rate=1 wait=1s", r);
    r->hook = reenter;
    r->hook_arg = b;
    call(b, BW_FAILURE); /* the state-change listener snapshots and acquires */
    CHECK_STATE(b, BW_STATE_OPEN);
    pump(S);
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK(rec_count(r) >= 3);
    bw_breaker_free(b);
    rec_free(r);
}

static void test_time_window_engine(void)
{
    setup();
    bw_breaker *b = make("window=time:3s min_calls=3 failure_rate=0.5", NULL);
    call(b, BW_FAILURE);
    pump(2 * S);
    call(b, BW_FAILURE);
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.total_calls, 2);
    pump(S); /* the first failure ages out */
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.total_calls, 1);
    call(b, BW_SUCCESS);
    call(b, BW_SUCCESS);
    CHECK_STATE(b, BW_STATE_CLOSED); /* 1 of 3 failed */
    call(b, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_OPEN); /* 2 of 4 */
    bw_breaker_free(b);
}

/*
 * A striped time window leaves the trip test out while the failed and slow
 * calls since the last test that passed stay within its headroom: the breaker
 * must still trip on exactly the call that reaches a threshold, for failures
 * and for slow calls, in one second and when the second moves on.
 */
static void test_time_window_trips_on_the_exact_call(void)
{
    for (int rate = 10; rate <= 90; rate += 40) {
        setup();
        char text[128];
        snprintf(text, sizeof text, "window=time:60s min_calls=1 failure_rate=0.%d wait=1h", rate / 10);
        bw_breaker *b = make(text, NULL);
        for (int i = 0; i < 1000; i++)
            call(b, BW_SUCCESS);
        /* failures f trip when f / (1000 + f) >= rate: f >= 1000 * rate / (100 - rate) */
        int need = (1000 * rate + (100 - rate) - 1) / (100 - rate);
        for (int f = 1; f < need; f++) {
            call(b, BW_FAILURE);
            if (f % 97 == 0)
                pump(S / 4); /* a new second now and then: a new base */
        }
        CHECK_STATE(b, BW_STATE_CLOSED);
        call(b, BW_FAILURE);
        CHECK_STATE(b, BW_STATE_OPEN);
        bw_breaker_free(b);
    }
    /* Slow calls: 200 admitted at once, settled half a second later, all slow. */
    setup();
    bw_breaker *b = make("window=time:60s min_calls=1 slow_call_duration=100ms slow_call_rate=0.5 wait=1h", NULL);
    for (int i = 0; i < 100; i++)
        call(b, BW_SUCCESS);
    bw_permit p[100];
    for (int i = 0; i < 100; i++)
        CHECK_OK(bw_acquire(b, &p[i], NULL));
    pump(S / 2);
    for (int i = 0; i < 99; i++)
        CHECK_OK(bw_settle(b, &p[i], BW_SUCCESS));
    CHECK_STATE(b, BW_STATE_CLOSED); /* 99 slow of 199 */
    CHECK_OK(bw_settle(b, &p[99], BW_SUCCESS));
    CHECK_STATE(b, BW_STATE_OPEN); /* 100 of 200 */
    bw_breaker_free(b);
}

static void test_consecutive_engine(void)
{
    setup();
    recorder *r = rec_new();
    bw_breaker *b = make("policy=consecutive error_threshold=3 success_threshold=2", r);
    call(b, BW_FAILURE);
    call(b, BW_FAILURE);
    call(b, BW_SUCCESS);
    call(b, BW_FAILURE);
    call(b, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_CLOSED);
    call(b, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_OPEN);
    bw_permit p;
    bw_rejection why;
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 30 * S); /* grelmicro's default reset_timeout */
    pump(30 * S);
    call(b, BW_SUCCESS);
    CHECK_STATE(b, BW_STATE_HALF_OPEN);
    call(b, BW_SUCCESS);
    CHECK_STATE(b, BW_STATE_CLOSED);
    bw_breaker_free(b);
    rec_free(r);
}

/* ---- the timer thread, on a custom clock the test controls ---- */

static _Atomic int64_t custom_now;

static int64_t custom_clock(void *user)
{
    (void)user;
    return atomic_load(&custom_now);
}

static void *noop_thread(void *arg)
{
    return arg;
}

/* Threads of this process, from /proc (Linux); -1 if unknown. */
static int thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

/*
 * Many auto_transition breakers on one custom clock share one timer thread; each
 * moves to HALF_OPEN once its wait is over on that clock, and not before.
 */
static void test_timer_service(void)
{
    enum { N = 50 };
    bw_clock *cc;
    CHECK_OK(bw_clock_custom_new(custom_clock, NULL, &cc));
    atomic_store(&custom_now, 0);
    recorder *r = rec_new();
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_parse(c, "min_calls=1 failure_rate=1 wait=1ms auto_transition=true", NULL));
    bw_config_set_clock(c, cc);
    bw_config_set_listener(c, BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), rec_listen, r);
    bw_breaker *b[N];
    /* A first thread makes a sanitizer start its own helper thread now, not below. */
    pthread_t dummy;
    pthread_create(&dummy, NULL, noop_thread, NULL);
    pthread_join(dummy, NULL);
    int threads_before = thread_count();
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "timer-%d", i);
        CHECK_OK(bw_breaker_new(name, c, &b[i], NULL));
        call(b[i], BW_FAILURE);
    }
    bw_config_free(c);
    CHECK_INT(rec_wait(r, N), N);
    if (threads_before > 0)
        CHECK_INT(thread_count() - threads_before, 1); /* one service thread for all */
    /* Time has not moved on the breakers' clock, so no timer can have fired. */
    for (int i = 0; i < N; i++)
        CHECK_STATE(b[i], BW_STATE_OPEN);
    atomic_store(&custom_now, BW_NS_PER_MS);
    CHECK_INT(rec_wait(r, 2 * N), 2 * N);
    for (int i = 0; i < N; i++)
        CHECK_STATE(b[i], BW_STATE_HALF_OPEN);
    CHECK_INT(rec_changes(r, "open->half_open"), N); /* exactly one each */
    for (int i = 0; i < N; i++)
        bw_breaker_free(b[i]); /* cancels; no fire runs afterwards */
    bw_clock_free(cc);         /* joins the service thread */
    rec_free(r);
}

/* The service also ends a hung half-open round on time, after moving to HALF_OPEN. */
static void test_timer_service_half_open_deadline(void)
{
    bw_clock *cc;
    CHECK_OK(bw_clock_custom_new(custom_clock, NULL, &cc));
    atomic_store(&custom_now, 0);
    recorder *r = rec_new();
    bw_config *c = bw_config_new();
    CHECK_OK(
        bw_config_parse(c, "min_calls=1 failure_rate=1 wait=1ms max_wait_in_half_open=2ms auto_transition=true", NULL));
    bw_config_set_clock(c, cc);
    bw_config_set_listener(c, BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), rec_listen, r);
    bw_breaker *b;
    CHECK_OK(bw_breaker_new("ho-deadline", c, &b, NULL));
    bw_config_free(c);
    call(b, BW_FAILURE);
    atomic_store(&custom_now, BW_NS_PER_MS); /* the wait ends: HALF_OPEN, no probe */
    CHECK_INT(rec_wait(r, 2), 2);
    atomic_store(&custom_now, 3 * BW_NS_PER_MS); /* the round outlived its 2 ms */
    CHECK_INT(rec_wait(r, 3), 3);
    CHECK_STR(rec_since(r, 0), "state closed->open, state open->half_open, state half_open->open");
    bw_breaker_free(b);
    bw_clock_free(cc);
    rec_free(r);
}

/*
 * Freeing breakers while the service is firing them is safe: the sanitizers'
 * part. Here: every breaker did trip (so a timer was armed to race the free).
 */
static void test_timer_free_while_firing(void)
{
    bw_clock *cc;
    recorder *r = rec_new();
    CHECK_OK(bw_clock_custom_new(custom_clock, NULL, &cc));
    for (int round = 0; round < 20; round++) {
        atomic_store(&custom_now, 0);
        bw_config *c = bw_config_new();
        CHECK_OK(bw_config_parse(c, "min_calls=1 failure_rate=1 wait=1us auto_transition=true", NULL));
        bw_config_set_clock(c, cc);
        bw_config_set_listener(c, BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), rec_listen, r);
        bw_breaker *b[8];
        for (int i = 0; i < 8; i++) {
            CHECK_OK(bw_breaker_new("racy", c, &b[i], NULL));
            call(b[i], BW_FAILURE);
        }
        bw_config_free(c);
        atomic_store(&custom_now, BW_NS_PER_MS); /* all due now */
        for (int i = 0; i < 8; i++)
            bw_breaker_free(b[i]);
    }
    bw_clock_free(cc);
    CHECK(rec_changes_to(r, 0, BW_STATE_OPEN) >= 20 * 8); /* every trip; a timer may add a reopen before its free */
    CHECK_INT(rec_changes(r, "closed->open"), 20 * 8);    /* each breaker tripped once */
    rec_free(r);
}

static void test_bad_input(void)
{
    bw_snapshot s;
    int code;
    CHECK_RC(bw_breaker_snapshot(NULL, &s), BW_EINVAL);
    CHECK_RC(bw_breaker_state(NULL), BW_EINVAL);
    CHECK_RC(bw_breaker_reset(NULL), BW_EINVAL);
    CHECK_RC(bw_breaker_force_open(NULL), BW_EINVAL);
    CHECK_RC(bw_breaker_disable(NULL), BW_EINVAL);
    CHECK_RC(bw_breaker_metrics_only(NULL), BW_EINVAL);
    CHECK_RC(bw_breaker_last_failure(NULL, &code), BW_EINVAL);
    CHECK(bw_breaker_name(NULL) == NULL);
    CHECK_INT(bw_breaker_bytes(NULL), 0);
    bw_breaker_free(NULL);
    bw_breaker *b = NULL;
    CHECK_RC(bw_breaker_new("x", NULL, NULL, NULL), BW_EINVAL);
    bw_error err;
    CHECK_RC(bw_breaker_new("has space", NULL, &b, &err), BW_EINVAL);
    CHECK_STR(err.field, "name");
    CHECK(b == NULL);
    CHECK_OK(bw_breaker_new("defaults", NULL, &b, &err));
    CHECK_STR(bw_breaker_name(b), "defaults");
    CHECK_RC(bw_breaker_snapshot(b, NULL), BW_EINVAL);
    CHECK_RC(bw_breaker_last_failure(b, NULL), BW_EINVAL);
    bw_breaker_free(b);
    CHECK_RC(bw_clock_manual_advance(NULL, 1), BW_EINVAL);
    CHECK_RC(bw_clock_manual_advance(bw_clock_system(), 1), BW_EINVAL);
    bw_clock *m;
    CHECK_OK(bw_clock_manual_new(5, &m));
    CHECK_RC(bw_clock_manual_advance(m, -1), BW_EINVAL);
    CHECK_RC(bw_clock_manual_set(m, 4), BW_EINVAL);
    CHECK_INT(bw_clock_now(m), 5);
    CHECK_OK(bw_clock_manual_set(m, 9));
    CHECK_INT(bw_clock_now(m), 9);
    bw_clock_free(m);
    bw_clock_free(bw_clock_system()); /* ignored */
    CHECK_RC(bw_clock_custom_new(NULL, NULL, &m), BW_EINVAL);
    CHECK_RC(bw_clock_manual_new(0, NULL), BW_EINVAL);
}

static void test_system_clock_moves(void)
{
    bw_clock *c = bw_clock_system();
    int64_t a = bw_clock_now(c);
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int64_t b = bw_clock_now(c);
    CHECK(b - a >= 19 * BW_NS_PER_MS / 10); /* 2 ms, less calibration error */
    CHECK(b - a < 5 * BW_NS_PER_S);
}

static void test_snapshot_fields(void)
{
    setup();
    bw_breaker *b = make("min_calls=4 failure_rate=0.5 wait=7s", NULL);
    call(b, BW_SUCCESS);
    call(b, BW_UNREACHABLE); /* a failure in CLOSED */
    call(b, BW_IGNORED);     /* not recorded */
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.state, BW_STATE_CLOSED);
    CHECK_INT(s.total_calls, 2);
    CHECK_INT(s.failed_calls, 1);
    CHECK_DBL(s.failure_rate, 0.5);
    CHECK_INT(s.retry_after_ns, BW_NO_TIME);
    CHECK_INT(s.open_wait_ns, 7 * S);
    call(b, BW_SUCCESS);
    call(b, BW_FAILURE);
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.state, BW_STATE_OPEN);
    CHECK_INT(s.retry_after_ns, 7 * S);
    CHECK_INT(s.generation, 1);
    bw_breaker_free(b);
}

int main(void)
{
    RUN(test_event_order);
    RUN(test_rejection_details);
    RUN(test_open_for);
    RUN(test_half_open_caps_reject_without_retry_after);
    RUN(test_permit_misuse);
    RUN(test_slow_call_boundary);
    RUN(test_all_slow_trips);
    RUN(test_stale_outcome_after_trip);
    RUN(test_unreachable_counts_off);
    RUN(test_disabled_and_metrics_only);
    RUN(test_initial_states);
    RUN(test_call_helper);
    RUN(test_auto_transition_manual_clock);
    RUN(test_auto_transition_then_call);
    RUN(test_auto_transition_cancelled_by_reset);
    RUN(test_half_open_deadline);
    RUN(test_half_open_deadline_by_timer);
    RUN(test_listener_may_reenter);
    RUN(test_time_window_engine);
    RUN(test_time_window_trips_on_the_exact_call);
    RUN(test_consecutive_engine);
    RUN(test_timer_service);
    RUN(test_timer_service_half_open_deadline);
    RUN(test_timer_free_while_firing);
    RUN(test_bad_input);
    RUN(test_system_clock_moves);
    RUN(test_snapshot_fields);
    clock_done();
    return TEST_SUMMARY();
}
