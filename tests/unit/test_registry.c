/*
 * test_registry.c (tests/unit/) — the registry through the public API: breakers
 * made lazily by name, list and count, per-name overrides (and what they
 * inherit from the defaults), name validation, bw_breaker_free on a registry
 * breaker, operator verbs over every breaker and keyed circuit, growth to
 * 100,000 names, and real threads creating and looking up names at once. Run it
 * under ASan and TSan too.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"
#include "recorder.h"

#define S BW_NS_PER_S

/* ---- fixtures ---- */

static bw_config *config(const char *text)
{
    bw_config *c = bw_config_new();
    bw_error err = {0};
    CHECK(c != NULL);
    if (text) {
        CHECK_OK(bw_config_parse(c, text, &err));
        if (err.code)
            fprintf(stderr, "config: %s\n", err.message);
    }
    return c;
}

static bw_registry *registry(const bw_config *defaults)
{
    bw_registry *r = NULL;
    bw_error err = {0};
    CHECK_OK(bw_registry_new(defaults, &r, &err));
    CHECK(r != NULL);
    return r;
}

static bw_breaker *get(bw_registry *r, const char *name, const bw_config *override)
{
    bw_breaker *b = NULL;
    bw_error err = {0};
    CHECK_OK(bw_registry_get(r, name, override, &b, &err));
    if (err.code)
        fprintf(stderr, "get %s: %s\n", name, err.message);
    CHECK(b != NULL);
    return b;
}

static void call(bw_breaker *b, bw_outcome o)
{
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle(b, &p, o));
}

static int ok_fn(void *arg)
{
    (void)arg;
    return 0;
}

/* Unlike the default classifier: a return code of 0 is a failure. */
static bw_outcome zero_fails(int rc, void *arg, void *user)
{
    (void)arg;
    (void)user;
    return rc == 0 ? BW_FAILURE : BW_SUCCESS;
}

/* ---- made lazily, one per name ---- */

static void test_get_makes_lazily(void)
{
    bw_registry *r = registry(NULL);
    CHECK_INT(bw_registry_count(r), 0);
    CHECK(bw_registry_get_existing(r, "payments") == NULL);
    CHECK_INT(bw_registry_count(r), 0); /* get_existing never makes one */
    bw_breaker *a = get(r, "payments", NULL);
    CHECK_INT(bw_registry_count(r), 1);
    CHECK_STR(bw_breaker_name(a), "payments");
    CHECK(bw_breaker_key(a) == NULL);
    CHECK_STATE(a, BW_STATE_CLOSED);
    CHECK(get(r, "payments", NULL) == a);
    CHECK(bw_registry_get_existing(r, "payments") == a);
    CHECK_INT(bw_registry_count(r), 1);
    bw_breaker *b = get(r, "ledger", NULL);
    CHECK(b != a);
    CHECK_STR(bw_breaker_name(b), "ledger");
    CHECK_STR(bw_breaker_name(a), "payments");
    CHECK_INT(bw_registry_count(r), 2);
    /* Names differing only in case or by a prefix are different names. */
    bw_breaker *c = get(r, "Payments", NULL);
    bw_breaker *d = get(r, "payment", NULL);
    CHECK(c != a && d != a && c != d);
    CHECK_INT(bw_registry_count(r), 4);
    CHECK(bw_registry_get_existing(r, "payments") == a);
    CHECK(bw_registry_get_existing(r, "ledger") == b);
    CHECK(bw_registry_get_existing(r, "ledger2") == NULL);
    CHECK_INT(bw_registry_count(r), 4);
    /* The breakers are independent: tripping one leaves the others alone. */
    for (int i = 0; i < 10; i++)
        call(a, BW_FAILURE);
    CHECK_STATE(a, BW_STATE_OPEN);
    CHECK_STATE(b, BW_STATE_CLOSED);
    CHECK_STATE(c, BW_STATE_CLOSED);
    bw_registry_free(r);
    bw_registry_free(NULL); /* ignored */
}

static void test_list(void)
{
    bw_registry *r = registry(NULL);
    const char *names[8];
    bw_breaker *bs[8];
    CHECK_INT(bw_registry_list(r, names, bs, 8), 0);
    const char *want[] = {"zeta", "alpha", "mid", "beta", "omega"}; /* not sorted: insertion order */
    bw_breaker *made[5];
    for (int i = 0; i < 5; i++)
        made[i] = get(r, want[i], NULL);
    get(r, "alpha", NULL); /* a hit does not reorder or add */
    CHECK_INT(bw_registry_count(r), 5);

    for (int i = 0; i < 8; i++) {
        names[i] = "untouched";
        bs[i] = NULL;
    }
    CHECK_INT(bw_registry_list(r, names, bs, 8), 5);
    for (int i = 0; i < 5; i++) {
        CHECK_STR(names[i], want[i]);
        CHECK(bs[i] == made[i]);
        CHECK(names[i] == bw_breaker_name(made[i])); /* owned by the breaker */
    }
    CHECK_STR(names[5], "untouched");
    CHECK(bs[5] == NULL);

    /* cap smaller than count: the full count, only cap entries filled. */
    for (int i = 0; i < 8; i++) {
        names[i] = "untouched";
        bs[i] = NULL;
    }
    CHECK_INT(bw_registry_list(r, names, bs, 2), 5);
    CHECK_STR(names[0], "zeta");
    CHECK_STR(names[1], "alpha");
    CHECK_STR(names[2], "untouched");
    CHECK(bs[0] == made[0] && bs[1] == made[1]);
    CHECK(bs[2] == NULL);
    CHECK_INT(bw_registry_list(r, names, bs, 0), 5);
    CHECK_STR(names[0], "zeta");

    /* Either array may be NULL. */
    CHECK_INT(bw_registry_list(r, NULL, NULL, 8), 5);
    for (int i = 0; i < 8; i++)
        bs[i] = NULL;
    CHECK_INT(bw_registry_list(r, NULL, bs, 8), 5);
    CHECK(bs[4] == made[4]);
    for (int i = 0; i < 8; i++)
        names[i] = "untouched";
    CHECK_INT(bw_registry_list(r, names, NULL, 8), 5);
    CHECK_STR(names[4], "omega");
    CHECK_INT(bw_registry_list(NULL, names, bs, 8), 0);
    CHECK_INT(bw_registry_count(NULL), 0);

    /* A list is a point in time: a later breaker is not in it, the next list has it last. */
    for (int i = 0; i < 8; i++) {
        names[i] = "untouched";
        bs[i] = NULL;
    }
    size_t n = bw_registry_list(r, names, bs, 8);
    bw_breaker *late = get(r, "late", NULL);
    CHECK_INT(n, 5);
    CHECK_STR(names[5], "untouched");
    CHECK(bs[5] == NULL);
    CHECK_INT(bw_registry_list(r, names, bs, 8), 6);
    CHECK_STR(names[5], "late");
    CHECK(bs[5] == late);
    CHECK_STR(names[0], "zeta");
    bw_registry_free(r);
}

/* ---- overrides and defaults ---- */

static void test_override_applies_at_creation_only(void)
{
    bw_clock *clk = NULL;
    CHECK_OK(bw_clock_manual_new(1000 * S, &clk));
    recorder *ev = rec_new();
    /* Defaults: min_calls 10 and wait 60 s, a manual clock, a listener, a classifier. */
    bw_config *d = config(NULL);
    bw_config_set_clock(d, clk);
    bw_config_set_listener(d, BW_EVENTS_ALL, rec_listen, ev);
    bw_config_set_classifier(d, zero_fails, NULL);
    bw_registry *r = registry(d);
    bw_config_free(d); /* the registry keeps a copy */

    /* The override trips after 2 failures and waits 7 s; it sets no clock, listener or classifier. */
    bw_config *o = config("min_calls=2 failure_rate=0.5 wait=7s");
    bw_breaker *ov = get(r, "ov", o);
    bw_breaker *plain = get(r, "plain", NULL);
    CHECK_INT(bw_registry_count(r), 2);
    CHECK_INT(rec_count(ev), 0); /* construction emits nothing */

    call(ov, BW_FAILURE);
    CHECK_STATE(ov, BW_STATE_CLOSED);
    call(ov, BW_FAILURE);
    CHECK_STATE(ov, BW_STATE_OPEN); /* the override's min_calls=2, not the default 10 */
    call(plain, BW_FAILURE);
    call(plain, BW_FAILURE);
    call(plain, BW_FAILURE);
    CHECK_STATE(plain, BW_STATE_CLOSED); /* the defaults: 3 < min_calls 10 */

    /* retry_after follows the manual clock from the defaults: exact values. */
    bw_permit p;
    bw_rejection why;
    CHECK_RC(bw_acquire(ov, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 7 * S);
    CHECK_OK(bw_clock_manual_advance(clk, 3 * S));
    CHECK_RC(bw_acquire(ov, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 4 * S);
    CHECK_OK(bw_clock_manual_advance(clk, 4 * S));
    CHECK_OK(bw_acquire(ov, &p, NULL)); /* the wait ended on the manual clock */
    CHECK_STATE(ov, BW_STATE_HALF_OPEN);
    CHECK_OK(bw_settle(ov, &p, BW_IGNORED));

    /* The listener from the defaults saw the overridden breaker's events, by name. */
    int closed_to_open = 0, rejected = 0;
    for (int i = 0; i < rec_count(ev); i++) {
        const bw_event *e = rec_nth(ev, i);
        if (e->type == BW_EVENT_STATE_CHANGE && e->from == BW_STATE_CLOSED && e->to == BW_STATE_OPEN) {
            closed_to_open++;
            CHECK_STR(e->name, "ov");
            CHECK(e->breaker == ov);
            CHECK(e->key == NULL);
        }
        if (e->type == BW_EVENT_REJECTED) {
            rejected++;
            CHECK_STR(e->name, "ov");
        }
    }
    CHECK_INT(closed_to_open, 1);
    CHECK_INT(rejected, 2);

    /* The classifier from the defaults: with it, a call returning 0 is a failure. */
    bw_breaker *cl = get(r, "classified", o);
    int rc = -1;
    CHECK_OK(bw_breaker_call(cl, ok_fn, NULL, &rc, NULL));
    CHECK_INT(rc, 0);
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(cl, &s));
    CHECK_INT(s.total_calls, 1);
    CHECK_INT(s.failed_calls, 1);

    /* Once the name exists the override is ignored: same breaker, same thresholds. */
    bw_config *trip1 = config("min_calls=1 failure_rate=0.1");
    CHECK(get(r, "plain", trip1) == plain);
    call(plain, BW_FAILURE);
    CHECK_STATE(plain, BW_STATE_CLOSED); /* 4 failures, still under the default min_calls */
    CHECK_OK(bw_breaker_snapshot(plain, &s));
    CHECK_INT(s.total_calls, 4);
    /* ...and an override given for an existing name is not even validated. */
    bw_config *bad = config("permitted_probes=2 max_concurrent_probes=2");
    CHECK_OK(bw_config_set_max_concurrent_probes(bad, 2, NULL));
    CHECK_OK(bw_config_set_permitted_probes(bad, 1, NULL)); /* now 2 > 1: fails validation */
    CHECK(bw_config_validate(bad, NULL) == BW_ERANGE);
    bw_breaker *again = NULL;
    CHECK_OK(bw_registry_get(r, "plain", bad, &again, NULL));
    CHECK(again == plain);
    CHECK_INT(bw_registry_count(r), 3);

    /* An override with its own clock and listener keeps them. */
    bw_clock *clk2 = NULL;
    CHECK_OK(bw_clock_manual_new(0, &clk2));
    recorder *own = rec_new();
    bw_config *o2 = config("min_calls=1 failure_rate=0.5 wait=5s");
    bw_config_set_clock(o2, clk2);
    bw_config_set_listener(o2, BW_EVENTS_ALL, rec_listen, own);
    bw_breaker *mine = get(r, "own-clock", o2);
    int before = rec_count(ev);
    call(mine, BW_FAILURE);
    CHECK_STATE(mine, BW_STATE_OPEN);
    CHECK_OK(bw_clock_manual_advance(clk, 100 * S)); /* the registry's clock: no effect on it */
    CHECK_RC(bw_acquire(mine, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 5 * S);
    CHECK_OK(bw_clock_manual_advance(clk2, 2 * S));
    CHECK_RC(bw_acquire(mine, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 3 * S);
    CHECK_INT(rec_count(ev), before); /* the defaults' listener heard nothing of it */
    CHECK_INT(rec_count(own), 4);     /* call, state change, two rejections */
    CHECK_STR(rec_nth(own, 0)->name, "own-clock");

    bw_config_free(o);
    bw_config_free(o2);
    bw_config_free(trip1);
    bw_config_free(bad);
    bw_registry_free(r);
    bw_clock_free(clk);
    bw_clock_free(clk2);
    rec_free(ev);
    rec_free(own);
}

static void test_defaults_initial_state_and_listener(void)
{
    recorder *ev = rec_new();
    bw_config *d = config("initial_state=forced_open");
    bw_config_set_listener(d, BW_EVENTS_ALL, rec_listen, ev);
    bw_registry *r = registry(d);
    bw_config_free(d);
    bw_breaker *b = get(r, "db-primary", NULL);
    CHECK_STATE(b, BW_STATE_FORCED_OPEN);
    CHECK_INT(rec_count(ev), 0);
    bw_permit p;
    bw_rejection why;
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_FORCED_OPEN);
    CHECK_INT(why.retry_after_ns, BW_NO_TIME);
    CHECK_INT(rec_count(ev), 1);
    CHECK_INT(rec_nth(ev, 0)->type, BW_EVENT_REJECTED);
    CHECK_INT(rec_nth(ev, 0)->to, BW_STATE_FORCED_OPEN);
    CHECK_STR(rec_nth(ev, 0)->name, "db-primary");
    CHECK(rec_nth(ev, 0)->breaker == b);
    CHECK(rec_nth(ev, 0)->key == NULL);
    bw_breaker *c = get(r, "db-replica", NULL);
    CHECK_STATE(c, BW_STATE_FORCED_OPEN);
    CHECK_OK(bw_breaker_reset(c));
    CHECK_STATE(c, BW_STATE_CLOSED);
    call(c, BW_SUCCESS);
    CHECK_INT(rec_count(ev), 4); /* state change, reset, call */
    CHECK_STR(rec_nth(ev, 1)->name, "db-replica");
    CHECK_STR(rec_nth(ev, 3)->name, "db-replica");
    CHECK_INT(rec_nth(ev, 3)->type, BW_EVENT_CALL);
    bw_registry_free(r);
    rec_free(ev);
}

static void test_get_existing(void)
{
    bw_registry *r = registry(NULL);
    CHECK(bw_registry_get_existing(r, "a") == NULL);
    CHECK(bw_registry_get_existing(r, "a") == NULL);
    CHECK_INT(bw_registry_count(r), 0);
    bw_breaker *a = get(r, "a", NULL);
    CHECK(bw_registry_get_existing(r, "a") == a);
    CHECK(bw_registry_get_existing(r, "b") == NULL);
    CHECK(bw_registry_get_existing(r, "aa") == NULL);
    CHECK_INT(bw_registry_count(r), 1);
    CHECK(bw_registry_get_existing(NULL, "a") == NULL);
    CHECK(bw_registry_get_existing(r, NULL) == NULL);
    bw_registry_free(r);
}

/* ---- bad input ---- */

static void test_bad_names(void)
{
    bw_registry *r = registry(NULL);
    get(r, "exists", NULL);
    char long256[257], long255[256];
    memset(long256, 'n', 256);
    long256[256] = 0;
    memset(long255, 'n', 255);
    long255[255] = 0;
    const char *bad[] = {NULL,
                         "",
                         long256,
                         "has space",
                         "ctl\x01"
                         "byte",
                         "tab\tname",
                         "del\x7f",
                         "hi\x80gh",
                         " "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bw_error err;
        memset(&err, 0, sizeof err);
        bw_breaker *b = NULL;
        CHECK_RC(bw_registry_get(r, bad[i], NULL, &b, &err), BW_EINVAL);
        CHECK_INT(err.code, BW_EINVAL);
        if (strcmp(err.field, "name") != 0)
            H_FAIL("bad name #%zu: err.field is \"%s\", want \"name\"", i, err.field);
        CHECK(strlen(err.message) > 0);
        CHECK_INT(bw_registry_count(r), 1); /* nothing made */
        CHECK(bw_registry_get_existing(r, bad[i]) == NULL);
        CHECK_RC(bw_registry_get(r, bad[i], NULL, &b, NULL), BW_EINVAL); /* err may be NULL */
    }
    CHECK_INT(bw_registry_count(r), 1);
    /* The bad long name did not become its 255-byte prefix. */
    CHECK(bw_registry_get_existing(r, long255) == NULL);
    /* 255 bytes, and the printable edges '!' and '~', are fine. */
    bw_breaker *b = get(r, long255, NULL);
    CHECK_STR(bw_breaker_name(b), long255);
    CHECK(bw_registry_get_existing(r, long255) == b);
    CHECK(bw_registry_get_existing(r, long256) == NULL);
    bw_breaker *edge = get(r, "!~", NULL);
    CHECK_STR(bw_breaker_name(edge), "!~");
    CHECK_INT(bw_registry_count(r), 3);

    /* NULL registry or out. */
    bw_error err;
    memset(&err, 0, sizeof err);
    bw_breaker *out = NULL;
    CHECK_RC(bw_registry_get(NULL, "x", NULL, &out, &err), BW_EINVAL);
    CHECK_INT(err.code, BW_EINVAL);
    CHECK(out == NULL);
    CHECK_RC(bw_registry_get(r, "x", NULL, NULL, &err), BW_EINVAL);
    CHECK_RC(bw_registry_get(r, "x", NULL, NULL, NULL), BW_EINVAL);
    CHECK_INT(bw_registry_count(r), 3);
    CHECK(bw_registry_get_existing(r, "x") == NULL);
    bw_registry_free(r);
}

static void test_bad_override_and_defaults(void)
{
    bw_registry *r = registry(NULL);
    bw_config *o = config("permitted_probes=2");
    CHECK_OK(bw_config_set_max_concurrent_probes(o, 2, NULL));
    CHECK_OK(bw_config_set_permitted_probes(o, 1, NULL)); /* max_concurrent_probes 2 > permitted_probes 1 */
    bw_error err;
    memset(&err, 0, sizeof err);
    bw_breaker *b = NULL;
    CHECK_RC(bw_registry_get(r, "svc", o, &b, &err), BW_ERANGE);
    CHECK_INT(err.code, BW_ERANGE);
    CHECK_STR(err.field, "max_concurrent_probes");
    CHECK(strlen(err.message) > 0);
    CHECK(b == NULL);
    CHECK_INT(bw_registry_count(r), 0);
    CHECK(bw_registry_get_existing(r, "svc") == NULL);
    CHECK_INT(bw_registry_list(r, NULL, NULL, 0), 0);
    /* Without the bad override the name is made from the defaults. */
    b = get(r, "svc", NULL);
    CHECK_INT(bw_registry_count(r), 1);
    CHECK(bw_registry_get_existing(r, "svc") == b);
    /* A bad name is reported before a bad override. */
    memset(&err, 0, sizeof err);
    CHECK_RC(bw_registry_get(r, "bad name", o, &b, &err), BW_EINVAL);
    CHECK_STR(err.field, "name");
    bw_registry_free(r);

    /* Invalid defaults: no registry. */
    bw_registry *r2 = NULL;
    memset(&err, 0, sizeof err);
    CHECK_RC(bw_registry_new(o, &r2, &err), BW_ERANGE);
    CHECK_INT(err.code, BW_ERANGE);
    CHECK_STR(err.field, "max_concurrent_probes");
    CHECK_RC(bw_registry_new(o, &r2, NULL), BW_ERANGE);
    bw_config *wm = config("wait=10s");
    CHECK_OK(bw_config_set_wait_max(wm, 5 * S, NULL)); /* wait_max < wait */
    CHECK_RC(bw_registry_new(wm, &r2, &err), BW_ERANGE);
    CHECK_STR(err.field, "wait_max");
    CHECK_RC(bw_registry_new(NULL, NULL, NULL), BW_EINVAL);
    memset(&err, 0, sizeof err);
    CHECK_RC(bw_registry_new(NULL, NULL, &err), BW_EINVAL);
    CHECK_INT(err.code, BW_EINVAL);
    /* NULL defaults: every default. */
    r2 = NULL;
    CHECK_OK(bw_registry_new(NULL, &r2, NULL));
    CHECK(r2 != NULL);
    b = get(r2, "d", NULL);
    for (int i = 0; i < 9; i++)
        call(b, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_CLOSED); /* default min_calls 10 */
    call(b, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_OPEN);
    bw_registry_free(r2);
    bw_config_free(o);
    bw_config_free(wm);
}

/* ---- ownership ---- */

static void test_breaker_free_ignored(void)
{
    bw_registry *r = registry(NULL);
    bw_breaker *b = get(r, "owned", NULL);
    bw_breaker_free(b); /* ignored: the registry owns it */
    bw_breaker_free(b);
    CHECK_STR(bw_breaker_name(b), "owned");
    CHECK_STATE(b, BW_STATE_CLOSED);
    for (int i = 0; i < 10; i++)
        call(b, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_OPEN);
    CHECK(get(r, "owned", NULL) == b);
    CHECK_INT(bw_registry_count(r), 1);
    bw_registry_free(r); /* frees it exactly once (ASan would see a double free) */
}

/* ---- operator verbs ---- */

static void test_apply(void)
{
    bw_clock *clk = NULL;
    CHECK_OK(bw_clock_manual_new(0, &clk));
    recorder *ev = rec_new();
    bw_config *d = config("min_calls=2 failure_rate=0.5 wait=10s");
    bw_config_set_clock(d, clk);
    bw_config_set_listener(d, BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), rec_listen, ev);
    bw_registry *r = registry(d);
    bw_config_free(d);
    bw_breaker *a = get(r, "a", NULL);
    bw_breaker *b = get(r, "b", NULL);
    call(b, BW_FAILURE);
    call(b, BW_FAILURE);
    CHECK_STATE(b, BW_STATE_OPEN);

    /* METRICS_ONLY: every existing breaker, and the ones made afterwards. */
    int mark = rec_count(ev);
    CHECK_OK(bw_registry_apply(r, BW_VERB_METRICS_ONLY));
    CHECK_STATE(a, BW_STATE_METRICS_ONLY);
    CHECK_STATE(b, BW_STATE_METRICS_ONLY);
    CHECK_INT(rec_changes_to(ev, mark, BW_STATE_METRICS_ONLY), 2);
    bw_breaker *c = get(r, "c", NULL);
    CHECK_STATE(c, BW_STATE_METRICS_ONLY);
    CHECK_INT(rec_count(ev), mark + 2); /* made in that state: no event */
    for (int i = 0; i < 5; i++)
        call(c, BW_FAILURE);
    CHECK_STATE(c, BW_STATE_METRICS_ONLY); /* records, never trips */
    bw_snapshot s;
    CHECK_OK(bw_breaker_snapshot(c, &s));
    CHECK_INT(s.failed_calls, 5);

    /* RESET: everything CLOSED, and new breakers start CLOSED again. */
    mark = rec_count(ev);
    CHECK_OK(bw_registry_apply(r, BW_VERB_RESET));
    CHECK_STATE(a, BW_STATE_CLOSED);
    CHECK_STATE(b, BW_STATE_CLOSED);
    CHECK_STATE(c, BW_STATE_CLOSED);
    CHECK_INT(rec_changes_to(ev, mark, BW_STATE_CLOSED), 3);
    CHECK_OK(bw_breaker_snapshot(c, &s));
    CHECK_INT(s.total_calls, 0); /* a fresh window */
    bw_breaker *e = get(r, "e", NULL);
    CHECK_STATE(e, BW_STATE_CLOSED);
    call(e, BW_FAILURE);
    call(e, BW_FAILURE);
    CHECK_STATE(e, BW_STATE_OPEN); /* an ordinary CLOSED breaker again */

    /* FORCE_OPEN rejects, on old and new breakers. */
    CHECK_OK(bw_registry_apply(r, BW_VERB_FORCE_OPEN));
    bw_breaker *f = get(r, "f", NULL);
    bw_breaker *all[] = {a, b, c, e, f};
    for (int i = 0; i < 5; i++) {
        bw_permit p;
        bw_rejection why;
        CHECK_STATE(all[i], BW_STATE_FORCED_OPEN);
        CHECK_RC(bw_acquire(all[i], &p, &why), BW_REJECTED);
        CHECK_INT(why.state, BW_STATE_FORCED_OPEN);
    }

    /* DISABLE admits everything. */
    CHECK_OK(bw_registry_apply(r, BW_VERB_DISABLE));
    for (int i = 0; i < 5; i++)
        CHECK_STATE(all[i], BW_STATE_DISABLED);
    CHECK_STATE(get(r, "g", NULL), BW_STATE_DISABLED);
    CHECK_INT(bw_registry_count(r), 6);

    /* Unknown verbs change nothing. */
    CHECK_RC(bw_registry_apply(r, (bw_verb)4), BW_EINVAL);
    CHECK_RC(bw_registry_apply(r, (bw_verb)-1), BW_EINVAL);
    CHECK_RC(bw_registry_apply(NULL, BW_VERB_RESET), BW_EINVAL);
    for (int i = 0; i < 5; i++)
        CHECK_STATE(all[i], BW_STATE_DISABLED);
    CHECK_STATE(get(r, "h", NULL), BW_STATE_DISABLED); /* the preset survived the bad verbs */
    bw_registry_free(r);

    /* RESET lets new breakers start in their configured initial state: forced_open here. */
    d = config("initial_state=forced_open");
    r = registry(d);
    bw_config_free(d);
    CHECK_OK(bw_registry_apply(r, BW_VERB_METRICS_ONLY));
    CHECK_STATE(get(r, "x", NULL), BW_STATE_METRICS_ONLY);
    CHECK_OK(bw_registry_apply(r, BW_VERB_RESET));
    CHECK_STATE(get(r, "x", NULL), BW_STATE_CLOSED);
    CHECK_STATE(get(r, "y", NULL), BW_STATE_FORCED_OPEN);
    /* apply on an empty registry works too. */
    bw_registry_free(r);
    r = registry(NULL);
    CHECK_OK(bw_registry_apply(r, BW_VERB_FORCE_OPEN));
    CHECK_STATE(get(r, "z", NULL), BW_STATE_FORCED_OPEN);
    bw_registry_free(r);
    bw_clock_free(clk);
    rec_free(ev);
}

static void test_apply_reaches_keyed_circuits(void)
{
    recorder *ev = rec_new();
    bw_config *d = config(NULL);
    bw_config_set_listener(d, BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), rec_listen, ev);
    bw_registry *r = registry(d);
    bw_config_free(d);
    bw_breaker *b = get(r, "tenants", NULL);
    bw_breaker *c = NULL;
    CHECK_OK(bw_keyed_get(b, "k", &c, NULL));
    CHECK(c != NULL && c != b);
    CHECK_STR(bw_breaker_key(c), "k");
    CHECK_STR(bw_breaker_name(c), "tenants");
    CHECK_STATE(c, BW_STATE_CLOSED);

    CHECK_OK(bw_registry_apply(r, BW_VERB_FORCE_OPEN));
    CHECK_STATE(b, BW_STATE_FORCED_OPEN);
    CHECK_STATE(c, BW_STATE_FORCED_OPEN);
    bw_permit p;
    bw_rejection why;
    CHECK_RC(bw_keyed_acquire(b, "k", &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_FORCED_OPEN);
    /* A key made after the verb starts in its state too (bw_keyed_apply's preset). */
    CHECK_RC(bw_keyed_acquire(b, "k2", &p, &why), BW_REJECTED);
    CHECK_INT(bw_keyed_count(b), 2);
    /* The circuit's state change was announced with the breaker's name and the key. */
    int keyed_events = 0;
    for (int i = 0; i < rec_count(ev); i++) {
        const bw_event *e = rec_nth(ev, i);
        if (e->to == BW_STATE_FORCED_OPEN && e->key && strcmp(e->key, "k") == 0) {
            keyed_events++;
            CHECK_STR(e->name, "tenants");
        }
    }
    CHECK_INT(keyed_events, 1);
    /* A breaker made after the verb starts in it, and so do its keys. */
    bw_breaker *late = get(r, "late", NULL);
    CHECK_STATE(late, BW_STATE_FORCED_OPEN);
    CHECK_RC(bw_keyed_acquire(late, "lk", &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_FORCED_OPEN);

    CHECK_OK(bw_registry_apply(r, BW_VERB_RESET));
    CHECK_STATE(late, BW_STATE_CLOSED);
    CHECK_OK(bw_keyed_acquire(late, "lk2", &p, NULL));
    CHECK_OK(bw_settle(late, &p, BW_SUCCESS));
    CHECK_STATE(b, BW_STATE_CLOSED);
    CHECK_STATE(c, BW_STATE_CLOSED);
    CHECK_OK(bw_keyed_acquire(b, "k3", &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    bw_keyed_release(c);
    bw_registry_free(r); /* frees the breaker's circuits with it (ASan: no leak) */
    rec_free(ev);
}

/* ---- growth ---- */

#define GROWTH 100000

static void test_growth(void)
{
    bw_registry *r = registry(NULL);
    bw_breaker **made = malloc(GROWTH * sizeof *made);
    CHECK(made != NULL);
    char name[32];
    for (int i = 0; i < GROWTH; i++) {
        snprintf(name, sizeof name, "svc-%d", i);
        made[i] = get(r, name, NULL);
    }
    CHECK_INT(bw_registry_count(r), GROWTH);
    int missing = 0, wrong = 0;
    for (int i = 0; i < GROWTH; i++) {
        snprintf(name, sizeof name, "svc-%d", i);
        bw_breaker *b = bw_registry_get_existing(r, name);
        missing += b == NULL;
        wrong += b != made[i] || (b && strcmp(bw_breaker_name(b), name) != 0);
        bw_breaker *g = NULL;
        if (bw_registry_get(r, name, NULL, &g, NULL) != BW_OK || g != made[i])
            wrong++;
    }
    CHECK_INT(missing, 0);
    CHECK_INT(wrong, 0);
    CHECK_INT(bw_registry_count(r), GROWTH); /* the lookups made nothing */
    CHECK(bw_registry_get_existing(r, "svc-100000") == NULL);
    CHECK(bw_registry_get_existing(r, "svc--1") == NULL);
    const char **names = malloc(GROWTH * sizeof *names);
    bw_breaker **listed = malloc(GROWTH * sizeof *listed);
    CHECK_INT(bw_registry_list(r, names, listed, GROWTH), GROWTH);
    int misordered = 0;
    for (int i = 0; i < GROWTH; i++) {
        snprintf(name, sizeof name, "svc-%d", i);
        misordered += listed[i] != made[i] || strcmp(names[i], name) != 0;
    }
    CHECK_INT(misordered, 0);
    free(names);
    free(listed);
    free(made);
    bw_registry_free(r);
}

/* ---- threads ---- */

static void run_threads(void *(*fn)(void *), void *args, size_t arg_size, int n)
{
    pthread_t t[16];
    for (int i = 0; i < n; i++)
        CHECK_INT(pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * arg_size), 0);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

#define SAME_THREADS 8
#define SAME_ROUNDS 50

typedef struct same_ctx {
    bw_registry *r;
    pthread_barrier_t start;
    char name[32];
    bw_breaker *got[SAME_THREADS];
    int rc[SAME_THREADS];
} same_ctx;

typedef struct same_arg {
    same_ctx *c;
    int id;
} same_arg;

static void *same_name(void *arg)
{
    same_arg *a = arg;
    pthread_barrier_wait(&a->c->start);
    a->c->rc[a->id] = bw_registry_get(a->c->r, a->c->name, NULL, &a->c->got[a->id], NULL);
    return NULL;
}

static void test_threads_same_new_name(void)
{
    static same_ctx c;
    memset(&c, 0, sizeof c);
    c.r = registry(NULL);
    same_arg args[SAME_THREADS];
    for (int round = 0; round < SAME_ROUNDS; round++) {
        snprintf(c.name, sizeof c.name, "hot-%d", round);
        memset(c.got, 0, sizeof c.got);
        pthread_barrier_init(&c.start, NULL, SAME_THREADS);
        for (int i = 0; i < SAME_THREADS; i++)
            args[i] = (same_arg){&c, i};
        run_threads(same_name, args, sizeof args[0], SAME_THREADS);
        pthread_barrier_destroy(&c.start);
        for (int i = 0; i < SAME_THREADS; i++) {
            CHECK_OK(c.rc[i]);
            CHECK(c.got[i] != NULL);
            CHECK(c.got[i] == c.got[0]);
        }
        CHECK_INT(bw_registry_count(c.r), round + 1);
        CHECK(bw_registry_get_existing(c.r, c.name) == c.got[0]);
        CHECK_STR(bw_breaker_name(c.got[0]), c.name);
    }
    bw_registry_free(c.r);
}

#define CREATORS 4
#define LOOKERS 4
#define PER_CREATOR 20000
#define OVERLAP (PER_CREATOR / 2) /* creator t's second half is creator t+1's first half */
#define PREFILL 5000
#define DISTINCT (CREATORS * PER_CREATOR - (CREATORS - 1) * OVERLAP)

typedef struct mix_ctx {
    bw_registry *r;
    bw_breaker *pre[PREFILL];
    bw_breaker *made[CREATORS][PER_CREATOR];
    _Atomic int progress[CREATORS]; /* made[t][0 .. progress) are published */
    _Atomic int creators_left;
    _Atomic long lookups, bad_lookups, bad_creates;
    pthread_barrier_t start;
} mix_ctx;

typedef struct mix_arg {
    mix_ctx *c;
    int id;
} mix_arg;

static void created_name(char *buf, size_t size, int t, int j)
{
    snprintf(buf, size, "dyn-%d", t * (PER_CREATOR - OVERLAP) + j);
}

static void *creator(void *arg)
{
    mix_arg *a = arg;
    mix_ctx *c = a->c;
    char name[32];
    pthread_barrier_wait(&c->start);
    for (int j = 0; j < PER_CREATOR; j++) {
        /* Odd creators go backwards, so overlapping names are made from both ends at once. */
        int k = a->id % 2 ? PER_CREATOR - 1 - j : j;
        created_name(name, sizeof name, a->id, k);
        bw_breaker *b = NULL;
        if (bw_registry_get(c->r, name, NULL, &b, NULL) != BW_OK || !b || strcmp(bw_breaker_name(b), name) != 0)
            atomic_fetch_add(&c->bad_creates, 1);
        c->made[a->id][k] = b;
        atomic_store_explicit(&c->progress[a->id], j + 1, memory_order_release);
    }
    atomic_fetch_sub(&c->creators_left, 1);
    return NULL;
}

static void *looker(void *arg)
{
    mix_arg *a = arg;
    mix_ctx *c = a->c;
    char name[32];
    long n = 0, bad = 0;
    unsigned x = 2463534242u + (unsigned)a->id * 7919u; /* xorshift */
    pthread_barrier_wait(&c->start);
    for (int pass = 0; pass < 1 || atomic_load(&c->creators_left) > 0; pass++) {
        for (int i = a->id; i < PREFILL; i += LOOKERS) {
            snprintf(name, sizeof name, "pre-%d", i);
            bw_breaker *b = bw_registry_get_existing(c->r, name);
            bw_breaker *g = NULL;
            int rc = bw_registry_get(c->r, name, NULL, &g, NULL);
            bad += b != c->pre[i] || rc != BW_OK || g != c->pre[i] || strcmp(bw_breaker_name(b), name) != 0;
            n += 2;
            /* And a name some creator has already published. */
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            int t = (int)(x % CREATORS);
            int done = atomic_load_explicit(&c->progress[t], memory_order_acquire);
            if (done > 0) {
                int j = (int)((x >> 8) % (unsigned)done);
                int k = t % 2 ? PER_CREATOR - 1 - j : j;
                created_name(name, sizeof name, t, k);
                bw_breaker *d = bw_registry_get_existing(c->r, name);
                bad += d == NULL || d != c->made[t][k];
                n++;
            }
        }
    }
    atomic_fetch_add(&c->lookups, n);
    atomic_fetch_add(&c->bad_lookups, bad);
    return NULL;
}

static int cmp_ptr(const void *a, const void *b)
{
    const void *p = *(void *const *)a, *q = *(void *const *)b;
    uintptr_t x = (uintptr_t)p, y = (uintptr_t)q;
    return (x > y) - (x < y);
}

static void test_threads_create_and_look_up(void)
{
    static mix_ctx c;
    memset(&c, 0, sizeof c);
    c.r = registry(NULL);
    char name[32];
    for (int i = 0; i < PREFILL; i++) {
        snprintf(name, sizeof name, "pre-%d", i);
        c.pre[i] = get(c.r, name, NULL);
    }
    atomic_store(&c.creators_left, CREATORS);
    pthread_barrier_init(&c.start, NULL, CREATORS + LOOKERS);
    pthread_t t[CREATORS + LOOKERS];
    mix_arg args[CREATORS + LOOKERS];
    for (int i = 0; i < CREATORS + LOOKERS; i++) {
        args[i] = (mix_arg){&c, i < CREATORS ? i : i - CREATORS};
        CHECK_INT(pthread_create(&t[i], NULL, i < CREATORS ? creator : looker, &args[i]), 0);
    }
    for (int i = 0; i < CREATORS + LOOKERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&c.start);

    CHECK_INT(atomic_load(&c.bad_creates), 0);
    CHECK_INT(atomic_load(&c.bad_lookups), 0);
    CHECK(atomic_load(&c.lookups) >= PREFILL * 2);
    CHECK_INT(bw_registry_count(c.r), PREFILL + DISTINCT);

    /* Each name maps to exactly one breaker: both creators of a shared name got the same one. */
    int bad = 0;
    for (int tt = 0; tt < CREATORS; tt++)
        for (int j = 0; j < PER_CREATOR; j++) {
            created_name(name, sizeof name, tt, j);
            bad += bw_registry_get_existing(c.r, name) != c.made[tt][j];
            if (tt + 1 < CREATORS && j >= PER_CREATOR - OVERLAP)
                bad += c.made[tt][j] != c.made[tt + 1][j - (PER_CREATOR - OVERLAP)];
        }
    CHECK_INT(bad, 0);
    /* ...and no two names share one: the list holds PREFILL + DISTINCT distinct breakers. */
    size_t total = PREFILL + DISTINCT;
    bw_breaker **all = malloc(total * sizeof *all);
    const char **names = malloc(total * sizeof *names);
    CHECK_INT(bw_registry_list(c.r, names, all, total), total);
    for (size_t i = 0; i < total; i++)
        bad += bw_registry_get_existing(c.r, names[i]) != all[i];
    qsort(all, total, sizeof *all, cmp_ptr);
    for (size_t i = 1; i < total; i++)
        bad += all[i] == all[i - 1];
    CHECK_INT(bad, 0);
    free(all);
    free(names);
    bw_registry_free(c.r);
}

int main(void)
{
    RUN(test_get_makes_lazily);
    RUN(test_list);
    RUN(test_override_applies_at_creation_only);
    RUN(test_defaults_initial_state_and_listener);
    RUN(test_get_existing);
    RUN(test_bad_names);
    RUN(test_bad_override_and_defaults);
    RUN(test_breaker_free_ignored);
    RUN(test_apply);
    RUN(test_apply_reaches_keyed_circuits);
    RUN(test_growth);
    RUN(test_threads_same_new_name);
    RUN(test_threads_create_and_look_up);
    return TEST_SUMMARY();
}
