/*
 * timer.h — the timer service that runs auto-transitions (internal).
 *
 * One thread per clock (the system clock, or each custom clock) serves every
 * breaker with auto_transition on that clock, as resilience4j's shared
 * scheduler does: a breaker costs a heap entry, not a thread. The service keeps
 * the entries in a min-heap by due time, sleeps until the earliest, and calls
 * its fire callback with no service lock held. Manual clocks do not use it: they
 * run timed transitions on the advancing thread (clock.c).
 */
#ifndef BW_TIMER_H
#define BW_TIMER_H

#include <stddef.h>
#include <stdint.h>

typedef struct bw__timer_entry {
    /* The entry's next due time, or INT64_MAX for none; called with the service lock held. */
    int64_t (*deadline)(void *ctx);
    /*
     * Run what is due at `now`; called on the service thread with no service lock
     * held. Afterwards the service re-reads the deadline and re-queues the entry.
     */
    void (*fire)(void *ctx, int64_t now);
    void *ctx;
    int64_t due; /* the heap key */
    size_t slot; /* 1 + index in the heap, or 0 when not queued */
} bw__timer_entry;

typedef struct bw__timers bw__timers;

struct bw_clock;
/* A new service reading `clock`; NULL when out of memory. Its thread starts on first use. */
bw__timers *bw__timers_new(struct bw_clock *clock);
/* Stop and join the thread, then free. No entry may still be queued or kicked. */
void bw__timers_free(bw__timers *t);
/*
 * Re-read e's deadline and (re)queue or dequeue it. Call after anything that may
 * change it, with no lock held that e->deadline takes. If the thread cannot be
 * started the entry simply never fires (transitions stay lazy).
 */
void bw__timers_kick(bw__timers *t, bw__timer_entry *e);
/* Dequeue e and wait until no fire of e is running: afterwards e is never touched again. */
void bw__timers_cancel(bw__timers *t, bw__timer_entry *e);

#endif
