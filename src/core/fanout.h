/*
 * fanout.h — a list of listeners that deliveries read without a lock (internal;
 * core layer). A breaker, a registry and a keyed family's breaker each may have
 * one; a fanout may point `up` at another whose listeners hear its events too
 * (a registry's breakers: the registry's).
 *
 * Locking: writers (add, remove, free) hold the fanout's mutex and replace the
 * list as a whole (copy, change, publish with one atomic exchange). A delivery
 * takes no lock: it reads the epoch, counts itself in active[epoch & 1] (one
 * atomic addition), loads the current list, calls each listener whose mask
 * wants the event, and counts itself out.
 *
 * Reclaiming a replaced list without waiting (two grace periods, as in RCU): a
 * list replaced at epoch E is freed once the epoch reaches E + 2. The epoch
 * moves from e to e + 1 only when active[(e - 1) & 1] is seen at 0 (under the
 * mutex). A delivery that loaded the list counted itself before loading it, so
 * before the replacement, in the parity of an epoch it read then (at most E,
 * perhaps an older one of the same parity); both moves, to E + 1 and to E + 2,
 * come after the replacement and each needs one parity drained, so together
 * they saw that delivery end. A delivery that counts itself in a stale parity
 * after a move loads the list only after it, so never a list replaced before.
 * New deliveries count in the new parity, so the old one drains even under
 * constant load. The moves are tried by every writer and by each delivery that
 * ends its parity's count with lists waiting (a try-lock; a writer holding the
 * mutex then looks again after unlocking). A removed listener's release runs
 * when its last list is freed, with no lock held, on whichever thread freed it
 * (a later writer or delivery, or the one that frees the fanout).
 */
#ifndef BW_CORE_FANOUT_H
#define BW_CORE_FANOUT_H

#include <stdint.h>

#include "breakwater/listener.h"

typedef struct bw__fanout bw__fanout;

/* A new, empty fanout whose events also go to `up` (borrowed; may be NULL). NULL when out of memory. */
bw__fanout *bw__fanout_new(bw__fanout *up);
/* Free f (NULL ignored): every listener's release runs. No delivery may be running on it. */
void bw__fanout_free(bw__fanout *f);
/* Add a listener (checked by the caller); *id its number. BW_OK or BW_ENOMEM. */
int bw__fanout_add(bw__fanout *f, const bw_listener *l, uint64_t *id);
/* Remove listener `id`: BW_OK, or BW_ESTATE when f has none of that number. */
int bw__fanout_remove(bw__fanout *f, uint64_t id);
/* The event types some listener of f or of a fanout up from it wants (0 for NULL). */
unsigned bw__fanout_mask(const bw__fanout *f);
/* Deliver e to every listener of f that wants it, then up the chain. */
void bw__fanout_deliver(bw__fanout *f, const bw_event *e);

#endif
