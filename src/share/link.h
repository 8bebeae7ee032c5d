/*
 * link.h — a breaker's link to its circuit in a store: the store key, the
 * configuration of the circuit kept there, one store operation, and the health
 * gate that degrades to local state when the store fails and lets it back in
 * when it answers again (internal; share layer).
 *
 * The link knows nothing of the breaker that owns it. The owner runs
 * operations through it, hands every result to bw__link_health, and reads what
 * the link reports (degraded or recovered, the stored circuit's state); the
 * coordinated mode's lane (lane.h) runs operations through it too.
 *
 * Health (docs/stores.md): a failing operation degrades the link; while
 * degraded, one caller per retry period (store_retry times store_retry_multiplier
 * per consecutive failure, capped at store_retry_max, plus jitter) may try the
 * store again (bw__link_gate). Only a write the store applied recovers a stored
 * link, and resets the backoff: a store that reads but cannot write (a read-only
 * file system, a full disk) stays degraded. A coordinated link also recovers on
 * any operation that completed, a poll's read included, since the view it
 * governs by was read afresh, but its backoff still resets only on a write.
 *
 * Locking: `lock` (a spin lock) guards the health fields; `degraded` and
 * `stored_state` are also read without it. No store call runs with it held, and
 * it is the innermost lock (the owner may hold its own around bw__link_health).
 */
#ifndef BW_SHARE_LINK_H
#define BW_SHARE_LINK_H

#include <stdatomic.h>

#include "base/name.h"
#include "base/spin.h"
#include "machine/machine.h"
#include "share/circuit.h"

/* What a link is made with. */
typedef struct bw__link_cfg {
    bw_store *store;
    int mode;                 /* BW_STORE_COORDINATED or BW_STORE_STORED */
    bw__mcfg scfg;            /* the configuration of the machine kept in the store */
    int64_t ttl;              /* the entry's lifetime after its last write, ns */
    int64_t quiet_ttl;        /* a quiet entry's (bw__shared_op): 0 = ttl, < 0 = not kept */
    int64_t retry, retry_max; /* ns; retry_max 0 = uncapped */
    double retry_mult, retry_jitter;
    bw_clock *clock; /* the owner's clock: retry times are on it */
    uint32_t quorum; /* coordinated: store_quorum (1: a trip opens the fleet's circuit) */
} bw__link_cfg;

typedef struct bw__link {
    bw__link_cfg c;
    char *key; /* the store key (base/name.h), owned */
    bw__spin lock;
    _Atomic int degraded;
    int64_t retry_at;          /* the owner's clock: the store is not tried before */
    _Atomic uint32_t failures; /* consecutive failed operations (the backoff's exponent) */
    uint64_t rng;
    _Atomic int stored_state; /* stored mode: the state the store last reported */
} bw__link;

/* What bw__link_health found. */
enum { BW__LINK_SAME = 0, BW__LINK_DEGRADED = 1, BW__LINK_RECOVERED = 2 };

/*
 * Make a link for the circuit of `name` (key NULL) or of its keyed circuit
 * `key`, both checked names. In stored mode the machine must fit an entry
 * (bw__shared_fits). The stored state starts as `initial`. Returns BW_OK or
 * BW_ENOMEM; bw__link_fini releases what it holds.
 */
int bw__link_init(bw__link *l, const bw__link_cfg *cfg, const char *name, const char *key, int initial);
void bw__link_fini(bw__link *l);

/*
 * Whether the store may be tried now: not degraded (no lock, no clock), or its
 * retry time came, in which case this caller takes the retry and the time moves
 * on, so that one caller per retry period waits for a store that may hang.
 */
int bw__link_gate(bw__link *l);

/*
 * One update of the circuit: fills op's configuration, lifetime and must_write
 * (a degraded stored link's retry must write: only a write shows the store
 * works again). Returns the store's status; *err (may be NULL) says why.
 */
int bw__link_update(bw__link *l, bw__shared_op *op, bw_error *err);

/*
 * An admission answered by the store's lock-free read, where the store has one
 * and the entry alone decides (bw__shared_admit_read): 1 with op filled, else 0.
 */
int bw__link_admit_read(bw__link *l, bw__shared_op *op);

/*
 * Run op as a READ (op->snap, when set, receives the circuit's snapshot) on the
 * store's lock-free read: BW_OK when answered; BW_ESTATE when the store has no
 * such read or could not answer at once (run a READ update instead), or the
 * store's error. Never writes.
 */
int bw__link_peek(bw__link *l, bw__shared_op *op);

static inline int bw__link_degraded(const bw__link *l)
{
    return atomic_load_explicit(&((bw__link *)l)->degraded, memory_order_relaxed);
}

static inline int bw__link_stored_state(const bw__link *l)
{
    return atomic_load_explicit(&((bw__link *)l)->stored_state, memory_order_relaxed);
}

/* bw__link_health's locked part (link.c). */
int bw__link_health_slow(bw__link *l, int rc, const bw__shared_op *op);

/*
 * Account for the result of an operation (rc, and op when BW_OK): degrade,
 * push the retry time on, recover, reset the backoff, note the stored state.
 * Returns BW__LINK_DEGRADED when this result degraded the link,
 * BW__LINK_RECOVERED when it recovered it, else BW__LINK_SAME. A healthy link
 * with nothing to reset takes no lock.
 */
static inline int bw__link_health(bw__link *l, int rc, const bw__shared_op *op)
{
    if (rc == BW_OK && l->c.mode == BW_STORE_STORED && bw__link_stored_state(l) != op->after)
        atomic_store_explicit(&l->stored_state, op->after, memory_order_relaxed);
    if (rc == BW_OK && !bw__link_degraded(l) &&
        (!op->wrote || !atomic_load_explicit(&l->failures, memory_order_relaxed)))
        return BW__LINK_SAME;
    return bw__link_health_slow(l, rc, op);
}

#endif
