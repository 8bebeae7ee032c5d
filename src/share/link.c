/*
 * link.c — a breaker's link to its circuit in a store (see link.h).
 */
#include "share/link.h"

#include <stdlib.h>
#include <string.h>

#include "base/compiler.h"
#include "base/hash.h"
#include "base/sat.h"
#include "share/instance.h"
#include "store/front.h"

int bw__link_init(bw__link *l, const bw__link_cfg *cfg, const char *name, const char *key, int initial)
{
    memset(l, 0, sizeof *l);
    char buf[BW__STORE_KEY_MAX + 1];
    size_t n = bw__store_key(buf, name, key);
    l->key = malloc(n + 1);
    if (!l->key)
        return BW_ENOMEM;
    memcpy(l->key, buf, n + 1);
    l->c = *cfg;
    atomic_init(&l->lock.v, 0);
    atomic_init(&l->degraded, 0);
    atomic_init(&l->stored_state, initial);
    atomic_init(&l->failures, 0);
    l->rng = bw__hash_seed(l);
    return BW_OK;
}

void bw__link_fini(bw__link *l)
{
    free(l->key);
    l->key = NULL;
}

/* The delay before a failing store is tried again: base * multiplier^k, capped, plus jitter. Lock held. */
static int64_t retry_delay(bw__link *l)
{
    double cap = l->c.retry_max > 0 ? (double)l->c.retry_max : 1e18;
    double d =
        bw__grow((double)l->c.retry, l->c.retry_mult, atomic_load_explicit(&l->failures, memory_order_relaxed), cap);
    d += d * l->c.retry_jitter * bw__unit(bw__splitmix(&l->rng));
    return d >= 9e18 ? INT64_MAX / 2 : (int64_t)d;
}

int bw__link_gate(bw__link *l)
{
    if (BW_LIKELY(!bw__link_degraded(l)))
        return 1; /* the common case: no lock, no clock */
    int64_t now = bw_clock_now(l->c.clock);
    bw__spin_lock(&l->lock);
    int open = !l->degraded || now >= l->retry_at;
    if (open && l->degraded)
        l->retry_at = bw__sat_add(now, retry_delay(l)); /* this caller retries; the others stay local */
    bw__spin_unlock(&l->lock);
    return open;
}

/* What every operation of l takes from it. */
static void prepare(bw__link *l, bw__shared_op *op)
{
    op->cfg = &l->c.scfg;
    op->ttl = l->c.ttl;
    op->quiet_ttl = l->c.quiet_ttl;
    op->quorum = l->c.quorum;
    op->instance = op->op == BW__OP_TRIP && op->quorum > 1 ? bw__instance_id() : 0; /* getpid: only a vote needs it */
}

int bw__link_update(bw__link *l, bw__shared_op *op, bw_error *err)
{
    prepare(l, op);
    op->must_write = l->c.mode == BW_STORE_STORED && bw__link_degraded(l);
    return bw__store_update(l->c.store, l->key, bw__shared_apply, op, err);
}

int bw__link_admit_read(bw__link *l, bw__shared_op *op)
{
    bw_store_entry e;
    int found = 0;
    int64_t now;
    prepare(l, op);
    if (bw__store_try_read(l->c.store, l->key, &now, &e, &found) != BW_OK)
        return 0;
    return bw__shared_admit_read(op, now, found ? &e : NULL);
}

int bw__link_peek(bw__link *l, bw__shared_op *op)
{
    bw_store_entry e, unused;
    int found = 0;
    int64_t now;
    op->op = BW__OP_READ;
    prepare(l, op);
    int rc = bw__store_try_read(l->c.store, l->key, &now, &e, &found);
    if (rc == BW_OK)
        bw__shared_apply(op, now, found ? &e : NULL, &unused); /* a READ never writes */
    return rc;
}

int bw__link_health_slow(bw__link *l, int rc, const bw__shared_op *op)
{
    int64_t now = rc == BW_OK ? 0 : bw_clock_now(l->c.clock);
    int what = BW__LINK_SAME;
    bw__spin_lock(&l->lock);
    if (rc == BW_OK) {
        if (l->degraded && (op->wrote || l->c.mode != BW_STORE_STORED)) {
            atomic_store_explicit(&l->degraded, 0, memory_order_relaxed);
            what = BW__LINK_RECOVERED;
        }
        if (op->wrote)
            atomic_store_explicit(&l->failures, 0, memory_order_relaxed);
    } else {
        if (!l->degraded)
            what = BW__LINK_DEGRADED;
        atomic_store_explicit(&l->degraded, 1, memory_order_relaxed);
        l->retry_at = bw__sat_add(now, retry_delay(l));
        uint32_t f = atomic_load_explicit(&l->failures, memory_order_relaxed);
        if (f < UINT32_MAX)
            atomic_store_explicit(&l->failures, f + 1, memory_order_relaxed);
    }
    bw__spin_unlock(&l->lock);
    return what;
}
