/*
 * clock.h — what the layers above need of a clock beyond the public API
 * (internal; time layer).
 *
 * A clock is system, manual or custom. A manual clock keeps a list of watchers
 * that its advance runs (the schedulers of sched.h register there: nothing else
 * does). Every clock has one attachment slot, for the scheduler its
 * auto-transition timers share (sched.c), freed with the clock (the system
 * clock's by bw__clock_system_fini). clock.c knows nothing of what the slot
 * holds: it keeps a pointer and the destructor it was given.
 */
#ifndef BW_TIME_CLOCK_H
#define BW_TIME_CLOCK_H

#include <stdint.h>

#include "breakwater/clock.h"

enum { BW__CLOCK_SYSTEM = 0, BW__CLOCK_MANUAL = 1, BW__CLOCK_CUSTOM = 2 };

/* The clock's kind (BW__CLOCK_*). */
int bw__clock_kind(const bw_clock *c);
/* A number no other clock of this process has had (the system clock's is 0): a freed clock's address may come back. */
uint64_t bw__clock_serial(const bw_clock *c);

/* A watcher of a manual clock: fire(ctx, now) runs on every advance, with the clock's mutex held. */
typedef struct bw__watch {
    struct bw__watch *next;
    void (*fire)(void *ctx, int64_t now);
    void *ctx;
} bw__watch;

/* Start and stop watching a manual clock. Unwatch returns after any fire of w that was running. */
void bw__clock_watch(bw_clock *c, bw__watch *w);
void bw__clock_unwatch(bw_clock *c, bw__watch *w);

/*
 * The clock's attachment: made by make(c) on first call (NULL means "could
 * not", and the next call tries again; two racing first calls each make one and
 * one is dropped), then returned as it is; freed by drop() when the clock is
 * freed. Neither runs with the clock's mutex held.
 */
void *bw__clock_attachment(bw_clock *c, void *(*make)(bw_clock *c), void (*drop)(void *att));

/* Drop the system clock's attachment (bw_fini); a later bw__clock_attachment makes a new one. */
void bw__clock_system_fini(void);

#endif
