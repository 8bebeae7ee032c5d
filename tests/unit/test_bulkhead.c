/*
 * test_bulkhead.c (tests/unit/) — the bulkhead: slots counted exactly, release
 * without acquire refused, real threads never exceeding N in flight, waiting up
 * to max_wait (and no longer), bad arguments.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "harness.h"
#include "timeutil.h"

static void test_counting(void)
{
    bw_bulkhead *bh = NULL;
    CHECK_OK(bw_bulkhead_new(2, 0, &bh, NULL));
    CHECK_INT(bw_bulkhead_max_concurrent(bh), 2);
    CHECK_INT(bw_bulkhead_in_flight(bh), 0);
    CHECK_OK(bw_bulkhead_try_acquire(bh));
    CHECK_OK(bw_bulkhead_acquire(bh));
    CHECK_INT(bw_bulkhead_in_flight(bh), 2);
    CHECK_RC(bw_bulkhead_try_acquire(bh), BW_EFULL);
    CHECK_RC(bw_bulkhead_acquire(bh), BW_EFULL); /* max_wait 0: at once */
    CHECK_INT(bw_bulkhead_in_flight(bh), 2);
    CHECK_OK(bw_bulkhead_release(bh));
    CHECK_OK(bw_bulkhead_try_acquire(bh));
    CHECK_OK(bw_bulkhead_release(bh));
    CHECK_OK(bw_bulkhead_release(bh));
    CHECK_INT(bw_bulkhead_in_flight(bh), 0);
    CHECK_RC(bw_bulkhead_release(bh), BW_ESTATE); /* nothing taken: refused, count unchanged */
    CHECK_INT(bw_bulkhead_in_flight(bh), 0);
    bw_bulkhead_free(bh);
}

#define THREADS 6
#define ITERS 3000

typedef struct shared {
    bw_bulkhead *bh;
    _Atomic int inside, max_inside, admitted, refused, bad;
    int blocking;
} shared;

static void *hammer(void *arg)
{
    shared *s = arg;
    for (int i = 0; i < ITERS; i++) {
        int rc = s->blocking ? bw_bulkhead_acquire(s->bh) : bw_bulkhead_try_acquire(s->bh);
        if (rc == BW_EFULL) {
            atomic_fetch_add(&s->refused, 1);
            continue;
        }
        if (rc != BW_OK) {
            atomic_fetch_add(&s->bad, 1);
            continue;
        }
        int now = atomic_fetch_add(&s->inside, 1) + 1;
        int m = atomic_load(&s->max_inside);
        while (now > m && !atomic_compare_exchange_weak(&s->max_inside, &m, now))
            ;
        if (i % 64 == 0)
            sched_yield();
        atomic_fetch_sub(&s->inside, 1);
        atomic_fetch_add(&s->admitted, 1);
        if (bw_bulkhead_release(s->bh) != BW_OK)
            atomic_fetch_add(&s->bad, 1);
    }
    return NULL;
}

static void run_threads(int blocking)
{
    shared s;
    memset(&s, 0, sizeof s);
    s.blocking = blocking;
    /* Waiting callers wait up to 5 s: in practice all of them get a slot. */
    CHECK_OK(bw_bulkhead_new(2, blocking ? 5 * BW_NS_PER_S : 0, &s.bh, NULL));
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK_INT(pthread_create(&t[i], NULL, hammer, &s), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&s.max_inside) <= 2);
    CHECK(atomic_load(&s.max_inside) >= 1);
    CHECK_INT(atomic_load(&s.bad), 0);
    CHECK_INT(atomic_load(&s.admitted) + atomic_load(&s.refused), THREADS * ITERS);
    if (blocking)
        CHECK_INT(atomic_load(&s.refused), 0);
    CHECK_INT(bw_bulkhead_in_flight(s.bh), 0);
    bw_bulkhead_free(s.bh);
}

static void test_threads_never_exceed_n(void)
{
    run_threads(0);
    run_threads(1);
}

typedef struct waiter {
    bw_bulkhead *bh;
    int rc;
    int64_t waited_ms;
} waiter;

static void *wait_once(void *arg)
{
    waiter *w = arg;
    int64_t t0 = mono_ms();
    w->rc = bw_bulkhead_acquire(w->bh);
    w->waited_ms = mono_ms() - t0;
    return NULL;
}

static void test_max_wait(void)
{
    bw_bulkhead *bh = NULL;
    /* A slot freed while a caller waits goes to it. */
    CHECK_OK(bw_bulkhead_new(1, 2 * BW_NS_PER_S, &bh, NULL));
    CHECK_OK(bw_bulkhead_acquire(bh));
    waiter w = {bh, -100, 0};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, wait_once, &w), 0);
    sleep_ms(30);
    CHECK_OK(bw_bulkhead_release(bh));
    pthread_join(t, NULL);
    CHECK_RC(w.rc, BW_OK);
    CHECK(w.waited_ms < 2000); /* served by the release, not by the 2 s max_wait (it may have started after) */
    CHECK_INT(bw_bulkhead_in_flight(bh), 1);
    CHECK_OK(bw_bulkhead_release(bh));
    bw_bulkhead_free(bh);

    /* No slot freed: BW_EFULL after max_wait, not before. */
    CHECK_OK(bw_bulkhead_new(1, 40 * BW_NS_PER_MS, &bh, NULL));
    CHECK_OK(bw_bulkhead_acquire(bh));
    int64_t t0 = mono_ms();
    CHECK_RC(bw_bulkhead_acquire(bh), BW_EFULL);
    int64_t waited = mono_ms() - t0;
    CHECK(waited >= 39 && waited < 2000);
    CHECK_RC(bw_bulkhead_try_acquire(bh), BW_EFULL); /* try never waits */
    CHECK_OK(bw_bulkhead_release(bh));
    bw_bulkhead_free(bh);
}

static void test_bad_arguments(void)
{
    bw_error err;
    bw_bulkhead *bh = NULL;
    CHECK_RC(bw_bulkhead_new(0, 0, &bh, &err), BW_ERANGE);
    CHECK_STR(err.field, "max_concurrent");
    CHECK(strstr(err.message, "[1, 1000000]") != NULL);
    CHECK_RC(bw_bulkhead_new(1000001, 0, &bh, &err), BW_ERANGE);
    CHECK_RC(bw_bulkhead_new(1, -1, &bh, &err), BW_ERANGE);
    CHECK_STR(err.field, "max_wait");
    CHECK_RC(bw_bulkhead_new(1, 0, NULL, &err), BW_EINVAL);
    CHECK(bh == NULL);
    CHECK_RC(bw_bulkhead_try_acquire(NULL), BW_EINVAL);
    CHECK_RC(bw_bulkhead_acquire(NULL), BW_EINVAL);
    CHECK_RC(bw_bulkhead_release(NULL), BW_EINVAL);
    CHECK_RC(bw_bulkhead_in_flight(NULL), BW_EINVAL);
    CHECK_RC(bw_bulkhead_max_concurrent(NULL), BW_EINVAL);
    bw_bulkhead_free(NULL);
}

int main(void)
{
    RUN(test_counting);
    RUN(test_threads_never_exceed_n);
    RUN(test_max_wait);
    RUN(test_bad_arguments);
    return TEST_SUMMARY();
}
