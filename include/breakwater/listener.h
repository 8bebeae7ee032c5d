/*
 * breakwater/listener.h — events a breaker reports, and the callback that
 * receives them.
 *
 * A breaker has at most one listener (set on its configuration). The listener
 * chooses which event types it wants with a bit mask, so an unwanted event costs
 * one branch and nothing else. Every event is delivered after the breaker's
 * internal lock is released, so a listener may call back into the breaker
 * (acquire, settle, reset, snapshot...). Events of one call are delivered in the
 * order the call produced them; events produced by different threads at the same
 * time may reach the listener in either order.
 *
 * Which thread runs the listener: the thread whose call produced the event
 * (acquire, settle, an operator verb), the clock's timer thread (one per clock,
 * shared by its breakers) for auto-transitions on the system clock or a custom
 * clock, a store's lane thread (one per store and clock) for what a coordinated breaker
 * learns from its store (a shared OPEN, HALF_OPEN or recovery, degraded and
 * recovered events; store.h), or the thread that
 * advanced a manual clock. In that last case the manual clock's own mutex is
 * held (no breaker lock is): such a listener may call into any breaker, but must
 * not advance or set that clock, nor create or free a breaker on it that has
 * auto_transition or a coordinated store (which includes making a new keyed
 * circuit of such a breaker, since that may also evict one).
 */
#ifndef BREAKWATER_LISTENER_H
#define BREAKWATER_LISTENER_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bw_breaker;

/* Event types; also bits for the listener's mask (BW_EVENT_MASK(type)). Append-only. */
typedef enum bw_event_type {
    BW_EVENT_STATE_CHANGE = 0, /* from -> to; fired once per transition */
    BW_EVENT_CALL = 1,         /* a permit was settled: outcome, slow, duration */
    BW_EVENT_REJECTED = 2,     /* an acquire was refused: state, retry_after */
    BW_EVENT_RESET = 3,        /* bw_breaker_reset ran (always, even if already CLOSED) */
    /* Pipeline events (pipeline.h): `breaker` is NULL and `name` is the pipeline's name. */
    BW_EVENT_RETRY = 4,               /* a retry layer will run another attempt: attempt, delay_ns, status */
    BW_EVENT_BULKHEAD_REJECTED = 5,   /* a bulkhead layer found no slot (status BW_EFULL) */
    BW_EVENT_FALLBACK = 6,            /* a fallback layer substituted a value: fallback_reason, status */
    BW_EVENT_STORE_DEGRADED = 7,      /* the breaker's store failed (status, message): it runs on local state */
    BW_EVENT_STORE_RECOVERED = 8,     /* the store took a write again: its shared state counts again */
    BW_EVENT_STORE_WRITE_DROPPED = 9, /* a coordinated write found the queue full and was dropped */
    BW_EVENT_STORE_CORRUPT = 10,      /* the breaker's entry in its store was malformed (message): it was
                                         replaced by a fresh circuit; fired once, by the update that replaced it */
    BW_EVENT_SHED = 11                /* pipeline: a breaker layer saw local saturation further in (status
                                         BW_EFULL: a bulkhead or limiter pool; BW_REJECTED: a breaker further in)
                                         and recorded nothing: this process shed the call */
} bw_event_type;

#define BW_EVENT_MASK(type) (1u << (unsigned)(type))
#define BW_EVENTS_ALL 0xffffffffu

/*
 * One event. Pointers inside are valid only during the callback. Fields that do
 * not apply to the event's type are zero (BW_NO_TIME for retry_after_ns);
 * REJECTED sets both `from` and `to` to the rejecting state.
 */
typedef struct bw_event {
    bw_event_type type;
    struct bw_breaker *breaker; /* the breaker (or keyed circuit) that produced it */
    const char *name;           /* the breaker's name (a keyed circuit's breaker's name) */
    bw_state from, to;          /* STATE_CHANGE: old and new state; REJECTED: both the state */
    bw_outcome outcome;         /* CALL: the outcome the caller or classifier gave */
    int slow;                   /* CALL: 1 when duration >= slow_call_duration */
    int stale;                  /* CALL: 1 when the outcome was dropped because the
                                   breaker moved on since the permit was issued */
    int64_t duration_ns;        /* CALL: settle time minus acquire time */
    int64_t retry_after_ns;     /* REJECTED: time until OPEN admits a probe, or BW_NO_TIME */
    const char *key;            /* a keyed circuit's key; NULL for a breaker's own circuit */
    int attempt;                /* RETRY: the attempt that just ended (1 = the first call) */
    int64_t delay_ns;           /* RETRY: the wait before the next attempt */
    int status;                 /* RETRY, FALLBACK: the status of the outcome that caused it
                                   (BW_OK with a failing code, BW_REJECTED, BW_ETIMEDOUT, ...);
                                   BULKHEAD_REJECTED: BW_EFULL; STORE_DEGRADED: the store's
                                   error (BW_ESYS, BW_ELIMIT, BW_ETIMEDOUT, ...) */
    int rc;                     /* RETRY, FALLBACK: the call's return code when status is BW_OK */
    int fallback_reason;        /* FALLBACK: the BW_FALLBACK_ON_* bit the fallback stood in for */
    const char *message;        /* STORE_DEGRADED: the store's error message ("" when it gave none);
                                   STORE_CORRUPT: what was wrong; NULL for other types */
} bw_event;

/*
 * The listener callback. `user` is the pointer given with it. It runs with no
 * breakwater lock held; it must not free the breaker that produced the event.
 */
typedef void (*bw_listener_cb)(const bw_event *event, void *user);

#ifdef __cplusplus
}
#endif
#endif
