/*
 * test_concurrency.c (tests/unit/) — real threads on one breaker: window totals
 * add up, the probe caps hold in every round, a concurrent trip emits exactly
 * one CLOSED->OPEN event, and a call racing the auto-transition timer sees
 * exactly one OPEN->HALF_OPEN event; and the backgrounds of a breaker with a
 * store (a lane, a timer) racing its free: freed while a manual clock
 * advances on another thread, its custom clock freed right after it, keyed
 * circuits evicted while their timers and lanes run. Run it under TSan and
 * ASan too: those last ones fail there (a use after free, a race) when the
 * order of a breaker's teardown is wrong. Removing the breaker's lock makes
 * test_totals_add_up and test_probe_caps fail (checked by hand).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "harness.h"
#include "recorder.h"

#define THREADS 4

static bw_breaker *make(const char *text, bw_clock *clk, bw_listener_cb fn, void *user)
{
    bw_config *c = bw_config_new();
    bw_error err = {0};
    CHECK_OK(bw_config_parse(c, text, &err));
    if (clk)
        bw_config_set_clock(c, clk);
    if (fn)
        bw_config_set_listener(c, BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), fn, user);
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("shared", c, &b, &err));
    bw_config_free(c);
    return b;
}

static void run_threads(void *(*fn)(void *), void *arg, int n)
{
    pthread_t t[16];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, fn, arg);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

/* ---- totals ---- */

#define CALLS 100000

static void *hammer(void *arg)
{
    bw_breaker *b = arg;
    for (int i = 0; i < CALLS; i++) {
        bw_permit p;
        if (bw_acquire(b, &p, NULL) == BW_OK)
            bw_settle(b, &p, i % 3 == 0 ? BW_FAILURE : BW_SUCCESS);
    }
    return NULL;
}

static void test_totals_add_up(void)
{
    /* A window larger than all calls and a min_calls it never reaches: nothing is evicted. */
    bw_breaker *b = make("window=count:1000000 min_calls=1000000 slow_call_duration=off", NULL, NULL, NULL);
    run_threads(hammer, b, THREADS);
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.total_calls, THREADS * CALLS);
    CHECK_INT(s.failed_calls, THREADS * ((CALLS + 2) / 3));
    bw_breaker_free(b);

    b = make("window=time:3600s min_calls=1000000000", NULL, NULL, NULL);
    run_threads(hammer, b, THREADS);
    bw_breaker_snapshot(b, &s);
    CHECK_INT(s.total_calls, THREADS * CALLS);
    bw_breaker_free(b);
}

/* ---- probe caps ---- */

#define MAX_GEN 65536
#define PERMITTED 3
#define MAXCONC 2

typedef struct probe_ctx {
    bw_breaker *b;
    bw_clock *clk;
    _Atomic int admitted[MAX_GEN];
    _Atomic int in_flight[MAX_GEN];
    _Atomic int violations;
    _Atomic int probes;
} probe_ctx;

static void *prober(void *arg)
{
    probe_ctx *c = arg;
    for (int i = 0; i < 20000; i++) {
        bw_clock_manual_advance(c->clk, 1); /* the 1 ns wait always elapses */
        bw_permit p;
        if (bw_acquire(c->b, &p, NULL) != BW_OK)
            continue;
        uint64_t g = p.generation_; /* test-only peek at the private field */
        if (g >= MAX_GEN)
            break;
        int adm = atomic_fetch_add(&c->admitted[g], 1) + 1;
        int fly = atomic_fetch_add(&c->in_flight[g], 1) + 1;
        if (adm > PERMITTED || fly > MAXCONC)
            atomic_fetch_add(&c->violations, 1);
        atomic_fetch_add(&c->probes, 1);
        atomic_fetch_sub(&c->in_flight[g], 1);
        bw_settle(c->b, &p, BW_FAILURE);
    }
    return NULL;
}

static void test_probe_caps(void)
{
    static probe_ctx c;
    memset(&c, 0, sizeof c);
    CHECK_OK(bw_clock_manual_new(0, &c.clk));
    /*
     * Every probe fails, so each round reopens and the breaker cycles
     * OPEN <-> HALF_OPEN without ever closing: every admission is a probe.
     */
    c.b = make("min_calls=1 failure_rate=0.5 wait=1ns permitted_probes=3 max_concurrent_probes=2 "
               "slow_call_duration=off max_wait_in_half_open=off",
               c.clk, NULL, NULL);
    /* Start open: one failure. */
    bw_permit p;
    CHECK_OK(bw_acquire(c.b, &p, NULL));
    CHECK_OK(bw_settle(c.b, &p, BW_FAILURE));
    run_threads(prober, &c, THREADS);
    CHECK_INT(atomic_load(&c.violations), 0);
    CHECK(atomic_load(&c.probes) > 1000); /* the test exercised many rounds */
    bw_breaker_free(c.b);
    bw_clock_free(c.clk);
}

/* ---- exactly one event per transition ---- */

typedef struct trip_ctx {
    bw_breaker *b;
    int calls;      /* per worker */
    int fail_every; /* every n-th call of a worker fails (the first one too) */
    recorder *rec;  /* the breaker's state changes */
    _Atomic int go;
} trip_ctx;

static void *worker(void *arg)
{
    trip_ctx *c = arg;
    while (!atomic_load(&c->go)) {
    }
    for (int i = 0; i < c->calls; i++) {
        bw_permit p;
        if (bw_acquire(c->b, &p, NULL) == BW_OK)
            bw_settle(c->b, &p, i % c->fail_every == 0 ? BW_FAILURE : BW_SUCCESS);
    }
    return NULL;
}

static void concurrent_trip(const char *config)
{
    static trip_ctx c;
    memset(&c, 0, sizeof c);
    c.rec = rec_new();
    c.b = make(config, NULL, rec_listen, c.rec);
    c.calls = 2000;
    c.fail_every = 1;
    for (int round = 0; round < 20; round++) {
        atomic_store(&c.go, 0);
        pthread_t t[8];
        for (int i = 0; i < 8; i++)
            pthread_create(&t[i], NULL, worker, &c);
        atomic_store(&c.go, 1);
        for (int i = 0; i < 8; i++)
            pthread_join(t[i], NULL);
        CHECK_STATE(c.b, BW_STATE_OPEN);
        CHECK_INT(rec_changes(c.rec, "closed->open"), round + 1);
        bw_snapshot s;
        bw_breaker_snapshot(c.b, &s);
        CHECK(s.total_calls >= 50); /* it tripped no earlier than min_calls */
        CHECK_INT(s.failed_calls, s.total_calls);
        bw_breaker_reset(c.b);
    }
    bw_breaker_free(c.b);
    rec_free(c.rec);
}

static void test_concurrent_trip_one_event(void)
{
    concurrent_trip("min_calls=50 failure_rate=0.5 wait=1h");
}

/* The same on a time window, which is striped across threads. */
static void test_concurrent_trip_one_event_time_window(void)
{
    concurrent_trip("min_calls=50 failure_rate=0.5 wait=1h window=time:60s");
}

/* Successes and failures from several threads into a striped time window trip exactly as the rates say. */
static void test_striped_rates(void)
{
    static trip_ctx c;
    memset(&c, 0, sizeof c);
    c.rec = rec_new();
    /* 25% failures stay under 30%: never trips; the totals add up across stripes. */
    c.b = make("min_calls=100 failure_rate=0.3 window=time:3600s", NULL, rec_listen, c.rec);
    c.calls = 20000;
    c.fail_every = 4;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, &c);
    atomic_store(&c.go, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    bw_snapshot s;
    bw_breaker_snapshot(c.b, &s);
    CHECK_STATE(c.b, BW_STATE_CLOSED);
    CHECK_INT(s.total_calls, 80000);
    CHECK_INT(s.failed_calls, 20000);
    CHECK_INT(rec_count(c.rec), 0);
    bw_breaker_free(c.b);
    rec_free(c.rec);
    /* At 20% the threshold is reached: it trips, once. */
    memset(&c, 0, sizeof c);
    c.rec = rec_new();
    c.b = make("min_calls=100 failure_rate=0.2 window=time:3600s wait=1h", NULL, rec_listen, c.rec);
    c.calls = 20000;
    c.fail_every = 4;
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, &c);
    atomic_store(&c.go, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK_STATE(c.b, BW_STATE_OPEN);
    CHECK_INT(rec_changes(c.rec, "closed->open"), 1);
    bw_breaker_free(c.b);
    rec_free(c.rec);
}

/*
 * Failures from several threads into a striped time window that reach the
 * threshold on the last one between them: the stripes' tallies must let the
 * last failure see all the others, so the breaker trips then, and not before
 * (no call is rejected). Leaving the other stripes' tallies out makes it stay
 * CLOSED (checked by hand).
 */
#define TALLY_THREADS 4
#define TALLY_FAILURES 250

typedef struct tally_ctx {
    bw_breaker *b;
    _Atomic int go;
    _Atomic int rejected;
} tally_ctx;

static void *tally_worker(void *arg)
{
    tally_ctx *c = arg;
    while (!atomic_load(&c->go)) {
    }
    for (int i = 0; i < TALLY_FAILURES; i++) {
        bw_permit p;
        if (bw_acquire(c->b, &p, NULL) == BW_OK)
            bw_settle(c->b, &p, BW_FAILURE);
        else
            atomic_fetch_add(&c->rejected, 1);
    }
    return NULL;
}

static void test_striped_tallies_meet(void)
{
    for (int round = 0; round < 20; round++) {
        tally_ctx c;
        memset(&c, 0, sizeof c);
        c.b = make("min_calls=1 failure_rate=0.5 window=time:3600s wait=1h", NULL, NULL, NULL);
        for (int i = 0; i < TALLY_THREADS * TALLY_FAILURES; i++) {
            bw_permit p;
            CHECK_OK(bw_acquire(c.b, &p, NULL));
            CHECK_OK(bw_settle(c.b, &p, BW_SUCCESS));
        }
        pthread_t t[TALLY_THREADS];
        for (int i = 0; i < TALLY_THREADS; i++)
            pthread_create(&t[i], NULL, tally_worker, &c);
        atomic_store(&c.go, 1);
        for (int i = 0; i < TALLY_THREADS; i++)
            pthread_join(t[i], NULL);
        CHECK_INT(atomic_load(&c.rejected), 0);
        CHECK_STATE(c.b, BW_STATE_OPEN); /* 1000 of 2000 failed */
        bw_breaker_free(c.b);
    }
}

typedef struct race_ctx {
    bw_breaker *b;
    bw_clock *clk;
    _Atomic int go;
} race_ctx;

static void *racer_call(void *arg)
{
    race_ctx *c = arg;
    while (!atomic_load(&c->go)) {
    }
    bw_permit p;
    for (int i = 0; i < 100; i++)
        if (bw_acquire(c->b, &p, NULL) == BW_OK)
            return NULL; /* hold the probe: the round stays open */
    return NULL;
}

static void *racer_clock(void *arg)
{
    race_ctx *c = arg;
    while (!atomic_load(&c->go)) {
    }
    bw_clock_manual_advance(c->clk, BW_NS_PER_S);
    return NULL;
}

static void test_timer_races_call(void)
{
    for (int round = 0; round < 200; round++) {
        recorder *rec = rec_new();
        race_ctx c = {0};
        CHECK_OK(bw_clock_manual_new(0, &c.clk));
        c.b = make("min_calls=1 failure_rate=1 wait=1s auto_transition=true", c.clk, rec_listen, rec);
        bw_permit p;
        CHECK_OK(bw_acquire(c.b, &p, NULL));
        CHECK_OK(bw_settle(c.b, &p, BW_FAILURE));
        pthread_t a, b;
        pthread_create(&a, NULL, racer_call, &c);
        pthread_create(&b, NULL, racer_clock, &c);
        atomic_store(&c.go, 1);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        CHECK_INT(rec_changes(rec, "open->half_open"), 1);
        CHECK_STATE(c.b, BW_STATE_HALF_OPEN);
        bw_breaker_free(c.b);
        bw_clock_free(c.clk);
        rec_free(rec);
    }
}

/* Operator verbs racing calls never corrupt the counters. */
static void *verbs(void *arg)
{
    bw_breaker *b = arg;
    for (int i = 0; i < 2000; i++) {
        switch (i % 4) {
        case 0:
            bw_breaker_metrics_only(b);
            break;
        case 1:
            bw_breaker_disable(b);
            break;
        case 2:
            bw_breaker_force_open(b);
            break;
        default:
            bw_breaker_reset(b);
        }
    }
    return NULL;
}

static void test_verbs_race_calls(void)
{
    bw_breaker *b = make("min_calls=5 failure_rate=0.5 wait=1h window=count:50", NULL, NULL, NULL);
    pthread_t v, h[2];
    pthread_create(&v, NULL, verbs, b);
    for (int i = 0; i < 2; i++)
        pthread_create(&h[i], NULL, hammer, b);
    pthread_join(v, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(h[i], NULL);
    bw_snapshot s;
    bw_breaker_snapshot(b, &s);
    CHECK(s.total_calls <= 50);
    CHECK(s.failed_calls <= s.total_calls);
    CHECK(s.state == BW_STATE_CLOSED || s.state == BW_STATE_OPEN); /* the last verb was reset */
    CHECK_INT(s.probes_in_flight, 0);
    bw_breaker_free(b);
}

/*
 * Snapshots taken while threads settle are never torn. Every call fails, so in a
 * consistent snapshot failed == total; a snapshot that read `total` and `failed`
 * at different moments would differ (checked by hand: without the snapshot's
 * lock this test fails).
 */
typedef struct snap_ctx {
    bw_breaker *b;
    _Atomic int stop;
    _Atomic int torn;
    _Atomic long taken;
} snap_ctx;

static void *snapshotter(void *arg)
{
    snap_ctx *c = arg;
    while (!atomic_load(&c->stop)) {
        bw_snapshot s;
        bw_breaker_snapshot(c->b, &s);
        if (s.failed_calls != s.total_calls || (s.total_calls && s.failure_rate != 1.0))
            atomic_fetch_add(&c->torn, 1);
        atomic_fetch_add(&c->taken, 1);
    }
    return NULL;
}

static void test_snapshot_never_torn(void)
{
    static const char *configs[] = {"window=count:1000000 min_calls=1000000 slow_call_duration=off",
                                    "window=time:3600s min_calls=1000000000"};
    for (int k = 0; k < 2; k++) {
        snap_ctx c = {0};
        static trip_ctx w;
        memset(&w, 0, sizeof w);
        w.b = c.b = make(configs[k], NULL, NULL, NULL);
        w.calls = CALLS;
        w.fail_every = 1;
        atomic_store(&w.go, 1);
        pthread_t s, h[2];
        pthread_create(&s, NULL, snapshotter, &c);
        for (int i = 0; i < 500 && atomic_load(&c.taken) == 0; i++) /* the snapshots under way first (5 s at most) */
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        for (int i = 0; i < 2; i++)
            pthread_create(&h[i], NULL, worker, &w);
        for (int i = 0; i < 2; i++)
            pthread_join(h[i], NULL);
        atomic_store(&c.stop, 1);
        pthread_join(s, NULL);
        CHECK_INT(atomic_load(&c.torn), 0);
        CHECK(atomic_load(&c.taken) > 0);
        bw_snapshot end;
        bw_breaker_snapshot(c.b, &end);
        CHECK_INT(end.total_calls, 2 * CALLS);
        bw_breaker_free(c.b);
    }
}

/* ---- a breaker's backgrounds racing its free ---- */

/*
 * Not a recording listener (the recorder keeps at most 1,024 events, and these
 * tests make tens of thousands): it counts events and reads the state of the
 * breaker an event comes from, which is a use after free if a background
 * reaches a breaker that is gone (ASan).
 */
static void touch_breaker(const bw_event *e, void *user)
{
    atomic_fetch_add((atomic_int *)user, 1);
    if (e->breaker)
        (void)bw_breaker_state(e->breaker);
}

typedef struct advancer {
    bw_clock *clk;
    atomic_int stop;
} advancer;

static void *advance_loop(void *arg)
{
    advancer *a = arg;
    while (!atomic_load(&a->stop))
        bw_clock_manual_advance(a->clk, 1000000); /* 1 ms: every poll of the lane comes due */
    return NULL;
}

static bw_config *coordinated(bw_store *s, bw_clock *clk, const char *text)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_parse(c, text, &e));
    if (clk)
        CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_COORDINATED, &e));
    return c;
}

/*
 * Coordinated breakers on a manual clock, made, tripped (a queued write) and
 * freed while another thread advances the clock: freeing runs the queued
 * writes on the freeing thread, and the advance must not run them too (it used
 * to, and called back into the freed breaker).
 */
static void test_free_while_advancing(void)
{
    bw_store *s = NULL;
    CHECK_OK(bw_store_open("memory:", &s, NULL));
    advancer a = {NULL, 0};
    CHECK_OK(bw_clock_manual_new(0, &a.clk));
    atomic_int events = 0;
    bw_config *c = coordinated(s, a.clk, "policy=consecutive error_threshold=1 store_poll=1ms");
    CHECK_OK(bw_config_set_listener(c, BW_EVENTS_ALL, touch_breaker, &events));
    bw_breaker *keep = NULL; /* keeps the lane */
    CHECK_OK(bw_breaker_new("keep", c, &keep, NULL));
    pthread_t t;
    pthread_create(&t, NULL, advance_loop, &a);
    for (int i = 0; i < 2000; i++) {
        bw_breaker *b = NULL;
        CHECK_OK(bw_breaker_new("svc", c, &b, NULL));
        for (int k = 0; k < 3; k++) {
            bw_permit p;
            if (bw_acquire(b, &p, NULL) == BW_OK)
                bw_settle(b, &p, BW_FAILURE);
            bw_breaker_reset(b);
        }
        bw_breaker_free(b);
    }
    atomic_store(&a.stop, 1);
    pthread_join(t, NULL);
    bw_breaker_free(keep);
    bw_config_free(c);
    bw_store_close(s);
    bw_clock_free(a.clk);
    CHECK(atomic_load(&events) > 0);
}

/* A custom clock that notes a read made after its owner said it was gone. */
static atomic_int clock_gone, reads_after_gone;

static int64_t custom_now(void *user)
{
    (void)user;
    if (atomic_load(&clock_gone))
        atomic_fetch_add(&reads_after_gone, 1);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * BW_NS_PER_S + ts.tv_nsec;
}

/*
 * A coordinated breaker on a custom clock, freed, then its clock freed (no
 * breaker uses it any more) while the store stays open: the store's lane must
 * not read that clock again (it did, at the poll it had queued).
 */
static void test_clock_freed_before_store(void)
{
    bw_store *s = NULL;
    CHECK_OK(bw_store_open("memory:", &s, NULL));
    bw_clock *clk = NULL;
    CHECK_OK(bw_clock_custom_new(custom_now, NULL, &clk));
    bw_config *c = coordinated(s, clk, "store_poll=10ms");
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("svc", c, &b, NULL));
    bw_config_free(c);
    struct timespec ts = {0, 30 * 1000000}; /* a few polls */
    nanosleep(&ts, NULL);
    bw_breaker_free(b);
    atomic_store(&clock_gone, 1);
    bw_clock_free(clk);
    ts.tv_nsec = 50 * 1000000; /* past the poll the lane had queued */
    nanosleep(&ts, NULL);
    CHECK_INT(atomic_load(&reads_after_gone), 0);
    bw_store_close(s);
}

static bw_breaker *keyed_parent;

static void *keyed_churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    char key[16];
    for (int i = 0; i < 3000; i++) {
        seed = seed * 1103515245u + 12345u;
        snprintf(key, sizeof key, "k%u", (seed >> 16) % 48);
        bw_permit p;
        if (bw_keyed_acquire(keyed_parent, key, &p, NULL) == BW_OK)
            bw_settle(keyed_parent, &p, (seed >> 8) % 3 ? BW_SUCCESS : BW_FAILURE);
        if (i % 500 == 0)
            bw_keyed_apply(keyed_parent, BW_VERB_RESET);
    }
    return NULL;
}

/*
 * Keyed circuits of a coordinated breaker with auto_transition, looked up by
 * four threads through a small map: circuits are evicted (freed) while their
 * timers fire and their lanes poll (a timer fire raced the release of a
 * circuit's store link).
 */
static void test_keyed_evicted_while_running(void)
{
    bw_store *s = NULL;
    CHECK_OK(bw_store_open("memory:", &s, NULL));
    bw_config *c = coordinated(s, NULL,
                               "policy=consecutive error_threshold=2 wait=1ms auto_transition=true store_poll=1ms "
                               "keyed_maxsize=8 keyed_limit=16 keyed_idle=1ms keyed_history_idle=2ms "
                               "max_wait_in_half_open=10ms");
    atomic_int events = 0;
    CHECK_OK(bw_config_set_listener(c, BW_EVENT_MASK(BW_EVENT_STATE_CHANGE), touch_breaker, &events));
    CHECK_OK(bw_breaker_new("svc", c, &keyed_parent, NULL));
    bw_config_free(c);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, keyed_churn, (void *)(i + 1));
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(bw_keyed_count(keyed_parent) <= 16);
    CHECK(atomic_load(&events) > 0); /* circuits tripped and moved on */
    bw_breaker_free(keyed_parent);
    bw_store_close(s);
}

int main(void)
{
    RUN(test_totals_add_up);
    RUN(test_probe_caps);
    RUN(test_concurrent_trip_one_event);
    RUN(test_concurrent_trip_one_event_time_window);
    RUN(test_striped_rates);
    RUN(test_striped_tallies_meet);
    RUN(test_snapshot_never_torn);
    RUN(test_timer_races_call);
    RUN(test_verbs_race_calls);
    RUN(test_free_while_advancing);
    RUN(test_clock_freed_before_store);
    RUN(test_keyed_evicted_while_running);
    return TEST_SUMMARY();
}
