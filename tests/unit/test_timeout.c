/*
 * test_timeout.c (tests/unit/) — the time limiter with real threads: a result
 * on time, a timeout on time while the abandoned call runs on, the pool
 * bounding the pile-up (BW_EFULL), the abandoned callback, free waiting for
 * abandoned work, bad arguments. Every wait here is tens of milliseconds.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "harness.h"
#include "timeutil.h"

/* A gate a job waits on until the test opens it. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, entered, finished;
    int abandoned_calls, abandoned_rc;
    void *abandoned_arg;
} gate;

static void gate_init(gate *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_fini(gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

static int wait_gate(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    g->finished++;
    pthread_mutex_unlock(&g->mu);
    return 77;
}

static void on_abandoned(void *arg, int rc, void *user)
{
    gate *g = user;
    pthread_mutex_lock(&g->mu);
    g->abandoned_calls++;
    g->abandoned_rc = rc;
    g->abandoned_arg = arg;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static int quick(void *arg)
{
    return *(int *)arg * 2;
}

static void test_result_on_time(void)
{
    bw_limiter *lim = NULL;
    CHECK_OK(bw_limiter_new(2, &lim, NULL));
    int x = 21, rc = 0;
    CHECK_OK(bw_limiter_run(lim, BW_NS_PER_S, quick, &x, &rc));
    CHECK_INT(rc, 42);
    for (int i = 0; i < 100; i++) /* workers are reused */
        CHECK_OK(bw_limiter_run(lim, BW_NS_PER_S, quick, &x, NULL));
    CHECK_INT(bw_limiter_busy(lim), 0);
    bw_limiter_free(lim);
}

static void test_timeout_and_pileup(void)
{
    gate g;
    gate_init(&g);
    bw_limiter *lim = NULL;
    CHECK_OK(bw_limiter_new(1, &lim, NULL));
    CHECK_OK(bw_limiter_set_abandoned(lim, on_abandoned, &g));
    int rc = -1;
    int64_t t0 = mono_ms();
    CHECK_RC(bw_limiter_run(lim, 40 * BW_NS_PER_MS, wait_gate, &g, &rc), BW_ETIMEDOUT);
    int64_t took = mono_ms() - t0;
    CHECK(took >= 39 && took < 2000); /* on time, not when the call ends */
    CHECK_INT(rc, -1);                /* untouched */
    /* The abandoned call runs on and holds the only worker: the next call is refused at once. */
    CHECK_INT(bw_limiter_busy(lim), 1);
    int x = 1;
    t0 = mono_ms();
    CHECK_RC(bw_limiter_run(lim, BW_NS_PER_S, quick, &x, &rc), BW_EFULL);
    CHECK(mono_ms() - t0 < 500);
    pthread_mutex_lock(&g.mu);
    while (g.entered == 0) /* a loaded machine may start the worker late */
        pthread_cond_wait(&g.cv, &g.mu);
    CHECK_INT(g.entered, 1);
    CHECK_INT(g.finished, 0);
    pthread_mutex_unlock(&g.mu);
    /* Let it finish: the abandoned callback gets its arg and code, and the worker comes back. */
    gate_open(&g);
    pthread_mutex_lock(&g.mu);
    while (g.abandoned_calls == 0)
        pthread_cond_wait(&g.cv, &g.mu);
    CHECK_INT(g.abandoned_calls, 1);
    CHECK_INT(g.abandoned_rc, 77);
    CHECK(g.abandoned_arg == &g);
    pthread_mutex_unlock(&g.mu);
    for (int i = 0; i < 200 && bw_limiter_busy(lim) != 0; i++)
        sleep_ms(5);
    CHECK_INT(bw_limiter_busy(lim), 0);
    CHECK_OK(bw_limiter_run(lim, BW_NS_PER_S, quick, &x, &rc));
    CHECK_INT(rc, 2);
    bw_limiter_free(lim);
    gate_fini(&g);
}

static void *open_later(void *arg)
{
    sleep_ms(30);
    gate_open(arg);
    return NULL;
}

static void test_free_waits_for_abandoned_work(void)
{
    gate g;
    gate_init(&g);
    bw_limiter *lim = NULL;
    CHECK_OK(bw_limiter_new(2, &lim, NULL));
    CHECK_RC(bw_limiter_run(lim, 10 * BW_NS_PER_MS, wait_gate, &g, NULL), BW_ETIMEDOUT);
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, open_later, &g), 0);
    bw_limiter_free(lim); /* returns only once the abandoned call has */
    pthread_mutex_lock(&g.mu);
    CHECK_INT(g.finished, 1);
    pthread_mutex_unlock(&g.mu);
    pthread_join(t, NULL);
    gate_fini(&g);
}

static void test_bad_arguments(void)
{
    bw_error err;
    bw_limiter *lim = NULL;
    CHECK_RC(bw_limiter_new(0, &lim, &err), BW_ERANGE);
    CHECK_STR(err.field, "workers");
    CHECK(strstr(err.message, "[1, 1024]") != NULL);
    CHECK_RC(bw_limiter_new(1025, &lim, &err), BW_ERANGE);
    CHECK_RC(bw_limiter_new(1, NULL, &err), BW_EINVAL);
    CHECK_OK(bw_limiter_new(1, &lim, &err));
    int x = 1;
    CHECK_RC(bw_limiter_run(NULL, BW_NS_PER_S, quick, &x, NULL), BW_EINVAL);
    CHECK_RC(bw_limiter_run(lim, BW_NS_PER_S, NULL, &x, NULL), BW_EINVAL);
    CHECK_RC(bw_limiter_run(lim, 0, quick, &x, NULL), BW_ERANGE);
    CHECK_RC(bw_limiter_run(lim, -5, quick, &x, NULL), BW_ERANGE);
    CHECK_RC(bw_limiter_set_abandoned(NULL, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_limiter_busy(NULL), BW_EINVAL);
    bw_limiter_free(lim);
    bw_limiter_free(NULL);
}

int main(void)
{
    RUN(test_result_on_time);
    RUN(test_timeout_and_pileup);
    RUN(test_free_waits_for_abandoned_work);
    RUN(test_bad_arguments);
    return TEST_SUMMARY();
}
