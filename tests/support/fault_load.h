/*
 * fault_load.h — breakers under load while their store's server fails, for
 * the fault tests (tests/support/; tests/integration/test_store_faults.c and
 * test_redis_faults.c).
 *
 * A load is FL_BREAKERS breakers on one store, half coordinated and half
 * stored (so every fault is seen by both modes at once), and FL_THREADS
 * threads that call them round-robin with bw_breaker_call until stopped, a
 * call about every millisecond. The guarded function always succeeds, so
 * every call must come back admitted with the function's own result: a
 * rejection or an error can only come from the store, which must never fail
 * a call (docs/stores.md, "When the store fails"). Each call is timed on the
 * real clock (a server's deadlines are real time), and the load keeps the
 * longest since fl_mark. The breakers run on the system clock with the
 * store's rules short enough for a test: a failing store is tried again every
 * FL_RETRY_MS (multiplier 1, no jitter), coordinated breakers poll every
 * FL_POLL_MS. Include it after defining _POSIX_C_SOURCE.
 */
#ifndef BW_TEST_FAULT_LOAD_H
#define BW_TEST_FAULT_LOAD_H

#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"
#include "timeutil.h"

#define FL_BREAKERS 4 /* [0, FL_BREAKERS/2) coordinated, the rest stored */
#define FL_THREADS 4
#define FL_RETRY_MS 200
#define FL_POLL_MS 100
#define FL_MS 1000000LL
/*
 * What the scheduler of a loaded 2-CPU machine may add to a wait: a bound on
 * real time is a deadline plus this much. Sanitized code runs several times
 * slower, so its threads wait longer for a CPU.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FL_ALLOWANCE_MS 600
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FL_ALLOWANCE_MS 600
#endif
#endif
#ifndef FL_ALLOWANCE_MS
#define FL_ALLOWANCE_MS 300
#endif

/*
 * A stall watch: a thread that asks to sleep 5 ms at a time and keeps the
 * longest it overslept since fl_watch_mark. That is how long this process was
 * not run (a loaded machine, a sanitizer's pause): a call cannot come back
 * sooner than its thread runs again, so the tests add it to their bounds. A
 * call that hangs on its own leaves the watch running, and still fails them.
 */
typedef struct fl_watch {
    pthread_t t;
    _Atomic int stop;
    _Atomic int64_t stall_ns;
} fl_watch;

static void *fl_watch_thread(void *arg)
{
    fl_watch *w = arg;
    while (!atomic_load(&w->stop)) {
        int64_t t0 = mono_ns();
        sleep_ns(5 * FL_MS);
        int64_t over = mono_ns() - t0 - 5 * FL_MS;
        int64_t m = atomic_load(&w->stall_ns);
        while (over > m && !atomic_compare_exchange_weak(&w->stall_ns, &m, over))
            ;
    }
    return NULL;
}

static inline void fl_watch_start(fl_watch *w)
{
    atomic_store(&w->stop, 0);
    atomic_store(&w->stall_ns, 0);
    if (pthread_create(&w->t, NULL, fl_watch_thread, w) != 0) {
        H_FAIL("pthread_create failed");
        exit(2);
    }
}

static inline void fl_watch_stop(fl_watch *w)
{
    atomic_store(&w->stop, 1);
    pthread_join(w->t, NULL);
}

/* The longest stall since the start or the last mark, in ms. */
static inline int64_t fl_watch_ms(fl_watch *w)
{
    return atomic_load(&w->stall_ns) / FL_MS;
}

static inline void fl_watch_mark(fl_watch *w)
{
    atomic_store(&w->stall_ns, 0);
}

typedef struct fault_load {
    fl_watch watch;
    bw_store *store;
    bw_breaker *b[FL_BREAKERS];
    pthread_t t[FL_THREADS];
    _Atomic int stop;
    _Atomic long calls;             /* bw_breaker_call made */
    _Atomic long ran;               /* the guarded function ran */
    _Atomic long rejected;          /* BW_REJECTED */
    _Atomic long wrong;             /* another status, or not the function's result */
    _Atomic int64_t max_ns;         /* the longest call since fl_mark */
    _Atomic int64_t max_mode_ns[2]; /* ... of a coordinated breaker's, of a stored one's */
    _Atomic int64_t max_at_ns;      /* when the longest began (mono_ns; roughly: the two are not updated at once) */
    _Atomic int64_t sum_ns;
    _Atomic long timed;
    char prefix[64];
} fault_load;

static inline const char *fl_mode_name(int i)
{
    return i < FL_BREAKERS / 2 ? "coordinated" : "stored";
}

static inline bw_store_mode fl_mode(int i)
{
    return i < FL_BREAKERS / 2 ? BW_STORE_COORDINATED : BW_STORE_STORED;
}

/*
 * A breaker for the fault tests: trips when 5 of its last 10 calls fail (so a
 * test can trip it on purpose), waits 30 s, and the store rules above.
 */
static inline bw_breaker *fl_breaker(const char *name, bw_store *s, bw_store_mode mode)
{
    bw_config *c = bw_config_new();
    bw_error e;
    bw_breaker *b = NULL;
    if (!c) {
        H_FAIL("out of memory");
        return NULL;
    }
    CHECK_OK(bw_config_parse(c,
                             "failure_rate=0.5 window=count:10 min_calls=5 wait=30s store_poll=100ms "
                             "store_retry=200ms store_retry_multiplier=1 store_retry_jitter=0 store_close_timeout=2s",
                             &e));
    CHECK_OK(bw_config_set_store(c, s, mode, &e));
    int rc = bw_breaker_new(name, c, &b, &e);
    if (rc != BW_OK)
        H_FAIL("bw_breaker_new(%s): %s: %s", name, bw_strerror(rc), e.message);
    bw_config_free(c);
    return b;
}

static int fl_guarded(void *arg)
{
    atomic_fetch_add((_Atomic long *)arg, 1);
    return 0; /* the function's own result: success */
}

static inline void fl_note_max(_Atomic int64_t *max, int64_t v)
{
    int64_t m = atomic_load(max);
    while (v > m && !atomic_compare_exchange_weak(max, &m, v))
        ;
}

static void *fl_thread(void *arg)
{
    fault_load *l = arg;
    long i = 0;
    while (!atomic_load(&l->stop)) {
        int idx = (int)(i++ % FL_BREAKERS);
        bw_breaker *b = l->b[idx];
        int rc = -1;
        bw_rejection why;
        int64_t t0 = mono_ns();
        int st = bw_breaker_call(b, fl_guarded, &l->ran, &rc, &why);
        int64_t took = mono_ns() - t0;
        atomic_fetch_add(&l->calls, 1);
        if (st == BW_REJECTED)
            atomic_fetch_add(&l->rejected, 1);
        else if (st != BW_OK || rc != 0)
            atomic_fetch_add(&l->wrong, 1);
        if (took > atomic_load(&l->max_ns))
            atomic_store(&l->max_at_ns, t0);
        fl_note_max(&l->max_ns, took);
        fl_note_max(&l->max_mode_ns[fl_mode(idx) == BW_STORE_STORED], took);
        atomic_fetch_add(&l->sum_ns, took);
        atomic_fetch_add(&l->timed, 1);
        sleep_ns(1000000); /* about 1,000 calls a second a thread: load, not a busy loop starving the server */
    }
    return NULL;
}

/* Start a load on s: its breakers are named PREFIX-0 .. PREFIX-3. */
static inline void fl_start(fault_load *l, bw_store *s, const char *prefix)
{
    memset(l, 0, sizeof *l);
    l->store = s;
    snprintf(l->prefix, sizeof l->prefix, "%s", prefix);
    for (int i = 0; i < FL_BREAKERS; i++) {
        char name[80];
        snprintf(name, sizeof name, "%s-%d", prefix, i);
        l->b[i] = fl_breaker(name, s, fl_mode(i));
    }
    fl_watch_start(&l->watch);
    for (int i = 0; i < FL_THREADS; i++)
        if (pthread_create(&l->t[i], NULL, fl_thread, l) != 0) {
            H_FAIL("pthread_create failed");
            exit(2);
        }
}

/* Stop the threads (the breakers stay, for the checks after). */
static inline void fl_stop_threads(fault_load *l)
{
    if (atomic_exchange(&l->stop, 1))
        return;
    for (int i = 0; i < FL_THREADS; i++)
        pthread_join(l->t[i], NULL);
    fl_watch_stop(&l->watch);
}

static inline void fl_free(fault_load *l)
{
    fl_stop_threads(l);
    for (int i = 0; i < FL_BREAKERS; i++)
        bw_breaker_free(l->b[i]);
}

/* Restart the measure of the longest call. */
static inline void fl_mark(fault_load *l)
{
    fl_watch_mark(&l->watch);
    atomic_store(&l->max_ns, 0);
    atomic_store(&l->max_mode_ns[0], 0);
    atomic_store(&l->max_mode_ns[1], 0);
    atomic_store(&l->sum_ns, 0);
    atomic_store(&l->timed, 0);
}

static inline bw_counters fl_counters(const fault_load *l, int i)
{
    bw_counters c;
    memset(&c, 0, sizeof c);
    CHECK_OK(bw_breaker_counters(l->b[i], &c));
    return c;
}

/* Breaker i's store link is healthy: every DEGRADED it reported was followed by a RECOVERED. */
static inline int fl_healthy(const fault_load *l, int i)
{
    bw_counters c = fl_counters(l, i);
    return c.store_degraded == c.store_recovered;
}

/* Wait (polling every 5 ms, at most limit_ms) until breakers [from, to) reported DEGRADED at least `n` times. */
static inline int fl_wait_degraded(const fault_load *l, int from, int to, uint64_t n, int64_t limit_ms)
{
    int64_t t0 = mono_ms();
    for (;;) {
        int all = 1;
        for (int i = from; i < to; i++)
            all &= fl_counters(l, i).store_degraded >= n;
        if (all)
            return 1;
        if (mono_ms() - t0 > limit_ms)
            return 0;
        sleep_ms(5);
    }
}

/*
 * Wait (at most limit_ms from `since`, a mono_ms instant) until every breaker
 * is healthy again; took[i] is when breaker i first was, in ms after `since`
 * (-1: not within the limit).
 */
static inline void fl_wait_healthy(const fault_load *l, int64_t since, int64_t limit_ms, int64_t took[FL_BREAKERS])
{
    int left = FL_BREAKERS;
    for (int i = 0; i < FL_BREAKERS; i++)
        took[i] = -1;
    while (left > 0 && mono_ms() - since <= limit_ms) {
        for (int i = 0; i < FL_BREAKERS; i++)
            if (took[i] < 0 && fl_healthy(l, i)) {
                took[i] = mono_ms() - since;
                left--;
            }
        if (left > 0)
            sleep_ms(5);
    }
}

/*
 * The checks every fault ends with, once the threads stopped: no call failed
 * or was rejected because of the store, and the guarded function ran for
 * every call.
 */
static inline void fl_check_served(const fault_load *l, const char *what)
{
    long calls = atomic_load(&l->calls), ran = atomic_load(&l->ran);
    long rejected = atomic_load(&l->rejected), wrong = atomic_load(&l->wrong);
    if (rejected || wrong || ran != calls)
        H_FAIL("%s: of %ld protected calls %ld were rejected and %ld failed or lost the function's result (%ld ran)",
               what, calls, rejected, wrong, ran);
    CHECK(calls > 100); /* the load really ran */
}

/*
 * Writes reach the server: breaker i, tripped on purpose (its threads
 * stopped), is seen OPEN by an observer of the same name and mode on `other`
 * (a store of its own, as another process would have) within limit_ms.
 * Returns how long that took (ms), or -1. A trip during which the breaker
 * degraded again (a store call that missed its deadline on a loaded machine:
 * its outcomes went to the local circuit) is made again, at most 3 times, once
 * the breaker is healthy; a trip made while healthy that never arrives fails.
 */
static inline int64_t fl_trip_seen(fault_load *l, int i, bw_store *other, int64_t limit_ms)
{
    char name[80];
    snprintf(name, sizeof name, "%s-%d", l->prefix, i);
    bw_breaker *obs = fl_breaker(name, other, fl_mode(i));
    if (!obs)
        return -1;
    sleep_ms(2 * FL_POLL_MS); /* a coordinated observer's first poll: it starts CLOSED */
    int64_t took = -1;
    int clean = 0;
    for (int attempt = 0; attempt < 3 && !clean; attempt++) {
        for (int64_t t0 = mono_ms(); !fl_healthy(l, i) && mono_ms() - t0 < 3000;)
            sleep_ms(10);
        uint64_t degraded = fl_counters(l, i).store_degraded;
        if (attempt > 0 && fl_mode(i) == BW_STORE_COORDINATED)
            CHECK_OK(bw_breaker_reset(l->b[i])); /* its local trip of the last attempt holds it OPEN: again */
        for (int k = 0; k < 20; k++) {
            bw_permit p;
            if (bw_acquire(l->b[i], &p, NULL) != BW_OK)
                break; /* OPEN */
            CHECK_OK(bw_settle(l->b[i], &p, BW_FAILURE));
        }
        int64_t t0 = mono_ms();
        while (took < 0 && mono_ms() - t0 <= limit_ms) {
            bw_permit p;
            if (bw_acquire(obs, &p, NULL) == BW_REJECTED)
                took = mono_ms() - t0;
            else {
                CHECK_OK(bw_settle(obs, &p, BW_IGNORED));
                sleep_ms(5);
            }
        }
        clean = fl_counters(l, i).store_degraded == degraded;
        if (took >= 0)
            break;
    }
    bw_counters c = fl_counters(l, i);
    if (c.state != BW_STATE_OPEN)
        H_FAIL("%s breaker %s: %s after the failures that trip it", fl_mode_name(i), name, bw_state_name(c.state));
    if (took < 0)
        H_FAIL("%s breaker %s: its trip never reached another store's client within %lld ms (it is %s; store "
               "degraded %llu, recovered %llu, writes dropped %llu)",
               fl_mode_name(i), name, (long long)limit_ms, bw_state_name(c.state), (unsigned long long)c.store_degraded,
               (unsigned long long)c.store_recovered, (unsigned long long)c.store_dropped);
    bw_breaker_free(obs);
    return took;
}

#endif
