/*
 * netpool.c — the connection pool of the network store backends (netpool.h):
 * slots handed out one call at a time, connected on demand (a connection a
 * call's deadline cut short goes on with the next call), a backoff after a
 * failure, one deadline per call.
 *
 * Locking: p->mu guards which slot is busy, the connection of an idle slot,
 * the backoff and the last failure; p->cv signals a slot coming free. A busy
 * slot is its thread's, used without the mutex (connecting, commands): no
 * network wait happens under p->mu. ops->close runs under it (a close that
 * does not wait); no other lock is taken under it.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/compiler.h"
#include "base/systime.h"
#include "store/netpool.h"

#define BACKOFF_MIN (10 * (int64_t)1000000) /* 10 ms */
#define BACKOFF_MAX ((int64_t)BW_NS_PER_S)  /* 1 s */

int bw__netpool_init(bw__netpool *p, const char *name, int size, int64_t timeout_ns, const bw__netpool_ops *ops,
                     void *backend, bw_error *err)
{
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        return bw__fail(err, BW_ESYS, "", "could not create the %s: store's mutex", name);
    if (bw__cond_init_mono(&p->cv) != 0) {
        pthread_mutex_destroy(&p->mu);
        return bw__fail(err, BW_ESYS, "", "could not create the %s: store's condition variable", name);
    }
    p->name = name;
    p->ops = ops;
    p->backend = backend;
    p->size = size < 1 ? 1 : size > BW__NETPOOL_MAX ? BW__NETPOOL_MAX : size;
    p->timeout_ns = timeout_ns;
    p->pid = getpid();
    return BW_OK;
}

void bw__netpool_destroy(bw__netpool *p)
{
    int forked = getpid() != p->pid;
    for (int i = 0; i < p->size; i++)
        if (p->slots[i].conn)
            p->ops->close(p->backend, p->slots[i].conn, forked);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

void bw__netpool_adopt(bw__netpool *p, void *conn)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; conn && i < p->size; i++)
        if (!p->slots[i].busy && !p->slots[i].conn) { /* connect_until is 0: no connection is being made there */
            p->slots[i].conn = conn;
            conn = NULL;
        }
    if (conn)
        p->ops->close(p->backend, conn, 0);
    pthread_mutex_unlock(&p->mu);
}

/* Note a failure: drop every idle connection and back off. mu held. */
static void note_down(bw__netpool *p, const bw_error *e)
{
    for (int i = 0; i < p->size; i++)
        if (!p->slots[i].busy && p->slots[i].conn) {
            p->ops->close(p->backend, p->slots[i].conn, 0); /* of an idle socket: no wait */
            p->slots[i].conn = NULL;
            p->slots[i].connect_until = 0;
        }
    p->backoff = p->backoff ? (p->backoff * 2 < BACKOFF_MAX ? p->backoff * 2 : BACKOFF_MAX) : BACKOFF_MIN;
    p->down_until = bw__mono_now() + p->backoff;
    /*
     * A failure is an error: a backend that gave none (code 0, BW_OK) would
     * make every acquire of the backoff "succeed" without a slot.
     */
    int known = e && e->code != BW_OK;
    p->down_code = known ? e->code : BW_ESYS;
    if (known && e->message[0])
        snprintf(p->down_why, sizeof p->down_why, "%.185s", e->message);
    else
        snprintf(p->down_why, sizeof p->down_why, "%.20s: the connection failed", p->name);
    pthread_cond_broadcast(&p->cv); /* every waiter fails at once (the backoff) instead of at its deadline */
}

int bw__netpool_acquire(bw__netpool *p, int now_only, bw__netslot **out, bw_error *err)
{
    if (BW_UNLIKELY(getpid() != p->pid)) /* its connections are the parent's: replies would cross */
        return bw__fail(err, BW_ESTATE, "", "%s: this store was opened in another process: open it again after fork()",
                        p->name);
    int64_t deadline = bw__mono_now() + p->timeout_ns;
    bw__netslot *pick = NULL;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int64_t now = bw__mono_now();
        if (p->backoff && now < p->down_until) {
            int code = p->down_code;
            char why[sizeof p->down_why];
            memcpy(why, p->down_why, sizeof why);
            int64_t left = (p->down_until - now) / 1000000 + 1;
            pthread_mutex_unlock(&p->mu);
            return bw__fail(err, code, "", "%.185s (not retried for %" PRId64 " ms)", why, left);
        }
        bw__netslot *making = NULL, *idle = NULL; /* a connection being made; none */
        for (int i = 0; i < p->size && !pick; i++) {
            if (p->slots[i].busy)
                continue;
            if (p->slots[i].conn && !p->slots[i].connect_until)
                pick = &p->slots[i];
            else if (p->slots[i].conn && !making)
                making = &p->slots[i];
            else if (!p->slots[i].conn && !idle)
                idle = &p->slots[i];
        }
        if (!pick && !now_only)
            pick = making ? making : idle; /* go on with a connection being made rather than begin another */
        if (pick)
            break;
        if (now_only) {
            pthread_mutex_unlock(&p->mu);
            return BW_ESTATE;
        }
        if (now >= deadline) {
            pthread_mutex_unlock(&p->mu);
            return bw__fail(err, BW_ETIMEDOUT, "", "%s: all %d connections of the pool stayed busy for the timeout",
                            p->name, p->size);
        }
        struct timespec ts = bw__timespec_of(deadline);
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    pick->busy = 1;
    pick->deadline = deadline;
    pthread_mutex_unlock(&p->mu);
    if (!pick->conn || pick->connect_until) {
        bw_error e = {0, "", ""};
        int rc = p->ops->connect(p->backend, pick, deadline, &e);
        if (rc != BW_OK) {
            pthread_mutex_lock(&p->mu);
            if (!pick->conn) /* it failed; otherwise the next call goes on with it: no failure yet */
                note_down(p, &e);
            pick->busy = 0;
            pthread_cond_signal(&p->cv);
            pthread_mutex_unlock(&p->mu);
            if (err)
                *err = e;
            return rc;
        }
    }
    *out = pick;
    return BW_OK;
}

void bw__netpool_release(bw__netpool *p, bw__netslot *s, int broken, const bw_error *e)
{
    pthread_mutex_lock(&p->mu);
    if (broken) {
        if (s->conn)
            p->ops->close(p->backend, s->conn, 0);
        s->conn = NULL;
        s->connect_until = 0;
        s->busy = 0;
        note_down(p, e);
    } else {
        s->busy = 0;
        p->backoff = 0;
    }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

int bw__netpool_done(bw__netpool *p, bw__netslot *s, int broken, int rc, const bw_error *e, bw_error *err)
{
    bw__netpool_release(p, s, broken, e);
    if (rc != BW_OK && err)
        *err = *e;
    return rc;
}

int bw__netpool_check(const bw__netpool *p, const bw__netslot *s, bw_error *err)
{
    if (bw__mono_now() < s->deadline)
        return BW_OK;
    return bw__fail(err, BW_ETIMEDOUT, "", "%s: the call's deadline (timeout %" PRId64 " ms) passed", p->name,
                    p->timeout_ns / 1000000);
}

int bw__netpool_wait(int fd, int what, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - bw__mono_now();
        if (left <= 0)
            return 0;
        short ev = what == BW__NETPOOL_OUT ? POLLOUT : what == BW__NETPOOL_INOUT ? (POLLIN | POLLOUT) : POLLIN;
        struct pollfd pf = {fd, ev, 0};
        int n = poll(&pf, 1, (int)((left + 999999) / 1000000));
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}
