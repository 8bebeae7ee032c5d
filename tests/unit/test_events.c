/*
 * test_events.c — many listeners per breaker and per registry, why a state
 * changed, and the cumulative counters (listener.h, breaker.h). Time is a
 * manual clock; threads only where deliveries race adds and removes.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "clockfix.h"
#include "harness.h"
#include "recorder.h"

#define S BW_NS_PER_S
#define MS BW_NS_PER_MS

/* A rate breaker on the fixture's clock: count:10 window, min 10 calls, 50 %, 1 s wait, 2 probes. */
static bw_breaker *rate_breaker(const char *name, bw_config *cfg)
{
    bw_config *c = cfg ? cfg : bw_config_new();
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 10, NULL));
    CHECK_OK(bw_config_set_min_calls(c, 10, NULL));
    CHECK_OK(bw_config_set_wait(c, S, NULL));
    CHECK_OK(bw_config_set_permitted_probes(c, 2, NULL));
    CHECK_OK(bw_config_set_slow_call_duration(c, 100 * MS, NULL));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new(name, c, &b, NULL));
    if (!cfg)
        bw_config_free(c);
    return b;
}

/* One call that takes `dt` on the clock. */
static void call_took(bw_breaker *b, int64_t dt, bw_outcome o)
{
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    pump(dt);
    CHECK_OK(bw_settle(b, &p, o));
}

static int released;
static void on_release(void *user)
{
    (void)user;
    released++;
}

static void test_many_listeners(void)
{
    clock_fresh(CLOCKFIX_START);
    recorder *cfg_rec = rec_new(), *a = rec_new(), *bb = rec_new();
    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_set_listener(cfg, BW_EVENTS_ALL, rec_listen, cfg_rec));
    bw_breaker *b = rate_breaker("many", cfg);
    bw_config_free(cfg);
    uint64_t ida = 0, idb = 0;
    bw_listener la = {BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), rec_listen, a, on_release};
    bw_listener lb = {BW_EVENTS_ALL, rec_listen, bb, on_release};
    CHECK_OK(bw_breaker_add_listener(b, &la, &ida));
    CHECK_OK(bw_breaker_add_listener(b, &lb, &idb));
    CHECK(ida != 0 && idb != 0 && ida != idb);
    h_calls(b, 10, BW_FAILURE); /* trips on the 10th */
    CHECK_STATE(b, BW_STATE_OPEN);
    CHECK_INT(rec_count(cfg_rec), 11); /* 10 calls and the change */
    CHECK_INT(rec_count(a), 1);        /* its mask: the change only */
    CHECK_INT(rec_count(bb), 11);
    CHECK_STR(rec_line(a, 0), "state closed->open");
    /* Removing one: the others go on; its release runs (no delivery is running). */
    released = 0;
    CHECK_OK(bw_breaker_remove_listener(b, idb));
    CHECK_INT(released, 1);
    CHECK_RC(bw_breaker_remove_listener(b, idb), BW_ESTATE);
    CHECK_OK(bw_breaker_reset(b));
    CHECK_INT(rec_count(bb), 11);
    CHECK_INT(rec_count(a), 2);
    CHECK_INT(rec_count(cfg_rec), 13); /* open->closed, reset */
    /* Argument errors. */
    bw_listener bad = {0, rec_listen, a, NULL};
    CHECK_RC(bw_breaker_add_listener(b, &bad, NULL), BW_EINVAL);
    bad.mask = 1;
    bad.fn = NULL;
    CHECK_RC(bw_breaker_add_listener(b, &bad, NULL), BW_EINVAL);
    CHECK_RC(bw_breaker_add_listener(NULL, &la, NULL), BW_EINVAL);
    CHECK_RC(bw_breaker_add_listener(b, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_breaker_remove_listener(NULL, 1), BW_EINVAL);
    /* Freeing the breaker releases the listener still on it. */
    released = 0;
    bw_breaker_free(b);
    CHECK_INT(released, 1);
    rec_free(cfg_rec);
    rec_free(a);
    rec_free(bb);
}

/* A listener that removes itself from inside its own delivery. */
typedef struct selfrm {
    bw_breaker *b;
    uint64_t id;
    int heard;
} selfrm;

static void self_remove(const bw_event *e, void *user)
{
    (void)e;
    selfrm *s = user;
    s->heard++;
    CHECK_OK(bw_breaker_remove_listener(s->b, s->id));
}

static void test_remove_from_listener(void)
{
    clock_fresh(CLOCKFIX_START);
    bw_breaker *b = rate_breaker("selfrm", NULL);
    selfrm s = {b, 0, 0};
    bw_listener l = {BW_EVENT_MASK(BW_EVENT_CALL), self_remove, &s, on_release};
    CHECK_OK(bw_breaker_add_listener(b, &l, &s.id));
    released = 0;
    h_calls(b, 3, BW_SUCCESS);
    CHECK_INT(s.heard, 1);
    CHECK_INT(released, 1); /* the delivery that removed it was the last to end: it freed the list */
    bw_breaker_free(b);
}

/* A registry's listener hears every breaker, those made later, and their keyed circuits. */
static void test_registry_listeners(void)
{
    clock_fresh(CLOCKFIX_START);
    bw_config *d = bw_config_new();
    CHECK_OK(bw_config_set_clock(d, clk));
    CHECK_OK(bw_config_set_policy(d, BW_POLICY_CONSECUTIVE, NULL));
    CHECK_OK(bw_config_set_error_threshold(d, 2, NULL));
    bw_registry *r = NULL;
    CHECK_OK(bw_registry_new(d, &r, NULL));
    bw_config_free(d);
    bw_breaker *early = NULL, *late = NULL;
    CHECK_OK(bw_registry_get(r, "early", NULL, &early, NULL));
    recorder *rr = rec_new(), *own = rec_new();
    uint64_t id = 0;
    bw_listener l = {BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), rec_listen, rr, NULL};
    CHECK_OK(bw_registry_add_listener(r, &l, &id));
    CHECK_OK(bw_registry_get(r, "late", NULL, &late, NULL));
    bw_listener lo = {BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), rec_listen, own, NULL};
    CHECK_OK(bw_breaker_add_listener(late, &lo, NULL));
    h_calls(early, 2, BW_FAILURE);
    h_calls(late, 2, BW_FAILURE);
    /* A keyed circuit of a registry breaker reports to it, and so to the registry. */
    for (int i = 0; i < 2; i++) {
        bw_permit p;
        CHECK_OK(bw_keyed_acquire(early, "tenant-7", &p, NULL));
        CHECK_OK(bw_settle(early, &p, BW_FAILURE));
    }
    CHECK_INT(rec_count(rr), 3);
    CHECK_STR(rec_nth(rr, 0)->name, "early");
    CHECK_STR(rec_nth(rr, 1)->name, "late");
    CHECK_STR(rec_nth(rr, 2)->key, "tenant-7");
    CHECK_INT(rec_nth(rr, 2)->reason, BW_REASON_CONSECUTIVE_FAILURES);
    CHECK_INT(rec_nth(rr, 2)->count, 2);
    CHECK_INT(rec_count(own), 1); /* late's own listener heard late only */
    CHECK_OK(bw_registry_remove_listener(r, id));
    CHECK_RC(bw_registry_remove_listener(r, id), BW_ESTATE);
    CHECK_OK(bw_breaker_reset(early));
    CHECK_INT(rec_count(rr), 3);
    bw_registry_free(r);
    rec_free(rr);
    rec_free(own);
}

/* Every reason a state change can give, with its figures. */
static void test_reasons(void)
{
    clock_fresh(CLOCKFIX_START);
    recorder *r = rec_new();
    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_set_listener(cfg, BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), rec_listen, r));
    CHECK_OK(bw_config_set_max_wait_in_half_open(cfg, 5 * S, NULL));
    bw_breaker *b = rate_breaker("why", cfg);
    bw_counters c;
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.reason, BW_REASON_INITIAL);
    /* Failure rate: 6 of 10. */
    h_calls(b, 4, BW_SUCCESS);
    h_calls(b, 6, BW_FAILURE);
    const bw_event *e = rec_nth(r, 0);
    CHECK_INT(e->reason, BW_REASON_FAILURE_RATE);
    CHECK_DBL(e->rate, 0.6); /* min_calls is reached at the 10th call: 6 of 10 failed */
    CHECK_INT(e->total, 10);
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.reason, BW_REASON_FAILURE_RATE);
    /* The wait ends: the next call moves it to HALF_OPEN. */
    pump(S);
    h_calls(b, 1, BW_FAILURE);
    CHECK_INT(rec_nth(r, 1)->reason, BW_REASON_WAIT_ENDED);
    h_calls(b, 1, BW_SUCCESS); /* the round: 1 of 2 failed = 50 % */
    e = rec_nth(r, 2);
    CHECK_INT(e->to, BW_STATE_OPEN);
    CHECK_INT(e->reason, BW_REASON_PROBES_FAILED);
    CHECK_DBL(e->rate, 0.5);
    CHECK_INT(e->total, 2);
    /* A round that passes. */
    pump(S);
    h_calls(b, 2, BW_SUCCESS);
    CHECK_INT(rec_nth(r, 4)->reason, BW_REASON_PROBES_PASSED);
    CHECK_INT(rec_nth(r, 4)->to, BW_STATE_CLOSED);
    /* Slow rate: 10 slow successes (slow_call_rate 1.0). */
    for (int i = 0; i < 10; i++)
        call_took(b, 100 * MS, BW_SUCCESS);
    e = rec_nth(r, 5);
    CHECK_INT(e->reason, BW_REASON_SLOW_RATE);
    CHECK_DBL(e->rate, 1.0);
    /* An inconclusive round: both probes UNREACHABLE. */
    pump(S);
    h_calls(b, 2, BW_UNREACHABLE);
    CHECK_INT(rec_nth(r, 7)->reason, BW_REASON_PROBES_INCONCLUSIVE);
    CHECK_INT(rec_nth(r, 7)->count, 2);
    /* A round that outlives max_wait_in_half_open. */
    pump(S);
    bw_permit hung;
    CHECK_OK(bw_acquire(b, &hung, NULL));
    pump(5 * S);
    bw_permit p;
    CHECK_RC(bw_acquire(b, &p, NULL), BW_REJECTED);
    CHECK_INT(rec_nth(r, 9)->reason, BW_REASON_HALF_OPEN_TIMEOUT);
    /* Operator verbs. */
    CHECK_OK(bw_breaker_force_open(b));
    CHECK_INT(rec_nth(r, 10)->reason, BW_REASON_OPERATOR);
    CHECK_OK(bw_breaker_reset(b));
    CHECK_INT(rec_nth(r, 11)->reason, BW_REASON_OPERATOR);
    CHECK_INT(rec_count(r), 12);
    CHECK_STR(bw_reason_name(BW_REASON_PROBES_INCONCLUSIVE), "probes_inconclusive");
    CHECK_STR(bw_reason_name((bw_reason)99), "unknown");
    bw_breaker_free(b);
    bw_config_free(cfg);
    rec_free(r);
}

static void test_counters(void)
{
    clock_fresh(CLOCKFIX_START);
    bw_breaker *b = rate_breaker("count", NULL);
    call_took(b, 0, BW_SUCCESS);          /* bucket 0 (<= 10 ms) */
    call_took(b, 3 * MS, BW_SUCCESS);     /* bucket 0 */
    call_took(b, 200 * MS, BW_SUCCESS);   /* slow, <= 250 ms: bucket 4 */
    call_took(b, 20 * S, BW_FAILURE);     /* slow failure, <= 30 s: bucket 10 */
    call_took(b, MS, BW_IGNORED);         /* bucket 0 */
    call_took(b, 2 * MS, BW_UNREACHABLE); /* bucket 0 */
    bw_permit stale;
    CHECK_OK(bw_acquire(b, &stale, NULL));
    CHECK_OK(bw_breaker_force_open(b));
    CHECK_OK(bw_settle(b, &stale, BW_SUCCESS)); /* stale */
    bw_permit p;
    CHECK_RC(bw_acquire(b, &p, NULL), BW_REJECTED);
    CHECK_RC(bw_acquire(b, &p, NULL), BW_REJECTED);
    CHECK_OK(bw_breaker_reset(b));
    bw_counters c;
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.counting, 1);
    CHECK_INT(c.timed, 1);
    CHECK_INT(c.calls[BW_CALL_SUCCESS], 2);
    CHECK_INT(c.calls[BW_CALL_SLOW_SUCCESS], 1);
    CHECK_INT(c.calls[BW_CALL_SLOW_FAILURE], 1);
    CHECK_INT(c.calls[BW_CALL_FAILURE], 0);
    CHECK_INT(c.calls[BW_CALL_IGNORED], 1);
    CHECK_INT(c.calls[BW_CALL_UNREACHABLE], 1);
    CHECK_INT(c.calls[BW_CALL_STALE], 1);
    CHECK_INT(c.rejected[BW_STATE_FORCED_OPEN], 2);
    CHECK_INT(c.transitions[BW_STATE_CLOSED][BW_STATE_FORCED_OPEN], 1);
    CHECK_INT(c.transitions[BW_STATE_FORCED_OPEN][BW_STATE_CLOSED], 1);
    CHECK_INT(c.resets, 1);
    CHECK_INT(c.duration_buckets[0], 5); /* 0, 3, 1 and 2 ms, and the stale one (0 ms) */
    CHECK_INT(c.duration_buckets[4], 1);
    CHECK_INT(c.duration_buckets[10], 1);
    CHECK_INT(c.duration_buckets[BW_DURATION_BUCKETS - 1], 0);
    CHECK_INT(c.duration_count, 7);
    CHECK(fabs(c.duration_sum_s - (0.003 + 0.2 + 20 + 0.001 + 0.002)) < 1e-9);
    CHECK_INT(c.has_last_failure, 0); /* the reset cleared it */
    /* The last failure, with its message and age; a later failure without one clears the message. */
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle_msg(b, &p, BW_FAILURE, 503, "upstream said 503 Service Unavailable"));
    pump(2 * S);
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.has_last_failure, 1);
    CHECK_INT(c.last_failure_code, 503);
    CHECK_INT(c.last_failure_age_ns, 2 * S);
    CHECK_STR(c.last_failure_message, "upstream said 503 Service Unavailable");
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle_ex(b, &p, BW_FAILURE, 7));
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.last_failure_code, 7);
    CHECK_STR(c.last_failure_message, "");
    /* A long message is cut to BW_FAILURE_MESSAGE_MAX - 1 bytes. */
    char longmsg[200];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = 0;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle_msg(b, &p, BW_FAILURE, 1, longmsg));
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(strlen(c.last_failure_message), BW_FAILURE_MESSAGE_MAX - 1);
    CHECK_RC(bw_breaker_counters(NULL, &c), BW_EINVAL);
    CHECK_RC(bw_breaker_counters(b, NULL), BW_EINVAL);
    bw_breaker_free(b);
}

/* Probe rounds, and counters that stay off when asked. */
static void test_rounds_and_off(void)
{
    clock_fresh(CLOCKFIX_START);
    bw_breaker *b = rate_breaker("rounds", NULL);
    h_calls(b, 10, BW_FAILURE);
    pump(S);
    h_calls(b, 2, BW_FAILURE); /* failed round */
    pump(S);
    h_calls(b, 2, BW_SUCCESS); /* passed round */
    bw_counters c;
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.rounds_failed, 1);
    CHECK_INT(c.rounds_passed, 1);
    CHECK_INT(c.transitions[BW_STATE_CLOSED][BW_STATE_OPEN], 1);
    CHECK_INT(c.transitions[BW_STATE_OPEN][BW_STATE_HALF_OPEN], 2);
    CHECK_INT(c.transitions[BW_STATE_HALF_OPEN][BW_STATE_OPEN], 1);
    CHECK_INT(c.transitions[BW_STATE_HALF_OPEN][BW_STATE_CLOSED], 1);
    CHECK_INT(c.calls[BW_CALL_FAILURE], 12);
    CHECK_INT(c.calls[BW_CALL_SUCCESS], 2);
    bw_breaker_free(b);

    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_set_counters(cfg, 0, NULL));
    b = rate_breaker("off", cfg);
    h_calls(b, 3, BW_SUCCESS);
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.counting, 0);
    CHECK_INT(c.calls[BW_CALL_SUCCESS], 0);
    bw_breaker_free(b);
    bw_config_free(cfg);
}

/* Keyed circuits: counted each, summed by bw_keyed_counters, evicted ones kept in the sum. */
static void test_keyed_counters(void)
{
    clock_fresh(CLOCKFIX_START);
    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_set_keyed_maxsize(cfg, 2, NULL));
    CHECK_OK(bw_config_set_keyed_idle(cfg, 0, NULL));
    bw_breaker *b = rate_breaker("keyed", cfg);
    bw_config_free(cfg);
    const char *keys[] = {"a", "b", "c", "d"};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i <= k; i++) {
            bw_permit p;
            CHECK_OK(bw_keyed_acquire(b, keys[k], &p, NULL));
            CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
            pump(MS);
        }
    CHECK(bw_keyed_count(b) <= 2);
    bw_counters c;
    CHECK_OK(bw_keyed_counters(b, &c));
    CHECK_INT(c.calls[BW_CALL_SUCCESS], 10); /* 1 + 2 + 3 + 4, evicted circuits included */
    int seen = 0;
    CHECK_INT(bw_keyed_each(b, 1, (void (*)(bw_breaker *, void *))(void *)0, NULL), 0);
    CHECK_INT(bw_keyed_counters(NULL, &c), BW_EINVAL);
    (void)seen;
    bw_breaker_free(b);
}

/*
 * The quick paths (the system clock, nothing listening): a count window, a
 * striped time window, the consecutive policy and a keyed circuit each count
 * what they settle (their durations are near 0: mostly the first bucket).
 */
static void quick_case(bw_config *cfg, const char *name, int keyed)
{
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new(name, cfg, &b, NULL));
    for (int i = 0; i < 200; i++) {
        bw_permit p;
        bw_outcome o = i % 10 == 0 ? BW_FAILURE : i % 10 == 1 ? BW_IGNORED : BW_SUCCESS;
        if (keyed)
            CHECK_OK(bw_keyed_acquire(b, "k", &p, NULL));
        else
            CHECK_OK(bw_acquire(b, &p, NULL));
        CHECK_OK(bw_settle(b, &p, o));
    }
    bw_counters c;
    if (keyed)
        CHECK_OK(bw_keyed_counters(b, &c));
    else
        CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.calls[BW_CALL_SUCCESS], 160);
    CHECK_INT(c.calls[BW_CALL_FAILURE], 20);
    CHECK_INT(c.calls[BW_CALL_IGNORED], 20);
    CHECK_INT(c.duration_count, 200);
    uint64_t in_buckets = 0;
    for (int i = 0; i < BW_DURATION_BUCKETS; i++)
        in_buckets += c.duration_buckets[i];
    CHECK_INT(in_buckets, 200);
    /* Near 0 each, but on the real clock a call may be preempted past 10 ms (TSan on a loaded machine). */
    CHECK(c.duration_buckets[0] >= 100);
    bw_breaker_free(b);
}

static void test_counters_quick(void)
{
    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_set_window(cfg, BW_WINDOW_COUNT, 1000, NULL));
    CHECK_OK(bw_config_set_min_calls(cfg, 1000, NULL)); /* never trips: 200 calls */
    quick_case(cfg, "quick-count", 0);
    quick_case(cfg, "quick-keyed", 1);
    CHECK_OK(bw_config_set_window(cfg, BW_WINDOW_TIME, 10, NULL));
    quick_case(cfg, "quick-time", 0);
    bw_config_free(cfg);
    cfg = bw_config_new();
    CHECK_OK(bw_config_set_policy(cfg, BW_POLICY_CONSECUTIVE, NULL));
    CHECK_OK(bw_config_set_error_threshold(cfg, 1000, NULL));
    quick_case(cfg, "quick-consecutive", 0);
    bw_config_free(cfg);
}

/* A listener that settles a failure on another breaker from inside a bw_settle_msg's event. */
static bw_breaker *inner_b;
static void settle_inner(const bw_event *e, void *user)
{
    (void)user;
    if (e->type != BW_EVENT_CALL)
        return;
    bw_permit p;
    CHECK_OK(bw_acquire(inner_b, &p, NULL));
    CHECK_OK(bw_settle_ex(inner_b, &p, BW_FAILURE, 77));
}

/* A message belongs to its own settle: not to one a listener makes meanwhile. */
static void test_message_scope(void)
{
    clock_fresh(CLOCKFIX_START);
    inner_b = rate_breaker("inner", NULL);
    recorder *r = rec_new();
    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_set_listener(cfg, BW_EVENT_MASK(BW_EVENT_CALL), settle_inner, NULL));
    bw_breaker *outer = rate_breaker("outer", cfg);
    bw_config_free(cfg);
    bw_listener l = {BW_EVENT_MASK(BW_EVENT_CALL), rec_listen, r, NULL};
    CHECK_OK(bw_breaker_add_listener(inner_b, &l, NULL));
    bw_permit p;
    CHECK_OK(bw_acquire(outer, &p, NULL));
    CHECK_OK(bw_settle_msg(outer, &p, BW_FAILURE, 500, "outer message"));
    bw_counters c;
    CHECK_OK(bw_breaker_counters(outer, &c));
    CHECK_STR(c.last_failure_message, "outer message");
    CHECK_OK(bw_breaker_counters(inner_b, &c));
    CHECK_INT(c.last_failure_code, 77);
    CHECK_STR(c.last_failure_message, "");
    CHECK_INT(rec_count(r), 1);
    CHECK(rec_nth(r, 0)->message == NULL || rec_nth(r, 0)->message[0] == 0);
    CHECK_INT(rec_nth(r, 0)->rc, 77);
    bw_breaker_free(outer);
    bw_breaker_free(inner_b);
    rec_free(r);
}

/* A stored breaker: an operator verb counts once (its store's transition), and the reason is the record's. */
static void test_stored_counts(void)
{
    clock_fresh(CLOCKFIX_START);
    bw_store *st = NULL;
    CHECK_OK(bw_store_open("memory:", &st, NULL));
    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_set_store(cfg, st, BW_STORE_STORED, NULL));
    CHECK_OK(bw_config_set_window(cfg, BW_WINDOW_COUNT, 10, NULL));
    bw_breaker *b = rate_breaker("stored", cfg);
    bw_config_free(cfg);
    CHECK_OK(bw_breaker_force_open(b));
    CHECK_OK(bw_breaker_reset(b));
    bw_counters c;
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.transitions[BW_STATE_CLOSED][BW_STATE_FORCED_OPEN], 1);
    CHECK_INT(c.transitions[BW_STATE_FORCED_OPEN][BW_STATE_CLOSED], 1);
    h_calls(b, 10, BW_FAILURE);
    CHECK_OK(bw_breaker_counters(b, &c));
    CHECK_INT(c.state, BW_STATE_OPEN);
    CHECK_INT(c.reason, BW_REASON_FAILURE_RATE);
    CHECK_INT(c.transitions[BW_STATE_CLOSED][BW_STATE_OPEN], 1);
    CHECK_INT(c.calls[BW_CALL_FAILURE], 10);
    bw_breaker_free(b);
    bw_store_close(st);
}

/* Deliveries on many threads while a listener is added and removed over and over (ThreadSanitizer's case). */
typedef struct churn {
    bw_breaker *b;
    _Atomic int stop;
} churn;

static _Atomic long heard;
static void count_event(const bw_event *e, void *user)
{
    (void)e;
    (void)user;
    heard++;
}

static void *caller(void *arg)
{
    churn *c = arg;
    while (!c->stop)
        h_calls(c->b, 10, BW_SUCCESS);
    return NULL;
}

static _Atomic int churn_released;
static void churn_release(void *user)
{
    (void)user;
    churn_released++;
}

static void test_churn(void)
{
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("churn", NULL, &b, NULL));
    churn c = {b, 0};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, caller, &c);
    for (int i = 0; i < 2000; i++) {
        uint64_t id;
        bw_listener l = {BW_EVENT_MASK(BW_EVENT_CALL), count_event, NULL, churn_release};
        CHECK_OK(bw_breaker_add_listener(b, &l, &id));
        CHECK_OK(bw_breaker_remove_listener(b, id));
    }
    c.stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    bw_breaker_free(b);
    CHECK_INT(churn_released, 2000); /* each release ran once, by the end */
}

/*
 * A removed listener's release runs while other threads keep delivering
 * (reclamation needs no quiet moment): 3 threads call without pause, with a
 * slow CALL listener, so some delivery is nearly always running.
 */
static _Atomic int busy_released;
static void busy_release(void *user)
{
    (void)user;
    busy_released = 1;
}

/* A listener that takes a while (so that deliveries on the calling threads overlap). */
static void slow_event(const bw_event *e, void *user)
{
    (void)e;
    (void)user;
    for (volatile int i = 0; i < 20000; i++)
        ;
}

static void test_release_under_load(void)
{
    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_set_listener(cfg, BW_EVENT_MASK(BW_EVENT_CALL), slow_event, NULL));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("busy", cfg, &b, NULL));
    bw_config_free(cfg);
    churn c = {b, 0};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, caller, &c);
    uint64_t id;
    bw_listener l = {BW_EVENT_MASK(BW_EVENT_CALL), count_event, NULL, busy_release};
    CHECK_OK(bw_breaker_add_listener(b, &l, &id));
    CHECK_OK(bw_breaker_remove_listener(b, id));
    /* Bounded: 10 s at most (it takes microseconds). */
    struct timespec ts = {0, 1000000};
    for (int i = 0; i < 10000 && !busy_released; i++)
        nanosleep(&ts, NULL);
    int seen = busy_released;
    c.stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(seen, 1);
    bw_breaker_free(b);
}

int main(void)
{
    RUN(test_many_listeners);
    RUN(test_remove_from_listener);
    RUN(test_registry_listeners);
    RUN(test_reasons);
    RUN(test_counters);
    RUN(test_rounds_and_off);
    RUN(test_keyed_counters);
    RUN(test_counters_quick);
    RUN(test_message_scope);
    RUN(test_stored_counts);
    RUN(test_churn);
    RUN(test_release_under_load);
    clock_done();
    return TEST_SUMMARY();
}
