/*
 * limiter.c — the time limiter: a fixed pool of worker threads, one job slot
 * each, and a caller that waits for its job with a timeout.
 *
 * Locking: one mutex `mu` guards every worker's state and job fields and the
 * `stopping` flag. A worker waits on its own `go` condition for a job; the
 * submitting caller waits on that worker's `done` condition. Neither the job
 * nor the abandoned callback runs under mu.
 *
 * Design notes: a worker is IDLE, BUSY (running a job) or DONE (finished, the
 * caller has not collected the result yet). A job's payload is copied into the
 * worker's slot, so an abandoned job never touches the caller's stack after the
 * caller has gone; when the caller collects a finished job it copies the
 * payload back. An abandoned job's worker calls the abandoned callback and only
 * then becomes IDLE, so the pool size really bounds the abandoned work. No
 * queue: with no IDLE worker a call is refused at once (BW_EFULL).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resilience/resilience.h"

#define MAX_WORKERS 1024

enum { IDLE = 0, BUSY = 1, DONE = 2 };

typedef struct worker {
    struct bw_limiter *lim;
    pthread_t thread;
    pthread_cond_t go, done;
    int state, abandoned, rc;
    int (*run)(void *payload);
    void *arg;
    alignas(16) unsigned char payload[BW__JOB_BYTES];
} worker;

struct bw_limiter {
    pthread_mutex_t mu;
    int n, stopping;
    bw_abandoned_cb abandoned;
    void *abandoned_user;
    worker w[];
};

static void *worker_main(void *p)
{
    worker *w = p;
    bw_limiter *lim = w->lim;
    pthread_mutex_lock(&lim->mu);
    for (;;) {
        while (w->state != BUSY && !lim->stopping)
            pthread_cond_wait(&w->go, &lim->mu);
        if (w->state != BUSY)
            break;
        pthread_mutex_unlock(&lim->mu);
        int rc = w->run(w->payload);
        pthread_mutex_lock(&lim->mu);
        if (w->abandoned) {
            bw_abandoned_cb cb = lim->abandoned;
            void *user = lim->abandoned_user;
            pthread_mutex_unlock(&lim->mu);
            if (cb)
                cb(w->arg, rc, user);
            pthread_mutex_lock(&lim->mu);
            w->state = IDLE;
        } else {
            w->rc = rc;
            w->state = DONE;
            pthread_cond_signal(&w->done);
        }
    }
    pthread_mutex_unlock(&lim->mu);
    return NULL;
}

/* Stop and join the first `started` workers, then release everything. */
static void teardown(bw_limiter *lim, int conds, int started)
{
    pthread_mutex_lock(&lim->mu);
    lim->stopping = 1;
    for (int i = 0; i < started; i++)
        pthread_cond_signal(&lim->w[i].go);
    pthread_mutex_unlock(&lim->mu);
    for (int i = 0; i < started; i++)
        pthread_join(lim->w[i].thread, NULL);
    for (int i = 0; i < conds; i++) {
        pthread_cond_destroy(&lim->w[i].go);
        pthread_cond_destroy(&lim->w[i].done);
    }
    pthread_mutex_destroy(&lim->mu);
    free(lim);
}

int bw_limiter_new(int workers, bw_limiter **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    if (workers < 1 || workers > MAX_WORKERS)
        return bw__fail(err, BW_ERANGE, "workers", "workers must be in [1, %d], got %d", MAX_WORKERS, workers);
    bw_limiter *lim = calloc(1, sizeof *lim + (size_t)workers * sizeof(worker));
    if (!lim)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    if (pthread_mutex_init(&lim->mu, NULL) != 0) {
        free(lim);
        return bw__fail(err, BW_ESYS, "", "could not create the limiter's mutex");
    }
    lim->n = workers;
    int conds = 0, started = 0;
    for (; conds < workers; conds++) {
        worker *w = &lim->w[conds];
        w->lim = lim;
        if (bw__cond_init_mono(&w->go) != 0)
            break;
        if (bw__cond_init_mono(&w->done) != 0) {
            pthread_cond_destroy(&w->go);
            break;
        }
    }
    if (conds == workers)
        for (; started < workers; started++)
            if (pthread_create(&lim->w[started].thread, NULL, worker_main, &lim->w[started]) != 0)
                break;
    if (started < workers) {
        teardown(lim, conds, started);
        return bw__fail(err, BW_ESYS, "", "could not create the limiter's threads or condition variables");
    }
    *out = lim;
    return BW_OK;
}

void bw_limiter_free(bw_limiter *lim)
{
    if (lim)
        teardown(lim, lim->n, lim->n);
}

int bw_limiter_set_abandoned(bw_limiter *lim, bw_abandoned_cb fn, void *user)
{
    if (!lim)
        return BW_EINVAL;
    pthread_mutex_lock(&lim->mu);
    lim->abandoned = fn;
    lim->abandoned_user = fn ? user : NULL;
    pthread_mutex_unlock(&lim->mu);
    return BW_OK;
}

int bw__limiter_submit(bw_limiter *lim, int64_t timeout_ns, int (*run)(void *payload), void *payload, size_t size,
                       void *arg, int *rc)
{
    struct timespec ts = bw__timespec_of(bw__mono_now() + timeout_ns);
    pthread_mutex_lock(&lim->mu);
    worker *w = NULL;
    for (int i = 0; i < lim->n && !w; i++)
        if (lim->w[i].state == IDLE)
            w = &lim->w[i];
    if (!w) {
        pthread_mutex_unlock(&lim->mu);
        return BW_EFULL;
    }
    memcpy(w->payload, payload, size);
    w->run = run;
    w->arg = arg;
    w->abandoned = 0;
    w->state = BUSY;
    pthread_cond_signal(&w->go);
    while (w->state == BUSY)
        if (pthread_cond_timedwait(&w->done, &lim->mu, &ts) == ETIMEDOUT && w->state == BUSY)
            break;
    int status = BW_OK;
    if (w->state == DONE) {
        memcpy(payload, w->payload, size);
        if (rc)
            *rc = w->rc;
        w->state = IDLE;
    } else {
        w->abandoned = 1;
        status = BW_ETIMEDOUT;
    }
    pthread_mutex_unlock(&lim->mu);
    return status;
}

/* bw_limiter_run's job: a function and its argument. */
typedef struct plain_job {
    bw_call_fn fn;
    void *arg;
} plain_job;

static int run_plain(void *payload)
{
    plain_job *j = payload;
    return j->fn(j->arg);
}

int bw_limiter_run(bw_limiter *lim, int64_t timeout_ns, bw_call_fn fn, void *arg, int *rc)
{
    if (!lim || !fn)
        return BW_EINVAL;
    if (bw__check_duration("timeout", timeout_ns, 0, NULL) != BW_OK)
        return BW_ERANGE;
    plain_job j = {fn, arg};
    return bw__limiter_submit(lim, timeout_ns, run_plain, &j, sizeof j, arg, rc);
}

int bw_limiter_busy(bw_limiter *lim)
{
    if (!lim)
        return BW_EINVAL;
    int n = 0;
    pthread_mutex_lock(&lim->mu);
    for (int i = 0; i < lim->n; i++)
        n += lim->w[i].state != IDLE;
    pthread_mutex_unlock(&lim->mu);
    return n;
}
