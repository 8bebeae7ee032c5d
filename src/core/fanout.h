/*
 * fanout.h — a list of listeners that deliveries read without a lock (internal;
 * core layer). A breaker, a registry and a keyed family's breaker each may have
 * one; a fanout may point `up` at another whose listeners hear its events too
 * (a registry's breakers: the registry's).
 *
 * Locking: writers (add, remove, free) hold the fanout's mutex and replace the
 * list as a whole (copy, change, publish with one atomic store). A delivery
 * counts itself in `active` (one atomic add and one subtract), loads the
 * current list, and calls each listener whose mask wants the event. A replaced
 * list is kept on a retired chain until `active` is seen at 0 after it was
 * replaced (by the writer right after replacing it, by the last delivery to
 * end, or at the next writer, or at free): a delivery that loaded it counted
 * itself before loading, so it is in `active` until it ends. No delivery waits
 * for a writer, nor a writer for a delivery. A removed listener's release runs
 * when its last list is freed, with no lock held.
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
