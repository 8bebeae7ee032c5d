/*
 * view.h — what a coordinated breaker knows of its fleet's circuit: the shared
 * OPEN or HALF_OPEN it follows (internal; machine layer).
 *
 * Pure, like the machine: no locks, no clock reads, no I/O. The engine keeps a
 * view beside its machine, under the same lock; what a store operation reports
 * of the shared circuit is adopted here, and the engine's published state is
 * the view's while the view governs (docs/stores.md, coordinated mode).
 */
#ifndef BW_MACHINE_VIEW_H
#define BW_MACHINE_VIEW_H

#include <stdint.h>

#include "machine/machine.h"

typedef struct bw__view {
    int state;       /* the shared state: CLOSED (nothing to follow), OPEN or HALF_OPEN */
    int64_t until;   /* OPEN: when the shared wait ends, on the breaker's clock (ns) */
    uint64_t gen;    /* the shared circuit's generation */
    int64_t wait;    /* its current (or next) open wait */
    uint32_t failed; /* its consecutive failed rounds (the fleet's backoff) */
} bw__view;

/* A view of a fresh shared circuit: CLOSED, generation 0. */
void bw__view_init(bw__view *v);

/*
 * Adopt what a store operation reported of the shared circuit: its state after
 * the operation (any state; only OPEN and HALF_OPEN are followed), generation,
 * open wait and failed rounds, and for OPEN the time `left` until its wait
 * ends, seen at `now` on the breaker's clock. A shared recovery (CLOSED at a
 * newer generation after a shared OPEN or HALF_OPEN) cuts the local machine's
 * own OPEN or HALF_OPEN short (interlock's rule): m is reset then.
 */
void bw__view_adopt(bw__view *v, bw__machine *m, int state, uint64_t gen, int64_t left, int64_t wait, uint32_t failed,
                    int64_t now);

/*
 * Whether the view governs a breaker whose machine is in `local`: a shared OPEN
 * or HALF_OPEN, while the machine is in an automatic state (the breaker's own
 * operator states win).
 */
static inline int bw__view_governs(const bw__view *v, int local)
{
    return (v->state == BW_STATE_OPEN || v->state == BW_STATE_HALF_OPEN) &&
           (local == BW_STATE_CLOSED || local == BW_STATE_OPEN || local == BW_STATE_HALF_OPEN);
}

#endif
