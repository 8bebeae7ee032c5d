/*
 * test_shared_modes.c — breakers sharing state through a store, on every
 * store (tests/contract/): the contract suite of the shared modes, next to
 * the store primitive's own (test_store_contract.c). Run as
 * `test_shared_modes URL`; ctest runs it once per URL a backend registered
 * (bw_add_backend's TEST_URL), each test on a fresh store of it (%n,
 * support/store_url.h). Everything here runs on one manual clock shared by
 * the breakers and the stores, so every rule is exact:
 * - stored mode: two breakers on one circuit, the global probe budget, stale
 *   outcomes, lifetimes of the entry (closing deletes, operator holds never
 *   expire, OPEN outlives its wait), a store failing on command (fallback to
 *   the local circuit, degraded and recovered events);
 * - coordinated mode: trip propagation through the queue and polls,
 *   retry_after of a shared OPEN, the global probe budget across breakers, a
 *   late probe from an old round dropped, a lease expiring, degradation and
 *   recovery adopting an OPEN made while cut off, the queue filling up;
 *   quorum tripping (the fleet's circuit opens at the K-th distinct instance
 *   to trip within one open wait; one process's breakers are one instance);
 * - both: bw_breaker_open_for (a Retry-After) opens the fleet's circuit until
 *   its end, and an OPEN read back that would last longer than anything of
 *   ours could set is corrupt.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "clockfix.h"
#include "timeutil.h"
#include "failing_store.h"
#include "recorder.h"
#include "share/circuit.h"
#include "base/systime.h"
#include "store/backend.h"
#include "store/front.h"
#include "store_url.h"

#define S BW_NS_PER_S
#define MS BW_NS_PER_MS

/* ---- helpers ---- */

/* A fresh store on the fixture's clock (store_url.h). */
static bw_store *open_store(void)
{
    return store_open_fresh(clk);
}

/*
 * A breaker named `name` on store s: trips on 2 failures of the last 4 calls,
 * waits 10 s, `probes` probes a round (all at once), a round expires after 5 s.
 */
static bw_breaker *make(const char *name, bw_store *s, bw_store_mode mode, int probes, recorder *log, int queue)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 4, &e));
    CHECK_OK(bw_config_set_min_calls(c, 2, &e));
    CHECK_OK(bw_config_set_wait(c, 10 * S, &e));
    CHECK_OK(bw_config_set_wait_multiplier(c, 2, &e));
    CHECK_OK(bw_config_set_permitted_probes(c, probes, &e));
    CHECK_OK(bw_config_set_max_concurrent_probes(c, probes, &e));
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 5 * S, &e));
    CHECK_OK(bw_config_set_store_poll(c, 1 * S, &e));
    CHECK_OK(bw_config_set_store_retry(c, 2 * S, &e));
    CHECK_OK(bw_config_set_store_retry_jitter(c, 0, &e));
    if (queue)
        CHECK_OK(bw_config_set_store_queue(c, queue, &e));
    if (log)
        CHECK_OK(bw_config_set_listener(c, BW_EVENTS_ALL, rec_listen, log));
    CHECK_OK(bw_config_set_store(c, s, mode, &e));
    bw_breaker *b = NULL;
    int rc = bw_breaker_new(name, c, &b, &e);
    if (rc != BW_OK)
        H_FAIL("bw_breaker_new: %s: %s", bw_strerror(rc), e.message);
    bw_config_free(c);
    return b;
}

static int call(bw_breaker *b, bw_outcome o)
{
    bw_permit p;
    int rc = bw_acquire(b, &p, NULL);
    if (rc == BW_OK)
        CHECK_OK(bw_settle(b, &p, o));
    return rc;
}

/* The stored circuit as the store holds it. */
typedef struct peek {
    int found;
    int64_t expires_at;
} peek;

static bw_store_verdict peek_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now;
    (void)next;
    peek *p = arg;
    p->found = cur != NULL;
    p->expires_at = cur ? cur->expires_at : 0;
    return BW_STORE_KEEP;
}

static peek peek_at(bw_store *s, const char *name)
{
    peek p = {0, 0};
    CHECK_OK(bw_store_update(s, name, peek_fn, &p, NULL));
    return p;
}

/* The configuration of the shared machine of make()'s coordinated breakers (attach_store.c's rule). */
static void shared_cfg(bw__mcfg *mc_)
{
    bw__mcfg mc;
    memset(&mc, 0, sizeof mc);
    mc.policy = BW_POLICY_RATE;
    mc.window_kind = BW_WINDOW_COUNT;
    mc.window_size = 1;
    mc.min_calls = UINT32_MAX;
    mc.failure_rate = 0.5;
    mc.slow_rate = 1;
    mc.wait = 10 * S;
    mc.wait_multiplier = 2;
    mc.permitted = 1;
    mc.max_concurrent = 1;
    mc.max_wait_ho = 5 * S;
    *mc_ = mc;
}

/* The shared machine's snapshot (coordinated: the shared OPEN/HALF_OPEN and its round). */
static bw_snapshot shared_snapshot(bw_store *s, const char *name)
{
    bw__mcfg mc;
    shared_cfg(&mc);
    bw__shared_op op;
    memset(&op, 0, sizeof op);
    op.op = BW__OP_READ;
    op.cfg = &mc;
    op.ttl = S;
    bw_snapshot snap;
    op.snap = &snap;
    CHECK_OK(bw_store_update(s, name, bw__shared_apply, &op, NULL));
    return snap;
}

/* ---- stored mode ---- */

static void test_stored_one_circuit_for_two(void)
{
    bw_store *s = open_store();
    bw_breaker *a = make("svc-stored", s, BW_STORE_STORED, 1, NULL, 0);
    bw_breaker *b = make("svc-stored", s, BW_STORE_STORED, 1, NULL, 0);
    CHECK_INT(call(a, BW_SUCCESS), BW_OK);
    CHECK(peek_at(s, "svc-stored").found); /* a success is worth remembering in a window */
    CHECK_INT(call(b, BW_FAILURE), BW_OK); /* one window for both: 1 of 2 failed trips it */
    CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
    CHECK_INT(bw_breaker_state(a), BW_STATE_CLOSED); /* as of a's last store operation */
    bw_permit p;
    bw_rejection why;
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 10 * S);
    CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
    /* The OPEN entry outlives its wait: it expires a ttl (1 d) after the wait ends. */
    peek pk = peek_at(s, "svc-stored");
    CHECK(pk.found);
    CHECK_INT(pk.expires_at - clock_now(), 10 * S + 86400 * S);
    /* The wait ends: one probe for the whole fleet. */
    pump(10 * S);
    bw_permit probe;
    CHECK_OK(bw_acquire(b, &probe, NULL));
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_HALF_OPEN);
    CHECK_OK(bw_settle(b, &probe, BW_SUCCESS));
    CHECK_INT(bw_breaker_state(b), BW_STATE_CLOSED);
    CHECK(!peek_at(s, "svc-stored").found); /* closing deletes the entry */
    bw_snapshot snap;
    CHECK_OK(bw_breaker_snapshot(a, &snap));
    CHECK_INT(snap.state, BW_STATE_CLOSED);
    CHECK_INT(snap.total_calls, 0);
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_store_close(s);
}

/* The clock moves between admission and settlement, as it always does outside tests. */
static void test_stored_moving_clock(void)
{
    bw_store *s = open_store();
    bw_breaker *a = make("svc-moving", s, BW_STORE_STORED, 1, NULL, 0);
    bw_breaker *b = make("svc-moving", s, BW_STORE_STORED, 1, NULL, 0);
    bw_permit pa, pb;
    CHECK_OK(bw_acquire(a, &pa, NULL)); /* no entry yet: nothing written */
    CHECK(!peek_at(s, "svc-moving").found);
    pump(1 * MS);
    CHECK_OK(bw_acquire(b, &pb, NULL));
    pump(1 * MS);
    CHECK_OK(bw_settle(b, &pb, BW_SUCCESS)); /* makes the entry */
    pump(1 * MS);
    CHECK_OK(bw_settle(a, &pa, BW_FAILURE)); /* admitted before it existed; nothing moved since: counts */
    bw_snapshot snap;
    CHECK_OK(bw_breaker_snapshot(a, &snap));
    CHECK_INT(snap.total_calls, 2);
    CHECK_INT(snap.failed_calls, 1);
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN); /* 1 of 2 failed */
    /* A permit from before the trip is stale once the circuit moved. */
    bw_breaker *c = make("svc-moving-2", s, BW_STORE_STORED, 1, NULL, 0);
    bw_permit old;
    CHECK_OK(bw_acquire(c, &old, NULL));
    pump(1 * MS);
    CHECK_OK(call(c, BW_FAILURE));
    CHECK_OK(call(c, BW_FAILURE)); /* 2 of 2: trips */
    pump(1 * MS);
    CHECK_OK(bw_settle(c, &old, BW_SUCCESS)); /* dropped */
    CHECK_OK(bw_breaker_snapshot(c, &snap));
    CHECK_INT(snap.state, BW_STATE_OPEN);
    CHECK_INT(snap.total_calls, 2);
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_breaker_free(c);
    bw_store_close(s);
}

/*
 * Every verb drops the outcomes in flight as stale (breaker.h), in stored mode
 * too: a reset keeps the entry as a fence at its new generation, so a permit of
 * the old one, or of a circuit that had no entry, no longer counts.
 */
static void test_stored_stale_across_reset(void)
{
    bw_store *s = open_store();
    bw_breaker *a = make("svc-fence", s, BW_STORE_STORED, 1, NULL, 0);
    bw_breaker *b = make("svc-fence", s, BW_STORE_STORED, 1, NULL, 0);
    CHECK_OK(call(a, BW_SUCCESS)); /* an entry with history */
    bw_permit p;
    CHECK_OK(bw_acquire(a, &p, NULL));
    CHECK_OK(bw_breaker_reset(b));
    peek k = peek_at(s, "svc-fence");
    CHECK(k.found); /* the fence */
    CHECK_INT(k.expires_at, clock_now() + 86400 * S);
    CHECK_OK(bw_settle(a, &p, BW_FAILURE)); /* admitted before the reset: stale */
    bw_snapshot snap;
    CHECK_OK(bw_breaker_snapshot(a, &snap));
    CHECK_INT(snap.total_calls, 0);
    CHECK_OK(call(a, BW_FAILURE)); /* admitted after it: counts */
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK_INT(snap.total_calls, 1);
    CHECK_INT(snap.failed_calls, 1);

    /* A circuit with no entry admits without writing: a reset still fences its permits off. */
    bw_breaker *c = make("svc-fence-fresh", s, BW_STORE_STORED, 1, NULL, 0);
    CHECK(!peek_at(s, "svc-fence-fresh").found);
    CHECK_OK(bw_acquire(c, &p, NULL));
    CHECK_OK(bw_breaker_reset(c));
    CHECK(peek_at(s, "svc-fence-fresh").found);
    CHECK_OK(bw_settle(c, &p, BW_FAILURE));
    CHECK_OK(bw_breaker_snapshot(c, &snap));
    CHECK_INT(snap.total_calls, 0);

    /* Without a reset, that permit counts into the circuit another breaker made meanwhile. */
    bw_breaker *d = make("svc-nofence", s, BW_STORE_STORED, 1, NULL, 0);
    bw_breaker *e = make("svc-nofence", s, BW_STORE_STORED, 1, NULL, 0);
    CHECK_OK(bw_acquire(d, &p, NULL));
    CHECK_OK(call(e, BW_SUCCESS));
    CHECK_OK(bw_settle(d, &p, BW_FAILURE));
    CHECK_OK(bw_breaker_snapshot(d, &snap));
    CHECK_INT(snap.total_calls, 2);
    CHECK_INT(snap.failed_calls, 1);

    /* A probe of an earlier round that finds the entry deleted (the circuit closed) is stale too. */
    CHECK_RC(call(e, BW_SUCCESS), BW_REJECTED); /* 1 of 2 failed: OPEN */
    pump(10 * S);
    bw_permit late, probe;
    CHECK_OK(bw_acquire(e, &late, NULL)); /* round 1's probe, never back in time */
    pump(5 * S);                          /* the round expires: OPEN for 20 s */
    CHECK_RC(bw_acquire(e, &probe, NULL), BW_REJECTED);
    pump(20 * S);
    CHECK_OK(bw_acquire(e, &probe, NULL));
    CHECK_OK(bw_settle(e, &probe, BW_SUCCESS)); /* CLOSED: the entry is deleted */
    CHECK(!peek_at(s, "svc-nofence").found);
    CHECK_OK(bw_settle(e, &late, BW_FAILURE));
    CHECK_OK(bw_breaker_snapshot(e, &snap));
    CHECK_INT(snap.total_calls, 0);
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_breaker_free(c);
    bw_breaker_free(d);
    bw_breaker_free(e);
    bw_store_close(s);
}

/* An operator verb applied to a registry reaches stored breakers it makes later: in their store. */
static void test_stored_registry_preset(void)
{
    bw_store *s = open_store();
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_STORED, &e));
    bw_registry *r;
    CHECK_OK(bw_registry_new(c, &r, &e));
    bw_config_free(c);
    CHECK_OK(bw_registry_apply(r, BW_VERB_FORCE_OPEN));
    bw_breaker *late;
    CHECK_OK(bw_registry_get(r, "svc-late-stored", NULL, &late, &e));
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(late, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_FORCED_OPEN);
    CHECK_INT(peek_at(s, "svc-late-stored").expires_at, BW_STORE_NEVER);
    CHECK_OK(bw_registry_apply(r, BW_VERB_RESET));
    CHECK_OK(call(late, BW_SUCCESS));
    bw_registry_free(r);
    bw_store_close(s);
}

static void test_stored_stale_and_expiry(void)
{
    bw_store *s = open_store();
    bw_breaker *a = make("svc-stale", s, BW_STORE_STORED, 1, NULL, 0);
    CHECK_INT(call(a, BW_FAILURE), BW_OK);
    CHECK_INT(call(a, BW_FAILURE), BW_OK);
    pump(10 * S);
    bw_permit old;
    CHECK_OK(bw_acquire(a, &old, NULL)); /* probe of round 1 */
    pump(5 * S);                         /* the round expires: a failed round, OPEN for 20 s */
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 20 * S);
    pump(20 * S);
    bw_permit probe;
    CHECK_OK(bw_acquire(a, &probe, NULL));    /* round 2 */
    CHECK_OK(bw_settle(a, &old, BW_SUCCESS)); /* round 1's late probe: dropped */
    bw_snapshot snap;
    CHECK_OK(bw_breaker_snapshot(a, &snap));
    CHECK_INT(snap.state, BW_STATE_HALF_OPEN);
    CHECK_INT(snap.probes_completed, 0);
    CHECK_INT(snap.probes_in_flight, 1);
    CHECK_INT(snap.failed_rounds, 1);
    CHECK_OK(bw_settle(a, &probe, BW_SUCCESS));
    CHECK_INT(bw_breaker_state(a), BW_STATE_CLOSED);
    /* An operator hold in the store never expires, and binds every breaker. */
    bw_breaker *b = make("svc-stale", s, BW_STORE_STORED, 1, NULL, 0);
    CHECK_OK(bw_breaker_force_open(a));
    CHECK_INT(peek_at(s, "svc-stale").expires_at, BW_STORE_NEVER);
    CHECK_RC(call(b, BW_SUCCESS), BW_REJECTED);
    CHECK_OK(bw_breaker_reset(b));
    CHECK(peek_at(s, "svc-stale").expires_at != BW_STORE_NEVER); /* a reset's fence expires */
    CHECK_OK(call(a, BW_SUCCESS));
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_store_close(s);
}

/*
 * Jobs minutes apart (a cron job every 5 minutes) share a stored time window of
 * an hour: 60 buckets of a minute in the entry. Three failures 5 minutes apart
 * trip it; the window forgets a call an hour after its minute began; a day's
 * and 30 days' windows are stored too. Before, stored time windows stopped at
 * 74 s (one-second buckets).
 */
static bw_breaker *make_text(const char *name, bw_store *s, const char *text)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_parse(c, text, &e));
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_STORED, &e));
    bw_breaker *b = NULL;
    int rc = bw_breaker_new(name, c, &b, &e);
    if (rc != BW_OK)
        H_FAIL("bw_breaker_new(%s): %s: %s", text, bw_strerror(rc), e.message);
    bw_config_free(c);
    return b;
}

static void test_stored_long_time_window(void)
{
    clock_fresh(3600 * S); /* on a minute's boundary: minute 60 */
    bw_store *s = open_store();
    const char *cfg = "failure_rate=0.5 window=time:1h min_calls=3 wait=15m permitted_probes=1";
    bw_breaker *b = make_text("svc-hourly", s, cfg);
    if (!b) {
        bw_store_close(s);
        return;
    }
    CHECK_OK(call(b, BW_FAILURE));
    pump(5 * 60 * S);
    CHECK_OK(call(b, BW_FAILURE));
    CHECK_INT(bw_breaker_state(b), BW_STATE_CLOSED); /* 2 calls: below min_calls */
    pump(5 * 60 * S);
    CHECK_OK(call(b, BW_FAILURE)); /* each run a new process: another breaker, the same stored circuit */
    CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
    bw_breaker *other = make_text("svc-hourly", s, cfg);
    pump(5 * 60 * S);
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(other, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 10 * 60 * S);
    pump(10 * 60 * S);
    CHECK_OK(call(other, BW_SUCCESS)); /* the probe closes it, with a fresh window */
    CHECK_INT(bw_breaker_state(other), BW_STATE_CLOSED);
    /* Calls leave an hour after their minute began: a failure at minute 85, then successes. */
    pump(30 * S); /* 85.5 min */
    CHECK_OK(call(other, BW_FAILURE));
    pump(30 * 60 * S);
    CHECK_OK(call(other, BW_SUCCESS)); /* 115.5 min */
    bw_snapshot snap;
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK_INT(snap.total_calls, 2);
    CHECK_INT(snap.failed_calls, 1);
    pump(29 * 60 * S + 29 * S); /* 144 min 59 s: minute 144, the failure's minute 85 is still in */
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK_INT(snap.total_calls, 2);
    pump(1 * S); /* minute 145: minute 85 leaves, 59.5 minutes after the failure */
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK_INT(snap.total_calls, 1);
    CHECK_INT(snap.failed_calls, 0);
    bw_breaker_free(b);
    bw_breaker_free(other);
    /* A day's window and the longest one are stored as well, and trip. */
    static const char *const longer[] = {"window=time:1d min_calls=2", "window=time:30d min_calls=2"};
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "svc-long-%d", i);
        bw_breaker *d = make_text(name, s, longer[i]);
        if (!d)
            continue;
        CHECK_OK(call(d, BW_FAILURE));
        pump(6 * 3600 * S);
        CHECK_OK(call(d, BW_FAILURE));
        CHECK_INT(bw_breaker_state(d), BW_STATE_OPEN);
        bw_breaker_free(d);
    }
    bw_store_close(s);
}

/* ---- entries that are not what breakwater wrote ---- */

typedef struct poke {
    size_t at;
    uint64_t value;
    int bytes;
    uint32_t len; /* when not 0: the entry's claimed length instead */
} poke;

static bw_store_verdict poke_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now;
    const poke *k = arg;
    if (!cur)
        return BW_STORE_KEEP;
    bw__entry_copy(next, cur);
    for (int i = 0; i < k->bytes; i++)
        next->data[k->at + (size_t)i] = (unsigned char)(k->value >> (8 * i));
    if (k->len)
        next->len = k->len;
    return BW_STORE_PUT;
}

/* Entry offsets (shared.c's 12-byte header, then the machine image of machine/image.c). */
#define AT_IMAGE 12
#define AT_OPENED_AT (AT_IMAGE + 20)
#define AT_OPEN_WAIT (AT_IMAGE + 28)
#define AT_HO_SINCE (AT_IMAGE + 36)
#define AT_IN_FLIGHT (AT_IMAGE + 52)
#define AT_TOTAL (AT_IMAGE + 80)
#define AT_CUR_SEC (AT_IMAGE + 104)

/*
 * A store hands back an entry with a field no encoder writes (a window second
 * near INT64_MIN, which once made the window walk 2^63 seconds under the
 * store's lock; a negative wait; an instant at INT64_MIN; counts that disagree;
 * a length past the entry): the call returns, the circuit starts afresh,
 * BW_EVENT_STORE_CORRUPT fires once per bad entry, and the next calls count.
 */
static void test_stored_corrupt_entry(void)
{
    bw_store *s = open_store();
    recorder *log = rec_new();
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_TIME, 10, &e));
    CHECK_OK(bw_config_set_min_calls(c, 2, &e));
    CHECK_OK(bw_config_set_listener(c, BW_EVENTS_ALL, rec_listen, log));
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_STORED, &e));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("svc-corrupt", c, &b, &e));
    bw_config_free(c);
    const poke pokes[] = {{AT_CUR_SEC, (uint64_t)INT64_MIN + 1, 8, 0},
                          {AT_CUR_SEC, (uint64_t)INT64_MAX, 8, 0},
                          {AT_OPEN_WAIT, (uint64_t)-5, 8, 0},
                          {AT_OPENED_AT, (uint64_t)INT64_MIN, 8, 0},
                          {AT_HO_SINCE, (uint64_t)INT64_MAX, 8, 0},
                          {AT_IN_FLIGHT, 7, 4, 0},
                          {AT_TOTAL, 1000, 8, 0},
                          {0, 0, 0, BW_STORE_DATA_MAX},
                          {4, UINT64_MAX, 8, 0} /* born after the generation */};
    for (size_t i = 0; i < sizeof pokes / sizeof pokes[0]; i++) {
        CHECK_OK(call(b, BW_SUCCESS)); /* a CLOSED entry with one call */
        CHECK(peek_at(s, "svc-corrupt").found);
        CHECK_OK(bw_store_update(s, "svc-corrupt", poke_fn, (void *)&pokes[i], NULL));
        int64_t t0 = bw__mono_now();
        CHECK_OK(call(b, BW_FAILURE)); /* admitted by the intact state; its outcome finds the entry corrupt */
        CHECK(bw__mono_now() - t0 < 2 * S);
        CHECK_INT(rec_count_line(log, 0, "corrupt"), (int)i + 1);
        CHECK_INT(rec_count_line(log, 0, "degraded"), 0);
        CHECK(!peek_at(s, "svc-corrupt").found); /* replaced by a fresh circuit: nothing to keep */
        bw_snapshot snap;
        CHECK_OK(bw_breaker_snapshot(b, &snap));
        CHECK_INT(snap.total_calls, 0);
        CHECK_OK(call(b, BW_FAILURE));
        CHECK_OK(bw_breaker_snapshot(b, &snap));
        CHECK_INT(snap.total_calls, 1);
        CHECK_INT(rec_count_line(log, 0, "corrupt"), (int)i + 1); /* once */
        pump(20 * S);                                             /* the window empties */
        CHECK_OK(call(b, BW_SUCCESS));
    }
    bw_breaker_free(b);
    bw_store_close(s);
    rec_free(log);
}

/* ---- a store that reads but cannot write (a read-only file system, a full disk) ---- */

typedef struct rostore {
    bw_store *inner; /* first: wrapped_sweep reads it */
    atomic_int readonly;
    atomic_int refused; /* writes refused */
} rostore;

typedef struct ro_call {
    bw_store_update_fn fn;
    void *arg;
    int refused;
} ro_call;

static bw_store_verdict ro_guard(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    ro_call *c = arg;
    bw_store_verdict v = c->fn(c->arg, now, cur, next);
    if (v != BW_STORE_KEEP)
        c->refused = 1;
    return BW_STORE_KEEP;
}

static int ro_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    rostore *r = ctx;
    if (!atomic_load(&r->readonly))
        return bw_store_update(r->inner, name, fn, arg, err);
    ro_call c = {fn, arg, 0};
    int rc = bw_store_update(r->inner, name, ro_guard, &c, err);
    if (rc == BW_OK && c.refused) {
        atomic_fetch_add(&r->refused, 1);
        if (err)
            snprintf(err->message, sizeof err->message, "attempt to write a readonly database");
        return BW_ESYS;
    }
    return rc;
}

typedef struct ro_read {
    bw_store_entry *out;
    int *found;
    int64_t *now;
} ro_read;

static bw_store_verdict ro_copy(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)next;
    ro_read *r = arg;
    *r->now = now;
    *r->found = cur != NULL;
    if (cur)
        bw__entry_copy(r->out, cur);
    return BW_STORE_KEEP;
}

static int ro_readfn(void *ctx, const char *name, int64_t *now, bw_store_entry *out, int *found, bw_error *err)
{
    rostore *r = ctx;
    ro_read rr = {out, found, now};
    return bw_store_update(r->inner, name, ro_copy, &rr, err);
}

static const bw_store_ops ro_ops = {.version = BW_STORE_OPS_VERSION,
                                    .scheme = "readonly",
                                    .update = ro_update,
                                    .sweep = wrapped_sweep,
                                    .close = wrapped_close,
                                    .read = ro_readfn};

/*
 * Reads succeed, writes fail: the breaker degrades once and stays degraded (no
 * RECOVERED from a read), its retries of the store growing 2 s, 4 s, 8 s, 16 s
 * apart; once writes work again, the first write recovers it. The DEGRADED
 * event carries the store's error.
 */
static void test_stored_reads_without_writes(void)
{
    bw_store *inner = open_store();
    rostore r = {inner, 0, 0};
    bw_store *s = custom_store(&ro_ops, &r);
    recorder *log = rec_new();
    bw_breaker *b = make("svc-readonly", s, BW_STORE_STORED, 1, log, 0);
    CHECK_OK(call(b, BW_SUCCESS)); /* an entry, CLOSED: admissions are answered by a read */
    atomic_store(&r.readonly, 1);
    int refused_at[8], n = 0;
    for (int t = 0; t < 310; t++) { /* 31 s, a call every 100 ms */
        int before = atomic_load(&r.refused);
        CHECK_OK(call(b, BW_SUCCESS));
        if (atomic_load(&r.refused) > before && n < 8)
            refused_at[n++] = t;
        pump(100 * MS);
    }
    CHECK_INT(rec_count_line(log, 0, "degraded"), 1);
    CHECK_INT(rec_count_line(log, 0, "recovered"), 0);
    int d = rec_find(log, 0, "degraded");
    if (d >= 0) { /* the store's error, copied with the event */
        CHECK_INT(rec_nth(log, d)->status, BW_ESYS);
        CHECK_STR(rec_nth(log, d)->message, "attempt to write a readonly database");
    }
    CHECK_INT(n, 5); /* at 0, 2, 6, 14 and 30 s */
    if (n == 5) {
        CHECK_INT(refused_at[1] - refused_at[0], 20);
        CHECK_INT(refused_at[2] - refused_at[1], 40);
        CHECK_INT(refused_at[3] - refused_at[2], 80);
        CHECK_INT(refused_at[4] - refused_at[3], 160);
    }
    atomic_store(&r.readonly, 0);
    for (int t = 0; t < 330; t++) {
        CHECK_OK(call(b, BW_SUCCESS));
        pump(100 * MS);
    }
    CHECK_INT(rec_count_line(log, 0, "recovered"), 1);
    CHECK_INT(rec_count_line(log, 0, "degraded"), 1);
    bw_breaker_free(b);
    bw_store_close(s);
    bw_store_close(inner);
    rec_free(log);
}

/*
 * Lifetimes on the manual clock, at each boundary: an entry expires store_ttl
 * after the last write that recorded something or moved the circuit; a no-op
 * (an admission in CLOSED, a stale or ignored outcome, a snapshot) writes
 * nothing and renews nothing; an OPEN entry expires store_ttl after its wait
 * ends (opened_at + wait + store_ttl).
 */
static void test_stored_lifetimes(void)
{
    const int64_t ttl = 86400 * S;
    bw_store *s = open_store();
    bw_breaker *b = make("svc-life", s, BW_STORE_STORED, 1, NULL, 0);
    int64_t t0 = clock_now();
    CHECK_OK(call(b, BW_SUCCESS)); /* written at t0 */
    CHECK_INT(peek_at(s, "svc-life").expires_at, t0 + ttl);
    pump(ttl / 2 + 1 * S); /* past half the lifetime: once renewed here */
    bw_permit p;
    CHECK_OK(bw_acquire(b, &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_IGNORED));
    bw_snapshot snap;
    for (int i = 0; i < 3; i++)
        CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK_INT(snap.total_calls, 1);
    CHECK_INT(peek_at(s, "svc-life").expires_at, t0 + ttl); /* nothing renewed it */
    clock_to(t0 + ttl - 1);
    CHECK(peek_at(s, "svc-life").found);
    clock_to(t0 + ttl);
    CHECK(!peek_at(s, "svc-life").found); /* expired: a fresh circuit */
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK_INT(snap.total_calls, 0);

    /* A recorded outcome renews. */
    int64_t t1 = clock_now();
    CHECK_OK(call(b, BW_SUCCESS));
    pump(10 * S);
    CHECK_OK(call(b, BW_SUCCESS));
    CHECK_INT(peek_at(s, "svc-life").expires_at, t1 + 10 * S + ttl);

    /* OPEN: opened_at + wait (10 s) + ttl; a rejection writes nothing. */
    int64_t t2 = clock_now();
    CHECK_OK(call(b, BW_FAILURE));
    CHECK_OK(call(b, BW_FAILURE)); /* 2 of 4 failed: OPEN at t2 */
    CHECK_RC(call(b, BW_SUCCESS), BW_REJECTED);
    CHECK_INT(peek_at(s, "svc-life").expires_at, t2 + 10 * S + ttl);
    pump(20 * S); /* the wait is over; nobody asks */
    CHECK_INT(peek_at(s, "svc-life").expires_at, t2 + 10 * S + ttl);
    clock_to(t2 + 10 * S + ttl - 1);
    CHECK(peek_at(s, "svc-life").found);
    clock_to(t2 + 10 * S + ttl);
    CHECK(!peek_at(s, "svc-life").found);
    CHECK_OK(call(b, BW_SUCCESS)); /* a fresh CLOSED circuit */
    bw_breaker_free(b);
    bw_store_close(s);
}

/*
 * A degraded breaker whose fleet circuit never needs a write (an operator hold
 * never expires, and admissions or rejections record nothing) still recovers:
 * its retry rewrites the entry unchanged, lifetime included.
 */
static void test_stored_hold_recovers(void)
{
    static const int holds[] = {BW_STATE_DISABLED, BW_STATE_FORCED_OPEN};
    for (int h = 0; h < 2; h++) {
        bw_store *inner = open_store();
        failing_store f;
        bw_store *s = failing_wrap(&f, inner);
        recorder *log = rec_new();
        bw_breaker *b = make("svc-hold", s, BW_STORE_STORED, 1, log, 0);
        if (holds[h] == BW_STATE_DISABLED)
            CHECK_OK(bw_breaker_disable(b));
        else
            CHECK_OK(bw_breaker_force_open(b));
        int64_t expires = peek_at(inner, "svc-hold").expires_at;
        CHECK_INT(expires, BW_STORE_NEVER);
        failing_set(&f, 1);
        call(b, BW_SUCCESS); /* degrades */
        CHECK_INT(rec_count_line(log, 0, "degraded"), 1);
        failing_set(&f, 0);
        for (int t = 0; t < 40; t++) { /* 4 s: past the 2 s retry */
            call(b, BW_SUCCESS);
            pump(100 * MS);
        }
        CHECK_INT(rec_count_line(log, 0, "recovered"), 1);
        CHECK_INT(rec_count_line(log, 0, "degraded"), 1);
        CHECK_INT(peek_at(inner, "svc-hold").expires_at, expires);
        CHECK_INT(bw_breaker_state(b), holds[h]);
        bw_breaker_free(b);
        bw_store_close(s);
        bw_store_close(inner);
        rec_free(log);
    }
}

/*
 * A stored breaker's verb moves the fleet's circuit: one STATE_CHANGE (and a
 * reset's one RESET) to the caller, counted once, whether its own local
 * circuit moved too or not; while the store fails, the local circuit's move
 * is the one told (after the DEGRADED).
 */
static void test_stored_verb_events(void)
{
    bw_store *inner = open_store();
    failing_store f;
    bw_store *s = failing_wrap(&f, inner);
    recorder *log = rec_new();
    bw_breaker *b = make("svc-verbs", s, BW_STORE_STORED, 1, log, 0);
    static const int verbs[] = {BW_STATE_FORCED_OPEN, BW_STATE_DISABLED, BW_STATE_METRICS_ONLY, BW_STATE_CLOSED};
    for (int i = 0; i < 4; i++) {
        int from = bw_breaker_state(b);
        CHECK_OK(bw_breaker_apply(b, i == 3 ? BW_VERB_RESET : (bw_verb)(i + 1)));
        CHECK_INT(rec_changes_to(log, 0, verbs[i]), 1);
        CHECK_INT(rec_count_line(log, 0, "reset"), i == 3);
        bw_counters k;
        CHECK_OK(bw_breaker_counters(b, &k));
        CHECK_INT(k.transitions[from][verbs[i]], 1);
    }
    CHECK_INT(rec_count(log), 5); /* four changes and the reset */
    failing_set(&f, 1);
    rec_clear(log);
    CHECK_OK(bw_breaker_force_open(b)); /* the store fails: the local circuit's move, told once */
    CHECK_STR(rec_since(log, 0), "degraded, state closed->forced_open");
    CHECK_RC(call(b, BW_SUCCESS), BW_REJECTED); /* the local circuit serves */
    CHECK_INT(shared_snapshot(inner, "svc-verbs").state, BW_STATE_CLOSED);
    bw_breaker_free(b);
    bw_store_close(s);
    bw_store_close(inner);
    rec_free(log);
}

/* ---- a store that claims more bytes than an entry holds ---- */

typedef struct liar {
    bw_store_entry *cur; /* malloc'd at its exact size, so that reading past it is a sanitizer report */
    int have;
    uint32_t claim;
} liar;

static int liar_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    (void)name;
    (void)err;
    liar *l = ctx;
    bw_store_entry next;
    uint32_t real = l->cur->len;
    if (l->have)
        l->cur->len = l->claim;
    bw_store_verdict v = fn(arg, 1000 * S, l->have ? l->cur : NULL, &next);
    l->cur->len = real;
    if (v == BW_STORE_PUT) {
        bw__entry_copy(l->cur, &next);
        l->have = 1;
    } else if (v == BW_STORE_DELETE) {
        l->have = 0;
    }
    return BW_OK;
}

static int liar_read(void *ctx, const char *name, int64_t *now, bw_store_entry *out, int *found, bw_error *err)
{
    (void)name;
    (void)err;
    liar *l = ctx;
    *now = 1000 * S;
    *found = l->have;
    if (l->have) {
        bw__entry_copy(out, l->cur);
        out->len = l->claim;
    }
    return BW_OK;
}

static const bw_store_ops liar_ops = {.version = BW_STORE_OPS_VERSION,
                                      .scheme = "liar",
                                      .update = liar_update,
                                      .sweep = nothing_swept,
                                      .close = wrapped_close,
                                      .read = liar_read};

/* An entry whose length says more than BW_STORE_DATA_MAX is corrupt, never read past its end. */
static void test_stored_entry_too_long(void)
{
    static const uint32_t claims[] = {BW_STORE_DATA_MAX + 1, UINT32_MAX};
    for (int i = 0; i < 2; i++) {
        liar l = {malloc(sizeof(bw_store_entry)), 0, claims[i]};
        bw_store *s = custom_store(&liar_ops, &l);
        recorder *log = rec_new();
        bw_breaker *b = make("svc-liar", s, BW_STORE_STORED, 1, log, 0);
        CHECK_OK(call(b, BW_FAILURE)); /* the first write: an entry (whose length the store then lies about) */
        CHECK(l.have);
        CHECK_OK(call(b, BW_FAILURE));
        CHECK(rec_count_line(log, 0, "corrupt") >= 1);
        bw_snapshot snap;
        CHECK_OK(bw_breaker_snapshot(b, &snap));
        CHECK_INT(snap.total_calls, 0); /* read as corrupt: a fresh circuit */
        bw_breaker_free(b);
        bw_store_close(s);
        free(l.cur);
        rec_free(log);
    }
}

static void test_stored_store_failure_falls_back(void)
{
    bw_store *inner = open_store();
    failing_store f;
    bw_store *s = failing_wrap(&f, inner);
    recorder *log = rec_new();
    bw_breaker *a = make("svc-flaky", s, BW_STORE_STORED, 1, log, 0);
    CHECK_OK(call(a, BW_SUCCESS));
    bw_permit inflight;
    CHECK_OK(bw_acquire(a, &inflight, NULL)); /* admitted by the store, settled during the outage */
    failing_set(&f, 1);
    int before = atomic_load(&f.calls);
    CHECK_OK(call(a, BW_FAILURE)); /* the store fails: the local circuit admits */
    CHECK_INT(rec_count_line(log, 0, "degraded"), 1);
    int d = rec_find(log, 0, "degraded");
    if (d >= 0)
        CHECK_STR(rec_nth(log, d)->message, FAILING_MESSAGE);
    CHECK_OK(bw_settle(a, &inflight, BW_FAILURE)); /* counts locally: 2 of 2 failed, trips */
    CHECK_INT(atomic_load(&f.calls) - before, 1);  /* not retried before store_retry (2 s) */
    CHECK_RC(call(a, BW_SUCCESS), BW_REJECTED);    /* the local circuit tripped on its own */
    pump(2 * S);
    failing_set(&f, 0);
    CHECK_OK(call(a, BW_SUCCESS)); /* the store again: its circuit was never tripped */
    CHECK_INT(rec_count_line(log, 0, "recovered"), 1);
    bw_breaker_free(a);
    bw_store_close(s);
    bw_store_close(inner);
    rec_free(log);
}

/*
 * An update that lost every race to other writers (BW_ECONFLICT) is
 * contention, not a failing store: the write is dropped (an event with that
 * status), the local circuit serves that call, and the breaker is not
 * degraded: the next call goes to the store again, not store_retry later.
 */
static void test_stored_contention_is_no_failure(void)
{
    bw_store *inner = open_store();
    failing_store f;
    bw_store *s = failing_wrap(&f, inner);
    recorder *log = rec_new();
    bw_breaker *a = make("svc-contended", s, BW_STORE_STORED, 1, log, 0);
    CHECK_OK(call(a, BW_SUCCESS));
    failing_set_code(&f, BW_ECONFLICT);
    int before = atomic_load(&f.calls);
    CHECK_OK(call(a, BW_SUCCESS)); /* its acquire's update loses: the local circuit admits it, and counts it */
    CHECK_OK(call(a, BW_SUCCESS));
    CHECK_INT(atomic_load(&f.calls) - before, 2); /* every call still asks the store: no store_retry wait */
    CHECK_INT(rec_count_line(log, 0, "degraded"), 0);
    CHECK_INT(rec_count_line(log, 0, "dropped"), 2);
    int d = rec_find(log, 0, "dropped");
    if (d >= 0) {
        CHECK_INT(rec_nth(log, d)->status, BW_ECONFLICT);
        CHECK_STR(rec_nth(log, d)->message, FAILING_MESSAGE);
    }
    failing_set_code(&f, BW_OK);
    CHECK_OK(call(a, BW_FAILURE)); /* the store serves again: its circuit trips (1 of its 2 calls failed) */
    bw_snapshot snap;
    CHECK_OK(bw_breaker_snapshot(a, &snap));
    CHECK_INT(snap.shared, 1);
    CHECK_INT(snap.state, BW_STATE_OPEN);
    CHECK_INT(rec_count_line(log, 0, "recovered"), 0); /* it never degraded */
    bw_breaker_free(a);
    bw_store_close(s);
    bw_store_close(inner);
    rec_free(log);
}

/* ---- coordinated mode ---- */

static void test_coordinated_trip_propagates(void)
{
    bw_store *s = open_store();
    recorder *la = rec_new(), *lb = rec_new();
    bw_breaker *a = make("svc-coord", s, BW_STORE_COORDINATED, 2, la, 0);
    bw_breaker *b = make("svc-coord", s, BW_STORE_COORDINATED, 2, lb, 0);
    pump(0); /* first polls: nothing shared yet */
    CHECK_OK(call(a, BW_FAILURE));
    CHECK_OK(call(a, BW_FAILURE)); /* a trips locally: the trip is queued */
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    CHECK_INT(bw_breaker_state(b), BW_STATE_CLOSED);
    CHECK_OK(call(b, BW_SUCCESS)); /* nothing written yet: b's CLOSED costs no store call */
    pump(0);                       /* the lane writes the trip */
    CHECK_INT(shared_snapshot(s, "svc-coord").state, BW_STATE_OPEN);
    CHECK_INT(bw_breaker_state(b), BW_STATE_CLOSED); /* b learns it at its next poll */
    pump(1 * S);
    CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
    CHECK_INT(rec_changes(lb, "closed->open"), 1);
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 9 * S); /* the shared wait, not a local one */
    /* The follower's snapshot tells what its callers are told: the shared circuit. */
    bw_snapshot fs, shs = shared_snapshot(s, "svc-coord");
    CHECK_OK(bw_breaker_snapshot(b, &fs));
    CHECK_INT(fs.state, BW_STATE_OPEN);
    CHECK_INT(fs.shared, 1);
    CHECK_INT(fs.retry_after_ns, 9 * S);
    CHECK_INT(fs.open_wait_ns, 10 * S);
    CHECK(fs.generation == shs.generation && fs.generation != 0);
    CHECK_INT(fs.total_calls, 1);          /* its own window: the one success */
    CHECK_OK(bw_breaker_snapshot(a, &fs)); /* the process that tripped: the shared circuit too */
    CHECK_INT(fs.shared, 1);
    CHECK_INT(fs.retry_after_ns, 9 * S);
    CHECK(fs.generation == shs.generation);
    /* The global budget: 2 probes between both breakers. */
    pump(9 * S);
    bw_permit pa, pb;
    CHECK_OK(bw_acquire(a, &pa, NULL));
    CHECK_OK(bw_acquire(b, &pb, NULL));
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_HALF_OPEN);
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    bw_snapshot sh = shared_snapshot(s, "svc-coord");
    CHECK_INT(sh.state, BW_STATE_HALF_OPEN);
    CHECK_INT(sh.probes_admitted, 2);
    CHECK_OK(bw_settle(a, &pa, BW_SUCCESS));
    CHECK_OK(bw_settle(b, &pb, BW_SUCCESS));
    pump(0); /* both outcomes written: the round passes, the shared circuit closes */
    CHECK(!peek_at(s, "svc-coord").found);
    pump(1 * S); /* polls: both follow, and a's own OPEN is cut short */
    CHECK_INT(bw_breaker_state(a), BW_STATE_CLOSED);
    CHECK_INT(bw_breaker_state(b), BW_STATE_CLOSED);
    CHECK_OK(call(a, BW_SUCCESS));
    CHECK_OK(call(b, BW_SUCCESS));
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_store_close(s);
    rec_free(la);
    rec_free(lb);
}

/* ---- quorum tripping ---- */

/* A coordinated breaker as make() makes it, with store_quorum = k. */
static bw_breaker *make_quorum(const char *name, bw_store *s, int k, recorder *log)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 4, &e));
    CHECK_OK(bw_config_set_min_calls(c, 2, &e));
    CHECK_OK(bw_config_set_wait(c, 10 * S, &e));
    CHECK_OK(bw_config_set_wait_multiplier(c, 2, &e));
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 5 * S, &e));
    CHECK_OK(bw_config_set_store_poll(c, 1 * S, &e));
    CHECK_OK(bw_config_set_store_quorum(c, k, &e));
    if (log)
        CHECK_OK(bw_config_set_listener(c, BW_EVENTS_ALL, rec_listen, log));
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_COORDINATED, &e));
    bw_breaker *b = NULL;
    int rc = bw_breaker_new(name, c, &b, &e);
    if (rc != BW_OK)
        H_FAIL("bw_breaker_new: %s: %s", bw_strerror(rc), e.message);
    bw_config_free(c);
    return b;
}

/* A local trip of another instance (as its lane writes it), toward quorum k: the shared state after it. */
static int vote_as(bw_store *s, const char *name, uint64_t instance, int k, int *votes)
{
    bw__mcfg mc;
    shared_cfg(&mc);
    bw__shared_op op;
    memset(&op, 0, sizeof op);
    op.op = BW__OP_TRIP;
    op.cfg = &mc;
    op.ttl = 86400 * S;
    op.quorum = (uint32_t)k;
    op.instance = instance;
    CHECK_OK(bw_store_update(s, name, bw__shared_apply, &op, NULL));
    if (votes)
        *votes = op.votes;
    return op.after;
}

/* The raw entry of a circuit (found or not). */
typedef struct raw {
    int found;
    bw_store_entry e;
} raw;

static bw_store_verdict raw_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now;
    (void)next;
    raw *r = arg;
    r->found = cur != NULL;
    if (cur)
        bw__entry_copy(&r->e, cur);
    return BW_STORE_KEEP;
}

static bw_store_verdict put_raw_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now;
    (void)cur;
    bw__entry_copy(next, &((raw *)arg)->e);
    return BW_STORE_PUT;
}

/*
 * store_quorum = 2: a local trip is a vote; the fleet's circuit opens at the
 * second distinct instance to trip within one open wait (10 s), not before;
 * this process's breakers are one instance however many trip; a vote older
 * than one wait no longer counts; and an entry listing one instance twice is
 * corrupt (replaced).
 */
static void test_coordinated_quorum(void)
{
    bw_store *s = open_store();
    recorder *lb = rec_new();
    bw_breaker *a = make_quorum("svc-quorum", s, 2, NULL);
    bw_breaker *b = make_quorum("svc-quorum", s, 2, lb);
    pump(0);
    CHECK_OK(call(a, BW_FAILURE));
    CHECK_OK(call(a, BW_FAILURE)); /* a trips: OPEN here, and its vote is queued */
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    pump(0); /* the lane writes the vote */
    CHECK_INT(shared_snapshot(s, "svc-quorum").state, BW_STATE_CLOSED);
    CHECK(peek_at(s, "svc-quorum").found); /* the entry holds the vote */
    pump(1 * S);
    CHECK_INT(bw_breaker_state(b), BW_STATE_CLOSED); /* the others keep serving */
    CHECK_OK(call(b, BW_SUCCESS));
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    /* b is the same instance (this process): its trip is not a second vote. */
    CHECK_OK(call(b, BW_FAILURE)); /* 1 failure of 2 calls: b trips */
    CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
    pump(0);
    CHECK_INT(shared_snapshot(s, "svc-quorum").state, BW_STATE_CLOSED);
    /* A second instance trips within the wait: the fleet's circuit opens. */
    int votes = -1;
    CHECK_INT(vote_as(s, "svc-quorum", 0x5eed, 2, &votes), BW_STATE_OPEN);
    CHECK_INT(votes, 0);
    bw_breaker *c = make_quorum("svc-quorum", s, 2, NULL); /* a fresh breaker follows it at its first poll */
    pump(1 * S);
    CHECK_INT(bw_breaker_state(c), BW_STATE_OPEN);
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(c, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK(why.retry_after_ns > 0 && why.retry_after_ns <= 10 * S);
    bw_breaker_free(c);

    /* Votes expire after one wait: X at 0 s, Y at 11 s does not open; Z at 12 s does (with Y). */
    CHECK_INT(vote_as(s, "svc-q2", 0xa, 3, &votes), BW_STATE_CLOSED);
    CHECK_INT(votes, 1);
    CHECK_INT(vote_as(s, "svc-q2", 0xa, 3, &votes), BW_STATE_CLOSED); /* the same instance again: still one */
    CHECK_INT(votes, 1);
    pump(11 * S);
    CHECK_INT(vote_as(s, "svc-q2", 0xb, 3, &votes), BW_STATE_CLOSED);
    CHECK_INT(votes, 1); /* 0xa's is older than the wait: dropped */
    pump(1 * S);
    CHECK_INT(vote_as(s, "svc-q2", 0xc, 3, &votes), BW_STATE_CLOSED);
    CHECK_INT(votes, 2);
    CHECK_INT(vote_as(s, "svc-q2", 0xd, 3, &votes), BW_STATE_OPEN); /* b, c, d within 10 s */
    CHECK_INT(votes, 0);

    /* One wait exactly is still within it; a vote dated further ahead than a wait is stale. */
    CHECK_INT(vote_as(s, "svc-q4", 0x1, 2, &votes), BW_STATE_CLOSED);
    pump(10 * S);
    CHECK_INT(vote_as(s, "svc-q4", 0x2, 2, &votes), BW_STATE_OPEN);
    /* The largest quorum: 15 votes are kept, the 16th distinct instance trips. */
    for (uint64_t i = 1; i <= BW_STORE_QUORUM_MAX - 1; i++) {
        CHECK_INT(vote_as(s, "svc-q16", 0x100 + i, BW_STORE_QUORUM_MAX, &votes), BW_STATE_CLOSED);
        CHECK_INT(votes, (int)i);
    }
    CHECK_INT(vote_as(s, "svc-q16", 0x1ff, BW_STORE_QUORUM_MAX, &votes), BW_STATE_OPEN);

    /* Untrusted: an entry with one instance listed twice is corrupt, and is replaced. */
    CHECK_INT(vote_as(s, "svc-q3", 0xe, 3, &votes), BW_STATE_CLOSED);
    raw r;
    memset(&r, 0, sizeof r);
    CHECK_OK(bw_store_update(s, "svc-q3", raw_fn, &r, NULL));
    CHECK(r.found && r.e.data[2] == 1 && r.e.len + 16 <= BW_STORE_DATA_MAX);
    if (r.found && r.e.len >= 16 && r.e.len + 16 <= BW_STORE_DATA_MAX) {
        memcpy(r.e.data + r.e.len, r.e.data + r.e.len - 16, 16);
        r.e.len += 16;
        r.e.data[2] = 2;
        CHECK_OK(bw_store_update(s, "svc-q3", put_raw_fn, &r, NULL));
        bw__mcfg mc;
        shared_cfg(&mc);
        bw__shared_op op;
        memset(&op, 0, sizeof op);
        op.op = BW__OP_TRIP;
        op.cfg = &mc;
        op.ttl = 86400 * S;
        op.quorum = 3;
        op.instance = 0xf;
        CHECK_OK(bw_store_update(s, "svc-q3", bw__shared_apply, &op, NULL));
        CHECK_INT(op.corrupt, 1);
        CHECK_INT(op.votes, 1); /* a fresh circuit with 0xf's vote alone: the duplicate's 0xe is gone */
        CHECK_INT(op.after, BW_STATE_CLOSED);
    }
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_store_close(s);
    rec_free(lb);
}

/* ---- keyed circuits through a store ---- */

/*
 * Keyed circuits of a stored breaker live in the store under "NAME KEY": two
 * breakers of one name (two processes) share each key's circuit, keys stay
 * apart, and neither touches the breaker's own circuit nor another breaker's.
 */
static void test_keyed_stored(void)
{
    bw_store *s = open_store();
    bw_breaker *a = make("svc-k", s, BW_STORE_STORED, 1, NULL, 0);
    bw_breaker *b = make("svc-k", s, BW_STORE_STORED, 1, NULL, 0);
    bw_breaker *other = make("svc-k2", s, BW_STORE_STORED, 1, NULL, 0);
    bw_permit p;
    for (int i = 0; i < 2; i++) {
        CHECK_OK(bw_keyed_acquire(a, "tenant-1", &p, NULL));
        CHECK_OK(bw_settle(a, &p, BW_FAILURE));
    }
    CHECK(peek_at(s, "svc-k tenant-1").found);
    CHECK(!peek_at(s, "svc-k").found);
    bw_rejection why;
    CHECK_RC(bw_keyed_acquire(b, "tenant-1", &p, &why), BW_REJECTED); /* b's circuit of the key: the same one */
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 10 * S);
    CHECK_OK(bw_keyed_acquire(b, "tenant-2", &p, NULL)); /* another key: its own circuit */
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK_OK(call(a, BW_SUCCESS)); /* the breaker's own circuit */
    CHECK_OK(call(b, BW_SUCCESS));
    CHECK_OK(bw_keyed_acquire(other, "tenant-1", &p, NULL)); /* another breaker's key */
    CHECK_OK(bw_settle(other, &p, BW_SUCCESS));
    bw_breaker *c = bw_keyed_find(b, "tenant-1");
    CHECK(c != NULL);
    if (c) {
        CHECK_INT(bw_breaker_state(c), BW_STATE_OPEN);
        CHECK_STR(bw_breaker_key(c), "tenant-1");
        bw_keyed_release(c);
    }
    /* An operator verb on one process's keyed circuit goes to the fleet's circuit of that key. */
    CHECK_OK(bw_keyed_get(a, "tenant-2", &c, NULL));
    CHECK_OK(bw_breaker_force_open(c));
    bw_keyed_release(c);
    CHECK_RC(bw_keyed_acquire(b, "tenant-2", &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_FORCED_OPEN);
    CHECK_INT(peek_at(s, "svc-k tenant-2").expires_at, BW_STORE_NEVER);
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_breaker_free(other);
    bw_store_close(s);
}

/* A stored keyed breaker for the flood: make()'s rules, `window`, keyed_idle `idle`, 16 circuits resident. */
static bw_breaker *make_flooded(const char *name, bw_store *s, const char *window, int64_t idle)
{
    bw_config *c = bw_config_new();
    bw_error e;
    char text[200];
    snprintf(text, sizeof text, "window=%s min_calls=2 failure_rate=0.6 wait=10s keyed_maxsize=16 keyed_limit=32",
             window);
    CHECK_OK(bw_config_parse(c, text, &e));
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_keyed_idle(c, idle, &e));
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_STORED, &e));
    bw_breaker *b = NULL;
    int rc = bw_breaker_new(name, c, &b, &e);
    if (rc != BW_OK)
        H_FAIL("bw_breaker_new: %s: %s", bw_strerror(rc), e.message);
    bw_config_free(c);
    return b;
}

/* The live entries among the flood's keys "NAME key-0" .. "NAME key-(n-1)". */
static int live_keys(bw_store *s, const char *name, int n)
{
    int live = 0;
    for (int i = 0; i < n; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s key-%d", name, i);
        live += peek_at(s, k).found;
    }
    return live;
}

/*
 * A flood of new keys that only succeed (stored mode) does not fill the store:
 * a quiet keyed entry lives keyed_idle after its last write (at most its time
 * window), so at any time only the keys written within the last keyed_idle are
 * live. Before, each lived store_ttl (a day): 1,500 keys 100 ms apart left
 * 1,500 entries (and filled shm:'s 1,024 slots). A key that failed keeps its
 * entry for store_ttl, as does the breaker's own circuit; keyed_idle 0 keeps
 * no quiet entry at all.
 */
static void test_keyed_stored_flood(void)
{
    const int n = 1500;
    const int64_t idle = 5 * S, step = 100 * MS, ttl = 86400 * S;
    bw_store *s = open_store();
    bw_breaker *b = make_flooded("svc-flood", s, "count:4", idle);
    bw_permit p;
    CHECK_OK(bw_keyed_acquire(b, "bad", &p, NULL));
    int64_t t_bad = clock_now();
    CHECK_OK(bw_settle(b, &p, BW_FAILURE));
    CHECK_OK(call(b, BW_SUCCESS)); /* the breaker's own circuit */
    int most = 0;
    for (int i = 0; i < n; i++) {
        char k[32];
        snprintf(k, sizeof k, "key-%d", i);
        if (i)
            pump(step);
        int rc = bw_keyed_acquire(b, k, &p, NULL);
        CHECK_OK(rc);
        if (rc == BW_OK)
            CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
        if (i == 0)
            CHECK_INT(peek_at(s, "svc-flood key-0").expires_at, clock_now() + idle);
        if (i % 250 == 249) {
            int live = live_keys(s, "svc-flood", i + 1);
            most = live > most ? live : most;
        }
    }
    /* Written at most idle ago: idle / step keys (the one written exactly idle ago has expired). */
    CHECK_INT(most, (int)(idle / step));
    CHECK_INT(live_keys(s, "svc-flood", n), (int)(idle / step));
    pump(idle);
    CHECK_INT(live_keys(s, "svc-flood", n), 0);
    CHECK_INT(peek_at(s, "svc-flood bad").expires_at, t_bad + ttl); /* a failure: history, kept */
    CHECK(peek_at(s, "svc-flood").found);                           /* the breaker's own circuit */
    /* A failure makes a quiet key's entry long-lived; the successes that push it out make it short again. */
    CHECK_OK(bw_keyed_acquire(b, "key-1", &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_FAILURE));
    CHECK_INT(peek_at(s, "svc-flood key-1").expires_at, clock_now() + ttl);
    for (int i = 0; i < 4; i++) {
        CHECK_OK(bw_keyed_acquire(b, "key-1", &p, NULL));
        CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    }
    CHECK_INT(peek_at(s, "svc-flood key-1").expires_at, clock_now() + idle);
    bw_breaker_free(b);

    /* A time window of 2 s: its successes matter 2 s, and so does their entry. */
    b = make_flooded("svc-flood-t", s, "time:2s", idle);
    CHECK_OK(bw_keyed_acquire(b, "key-0", &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK_INT(peek_at(s, "svc-flood-t key-0").expires_at, clock_now() + 2 * S);
    bw_breaker_free(b);

    /* keyed_idle 0: a quiet circuit is forgotten at once, and keeps no entry; a failure still does. */
    b = make_flooded("svc-flood-0", s, "count:4", 0);
    for (int i = 0; i < 3; i++) {
        char k[32];
        snprintf(k, sizeof k, "key-%d", i);
        CHECK_OK(bw_keyed_acquire(b, k, &p, NULL));
        CHECK_OK(bw_settle(b, &p, i == 2 ? BW_FAILURE : BW_SUCCESS));
    }
    CHECK_INT(live_keys(s, "svc-flood-0", 3), 1);
    CHECK(peek_at(s, "svc-flood-0 key-2").found);
    bw_breaker_free(b);
    bw_store_close(s);
}

/* Keyed circuits of coordinated breakers: a key's trip reaches the other process's circuit of that key only. */
static void test_keyed_coordinated(void)
{
    bw_store *s = open_store();
    recorder *lb = rec_new();
    bw_breaker *a = make("svc-kc", s, BW_STORE_COORDINATED, 1, NULL, 0);
    bw_breaker *b = make("svc-kc", s, BW_STORE_COORDINATED, 1, lb, 0);
    bw_permit p;
    CHECK_OK(bw_keyed_acquire(b, "host-1", &p, NULL)); /* b's circuits exist before the trip */
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK_OK(bw_keyed_acquire(b, "host-2", &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    pump(0);
    for (int i = 0; i < 2; i++) {
        CHECK_OK(bw_keyed_acquire(a, "host-1", &p, NULL));
        CHECK_OK(bw_settle(a, &p, BW_FAILURE));
    }
    pump(0); /* the trip is written under "svc-kc host-1" */
    CHECK_INT(shared_snapshot(s, "svc-kc host-1").state, BW_STATE_OPEN);
    CHECK_INT(shared_snapshot(s, "svc-kc").state, BW_STATE_CLOSED);
    pump(1 * S); /* b's circuits poll */
    bw_rejection why;
    CHECK_RC(bw_keyed_acquire(b, "host-1", &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_OK(bw_keyed_acquire(b, "host-2", &p, NULL));
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK_OK(call(b, BW_SUCCESS));
    CHECK_INT(rec_changes(lb, "closed->open"), 1); /* host-1's circuit, and nothing else */
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_store_close(s);
    rec_free(lb);
}

/* A breaker named `name` with store_poll `poll`, otherwise make()'s. */
static bw_breaker *make_polled(const char *name, bw_store *s, int64_t poll)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 4, &e));
    CHECK_OK(bw_config_set_min_calls(c, 2, &e));
    CHECK_OK(bw_config_set_wait(c, 10 * S, &e));
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 5 * S, &e));
    CHECK_OK(bw_config_set_store_poll(c, poll, &e));
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_COORDINATED, &e));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new(name, c, &b, &e));
    bw_config_free(c);
    return b;
}

/*
 * Many circuits on one lane: the polls of an idle fleet read and never write,
 * in one batched read per tick; writes queued by some circuits run in the same
 * tick as the others' polls; each circuit polls on its own interval's grid.
 */
static void test_coordinated_lane_batches(void)
{
    enum { N = 40 };
    bw_store *real = open_store();
    counting_store cs;
    bw_store *s = counting_wrap(&cs, real);
    CHECK_OK(bw_store_set_clock(s, clk));
    bw_breaker *b[N];
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "lane-%d", i % (N / 2)); /* two breakers per circuit */
        b[i] = make_polled(name, s, i < N / 2 ? 1 * S : 3 * S);
    }
    pump(0); /* everyone's first poll: one tick */
    CHECK_INT(atomic_load(&cs.updates), 0);
    CHECK_INT(atomic_load(&cs.reads), 1);
    for (int t = 0; t < 6; t++)
        pump(1 * S); /* six ticks of the 1 s grid, two of them the 3 s grid's too */
    CHECK_INT(atomic_load(&cs.updates), 0);
    CHECK_INT(atomic_load(&cs.reads), 7);
    /* Circuits 0 and 1 trip in breaker 0 and 1; breakers 20 and 21 (same circuits, 3 s polls) learn it at the
       next 3 s tick; every other circuit stays closed, and still nothing but the two trips is written. */
    CHECK_OK(call(b[0], BW_FAILURE));
    CHECK_OK(call(b[0], BW_FAILURE));
    CHECK_OK(call(b[1], BW_FAILURE));
    CHECK_OK(call(b[1], BW_FAILURE));
    pump(0);
    CHECK_INT(atomic_load(&cs.updates), 2);
    CHECK_INT(bw_breaker_state(b[20]), BW_STATE_CLOSED);
    CHECK_INT(bw_breaker_state(b[21]), BW_STATE_CLOSED);
    int64_t to_grid = 3 * S - clock_now() % (3 * S);
    pump(to_grid - 1);
    CHECK_INT(bw_breaker_state(b[20]), BW_STATE_CLOSED);
    pump(1);
    CHECK_INT(bw_breaker_state(b[20]), BW_STATE_OPEN);
    CHECK_INT(bw_breaker_state(b[21]), BW_STATE_OPEN);
    CHECK_INT(bw_breaker_state(b[22]), BW_STATE_CLOSED);
    CHECK_INT(bw_breaker_state(b[2]), BW_STATE_CLOSED);
    CHECK_INT(atomic_load(&cs.updates), 2);
    /* The shared wait ends: the poll after it advances each circuit to HALF_OPEN. Both breakers of a circuit poll
       in that one tick, from one batched read: each runs the update, the second finds it done. */
    pump(10 * S);
    CHECK_INT(atomic_load(&cs.updates), 2 + 2 * 2);
    CHECK_INT(shared_snapshot(real, "lane-0").state, BW_STATE_HALF_OPEN);
    /* A write queued by a circuit whose own poll is not due runs in the tick of the others' polls, and they read
       it: b[22] (3 s grid) trips circuit lane-2 just before a 1 s tick that is no 3 s tick; b[2] sees it there. */
    int64_t to_tick = S - clock_now() % S;
    if ((clock_now() + to_tick) % (3 * S) == 0) {
        pump(to_tick);
        to_tick = S;
    }
    CHECK_OK(call(b[22], BW_FAILURE));
    CHECK_OK(call(b[22], BW_FAILURE));
    CHECK_INT(bw_breaker_state(b[2]), BW_STATE_CLOSED);
    pump(to_tick);
    CHECK_INT(bw_breaker_state(b[2]), BW_STATE_OPEN);
    CHECK_INT(bw_breaker_state(b[3]), BW_STATE_CLOSED);
    pump(3 * S); /* everyone polled again since: every circuit still on the lane */
    CHECK_INT(bw_breaker_state(b[22]), BW_STATE_OPEN);
    CHECK_INT(bw_breaker_state(b[23]), BW_STATE_CLOSED);
    for (int i = 0; i < N; i++)
        bw_breaker_free(b[i]);
    bw_store_close(s);
    bw_store_close(real);
}

static void test_coordinated_late_probe_and_expired_lease(void)
{
    bw_store *s = open_store();
    bw_breaker *a = make("svc-late", s, BW_STORE_COORDINATED, 1, NULL, 0);
    bw_breaker *b = make("svc-late", s, BW_STORE_COORDINATED, 1, NULL, 0);
    pump(0);
    CHECK_OK(call(a, BW_FAILURE));
    CHECK_OK(call(a, BW_FAILURE));
    pump(0);
    pump(10 * S); /* polls move the shared OPEN to HALF_OPEN */
    bw_permit old;
    CHECK_OK(bw_acquire(b, &old, NULL)); /* b leases round 1's probe, and never settles in time */
    pump(5 * S);                         /* the lease expires with its round: a failed round */
    bw_snapshot sh = shared_snapshot(s, "svc-late");
    CHECK_INT(sh.state, BW_STATE_OPEN);
    CHECK_INT(sh.failed_rounds, 1);
    CHECK_INT(sh.open_wait_ns, 20 * S); /* the fleet's backoff */
    pump(1 * S);
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 19 * S);
    pump(19 * S);
    bw_permit probe;
    CHECK_OK(bw_acquire(a, &probe, NULL));    /* round 2 */
    CHECK_OK(bw_settle(b, &old, BW_FAILURE)); /* round 1's probe, late: dropped */
    pump(0);
    sh = shared_snapshot(s, "svc-late");
    CHECK_INT(sh.state, BW_STATE_HALF_OPEN);
    CHECK_INT(sh.probes_completed, 0);
    CHECK_OK(bw_settle(a, &probe, BW_SUCCESS));
    pump(0);
    CHECK(!peek_at(s, "svc-late").found);
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_store_close(s);
}

static void test_coordinated_degrade_and_recover(void)
{
    bw_store *inner = open_store();
    failing_store f;
    bw_store *s = failing_wrap(&f, inner);
    recorder *la = rec_new();
    bw_breaker *a = make("svc-degrade", s, BW_STORE_COORDINATED, 1, la, 0);
    bw_breaker *other = make("svc-degrade", inner, BW_STORE_COORDINATED, 1, NULL, 0);
    pump(0);
    failing_set(&f, 1);
    pump(1 * S); /* a's poll fails */
    CHECK_INT(rec_count_line(la, 0, "degraded"), 1);
    /* While a is cut off, the other one trips the shared circuit. */
    CHECK_OK(call(other, BW_FAILURE));
    CHECK_OK(call(other, BW_FAILURE));
    pump(0);
    CHECK_INT(shared_snapshot(inner, "svc-degrade").state, BW_STATE_OPEN);
    pump(1 * S); /* a polls again before its retry time (2 s): no store call */
    CHECK_INT(bw_breaker_state(a), BW_STATE_CLOSED);
    CHECK_OK(call(a, BW_SUCCESS)); /* local rules */
    failing_set(&f, 0);
    pump(1 * S); /* retry time: the poll succeeds, a adopts the shared OPEN */
    CHECK_INT(rec_count_line(la, 0, "recovered"), 1);
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK(why.retry_after_ns > 0 && why.retry_after_ns <= 10 * S);
    bw_breaker_free(a);
    bw_breaker_free(other);
    bw_store_close(s);
    bw_store_close(inner);
    rec_free(la);
}

/*
 * A trip made while the store was failing is not lost for the fleet: the
 * breaker that tripped is OPEN on its own, its write failed, and when its
 * store answers again it writes the trip then, so the others follow.
 */
static void test_coordinated_trip_written_after_recovery(void)
{
    bw_store *inner = open_store();
    failing_store f;
    bw_store *s = failing_wrap(&f, inner);
    bw_breaker *a = make("svc-late-trip", s, BW_STORE_COORDINATED, 1, NULL, 0);
    bw_breaker *other = make("svc-late-trip", inner, BW_STORE_COORDINATED, 1, NULL, 0);
    pump(0);
    failing_set(&f, 1);
    CHECK_OK(call(a, BW_FAILURE));
    CHECK_OK(call(a, BW_FAILURE)); /* a trips on its own; its write fails */
    pump(0);
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    CHECK_INT(shared_snapshot(inner, "svc-late-trip").state, BW_STATE_CLOSED);
    failing_set(&f, 0);
    pump(2 * S); /* a's retry time: its poll succeeds (recovered), and it writes its trip */
    pump(0);
    CHECK_INT(shared_snapshot(inner, "svc-late-trip").state, BW_STATE_OPEN);
    pump(1 * S); /* the other one's poll */
    CHECK_INT(bw_breaker_state(other), BW_STATE_OPEN);
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    /* A trip whose wait ended while cut off is not written: nothing to tell. */
    bw_breaker_free(a);
    bw_breaker_free(other);
    bw_store_close(s);
    bw_store_close(inner);
}

static void test_coordinated_queue_full(void)
{
    bw_store *s = open_store();
    recorder *la = rec_new();
    bw_breaker *a = make("svc-queue", s, BW_STORE_COORDINATED, 3, la, 2);
    pump(0);
    CHECK_OK(call(a, BW_FAILURE));
    CHECK_OK(call(a, BW_FAILURE));
    pump(0);
    pump(10 * S);
    bw_permit p[3];
    for (int i = 0; i < 3; i++)
        CHECK_OK(bw_acquire(a, &p[i], NULL));
    for (int i = 0; i < 3; i++) /* three writes, room for two: the third is dropped */
        CHECK_OK(bw_settle(a, &p[i], BW_SUCCESS));
    CHECK_INT(rec_count_line(la, 0, "dropped"), 1);
    pump(0);
    bw_snapshot sh = shared_snapshot(s, "svc-queue");
    CHECK_INT(sh.state, BW_STATE_HALF_OPEN);
    CHECK_INT(sh.probes_completed, 2);
    bw_breaker_free(a);
    bw_store_close(s);
    rec_free(la);
}

/* A store whose updates block until released: bw_breaker_free must still return on time. */
typedef struct stuck {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int release, inside;
} stuck;

static int stuck_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    (void)name;
    (void)err;
    stuck *st = ctx;
    pthread_mutex_lock(&st->mu);
    st->inside++;
    while (!st->release)
        pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
    /* It answers at last, after the breaker was freed: what the call reads must still be alive (ASan). */
    bw_store_entry *next = malloc(sizeof *next);
    if (next)
        fn(arg, 0, NULL, next);
    free(next);
    return BW_ESYS;
}

static void stuck_close(void *ctx)
{
    (void)ctx;
}

/* This thread's CPU time, in ms. */
static int64_t thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_coordinated_close_bounded_when_store_hangs(void)
{
    static const bw_store_ops ops = {.version = BW_STORE_OPS_VERSION,
                                     .scheme = "stuck",
                                     .update = stuck_update,
                                     .sweep = nothing_swept,
                                     .close = stuck_close,
                                     .read = NULL};
    stuck st = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    bw_store *s;
    CHECK_OK(bw_store_custom(&ops, &st, &s, NULL));
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_COORDINATED, &e)); /* system clock: a real lane */
    CHECK_OK(bw_config_set_store_close_timeout(c, 100 * MS, &e));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 2, &e));
    CHECK_OK(bw_config_set_min_calls(c, 2, &e));
    bw_breaker *b = NULL, *idle = NULL;
    CHECK_OK(bw_breaker_new("svc-stuck", c, &b, &e));
    CHECK_OK(bw_breaker_new("svc-idle", c, &idle, &e));
    bw_config_free(c);
    int64_t t0 = mono_ms();
    int in = 0;
    while (!in && mono_ms() - t0 < 10000) { /* the lane's first poll gets stuck in the store */
        pthread_mutex_lock(&st.mu);
        in = st.inside;
        pthread_mutex_unlock(&st.mu);
        sleep_ms(1);
    }
    CHECK(in);
    CHECK_OK(call(b, BW_SUCCESS)); /* calls do not wait for the store */
    /* Nothing queued: freeing waits for nothing, the hung poll is abandoned. */
    int64_t t1 = mono_ms();
    bw_breaker_free(idle);
    int64_t took = mono_ms() - t1;
    if (took > 50)
        H_FAIL("bw_breaker_free took %lld ms with nothing queued; want no wait", (long long)took);
    /* A local trip queues its write, which the hung lane cannot run: freeing waits the close timeout, no more. */
    CHECK_RC(call(b, BW_FAILURE), BW_OK); /* with the success above: 1 of 2 failed, the rate trips */
    CHECK_STATE(b, BW_STATE_OPEN);
    t1 = mono_ms();
    int64_t cpu0 = thread_cpu_ms();
    bw_breaker_free(b);
    took = mono_ms() - t1;
    int64_t cpu = thread_cpu_ms() - cpu0;
    if (took < 90 || took > 3000)
        H_FAIL("bw_breaker_free took %lld ms with a queued write and a hung store call; want about the 100 ms "
               "close timeout",
               (long long)took);
    if (cpu > took / 2) /* it sleeps for the timeout (its deadline once spun a CPU: the wrong clock) */
        H_FAIL("bw_breaker_free used %lld ms of CPU in its %lld ms wait", (long long)cpu, (long long)took);
    pthread_mutex_lock(&st.mu);
    st.release = 1; /* the abandoned call returns: the lane frees what it held, touching no breaker */
    pthread_cond_broadcast(&st.cv);
    pthread_mutex_unlock(&st.mu);
    bw_store_close(s); /* joins the lane, after the abandoned call ran its update function */
}

/* bw_store_ops.version: later versions only append, so any version >= 1 is taken; 0 is not. */
static void test_custom_versions(void)
{
    bw_store *inner = open_store();
    failing_store f = {inner, 0, 0, 0};
    bw_store_ops ops = failing_ops;
    bw_store *s = NULL;
    bw_error e;
    ops.version = BW_STORE_OPS_VERSION + 1;
    CHECK_OK(bw_store_custom(&ops, &f, &s, &e));
    bw_store_cursor cur;
    memset(&cur, 0, sizeof cur);
    bw_store_key k;
    int n;
    CHECK_RC(bw_store_scan(s, &cur, &k, 1, &n, &e), BW_ENOTSUP); /* a table without scan cannot list */
    bw_breaker *b = make("svc-v2", s, BW_STORE_STORED, 1, NULL, 0);
    CHECK_OK(call(b, BW_FAILURE));
    CHECK(atomic_load(&f.calls) > 0);
    bw_breaker_free(b);
    bw_store_close(s);
    ops.version = 0;
    CHECK_RC(bw_store_custom(&ops, &f, &s, &e), BW_EINVAL);
    bw_store_close(inner);
}

static void test_config_checks(void)
{
    bw_store *s = open_store();
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_RC(bw_config_set_store(c, s, (bw_store_mode)9, &e), BW_EINVAL);
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_STORED, &e));
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 0, &e));
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "max_wait_in_half_open");
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, S, &e));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 5000, &e));
    bw_breaker *b = NULL;
    CHECK_RC(bw_breaker_new("too-big", c, &b, &e), BW_ERANGE);
    CHECK_STR(e.field, "window");
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_COORDINATED, &e)); /* coordinated keeps windows local */
    CHECK_OK(bw_breaker_new("big-ok", c, &b, &e));
    bw_breaker_free(b);
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_STORED, &e)); /* a time window in the store, never striped */
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_TIME, 60, &e));
    CHECK_OK(bw_breaker_new("time-ok", c, &b, &e));
    CHECK_OK(call(b, BW_SUCCESS));
    bw_breaker_free(b);
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 893, &e)); /* the longest count window is 892 calls */
    CHECK_RC(bw_breaker_new("too-big", c, &b, &e), BW_ERANGE);
    CHECK(strstr(e.message, "count:N up to 892 calls, got count:893") != NULL);
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 892, &e));
    CHECK_OK(bw_breaker_new("count-ok", c, &b, &e));
    bw_breaker_free(b);
    CHECK_RC(bw_config_parse(c, "store_retry=10s store_retry_max=5s", &e), BW_OK);
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE);
    CHECK_STR(e.field, "store_retry_max");
    CHECK_RC(bw_config_set_store_retry_jitter(c, 1.5, &e), BW_ERANGE);
    CHECK_RC(bw_config_set_store_queue(c, 0, &e), BW_ERANGE);
    CHECK_RC(bw_config_set_store_quorum(c, 0, &e), BW_ERANGE);
    CHECK_STR(e.field, "store_quorum");
    CHECK_RC(bw_config_set_store_quorum(c, BW_STORE_QUORUM_MAX + 1, &e), BW_ERANGE);
    CHECK_OK(bw_config_parse(c, "store_retry_max=none store_quorum=3", &e));
    CHECK_RC(bw_config_validate(c, &e), BW_ERANGE); /* stored mode: no local trips to count */
    CHECK_STR(e.field, "store_quorum");
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_COORDINATED, &e));
    CHECK_OK(bw_config_validate(c, &e));
    bw_config_free(c);
    bw_store_close(s);
}

/*
 * bw_store_read_circuit: a stored circuit read by name without a breaker, its
 * shape from the entry itself: CLOSED with its window, OPEN with retry_after
 * and a lifetime, an operator hold that never expires, a reset's fence; no
 * entry; an entry that is not a circuit.
 */
static bw_store_verdict put_garbage(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)arg;
    (void)now;
    (void)cur;
    next->expires_at = BW_STORE_NEVER;
    next->len = 20;
    memset(next->data, 0x5a, 20);
    return BW_STORE_PUT;
}

static void test_read_circuit(void)
{
    clock_fresh(CLOCKFIX_START);
    bw_store *s = open_store();
    bw_store_circuit c;
    bw_error e;
    CHECK_OK(bw_store_read_circuit(s, "rc-svc", &c, &e));
    CHECK_INT(c.found, 0);
    CHECK_INT(c.snap.retry_after_ns, BW_NO_TIME);
    bw_breaker *b = make("rc-svc", s, BW_STORE_STORED, 2, NULL, 0);
    CHECK_OK(call(b, BW_SUCCESS));
    CHECK_OK(call(b, BW_SUCCESS));
    CHECK_OK(call(b, BW_FAILURE));
    CHECK_OK(bw_store_read_circuit(s, "rc-svc", &c, &e));
    CHECK_INT(c.found, 1);
    CHECK_INT(c.readable, 1);
    CHECK_INT(c.snap.state, BW_STATE_CLOSED);
    CHECK_INT(c.policy, BW_POLICY_RATE);
    CHECK_INT(c.window, BW_WINDOW_COUNT);
    CHECK_INT(c.window_size, 4);
    CHECK_INT(c.snap.total_calls, 3);
    CHECK_INT(c.snap.failed_calls, 1);
    CHECK_INT(c.hold, 0);
    CHECK(c.expires_in_ns > 0);
    CHECK_OK(call(b, BW_FAILURE)); /* 2 of 4 failed: OPEN for 10 s */
    pump(3 * S);
    CHECK_OK(bw_store_read_circuit(s, "rc-svc", &c, &e));
    CHECK_INT(c.snap.state, BW_STATE_OPEN);
    CHECK_INT(c.snap.retry_after_ns, 7 * S);
    bw_snapshot mine;
    CHECK_OK(bw_breaker_snapshot(b, &mine));
    CHECK_INT(mine.generation, c.snap.generation);
    CHECK(c.expires_in_ns > 7 * S);
    CHECK_OK(bw_breaker_force_open(b));
    CHECK_OK(bw_store_read_circuit(s, "rc-svc", &c, &e));
    CHECK_INT(c.snap.state, BW_STATE_FORCED_OPEN);
    CHECK_INT(c.hold, 1);
    CHECK_INT(c.expires_in_ns, BW_NO_TIME);
    CHECK_OK(bw_breaker_reset(b));
    CHECK_OK(bw_store_read_circuit(s, "rc-svc", &c, &e));
    CHECK_INT(c.snap.state, BW_STATE_CLOSED);
    CHECK_INT(c.fence, 1);
    CHECK_INT(c.hold, 0);
    bw_breaker_free(b);
    /* Not a circuit: found, not readable. */
    CHECK_OK(bw_store_update(s, "rc-raw", put_garbage, NULL, &e));
    CHECK_OK(bw_store_read_circuit(s, "rc-raw", &c, &e));
    CHECK_INT(c.found, 1);
    CHECK_INT(c.readable, 0);
    CHECK_RC(bw_store_read_circuit(s, "bad name here", &c, &e), BW_EINVAL);
    CHECK_RC(bw_store_read_circuit(NULL, "x", &c, &e), BW_EINVAL);
    bw_store_close(s);
}

/*
 * A stored rejection that the read entry decides (OPEN before its wait ends,
 * FORCED_OPEN) takes no update: a rejected caller takes no store lock. The
 * rejection is the update's: the state, and retry_after to the nanosecond.
 */
static int counting_read1(void *ctx, const char *name, int64_t *now, bw_store_entry *out, int *found, bw_error *err)
{
    counting_store *c = ctx;
    atomic_fetch_add(&c->reads, 1);
    ro_read r = {out, found, now};
    return bw_store_update(c->inner, name, ro_copy, &r, err);
}

static void test_stored_rejection_by_read(void)
{
    clock_fresh(CLOCKFIX_START);
    bw_store *inner = open_store();
    counting_store cs;
    bw_store_ops ops = counting_ops;
    ops.read = counting_read1;
    cs.inner = inner;
    atomic_store(&cs.updates, 0);
    atomic_store(&cs.reads, 0);
    bw_store *s = custom_store(&ops, &cs);
    bw_breaker *b = make("svc-rejread", s, BW_STORE_STORED, 1, NULL, 0);
    CHECK_OK(call(b, BW_FAILURE));
    CHECK_OK(call(b, BW_FAILURE)); /* 2 of 2 failed: OPEN for 10 s */
    pump(3 * S);
    int u0 = atomic_load(&cs.updates), r0 = atomic_load(&cs.reads);
    bw_permit p;
    bw_rejection why;
    for (int i = 0; i < 5; i++) {
        CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
        CHECK_INT(why.state, BW_STATE_OPEN);
        CHECK_INT(why.retry_after_ns, 7 * S);
    }
    CHECK_INT(atomic_load(&cs.updates), u0); /* no update: the read decided */
    CHECK_INT(atomic_load(&cs.reads), r0 + 5);
    pump(7 * S); /* the wait ends: the next caller is the probe, by an update */
    CHECK_OK(bw_acquire(b, &p, &why));
    CHECK(atomic_load(&cs.updates) > u0);
    CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
    CHECK_OK(bw_breaker_force_open(b));
    u0 = atomic_load(&cs.updates);
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_FORCED_OPEN);
    CHECK_INT(why.retry_after_ns, BW_NO_TIME);
    CHECK_INT(atomic_load(&cs.updates), u0);
    bw_breaker_free(b);
    bw_store_close(s);
    bw_store_close(inner);
}

/* ---- bw_breaker_open_for: a hold with an end (a Retry-After), for the whole fleet ---- */

/* The number of state changes into `to` among r's events, and whether the last of them had reason `why`. */
static int changes_into(recorder *r, bw_state to, bw_reason why)
{
    int n = rec_count(r), k = 0, last = -1;
    for (int i = 0; i < n; i++)
        if (r->ev[i].ev.type == BW_EVENT_STATE_CHANGE && r->ev[i].ev.to == to) {
            k++;
            last = i;
        }
    if (last >= 0 && r->ev[last].ev.reason != why)
        H_FAIL("the last change into %s had reason %s, not %s", bw_state_name(to),
               bw_reason_name(r->ev[last].ev.reason), bw_reason_name(why));
    return k;
}

/*
 * A coordinated breaker following the fleet's OPEN whose store fails shows its
 * own CLOSED circuit again: that change says why (store_down, in the log "the
 * store failed"), not "shared", which read as the fleet's recovery; following
 * the fleet again once the store answers is "shared".
 */
static void test_coordinated_store_down_reason(void)
{
    bw_store *inner = open_store();
    failing_store f;
    bw_store *s = failing_wrap(&f, inner);
    recorder *la = rec_new();
    bw_breaker *a = make("svc-down", s, BW_STORE_COORDINATED, 1, la, 0);
    bw_breaker *other = make("svc-down", inner, BW_STORE_COORDINATED, 1, NULL, 0);
    pump(0);
    CHECK_OK(call(other, BW_FAILURE));
    CHECK_OK(call(other, BW_FAILURE));
    pump(0);
    pump(1 * S); /* a's poll: it follows the fleet's OPEN */
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    CHECK_INT(changes_into(la, BW_STATE_OPEN, BW_REASON_SHARED), 1);
    failing_set(&f, 1);
    pump(1 * S); /* a's poll fails: degraded, its own circuit (CLOSED) */
    CHECK_INT(rec_count_line(la, 0, "degraded"), 1);
    CHECK_INT(bw_breaker_state(a), BW_STATE_CLOSED);
    CHECK_INT(changes_into(la, BW_STATE_CLOSED, BW_REASON_STORE_DOWN), 1);
    bw_counters k;
    CHECK_OK(bw_breaker_counters(a, &k));
    CHECK_INT(k.reason, BW_REASON_STORE_DOWN);
    failing_set(&f, 0);
    pump(2 * S); /* retry time: the poll succeeds, a follows the fleet's OPEN again */
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    CHECK_INT(changes_into(la, BW_STATE_OPEN, BW_REASON_SHARED), 2);
    bw_breaker_free(a);
    bw_breaker_free(other);
    bw_store_close(s);
    bw_store_close(inner);
    rec_free(la);
}

/*
 * Stored mode: open_for writes the fleet's circuit, OPEN for the given wait
 * (a trip whose wait is that long): every breaker on it rejects with that
 * retry_after, the entry lives until the wait ends plus its lifetime, one
 * STATE_CHANGE (reason retry_after) goes to the caller; a shorter one leaves
 * it alone, a longer one starts a new period; afterwards recovery goes as
 * usual, and an operator state wins (BW_ESTATE).
 */
static void test_stored_open_for(void)
{
    bw_store *s = open_store();
    recorder *la = rec_new(), *lb = rec_new();
    bw_breaker *a = make("svc-ra", s, BW_STORE_STORED, 1, la, 0);
    bw_breaker *b = make("svc-ra", s, BW_STORE_STORED, 1, lb, 0);
    CHECK_OK(call(b, BW_SUCCESS));
    CHECK_OK(bw_breaker_open_for(a, 5 * S));
    CHECK_INT(changes_into(la, BW_STATE_OPEN, BW_REASON_RETRY_AFTER), 1);
    CHECK_INT(changes_into(lb, BW_STATE_OPEN, BW_REASON_RETRY_AFTER), 0); /* stored: the caller's event only */
    bw_counters k;
    CHECK_OK(bw_breaker_counters(a, &k));
    CHECK_INT(k.reason, BW_REASON_RETRY_AFTER);
    CHECK_INT(k.transitions[BW_STATE_CLOSED][BW_STATE_OPEN], 1);
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED); /* the other breaker: the fleet's circuit */
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 5 * S);
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 5 * S);
    bw_snapshot snap;
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK_INT(snap.state, BW_STATE_OPEN);
    CHECK_INT(snap.shared, 1);
    CHECK_INT(snap.open_wait_ns, 5 * S);
    CHECK_INT(peek_at(s, "svc-ra").expires_at, clock_now() + 5 * S + 86400 * S); /* store_ttl after the wait */
    pump(2 * S);
    uint64_t gen = snap.generation;
    CHECK_OK(bw_breaker_open_for(b, 1 * S)); /* ends sooner than the OPEN: left alone */
    CHECK_OK(bw_breaker_snapshot(b, &snap));
    CHECK(snap.generation == gen);
    CHECK_INT(snap.retry_after_ns, 3 * S);
    CHECK_OK(bw_breaker_open_for(b, 4 * S)); /* ends later: a new OPEN period of 4 s */
    CHECK_OK(bw_breaker_snapshot(a, &snap));
    CHECK(snap.generation > gen);
    CHECK_INT(snap.retry_after_ns, 4 * S);
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 4 * S);
    pump(4 * S); /* the wait ends: recovery as usual, a probe, and CLOSED */
    bw_permit probe;
    CHECK_OK(bw_acquire(a, &probe, &why));
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_HALF_OPEN);
    CHECK_OK(bw_settle(a, &probe, BW_SUCCESS));
    CHECK_INT(bw_breaker_state(a), BW_STATE_CLOSED);
    CHECK_OK(call(b, BW_SUCCESS));
    /* A trip afterwards waits the configured 10 s: a Retry-After's wait is not kept. */
    CHECK_OK(call(b, BW_FAILURE)); /* 1 of 2 failed: a trip */
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 10 * S);
    /* An operator state wins, in the store as in memory. */
    CHECK_OK(bw_breaker_force_open(a));
    CHECK_RC(bw_breaker_open_for(b, 5 * S), BW_ESTATE);
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_FORCED_OPEN);
    CHECK_RC(bw_breaker_open_for(b, 0), BW_ERANGE);
    CHECK_RC(bw_breaker_open_for(b, 365 * 86400 * S + 1), BW_ERANGE);
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_store_close(s);
    rec_free(la);
    rec_free(lb);
}

/* make()'s breaker, one probe a round, with store_quorum 3 (a local trip alone would open nothing shared). */
static bw_breaker *make_ra(const char *name, bw_store *s, recorder *log)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_window(c, BW_WINDOW_COUNT, 4, &e));
    CHECK_OK(bw_config_set_min_calls(c, 2, &e));
    CHECK_OK(bw_config_set_wait(c, 10 * S, &e));
    CHECK_OK(bw_config_set_permitted_probes(c, 1, &e));
    CHECK_OK(bw_config_set_max_wait_in_half_open(c, 5 * S, &e));
    CHECK_OK(bw_config_set_store_poll(c, 1 * S, &e));
    CHECK_OK(bw_config_set_store_quorum(c, 3, &e));
    CHECK_OK(bw_config_set_listener(c, BW_EVENTS_ALL, rec_listen, log));
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_COORDINATED, &e));
    bw_breaker *b = NULL;
    int rc = bw_breaker_new(name, c, &b, &e);
    if (rc != BW_OK)
        H_FAIL("bw_breaker_new: %s: %s", bw_strerror(rc), e.message);
    bw_config_free(c);
    return b;
}

/*
 * Coordinated mode: open_for opens this process's circuit at once (reason
 * retry_after) and its lane writes the fleet's OPEN for that wait, as it
 * writes a trip; the other breakers follow it from their next poll, with the
 * shared retry_after; a quorum does not apply (the dependency said so); after
 * the wait, the probes are leased fleet-wide as usual and the circuit closes.
 */
static void test_coordinated_open_for(void)
{
    bw_store *s = open_store();
    recorder *la = rec_new(), *lb = rec_new();
    bw_breaker *a = make_ra("svc-coord-ra", s, la);
    bw_breaker *b = make_ra("svc-coord-ra", s, lb);
    pump(0);
    CHECK_OK(bw_breaker_open_for(a, 5 * S));
    CHECK_INT(bw_breaker_state(a), BW_STATE_OPEN);
    CHECK_INT(changes_into(la, BW_STATE_OPEN, BW_REASON_RETRY_AFTER), 1);
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 5 * S);
    CHECK_INT(bw_breaker_state(b), BW_STATE_CLOSED);
    pump(0); /* the lane writes it */
    bw_snapshot sh = shared_snapshot(s, "svc-coord-ra");
    CHECK_INT(sh.state, BW_STATE_OPEN);
    CHECK_INT(sh.open_wait_ns, 5 * S);
    CHECK_INT(sh.retry_after_ns, 5 * S);
    pump(1 * S); /* b's poll */
    CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
    CHECK_INT(changes_into(lb, BW_STATE_OPEN, BW_REASON_SHARED), 1);
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_OPEN);
    CHECK_INT(why.retry_after_ns, 4 * S);
    bw_snapshot fs;
    CHECK_OK(bw_breaker_snapshot(b, &fs));
    CHECK_INT(fs.shared, 1);
    CHECK_INT(fs.open_wait_ns, 5 * S);
    /* A shorter one from b writes nothing new; a longer one moves the fleet's end. */
    CHECK_OK(bw_breaker_open_for(b, 1 * S));
    pump(0);
    CHECK_INT(shared_snapshot(s, "svc-coord-ra").retry_after_ns, 4 * S);
    CHECK_OK(bw_breaker_open_for(b, 6 * S));
    pump(0);
    CHECK_INT(shared_snapshot(s, "svc-coord-ra").retry_after_ns, 6 * S);
    pump(1 * S); /* a's poll */
    CHECK_RC(bw_acquire(a, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 5 * S);
    pump(5 * S); /* the wait ends: one probe for the fleet */
    bw_permit pa;
    CHECK_OK(bw_acquire(a, &pa, NULL));
    CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
    CHECK_INT(why.state, BW_STATE_HALF_OPEN);
    CHECK_OK(bw_settle(a, &pa, BW_SUCCESS));
    pump(0);
    pump(1 * S);
    CHECK_INT(bw_breaker_state(a), BW_STATE_CLOSED);
    CHECK_INT(bw_breaker_state(b), BW_STATE_CLOSED);
    CHECK_OK(call(b, BW_SUCCESS));
    /* This process's operator state wins here (a coordinated verb stays local): nothing is written. */
    CHECK_OK(bw_breaker_disable(a));
    CHECK_RC(bw_breaker_open_for(a, 5 * S), BW_ESTATE);
    pump(0);
    CHECK_INT(shared_snapshot(s, "svc-coord-ra").state, BW_STATE_CLOSED);
    bw_breaker_free(a);
    bw_breaker_free(b);
    bw_store_close(s);
    rec_free(la);
    rec_free(lb);
}

/*
 * A coordinated open_for made while the store failed is written when the
 * store answers again, as a trip would be, but as what it is: the fleet's
 * circuit opens for what is left of it (28 s), not for the configured wait.
 */
static void test_coordinated_open_for_written_after_recovery(void)
{
    bw_store *inner = open_store();
    failing_store f;
    bw_store *s = failing_wrap(&f, inner);
    bw_breaker *a = make("svc-late-ra", s, BW_STORE_COORDINATED, 1, NULL, 0);
    bw_breaker *other = make("svc-late-ra", inner, BW_STORE_COORDINATED, 1, NULL, 0);
    pump(0);
    failing_set(&f, 1);
    CHECK_OK(bw_breaker_open_for(a, 30 * S));
    pump(0); /* its write fails: degraded */
    CHECK_INT(shared_snapshot(inner, "svc-late-ra").state, BW_STATE_CLOSED);
    failing_set(&f, 0);
    pump(2 * S); /* a's retry time: its poll succeeds (recovered), and it writes its OPEN */
    pump(0);
    bw_snapshot sh = shared_snapshot(inner, "svc-late-ra");
    CHECK_INT(sh.state, BW_STATE_OPEN);
    CHECK_INT(sh.retry_after_ns, 28 * S);
    pump(1 * S); /* the other one's poll */
    bw_rejection why;
    bw_permit p;
    CHECK_RC(bw_acquire(other, &p, &why), BW_REJECTED);
    CHECK_INT(why.retry_after_ns, 27 * S);
    bw_breaker_free(a);
    bw_breaker_free(other);
    bw_store_close(s);
    bw_store_close(inner);
}

/* A breaker on s in `mode` whose longest backoff is 1 min (wait 10 s, doubling, wait_max 1 min). */
static bw_breaker *make_capped(const char *name, bw_store *s, bw_store_mode mode, recorder *log)
{
    bw_config *c = bw_config_new();
    bw_error e;
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_wait(c, 10 * S, &e));
    CHECK_OK(bw_config_set_wait_multiplier(c, 2, &e));
    CHECK_OK(bw_config_set_wait_max(c, 60 * S, &e));
    CHECK_OK(bw_config_set_store_poll(c, 1 * S, &e));
    CHECK_OK(bw_config_set_listener(c, BW_EVENTS_ALL, rec_listen, log));
    CHECK_OK(bw_config_set_store(c, s, mode, &e));
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new(name, c, &b, &e));
    bw_config_free(c);
    return b;
}

/*
 * An OPEN read back from a store is untrusted: one that would last longer from
 * now than its configuration's longest wait or a Retry-After's 365 days (here
 * 365 days: the backoff stops at 1 min) is corrupt, in both modes: replaced by
 * a fresh circuit (BW_EVENT_STORE_CORRUPT), so a store cannot hold the fleet
 * open for longer. 365 days exactly is what open_for may write, and holds.
 */
static void test_open_held_too_long(void)
{
    const int64_t year = 365 * 86400 * S;
    for (int mode = 0; mode < 2; mode++) {
        bw_store *s = open_store();
        recorder *la = rec_new(), *lb = rec_new();
        bw_store_mode m = mode ? BW_STORE_COORDINATED : BW_STORE_STORED;
        bw_breaker *a = make_capped("svc-held", s, m, la);
        bw_breaker *b = make_capped("svc-held", s, m, lb);
        pump(0);
        CHECK_OK(bw_breaker_open_for(a, year)); /* the longest a Retry-After may ask */
        pump(0);
        pump(1 * S); /* coordinated: b's poll */
        bw_rejection why;
        bw_permit p;
        CHECK_RC(bw_acquire(b, &p, &why), BW_REJECTED);
        CHECK_INT(why.retry_after_ns, year - 1 * S);
        CHECK_INT(rec_count_line(lb, 0, "corrupt"), 0);
        const poke pokes[] = {{AT_OPEN_WAIT, (uint64_t)(year + 10 * S), 8, 0},       /* ends past 365 d from now */
                              {AT_OPENED_AT, (uint64_t)(clock_now() + year), 8, 0}}; /* opened a year ahead */
        for (int i = 0; i < 2; i++) {
            CHECK_OK(bw_store_update(s, "svc-held", poke_fn, (void *)&pokes[i], NULL));
            pump(1 * S); /* coordinated: the polls find it corrupt, and one of them replaces it */
            if (m == BW_STORE_STORED)
                CHECK_OK(call(b, BW_SUCCESS)); /* stored: the acquire finds it corrupt, and is admitted */
            CHECK_INT(rec_count_line(la, 0, "corrupt") + rec_count_line(lb, 0, "corrupt"), i + 1);
            CHECK_INT(shared_snapshot(s, "svc-held").state, BW_STATE_CLOSED);
            CHECK_OK(bw_breaker_open_for(a, 30 * S)); /* OPEN again, for the next poke */
            pump(0);
            CHECK_INT(shared_snapshot(s, "svc-held").state, BW_STATE_OPEN);
        }
        bw_breaker_free(a);
        bw_breaker_free(b);
        bw_store_close(s);
        rec_free(la);
        rec_free(lb);
    }
}

int main(int argc, char **argv)
{
    store_url_init(argc, argv);
    clock_fresh(CLOCKFIX_START);
    RUN(test_stored_one_circuit_for_two);
    RUN(test_stored_moving_clock);
    RUN(test_stored_stale_across_reset);
    RUN(test_stored_registry_preset);
    RUN(test_stored_stale_and_expiry);
    RUN(test_stored_long_time_window);
    RUN(test_stored_corrupt_entry);
    RUN(test_stored_lifetimes);
    RUN(test_stored_store_failure_falls_back);
    RUN(test_stored_contention_is_no_failure);
    RUN(test_stored_reads_without_writes);
    RUN(test_stored_hold_recovers);
    RUN(test_stored_verb_events);
    RUN(test_stored_entry_too_long);
    RUN(test_coordinated_trip_propagates);
    RUN(test_coordinated_quorum);
    RUN(test_coordinated_lane_batches);
    RUN(test_keyed_stored);
    RUN(test_keyed_stored_flood);
    RUN(test_keyed_coordinated);
    RUN(test_coordinated_late_probe_and_expired_lease);
    RUN(test_coordinated_degrade_and_recover);
    RUN(test_coordinated_trip_written_after_recovery);
    RUN(test_coordinated_queue_full);
    RUN(test_custom_versions);
    RUN(test_read_circuit);
    RUN(test_stored_rejection_by_read);
    RUN(test_config_checks);
    RUN(test_coordinated_store_down_reason);
    RUN(test_stored_open_for);
    RUN(test_coordinated_open_for);
    RUN(test_coordinated_open_for_written_after_recovery);
    RUN(test_open_held_too_long);
    RUN(test_coordinated_close_bounded_when_store_hangs);
    clock_done();
    store_url_cleanup();
    return TEST_SUMMARY();
}
