/*
 * lane.c — the coordinator of coordinated circuits: a bounded write queue per
 * circuit and one background lane per store that runs the writes and polls
 * (see lane.h).
 *
 * The lane is one thread per store, shared by every coordinated breaker on it
 * (interlock runs a thread per breaker). It takes each breaker's queued writes
 * in FIFO order, and polls a breaker (BW__OP_ADVANCE: read the shared state,
 * move an elapsed OPEN to HALF_OPEN, expire a stale round) every store_poll.
 * A breaker on a manual clock has no thread: its writes and polls run inside
 * bw_clock_manual_advance, so tests are deterministic (advance by 0 to run the
 * queued writes).
 *
 * Locking: the lane mutex guards every queue, the list and each coordinator's
 * `phase`. No store call and no breaker call runs with it held. Detaching
 * (bw__coord_free, from bw_breaker_free) waits for the queue to drain for at
 * most the close timeout; a store call still hanging then is abandoned: the
 * coordinator is marked orphan and the lane frees it when the call returns,
 * without touching the breaker, which is gone. While the lane is between store
 * calls and touching the breaker (phase TOUCH), detaching waits for it, since
 * that part is short and bounded.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "share/lane.h"

#include "base/systime.h"
#include "store/front.h"
#include "time/clock.h"

enum { IDLE = 0, TOUCH = 1, CALL = 2 };

typedef struct qop {
    int op;
    uint64_t gen;
    int outcome, slow;
} qop;

typedef struct lane lane;

struct bw__coord {
    bw__link *link;
    bw__coord_result_fn result;
    void *owner;
    bw_store *store;
    lane *ln; /* NULL on a manual clock */
    bw_clock *clock;
    bw__watch watch;
    struct bw__coord *next;
    qop *q;
    uint32_t cap, head, count;
    int64_t poll, poll_next, close_timeout;
    int phase, detaching, orphan;
    /* Copies of what a store call reads, so that an abandoned call (orphan)
       never touches the breaker's memory. */
    bw__mcfg scfg;
    int64_t ttl;
    char key[BW__STORE_KEY_MAX + 1];
};

struct lane {
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    pthread_t thread;
    bw__coord *list;
    int stop;
    bw_store *store;
    bw__store_hook hook; /* bw_store_close stops the lane */
    struct lane *next;   /* in `lanes` */
};

static pthread_mutex_t manual_mu = PTHREAD_MUTEX_INITIALIZER; /* the "lane" of manual-clock coordinators */
static pthread_cond_t manual_idle = PTHREAD_COND_INITIALIZER;

static pthread_mutex_t *mu_of(bw__coord *c)
{
    return c->ln ? &c->ln->mu : &manual_mu;
}

static pthread_cond_t *idle_of(bw__coord *c)
{
    return c->ln ? &c->ln->idle : &manual_idle;
}

static void coord_destroy(bw__coord *c)
{
    free(c->q);
    free(c);
}

/*
 * Run one store operation for c, with its mutex held on entry and on return.
 * Returns 0 when c was orphaned meanwhile and has been freed.
 */
static int run_op(bw__coord *c, const qop *o)
{
    pthread_mutex_t *mu = mu_of(c);
    c->phase = TOUCH;
    pthread_mutex_unlock(mu);
    int gate = bw__link_gate(c->link);
    pthread_mutex_lock(mu);
    if (!gate) { /* degraded and not yet time to retry: writes are dropped, polls skipped */
        c->phase = IDLE;
        pthread_cond_broadcast(idle_of(c));
        return 1;
    }
    c->phase = CALL;
    pthread_mutex_unlock(mu);
    bw__shared_op op;
    memset(&op, 0, sizeof op);
    op.op = o->op;
    op.gen = o->gen;
    op.outcome = o->outcome;
    op.slow = o->slow;
    op.cfg = &c->scfg;
    op.ttl = c->ttl;
    bw_error err;
    err.message[0] = '\0';
    int rc = bw__store_update(c->store, c->key, bw__shared_apply, &op, &err);
    pthread_mutex_lock(mu);
    if (c->orphan) {
        coord_destroy(c);
        return 0;
    }
    c->phase = TOUCH;
    pthread_mutex_unlock(mu);
    c->result(c->owner, rc, &op, &err);
    pthread_mutex_lock(mu);
    c->phase = IDLE;
    pthread_cond_broadcast(idle_of(c));
    return 1;
}

/* Run c's queued writes, then a poll if one is due. Mutex held. Returns 0 if c is gone. */
static int service(bw__coord *c, int64_t now)
{
    while (c->count > 0) {
        qop o = c->q[c->head];
        c->head = (c->head + 1) % c->cap;
        c->count--;
        if (!run_op(c, &o))
            return 0;
    }
    if (!c->detaching && now >= c->poll_next) {
        c->poll_next = now + c->poll;
        qop poll = {BW__OP_ADVANCE, 0, 0, 0};
        if (!run_op(c, &poll))
            return 0;
    }
    return 1;
}

/* ---- the lane thread (system and custom clocks) ---- */

static void *lane_main(void *arg)
{
    lane *ln = arg;
    pthread_mutex_lock(&ln->mu);
    while (!ln->stop) {
        int64_t wake = INT64_MAX;
        int did = 0;
        for (bw__coord *c = ln->list; c; c = c->next) {
            if (c->phase != IDLE)
                continue;
            int64_t now = bw_clock_now(c->clock);
            if (c->count > 0 || (!c->detaching && now >= c->poll_next)) {
                service(c, now);
                did = 1;
                break; /* the list may have changed: scan again */
            }
            if (!c->detaching) {
                int64_t left = c->poll_next - now;
                wake = left < wake ? left : wake;
            }
        }
        if (did)
            continue;
        if (wake == INT64_MAX) {
            pthread_cond_wait(&ln->work, &ln->mu);
        } else {
            struct timespec ts =
                bw__timespec_of(bw__mono_now() + (wake < BW_NS_PER_S * 3600 ? wake : BW_NS_PER_S * 3600));
            pthread_cond_timedwait(&ln->work, &ln->mu, &ts);
        }
    }
    pthread_mutex_unlock(&ln->mu);
    return NULL;
}

static pthread_mutex_t lanes_mu = PTHREAD_MUTEX_INITIALIZER;
static lane *lanes; /* every running lane, under lanes_mu */

/* The store is closing: stop and join its lane (it waits out a store call that hangs). */
static void lane_stop(bw__store_hook *h)
{
    lane *ln = (lane *)((char *)h - offsetof(lane, hook));
    pthread_mutex_lock(&lanes_mu);
    for (lane **p = &lanes; *p; p = &(*p)->next)
        if (*p == ln) {
            *p = ln->next;
            break;
        }
    pthread_mutex_unlock(&lanes_mu);
    pthread_mutex_lock(&ln->mu);
    ln->stop = 1;
    pthread_cond_broadcast(&ln->work);
    pthread_mutex_unlock(&ln->mu);
    pthread_join(ln->thread, NULL);
    pthread_mutex_destroy(&ln->mu);
    pthread_cond_destroy(&ln->work);
    pthread_cond_destroy(&ln->idle);
    free(ln);
}

/* The store's lane, started on first use. */
static lane *lane_of(bw_store *s)
{
    pthread_mutex_lock(&lanes_mu);
    lane *ln = lanes;
    while (ln && ln->store != s)
        ln = ln->next;
    if (!ln) {
        ln = calloc(1, sizeof *ln);
        if (ln) {
            pthread_mutex_init(&ln->mu, NULL);
            bw__cond_init_mono(&ln->work);
            bw__cond_init_mono(&ln->idle);
            if (pthread_create(&ln->thread, NULL, lane_main, ln) != 0) {
                pthread_mutex_destroy(&ln->mu);
                pthread_cond_destroy(&ln->work);
                pthread_cond_destroy(&ln->idle);
                free(ln);
                ln = NULL;
            } else {
                ln->store = s;
                ln->hook.fn = lane_stop;
                bw__store_on_close(s, &ln->hook);
                ln->next = lanes;
                lanes = ln;
            }
        }
    }
    pthread_mutex_unlock(&lanes_mu);
    return ln;
}

/* ---- manual clocks: the advancing thread runs the writes and polls ---- */

static void manual_fire(void *ctx, int64_t now)
{
    bw__coord *c = ctx;
    pthread_mutex_lock(&manual_mu);
    service(c, now);
    pthread_mutex_unlock(&manual_mu);
}

/* ---- the breaker's side ---- */

int bw__coord_new(bw__link *l, const bw__coord_cfg *cfg, bw__coord_result_fn result, void *owner, bw__coord **out)
{
    bw__coord *c = calloc(1, sizeof *c);
    qop *q = calloc(cfg->queue, sizeof *q);
    if (!c || !q) {
        free(c);
        free(q);
        return BW_ENOMEM;
    }
    c->link = l;
    c->result = result;
    c->owner = owner;
    c->store = l->c.store;
    c->q = q;
    c->cap = cfg->queue;
    c->poll = cfg->poll;
    c->close_timeout = cfg->close_timeout;
    memcpy(c->key, l->key, sizeof c->key);
    c->scfg = l->c.scfg;
    c->ttl = l->c.ttl;
    c->clock = cfg->clock;
    c->poll_next = bw_clock_now(c->clock); /* poll at once: learn the shared state */
    if (bw__clock_kind(c->clock) == BW__CLOCK_MANUAL) {
        c->watch.fire = manual_fire;
        c->watch.ctx = c;
        bw__clock_watch(c->clock, &c->watch);
    } else {
        lane *ln = lane_of(c->store);
        if (!ln) {
            coord_destroy(c);
            return BW_ESYS;
        }
        c->ln = ln;
        pthread_mutex_lock(&ln->mu);
        c->next = ln->list;
        ln->list = c;
        pthread_cond_signal(&ln->work);
        pthread_mutex_unlock(&ln->mu);
    }
    *out = c;
    return BW_OK;
}

int bw__coord_enqueue(bw__coord *c, int op, uint64_t gen, int outcome, int slow)
{
    pthread_mutex_t *mu = mu_of(c);
    pthread_mutex_lock(mu);
    int rc = 0;
    if (c->detaching) {
        rc = 0; /* closing: later writes are dropped silently */
    } else if (c->count >= c->cap) {
        rc = -1; /* full: the arriving write is dropped, FIFO order kept */
    } else {
        qop *o = &c->q[(c->head + c->count) % c->cap];
        o->op = op;
        o->gen = gen;
        o->outcome = outcome;
        o->slow = slow;
        c->count++;
        if (c->ln)
            pthread_cond_signal(&c->ln->work);
    }
    pthread_mutex_unlock(mu);
    return rc;
}

static void unlink_coord(bw__coord *c)
{
    for (bw__coord **pp = &c->ln->list; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            return;
        }
}

void bw__coord_free(bw__coord *c, int wait)
{
    if (!c->ln) { /* manual clock: stop the watch, then run what is queued here */
        bw__clock_unwatch(c->clock, &c->watch);
        pthread_mutex_lock(&manual_mu);
        c->detaching = 1;
        service(c, INT64_MIN);
        pthread_mutex_unlock(&manual_mu);
        coord_destroy(c);
        return;
    }
    lane *ln = c->ln;
    pthread_mutex_lock(&ln->mu);
    c->detaching = 1;
    pthread_cond_signal(&ln->work);
    int64_t at = bw__mono_now() + (wait ? c->close_timeout : 0);
    struct timespec ts = bw__timespec_of(at);
    while ((c->count > 0 || c->phase != IDLE) && bw__mono_now() < at)
        pthread_cond_timedwait(&ln->idle, &ln->mu, &ts);
    while (c->phase == TOUCH)
        pthread_cond_wait(&ln->idle, &ln->mu);
    unlink_coord(c);
    if (c->phase == CALL) { /* a store call hangs: abandon it; the lane frees c when it returns */
        c->orphan = 1;
        c->count = 0;
        pthread_mutex_unlock(&ln->mu);
        return;
    }
    pthread_mutex_unlock(&ln->mu);
    coord_destroy(c);
}
