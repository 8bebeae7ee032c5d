/*
 * test_keyed.c (tests/unit/) — keyed circuits: independence, handles and pins,
 * every eviction rule on a manual clock (idle boundary, in-flight calls, LRU
 * order, maxsize 0, history, operator states, the hard limit, a flood of new
 * keys against a failing key), the keyed_* knobs, bad input, and a concurrency
 * test of lookups, calls and evictions at once (meant to run under ASan and
 * TSan).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"
#include "clockfix.h"
#include "recorder.h"

#define S BW_NS_PER_S

/* Knobs of one test breaker; zero fields keep the defaults below. */
typedef struct opts {
    int64_t maxsize, limit, idle, hidle;
    int auto_transition;
    bw_listener_cb listener;
    void *user;
} opts;

/*
 * A breaker on the manual clock that trips on 2 failures out of the last 4
 * calls (min_calls 2, failure_rate 0.5), waits 60 s, and closes after 1 probe.
 */
static bw_breaker *make(const opts *o)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 4, &e));
    CHECK_OK(bw_config_set_min_calls(c, 2, &e));
    CHECK_OK(bw_config_set_permitted_probes(c, 1, &e));
    CHECK_OK(bw_config_set_wait(c, 60 * S, &e));
    CHECK_OK(bw_config_set_keyed_maxsize(c, o->maxsize, &e));
    CHECK_OK(bw_config_set_keyed_limit(c, o->limit, &e));
    CHECK_OK(bw_config_set_keyed_idle(c, o->idle ? o->idle : 300 * S, &e));
    CHECK_OK(bw_config_set_keyed_history_idle(c, o->hidle ? o->hidle : 3600 * S, &e));
    CHECK_OK(bw_config_set_auto_transition(c, o->auto_transition, &e));
    if (o->listener)
        CHECK_OK(bw_config_set_listener(c, BW_EVENTS_ALL, o->listener, o->user));
    bw_breaker *b = NULL;
    int rc = bw_breaker_new("upstream", c, &b, &e);
    if (rc != BW_OK)
        H_FAIL("bw_breaker_new: %s (%s)", bw_strerror(rc), e.message);
    bw_config_free(c);
    return b;
}

/* One call on key's circuit with this outcome; returns the acquire status. */
static int call(bw_breaker *b, const char *key, bw_outcome o)
{
    bw_permit p;
    int rc = bw_keyed_acquire(b, key, &p, NULL);
    if (rc == BW_OK)
        CHECK_OK(bw_settle(b, &p, o));
    return rc;
}

/* The state of key's circuit, or -100 when it is not resident. */
static int key_state(bw_breaker *b, const char *key)
{
    bw_breaker *c = bw_keyed_find(b, key);
    if (!c)
        return -100;
    int s = bw_breaker_state(c);
    bw_keyed_release(c);
    return s;
}

static int resident(bw_breaker *b, const char *key)
{
    return key_state(b, key) != -100;
}

/* Fail calls on key's circuit until it opens (at most 4). */
static void trip(bw_breaker *b, const char *key)
{
    for (int i = 0; i < 4 && key_state(b, key) != BW_STATE_OPEN; i++)
        CHECK_OK(call(b, key, BW_FAILURE));
    CHECK_INT(key_state(b, key), BW_STATE_OPEN);
}

/* The recorder's i-th event as "name/key what" (key "-" for the breaker's own circuit). */
static const char *keyed_line(recorder *r, int i)
{
    static char buf[600];
    const bw_event *e = rec_nth(r, i);
    const char *what = e->type == BW_EVENT_STATE_CHANGE ? bw_state_name(e->to)
                       : e->type == BW_EVENT_CALL       ? bw_outcome_name(e->outcome)
                       : e->type == BW_EVENT_REJECTED   ? "rejected"
                                                        : "reset";
    snprintf(buf, sizeof buf, "%s/%s %s", e->name ? e->name : "(null)", e->key ? e->key : "-", what);
    return buf;
}

/* ---- independence, identity, events ---- */

static void test_independent_circuits(void)
{
    recorder *r = rec_new();
    opts o = {.maxsize = 16, .listener = rec_listen, .user = r};
    bw_breaker *b = make(&o);
    trip(b, "a");
    CHECK_INT(key_state(b, "b"), -100);
    CHECK_OK(call(b, "b", BW_SUCCESS));
    CHECK_INT(key_state(b, "b"), BW_STATE_CLOSED);
    CHECK_STATE(b, BW_STATE_CLOSED); /* the breaker's own circuit is untouched */

    bw_permit p;
    bw_rejection why;
    CHECK_RC(bw_keyed_acquire(b, "a", &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 60 * S);
    CHECK_INT(why.has_last_failure, 1);

    /* Tripping the breaker's own circuit leaves the keys alone. */
    bw_permit q;
    for (int i = 0; i < 2; i++) {
        CHECK_OK(bw_acquire(b, &q, NULL));
        CHECK_OK(bw_settle(b, &q, BW_FAILURE));
    }
    CHECK_STATE(b, BW_STATE_OPEN);
    CHECK_INT(key_state(b, "b"), BW_STATE_CLOSED);
    CHECK_OK(call(b, "b", BW_SUCCESS));

    /* Identity: one circuit per key; the breaker's name, the key apart. */
    bw_breaker *h1, *h2;
    CHECK_OK(bw_keyed_get(b, "a", &h1, NULL));
    CHECK_OK(bw_keyed_get(b, "a", &h2, NULL));
    CHECK(h1 == h2);
    CHECK(h1 != b);
    CHECK_STR(bw_breaker_name(h1), "upstream");
    CHECK_STR(bw_breaker_key(h1), "a");
    CHECK(bw_breaker_key(b) == NULL);
    CHECK_INT(bw_keyed_count(b), 2);
    CHECK(bw_breaker_bytes(h1) > 0 && bw_breaker_bytes(h1) <= 1280); /* 768 with counters off */
    CHECK(bw_keyed_bytes(b) >= 2 * bw_breaker_bytes(h1));
    bw_keyed_release(h1);
    bw_keyed_release(h2);

    /* Events: the breaker's name, and the key apart (NULL for its own circuit). */
    const char *want[] = {"upstream/a failure", "upstream/a failure",  "upstream/a open",
                          "upstream/b success", "upstream/a rejected", "upstream/- failure",
                          "upstream/- failure", "upstream/- open",     "upstream/b success"};
    int n = (int)(sizeof want / sizeof want[0]);
    CHECK_INT(rec_count(r), n);
    for (int i = 0; i < n && i < rec_count(r); i++)
        CHECK_STR(keyed_line(r, i), want[i]);
    bw_breaker_free(b);
    rec_free(r);
}

static void test_handle_has_full_surface(void)
{
    opts o = {.maxsize = 16};
    bw_breaker *b = make(&o);
    bw_breaker *c;
    CHECK_OK(bw_keyed_get(b, "tenant-1", &c, NULL));
    bw_permit p;
    CHECK_OK(bw_acquire(c, &p, NULL));
    CHECK_OK(bw_settle(c, &p, BW_FAILURE)); /* settled on the circuit itself */
    CHECK_OK(bw_acquire(c, &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_FAILURE)); /* or through its breaker */
    CHECK_STATE(c, BW_STATE_OPEN);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(c, &s));
    CHECK_INT(s.failed_calls, 2);
    CHECK_OK(bw_breaker_reset(c));
    CHECK_STATE(c, BW_STATE_CLOSED);
    CHECK_OK(bw_breaker_force_open(c));
    CHECK_INT(key_state(b, "tenant-1"), BW_STATE_FORCED_OPEN);
    CHECK_OK(bw_breaker_apply(c, BW_VERB_DISABLE));
    CHECK_STATE(c, BW_STATE_DISABLED);
    CHECK_STATE(b, BW_STATE_CLOSED);
    bw_breaker_free(c); /* ignored: the family owns it */
    CHECK_STATE(c, BW_STATE_DISABLED);
    bw_keyed_release(c);
    bw_breaker_free(b);
}

static void test_permits(void)
{
    opts o = {.maxsize = 16};
    bw_breaker *b = make(&o), *other = make(&o);
    bw_permit p, copy;
    CHECK_OK(bw_keyed_acquire(b, "k", &p, NULL));
    copy = p;
    CHECK_RC(bw_settle(other, &p, BW_SUCCESS), BW_EPERMIT); /* another breaker */
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK_RC(bw_settle(b, &p, BW_SUCCESS), BW_EPERMIT); /* twice */
    (void)copy;
    /* A pinned permit settled on its circuit also unpins: the circuit becomes evictable. */
    bw_breaker *c;
    CHECK_OK(bw_keyed_get(b, "k", &c, NULL));
    CHECK_OK(bw_keyed_acquire(b, "k", &p, NULL));
    CHECK_OK(bw_settle(c, &p, BW_SUCCESS));
    bw_keyed_release(c);
    /* A rejected acquire leaves no pin: after the idle time "k" gives way. */
    trip(b, "j");
    CHECK_RC(bw_keyed_acquire(b, "j", &p, NULL), BW_REJECTED);
    CHECK_RC(bw_settle(b, &p, BW_SUCCESS), BW_EPERMIT);
    bw_breaker_free(other);
    bw_breaker_free(b);

    opts one = {.maxsize = 1};
    b = make(&one);
    CHECK_OK(call(b, "k", BW_SUCCESS));
    pump(300 * S);
    CHECK_OK(call(b, "m", BW_SUCCESS));
    CHECK(!resident(b, "k"));
    CHECK_INT(bw_keyed_count(b), 1);
    bw_breaker_free(b);
}

/* ---- eviction ---- */

/* The idle boundary: a quiet circuit unused for d seconds, then a new key arrives. */
static void test_idle_boundary(void)
{
    const int64_t d[] = {299, 300, 301};
    for (int i = 0; i < 3; i++) {
        opts o = {.maxsize = 1};
        bw_breaker *b = make(&o);
        CHECK_OK(call(b, "old", BW_SUCCESS));
        pump(d[i] * S);
        CHECK_OK(call(b, "new", BW_SUCCESS));
        int kept = resident(b, "old");
        if (kept != (d[i] < 300))
            H_FAIL("idle %" PRId64 " s: old circuit %s", d[i], kept ? "kept" : "evicted");
        CHECK_INT(bw_keyed_count(b), d[i] < 300 ? 2 : 1);
        bw_breaker_free(b);
    }
    /* A lookup counts as use: idle time runs from the last find/release. */
    opts o = {.maxsize = 1};
    bw_breaker *b = make(&o);
    CHECK_OK(call(b, "old", BW_SUCCESS));
    pump(200 * S);
    CHECK(resident(b, "old"));
    pump(299 * S);
    CHECK_OK(call(b, "new", BW_SUCCESS));
    CHECK(resident(b, "old"));
    bw_breaker_free(b);
}

static void test_in_flight_never_evicted(void)
{
    opts o = {.maxsize = 1};
    bw_breaker *b = make(&o);
    bw_permit p;
    CHECK_OK(bw_keyed_acquire(b, "busy", &p, NULL));
    pump(1000 * S);
    CHECK_OK(call(b, "x", BW_SUCCESS));
    CHECK(resident(b, "busy")); /* a permit in flight pins it */
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    /* The settle was its last use: 299 s later it stays, 300 s later it goes. */
    pump(299 * S);
    CHECK_OK(call(b, "y", BW_SUCCESS));
    CHECK(resident(b, "busy"));
    CHECK(!resident(b, "x")); /* quiet, so it gave way at keyed_limit (2) */
    bw_breaker_free(b);

    /* A held handle pins as well. */
    b = make(&o);
    bw_breaker *h;
    CHECK_OK(bw_keyed_get(b, "held", &h, NULL));
    pump(1000 * S);
    CHECK_OK(call(b, "x", BW_SUCCESS));
    CHECK(resident(b, "held"));
    bw_keyed_release(h);
    pump(300 * S);
    CHECK_OK(call(b, "y", BW_SUCCESS));
    CHECK(!resident(b, "held"));
    bw_breaker_free(b);
}

static void test_lru_order(void)
{
    opts o = {.maxsize = 3};
    bw_breaker *b = make(&o);
    CHECK_OK(call(b, "A", BW_SUCCESS));
    CHECK_OK(call(b, "B", BW_SUCCESS));
    CHECK_OK(call(b, "C", BW_SUCCESS));
    pump(10 * S);
    CHECK(resident(b, "A")); /* A moves to the most recent end */
    pump(400 * S);
    /* All three are idle; B is the least recently used. */
    CHECK_OK(call(b, "D", BW_SUCCESS));
    CHECK(!resident(b, "B"));
    CHECK_OK(call(b, "E", BW_SUCCESS));
    CHECK(!resident(b, "C"));
    CHECK(resident(b, "A"));
    CHECK_INT(bw_keyed_count(b), 3);
    bw_breaker_free(b);
}

/*
 * On the system clock a keyed permit's settle releases its pin on the quick
 * path (the record and the release in one critical section): a circuit is
 * kept while its permit is in flight and evictable right after its settle.
 */
static void test_pin_released_by_quick_settle(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_parse(c, "window=count:4 keyed_maxsize=1 keyed_idle=0s keyed_history_idle=1h", &e));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("sys", c, &b, &e));
    bw_config_free(c);
    bw_permit pa;
    CHECK_OK(bw_keyed_acquire(b, "a", &pa, NULL));
    CHECK_OK(call(b, "b", BW_SUCCESS)); /* a is marked used: its second chance */
    CHECK_OK(call(b, "c", BW_SUCCESS)); /* a is pinned: b goes */
    CHECK_INT(bw_keyed_count(b), 2);
    CHECK_OK(bw_settle(b, &pa, BW_SUCCESS));
    CHECK_OK(call(b, "d", BW_SUCCESS)); /* a is idle now: a and c go, down to below keyed_maxsize */
    CHECK_INT(bw_keyed_count(b), 1);
    CHECK(resident(b, "d"));
    CHECK(!resident(b, "a") && !resident(b, "b") && !resident(b, "c"));
    bw_breaker_free(b);
}

static void test_maxsize_zero_is_unbounded(void)
{
    opts o = {.maxsize = 0};
    bw_breaker *b = make(&o);
    char key[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        CHECK_OK(call(b, key, BW_SUCCESS));
        pump(3600 * S);
    }
    CHECK_INT(bw_keyed_count(b), 5000);
    CHECK(resident(b, "k0") && resident(b, "k4999"));
    bw_breaker_free(b);
}

/* OPEN, HALF_OPEN and failing circuits outlive keyed_idle; they expire after keyed_history_idle. */
static void test_history_kept_until_history_idle(void)
{
    opts o = {.maxsize = 1, .limit = 10};
    bw_breaker *b = make(&o);
    trip(b, "open");
    CHECK_OK(call(b, "dirty", BW_FAILURE)); /* CLOSED, one failure in its window */
    CHECK_INT(key_state(b, "dirty"), BW_STATE_CLOSED);
    pump(3599 * S);
    CHECK_OK(call(b, "x1", BW_SUCCESS));
    CHECK(resident(b, "open") && resident(b, "dirty"));
    CHECK_INT(bw_keyed_count(b), 3);
    /* keyed_history_idle after their last use (the lookups above), both go. */
    pump(3600 * S);
    CHECK_OK(call(b, "x2", BW_SUCCESS));
    CHECK(!resident(b, "open"));
    CHECK(!resident(b, "dirty"));
    CHECK(!resident(b, "x1"));
    CHECK_INT(bw_keyed_count(b), 1);
    bw_breaker_free(b);

    /* An OPEN circuit is kept until its open wait ends, even past keyed_history_idle. */
    opts w = {.maxsize = 1, .idle = 1 * S, .hidle = 10 * S};
    b = make(&w);
    trip(b, "open"); /* wait 60 s */
    pump(59 * S);
    CHECK_OK(call(b, "x", BW_SUCCESS));
    CHECK_INT(bw_keyed_count(b), 2); /* "open" stayed (a lookup would count as use) */
    pump(1 * S);
    CHECK_OK(call(b, "y", BW_SUCCESS));
    CHECK(!resident(b, "open"));
    bw_breaker_free(b);
}

static void test_operator_states_never_evicted(void)
{
    opts o = {.maxsize = 1, .limit = 3, .hidle = 300 * S};
    bw_breaker *b = make(&o);
    const char *keys[] = {"forced", "disabled", "shadow"};
    for (int i = 0; i < 3; i++) {
        bw_breaker *h;
        CHECK_OK(bw_keyed_get(b, keys[i], &h, NULL));
        CHECK_OK(bw_breaker_apply(h, (bw_verb)(BW_VERB_FORCE_OPEN + i)));
        bw_keyed_release(h);
    }
    pump(365 * 86400 * S);
    bw_error e;
    bw_breaker *h = NULL;
    CHECK_RC(bw_keyed_get(b, "new", &h, &e), BW_ELIMIT);
    CHECK(h == NULL);
    CHECK_STR(e.field, "key");
    CHECK_INT(key_state(b, "forced"), BW_STATE_FORCED_OPEN);
    CHECK_INT(key_state(b, "disabled"), BW_STATE_DISABLED);
    CHECK_INT(key_state(b, "shadow"), BW_STATE_METRICS_ONLY);
    bw_breaker_free(b);
}

/* At keyed_limit: quiet circuits give way however recent; failing ones never; else BW_ELIMIT. */
static void test_limit(void)
{
    opts o = {.maxsize = 2, .limit = 4};
    bw_breaker *b = make(&o);
    trip(b, "f1");
    trip(b, "f2");
    CHECK_OK(call(b, "q1", BW_SUCCESS));
    CHECK_OK(call(b, "q2", BW_SUCCESS));
    CHECK_INT(bw_keyed_count(b), 4);
    CHECK_OK(call(b, "q3", BW_SUCCESS)); /* evicts q1, the least recent quiet one */
    CHECK(!resident(b, "q1"));
    CHECK_INT(bw_keyed_count(b), 4);
    trip(b, "q2");                       /* now 3 failing circuits and q3 */
    CHECK_OK(call(b, "q4", BW_SUCCESS)); /* evicts q3 */
    CHECK(!resident(b, "q3"));
    trip(b, "q4");
    /* Four failing circuits: a new key is refused, resident keys keep working. */
    bw_permit p;
    CHECK_RC(bw_keyed_acquire(b, "new", &p, NULL), BW_ELIMIT);
    CHECK_INT(bw_keyed_count(b), 4);
    CHECK_RC(bw_keyed_acquire(b, "f1", &p, NULL), BW_REJECTED);
    /* After their open waits and keyed_history_idle, they expire. */
    pump(3600 * S);
    CHECK_OK(call(b, "new", BW_SUCCESS));
    CHECK_INT(bw_keyed_count(b), 2); /* evicted down to maxsize - 1 before adding */
    bw_breaker_free(b);
}

/* A flood of new keys cannot reset a failing key's history, and memory stays bounded. */
static void test_flood_against_failing_key(void)
{
    opts o = {.maxsize = 8}; /* limit 16 */
    bw_breaker *b = make(&o);
    trip(b, "victim");
    CHECK_OK(call(b, "slow-burn", BW_FAILURE));
    CHECK_OK(call(b, "slow-burn", BW_SUCCESS));
    bw_breaker *v;
    CHECK_OK(bw_keyed_get(b, "victim", &v, NULL));
    bw_snapshot before;
    CHECK_OK(bw_breaker_snapshot(v, &before));
    bw_keyed_release(v);
    char key[32];
    size_t peak = 0;
    /* 20,000 keys, 0.1 s apart: 2,000 s, within keyed_history_idle. */
    for (int i = 0; i < 20000; i++) {
        snprintf(key, sizeof key, "flood-%d", i);
        CHECK_OK(call(b, key, BW_SUCCESS));
        size_t n = bw_keyed_count(b);
        peak = n > peak ? n : peak;
        pump(S / 10);
    }
    CHECK(peak <= 16);
    CHECK(bw_keyed_bytes(b) <= 16 * 1280 + 4096);
    CHECK_OK(bw_keyed_get(b, "victim", &v, NULL));
    CHECK(v != NULL);
    bw_snapshot after;
    CHECK_OK(bw_breaker_snapshot(v, &after));
    CHECK_INT(after.state, BW_STATE_OPEN);
    CHECK_INT(after.generation, before.generation);
    CHECK_INT(after.failed_calls, before.failed_calls);
    bw_keyed_release(v);
    CHECK_OK(bw_keyed_get(b, "slow-burn", &v, NULL));
    CHECK_OK(bw_breaker_snapshot(v, &after));
    CHECK_INT(after.total_calls, 2);
    CHECK_INT(after.failed_calls, 1);
    bw_keyed_release(v);
    bw_breaker_free(b);

    /* The same flood with no time passing: only the hard limit can make room. */
    b = make(&o);
    trip(b, "victim");
    for (int i = 0; i < 20000; i++) {
        snprintf(key, sizeof key, "flood-%d", i);
        CHECK_OK(call(b, key, BW_SUCCESS));
    }
    CHECK_INT(bw_keyed_count(b), 16);
    CHECK_INT(key_state(b, "victim"), BW_STATE_OPEN);
    bw_breaker_free(b);
}

/* Evicting a circuit with a timed transition cancels it: advancing later must not touch freed memory. */
static void test_eviction_cancels_timer(void)
{
    opts o = {.maxsize = 1, .idle = 1 * S, .hidle = 1 * S, .auto_transition = 1};
    bw_breaker *b = make(&o);
    trip(b, "t");
    pump(61 * S); /* the timer moves it to HALF_OPEN */
    CHECK_INT(key_state(b, "t"), BW_STATE_HALF_OPEN);
    pump(2 * S);
    CHECK_OK(call(b, "u", BW_SUCCESS));
    CHECK(!resident(b, "t"));
    pump(3600 * S); /* no timer of "t" may fire now */
    CHECK_INT(key_state(b, "u"), BW_STATE_CLOSED);
    bw_breaker_free(b);
}

static void test_keyed_apply(void)
{
    opts o = {.maxsize = 16};
    bw_breaker *b = make(&o);
    CHECK_OK(call(b, "a", BW_SUCCESS));
    CHECK_OK(bw_keyed_apply(b, BW_VERB_METRICS_ONLY));
    CHECK_INT(key_state(b, "a"), BW_STATE_METRICS_ONLY);
    CHECK_OK(call(b, "new", BW_FAILURE));
    CHECK_INT(key_state(b, "new"), BW_STATE_METRICS_ONLY);
    CHECK_STATE(b, BW_STATE_CLOSED);
    CHECK_OK(bw_keyed_apply(b, BW_VERB_RESET));
    CHECK_INT(key_state(b, "a"), BW_STATE_CLOSED);
    CHECK_INT(key_state(b, "new"), BW_STATE_CLOSED);
    CHECK_OK(call(b, "newer", BW_SUCCESS));
    CHECK_INT(key_state(b, "newer"), BW_STATE_CLOSED);
    CHECK_RC(bw_keyed_apply(b, (bw_verb)9), BW_EINVAL);
    CHECK_RC(bw_keyed_apply(NULL, BW_VERB_RESET), BW_EINVAL);
    bw_breaker *h;
    CHECK_OK(bw_keyed_get(b, "a", &h, NULL));
    CHECK_RC(bw_keyed_apply(h, BW_VERB_RESET), BW_EINVAL);
    bw_keyed_release(h);
    bw_breaker_free(b);
}

/*
 * A checked handle: a second drop is BW_EPERMIT and unpins nothing, so the
 * circuit another handle still holds survives a flood of new keys (under ASan a
 * wrong unpin shows as a use-after-free below).
 */
static void test_checked_handles(void)
{
    opts o = {.maxsize = 1, .limit = 2};
    bw_breaker *b = make(&o);
    bw_keyed_handle h1, h2;
    CHECK_OK(bw_keyed_hold(b, "k", &h1, NULL));
    CHECK_OK(bw_keyed_hold(b, "k", &h2, NULL));
    CHECK(h1.circuit == h2.circuit && h1.circuit != NULL);
    CHECK_OK(bw_keyed_drop(&h1));
    CHECK(h1.circuit == NULL);
    CHECK_RC(bw_keyed_drop(&h1), BW_EPERMIT); /* the double release, detected */
    for (int i = 0; i < 50; i++) {
        char key[16];
        snprintf(key, sizeof key, "x%d", i);
        call(b, key, BW_SUCCESS); /* new keys: quiet circuits are recycled, a held one never */
    }
    bw_permit p;
    CHECK_OK(bw_acquire(h2.circuit, &p, NULL));
    CHECK_OK(bw_settle(h2.circuit, &p, BW_FAILURE));
    bw_breaker *found = bw_keyed_find(b, "k");
    CHECK(found == h2.circuit);
    bw_keyed_release(found);
    CHECK_OK(bw_keyed_drop(&h2));
    bw_keyed_handle never;
    memset(&never, 0, sizeof never);
    CHECK_RC(bw_keyed_drop(&never), BW_EPERMIT);
    CHECK_RC(bw_keyed_drop(NULL), BW_EINVAL);
    bw_error e;
    CHECK_RC(bw_keyed_hold(b, "bad key", &h1, &e), BW_EINVAL);
    CHECK_STR(e.field, "key");
    CHECK(h1.circuit == NULL);
    CHECK_RC(bw_keyed_drop(&h1), BW_EPERMIT);
    bw_breaker_free(b);
}

static void test_bad_input(void)
{
    opts o = {.maxsize = 16};
    bw_breaker *b = make(&o);
    bw_permit p;
    bw_breaker *h = NULL;
    /* bw_keyed_acquire_ex says why. */
    bw_error e;
    memset(&e, 0, sizeof e);
    bw_breaker *b2 = make(&o);
    CHECK_RC(bw_keyed_acquire_ex(b2, "bad key", &p, NULL, &e), BW_EINVAL);
    CHECK_STR(e.field, "key");
    CHECK(strstr(e.message, "byte 3") != NULL);
    CHECK_OK(bw_keyed_acquire_ex(b2, "good-key", &p, NULL, &e));
    CHECK_OK(bw_settle(b2, &p, BW_SUCCESS));
    bw_breaker_free(b2);
    char long_key[300];
    memset(long_key, 'k', sizeof long_key);
    long_key[256] = 0;
    const char *bad[] = {"", long_key, "a b", "tab\there", "del\x7f", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        CHECK_RC(bw_keyed_get(b, bad[i], &h, &e), BW_EINVAL);
        CHECK_STR(e.field, "key");
        CHECK(strlen(e.message) > 0);
        CHECK_RC(bw_keyed_acquire(b, bad[i], &p, NULL), BW_EINVAL);
        CHECK(bw_keyed_find(b, bad[i]) == NULL);
    }
    long_key[255] = 0; /* 255 bytes is allowed */
    CHECK_OK(call(b, long_key, BW_SUCCESS));
    CHECK_INT(bw_keyed_count(b), 1);
    CHECK_RC(bw_keyed_acquire(NULL, "k", &p, NULL), BW_EINVAL);
    CHECK_RC(bw_keyed_acquire(b, NULL, &p, NULL), BW_EINVAL);
    CHECK_RC(bw_keyed_acquire(b, "k", NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_keyed_get(b, "k", NULL, NULL), BW_EINVAL);
    CHECK(bw_keyed_find(NULL, "k") == NULL);
    CHECK(bw_keyed_find(b, NULL) == NULL);
    CHECK(bw_keyed_find(b, "absent") == NULL);
    CHECK_INT(bw_keyed_count(b), 1);
    CHECK_OK(bw_keyed_get(b, "k", &h, NULL));
    CHECK_RC(bw_keyed_get(h, "sub", &h, &e), BW_EINVAL); /* a circuit has no circuits */
    CHECK_STR(e.field, "breaker");
    CHECK_RC(bw_keyed_acquire(h, "sub", &p, NULL), BW_EINVAL);
    bw_keyed_release(h);
    bw_keyed_release(NULL);
    bw_keyed_release(b); /* not a circuit: ignored */
    CHECK_INT(bw_keyed_count(NULL), 0);
    CHECK_INT(bw_keyed_bytes(NULL), 0);
    CHECK(bw_breaker_key(NULL) == NULL);
    CHECK_RC(bw_breaker_apply(NULL, BW_VERB_RESET), BW_EINVAL);
    CHECK_RC(bw_breaker_apply(b, (bw_verb)-1), BW_EINVAL);
    bw_breaker_free(b);
    /* A breaker never used with keys holds no keyed memory. */
    b = make(&o);
    CHECK_INT(bw_keyed_bytes(b), 0);
    CHECK_INT(bw_keyed_count(b), 0);
    bw_breaker_free(b);
}

static void test_knobs(void)
{
    bw_config *c = bw_config_new();
    bw_error e;
    char buf[1024];
    CHECK_RC(bw_config_set_keyed_maxsize(c, -1, &e), BW_ERANGE);
    CHECK_STR(e.field, "keyed_maxsize");
    CHECK(strstr(e.message, "[0, 1000000000]") != NULL);
    CHECK_RC(bw_config_set_keyed_maxsize(c, 1000000001, &e), BW_ERANGE);
    CHECK_OK(bw_config_set_keyed_maxsize(c, 0, &e));
    CHECK_RC(bw_config_set_keyed_limit(c, -1, &e), BW_ERANGE);
    CHECK_STR(e.field, "keyed_limit");
    CHECK_RC(bw_config_set_keyed_idle(c, -1, &e), BW_ERANGE);
    CHECK_STR(e.field, "keyed_idle");
    CHECK_OK(bw_config_set_keyed_idle(c, 0, &e));
    CHECK_RC(bw_config_set_keyed_history_idle(c, 0, &e), BW_ERANGE);
    CHECK_STR(e.field, "keyed_history_idle");
    CHECK_RC(bw_config_set_keyed_maxsize(NULL, 1, &e), BW_EINVAL);
    /* Cross-field: a limit needs a maxsize, and at least it; history idle at least idle. */
    CHECK_OK(bw_config_set_keyed_limit(c, 10, &e));
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE); /* maxsize 0 with a limit */
    CHECK_STR(e.field, "keyed_limit");
    CHECK_OK(bw_config_set_keyed_maxsize(c, 11, &e));
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "keyed_limit");
    CHECK_OK(bw_config_set_keyed_maxsize(c, 10, &e));
    CHECK_OK(bw_config_validate(c, &e));
    CHECK_OK(bw_config_set_keyed_idle(c, 2 * 3600 * S, &e));
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "keyed_history_idle");
    bw_breaker *b = NULL;
    CHECK_RC(bw_breaker_new("x", c, &b, &e), BW_ERANGE);
    CHECK(b == NULL);
    /* Text form, both ways. */
    CHECK_OK(bw_config_parse(c, "keyed_maxsize=64 keyed_limit=100 keyed_idle=90s keyed_history_idle=2h", &e));
    CHECK_OK(bw_config_validate(c, &e));
    CHECK(bw_config_format(c, buf, sizeof buf) > 0);
    CHECK(strstr(buf, "keyed_maxsize=64 keyed_limit=100 keyed_idle=90s keyed_history_idle=2h") != NULL);
    CHECK_RC(bw_config_parse(c, "keyed_maxsize=lots", &e), BW_EPARSE);
    CHECK_STR(e.field, "keyed_maxsize");
    bw_config_free(c);
    /* Defaults. */
    c = bw_config_new();
    CHECK(bw_config_format(c, buf, sizeof buf) > 0);
    CHECK(strstr(buf, "keyed_maxsize=1024 keyed_limit=0 keyed_idle=5m keyed_history_idle=1h") != NULL);
    bw_config_free(c);
}

/* ---- concurrency ---- */

#define THREADS 4
#define ITERS 20000
#define KEYS 48

typedef struct shared {
    bw_breaker *b;
    bw_breaker *held; /* a handle kept across the churn */
    atomic_int go;
    atomic_long admitted, rejected, limited;
    atomic_int over_limit;
} shared;

static void *churn(void *arg)
{
    shared *s = arg;
    while (!atomic_load(&s->go))
        ;
    unsigned x = (unsigned)(uintptr_t)&x;
    char key[16];
    for (int i = 0; i < ITERS; i++) {
        x = x * 1103515245u + 12345u;
        snprintf(key, sizeof key, "k%u", (x >> 16) % KEYS);
        int op = (int)((x >> 8) % 16);
        if (op < 12) {
            bw_permit p;
            int rc = bw_keyed_acquire(s->b, key, &p, NULL);
            if (rc == BW_OK) {
                atomic_fetch_add(&s->admitted, 1);
                CHECK_OK(bw_settle(s->b, &p, op == 0 ? BW_FAILURE : BW_SUCCESS));
            } else if (rc == BW_REJECTED) {
                atomic_fetch_add(&s->rejected, 1);
            } else {
                CHECK_RC(rc, BW_ELIMIT);
                atomic_fetch_add(&s->limited, 1);
            }
        } else if (op < 14) {
            bw_breaker *h = bw_keyed_find(s->b, key);
            if (h) {
                bw_snapshot snap;
                CHECK_OK(bw_breaker_snapshot(h, &snap));
                CHECK_STR(bw_breaker_key(h), key);
                bw_keyed_release(h);
            }
        } else if (op == 14) {
            bw_breaker *h;
            if (bw_keyed_get(s->b, key, &h, NULL) == BW_OK) {
                if ((x >> 4) % 64 == 0)
                    CHECK_OK(bw_breaker_reset(h));
                bw_keyed_release(h);
            }
        } else {
            CHECK_STR(bw_breaker_key(s->held), "held");
            if (bw_keyed_count(s->b) > 16)
                atomic_store(&s->over_limit, 1);
        }
    }
    return NULL;
}

static void test_concurrent_lookup_call_evict(void)
{
    /* System clock, everything unpinned evictable at once: maximal churn of circuits. */
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_keyed_maxsize(c, 8, &e));
    CHECK_OK(bw_config_set_keyed_idle(c, 0, &e));
    CHECK_OK(bw_config_set_keyed_history_idle(c, 1, &e));
    /* Failures leave history but never trip (a min_calls no circuit reaches: a time window holds any number of
       calls, and far fewer are made): no circuit is ever protected by an open wait, so only pins can block room. */
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_TIME, 60, &e));
    CHECK_OK(bw_config_set_min_calls(c, 1000000000, &e));
    /* Precise stamps (a threshold below 100 ms): 1 ns of history idle is 1 ns, not a tick of the coarse clock. */
    CHECK_OK(bw_config_set_slow_call_duration(c, 50 * BW_NS_PER_MS, &e));
    shared s;
    memset(&s, 0, sizeof s);
    CHECK_OK(bw_breaker_new("churn", c, &s.b, &e));
    bw_config_free(c);
    CHECK_OK(bw_keyed_get(s.b, "held", &s.held, NULL));
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, churn, &s);
    atomic_store(&s.go, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    long calls = atomic_load(&s.admitted) + atomic_load(&s.rejected) + atomic_load(&s.limited);
    CHECK(atomic_load(&s.admitted) > 0);
    CHECK(calls > 0 && calls <= (long)THREADS * ITERS);
    CHECK(!atomic_load(&s.over_limit));
    /* At most 5 circuits are pinned at once and every other one may go, so 48 keys
       never meet the limit of 16 without room. */
    CHECK_INT(atomic_load(&s.limited), 0);
    CHECK(bw_keyed_count(s.b) <= 16);
    /* The held circuit survived every eviction: the same one is found again. */
    bw_breaker *again = bw_keyed_find(s.b, "held");
    CHECK(again == s.held);
    bw_keyed_release(again);
    bw_keyed_release(s.held);
    bw_breaker_free(s.b);
}

int main(void)
{
    clock_fresh(CLOCKFIX_START);
    RUN(test_independent_circuits);
    RUN(test_handle_has_full_surface);
    RUN(test_permits);
    RUN(test_idle_boundary);
    RUN(test_in_flight_never_evicted);
    RUN(test_lru_order);
    RUN(test_pin_released_by_quick_settle);
    RUN(test_maxsize_zero_is_unbounded);
    RUN(test_history_kept_until_history_idle);
    RUN(test_operator_states_never_evicted);
    RUN(test_limit);
    RUN(test_flood_against_failing_key);
    RUN(test_eviction_cancels_timer);
    RUN(test_keyed_apply);
    RUN(test_bad_input);
    RUN(test_checked_handles);
    RUN(test_knobs);
    RUN(test_concurrent_lookup_call_evict);
    clock_done();
    return TEST_SUMMARY();
}
