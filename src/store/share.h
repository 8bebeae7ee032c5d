/*
 * share.h — a breaker bound to a store: what breaker.c and the coordinator's
 * lane (coord.c) share (internal).
 *
 * Every field of bw__share after `coord` is guarded by the breaker's lock (the
 * engine's spin lock); store operations always run with no lock held.
 */
#ifndef BW_SHARE_H
#define BW_SHARE_H

#include <stdatomic.h>

#include "core/internal.h"
#include "store/shared.h"

struct bw_breaker;
typedef struct bw__coord bw__coord;

typedef struct bw__share {
    bw_store *store;
    int mode;      /* BW_STORE_COORDINATED or BW_STORE_STORED */
    bw__mcfg scfg; /* the configuration of the machine kept in the store */
    int64_t ttl;
    int64_t retry, retry_max; /* ns */
    double retry_mult, retry_jitter;
    bw__coord *coord; /* coordinated: the lane's side */
    /* Written under the breaker's lock; `degraded` is also read without it. */
    _Atomic int degraded;
    int64_t retry_at; /* breaker clock: the store is not tried before */
    uint32_t failures;
    uint64_t rng;
    int ov_state;     /* coordinated view: CLOSED (none), OPEN or HALF_OPEN */
    int64_t ov_until; /* OPEN: stamp when the shared wait ends */
    uint64_t ov_gen;
    int64_t ov_wait;    /* the shared open wait */
    uint32_t ov_failed; /* the shared failed rounds */
    /* Stored: the state the store last reported (read without a lock). */
    _Atomic int stored_state;
} bw__share;

/* ---- breaker.c, for coord.c ---- */

/* The breaker's clock in ns. */
int64_t bw__breaker_now(const struct bw_breaker *b);
/*
 * Whether the store may be tried now: not degraded, or its retry time came, in
 * which case this caller takes the retry and the time moves on (the others wait
 * for the next one).
 */
int bw__breaker_store_gate(struct bw_breaker *b);
/*
 * The result of a store operation: BW_OK adopts `op`'s view (coordinated) and,
 * after a write (stored) or any update (coordinated), recovers a degraded
 * breaker; an error (described by *err, which may be NULL) degrades it or pushes
 * its retry time further. Emits the events that follow.
 */
void bw__breaker_store_result(struct bw_breaker *b, int rc, const bw__shared_op *op, const bw_error *err);
/* A write the coordinator dropped because its queue was full. */
void bw__breaker_write_dropped(struct bw_breaker *b);

/* ---- coord.c, for breaker.c ---- */

/* The lane's side of a coordinated breaker; starts polling at once. */
int bw__coord_new(struct bw_breaker *b, bw__share *s, const bw_config *cfg, bw__coord **out);
/* Stop: run queued writes for up to the close timeout, then detach. */
void bw__coord_free(bw__coord *c);
/* Queue a write (BW__OP_TRIP or BW__OP_RECORD); returns 0, or -1 when dropped. */
int bw__coord_enqueue(bw__coord *c, int op, uint64_t gen, int outcome, int slow);

#endif
