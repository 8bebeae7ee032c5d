/*
 * sched.h — the one scheduler: run something when an instant of a clock comes
 * (internal; time layer).
 *
 * A scheduler keeps entries in a min-heap by due instant and runs each entry's
 * fire() once it is due, then asks the entry for its next deadline. Two runners
 * sit behind the one interface, chosen by the clock:
 * - threaded (system and custom clocks): one thread per scheduler, started on
 *   the first kick, sleeping on CLOCK_MONOTONIC until the earliest entry is
 *   due (at most an hour at a time, then it reads the clock again);
 * - manual-advance (manual clocks): no thread; bw_clock_manual_advance and
 *   bw_clock_manual_set run every entry due at the new time, on the advancing
 *   thread, before they return, with the clock's mutex held.
 * Users: the auto-transition timers of the breakers on one clock share that
 * clock's scheduler (bw__sched_of, resilience4j's shared scheduler: a breaker
 * costs an entry, not a thread); each store lane has a scheduler of its own
 * (share/lane.c), so a store call that hangs delays no timer and no other store.
 *
 * Entries belong to their owners, and are added before their first kick and
 * removed before the owner frees them. A scheduler calls deadline() with its mutex
 * held: the owner may take a lock of its own there, and must then never kick or
 * cancel while holding that lock. fire() runs with no scheduler lock held and
 * may kick any entry, its own included.
 */
#ifndef BW_TIME_SCHED_H
#define BW_TIME_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "base/heap.h"
#include "breakwater/clock.h"

typedef struct bw__sched bw__sched;

typedef struct bw__sched_entry {
    /* Set by the owner before the first kick. */
    int64_t (*deadline)(struct bw__sched_entry *e); /* next due instant on the clock; INT64_MAX: none */
    void (*fire)(struct bw__sched_entry *e, int64_t now);
    bw__heap_node node; /* the scheduler's */
} bw__sched_entry;

/*
 * A new scheduler on `clock` (threaded, its thread started now, or
 * manual-advance for a manual clock). Returns BW_OK with *out, BW_ENOMEM, or
 * BW_ESYS when the thread cannot start.
 */
int bw__sched_new(bw_clock *clock, bw__sched **out);
/* Stop (joining the thread) and free. Every entry must have been removed. */
void bw__sched_free(bw__sched *s);
/* Take e on: room in the heap is reserved for it, so that no kick can fail. BW_OK or BW_ENOMEM. */
int bw__sched_add(bw__sched *s, bw__sched_entry *e);
/* Re-read e's deadline and queue, move or dequeue e accordingly. Call after anything that may change it. */
void bw__sched_kick(bw__sched *s, bw__sched_entry *e);
/*
 * Let e go: dequeue it and wait until no fire of e runs; afterwards e is never
 * touched again. Not from e's own fire.
 */
void bw__sched_remove(bw__sched *s, bw__sched_entry *e);

/*
 * The scheduler a clock's auto-transition timers share, made on first use and
 * freed with the clock (the system clock's by bw__sched_fini). NULL when it
 * could not be made.
 */
bw__sched *bw__sched_of(bw_clock *clock);
/* Stop and free the system clock's shared scheduler, if any (bw_fini). */
void bw__sched_fini(void);

#endif
