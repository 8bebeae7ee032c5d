/*
 * lane.h — the coordinated mode's background: a bounded write queue per
 * coordinated circuit, and one lane per store and clock that runs the queued
 * writes and polls the shared circuit every store_poll (internal; share layer).
 *
 * A coordinator belongs to its owner (a coordinated breaker), which registers
 * a result callback: the lane hands it the result of every operation it ran
 * (a poll, a queued write), on the lane's thread or, on a manual clock, the
 * thread that advanced it. That callback is the only way the lane tells its
 * owner anything.
 */
#ifndef BW_SHARE_LANE_H
#define BW_SHARE_LANE_H

#include "share/link.h"

typedef struct bw__coord bw__coord;

/* The owner's callback: the result of an operation the lane ran (err may be NULL). */
typedef void (*bw__coord_result_fn)(void *owner, int rc, const bw__shared_op *op, const bw_error *err);

/* What a coordinator is made with. */
typedef struct bw__coord_cfg {
    bw_clock *clock;       /* the owner's clock: polls and the queue run on it */
    int64_t poll;          /* store_poll, ns */
    uint32_t queue;        /* store_queue: the most writes waiting */
    int64_t close_timeout; /* store_close_timeout, ns */
} bw__coord_cfg;

/*
 * The lane's side of a coordinated circuit on link l (which must outlive it
 * until bw__coord_stop); polls at once. Returns BW_OK with *out, BW_ENOMEM, or
 * BW_ESYS when the lane's thread cannot start.
 */
int bw__coord_new(bw__link *l, const bw__coord_cfg *cfg, bw__coord_result_fn result, void *owner, bw__coord **out);
/*
 * Stop the lane's work for its owner: when `wait`, let queued writes run for up
 * to the close timeout (on a manual clock: run them here, now); then drop what
 * is left. Afterwards the lane never calls the owner back or touches the link
 * again (a store call still running is abandoned: its result is dropped), and
 * a write queued meanwhile is dropped quietly. The coordinator itself stays
 * valid until bw__coord_release, so that an owner's thread that races the stop
 * (a timer's trip) may still queue into it.
 */
void bw__coord_stop(bw__coord *c, int wait);
/* Free the owner's side of a stopped coordinator. */
void bw__coord_release(bw__coord *c);
/*
 * Queue a write: BW__OP_TRIP, BW__OP_RECORD (gen, outcome, slow) or
 * BW__OP_OPEN_FOR (wait); the other arguments are 0. Returns 0, or -1 when
 * the queue was full (or its memory could not be made) and it was dropped.
 */
int bw__coord_enqueue(bw__coord *c, int op, uint64_t gen, int outcome, int slow, int64_t wait);

#endif
