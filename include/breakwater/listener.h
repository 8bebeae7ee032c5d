/*
 * breakwater/listener.h — events a breaker reports, why its state changed, and
 * the callbacks that receive them.
 *
 * A breaker has any number of listeners: the one its configuration names
 * (bw_config_set_listener), those added to it (bw_breaker_add_listener,
 * breaker.h), and those of the registry that made it (bw_registry_add_listener,
 * registry.h). A keyed circuit reports to its breaker's listeners (and so to
 * its breaker's registry's). Each listener chooses the event types it wants
 * with a bit mask, so an event nobody wants costs one branch. (Any listener at
 * all, even one that wants only state changes, takes its breakers off the
 * quickest settle and OPEN rejection paths: about 10 to 30 instructions a call
 * more.) A breaker's listeners are added and removed at any time, from any
 * thread, even from a listener (a registry's, from any thread but a
 * listener); delivery takes no lock (it reads the current list with atomic
 * operations), so a slow listener delays only the thread it runs on. Every
 * event is delivered after the breaker's internal lock is released, so a
 * listener may call back into the breaker (acquire, settle, reset,
 * snapshot...). Events of one call are delivered in the order the call
 * produced them, to the breaker's own listeners first (in the order they were
 * added), then to its registry's; events produced by different threads at the
 * same time may reach a listener in either order, and a listener may run on
 * several threads at once.
 *
 * What a listener must not do (C has no exceptions, so nothing can stop one
 * that misbehaves): block for long (it runs on the caller's thread, inside its
 * bw_acquire or bw_settle, or on a timer or lane thread that other breakers
 * share), longjmp out of the callback, free the breaker that produced the event,
 * or remove itself and then free `user` before its release callback ran (see
 * bw_listener). Errors inside a listener are the listener's to handle: the
 * library ignores whatever it does and the call goes on.
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
    BW_EVENT_STORE_WRITE_DROPPED = 9, /* a coordinated write found the queue full and was dropped, or a
                                         write lost every race to other writers (status BW_ECONFLICT,
                                         message): contention, the store is not degraded */
    BW_EVENT_STORE_CORRUPT = 10,      /* the breaker's entry in its store was malformed (message): it was
                                         replaced by a fresh circuit; fired once, by the update that replaced it */
    BW_EVENT_SHED = 11                /* pipeline: a breaker layer saw local saturation further in (status
                                         BW_EFULL: a bulkhead or limiter pool; BW_REJECTED: a breaker further in)
                                         and recorded nothing: this process shed the call */
} bw_event_type;

#define BW_EVENT_MASK(type) (1u << (unsigned)(type))
#define BW_EVENTS_ALL 0xffffffffu

/*
 * Why a state changed (bw_event.reason; bw_counters.reason for the current
 * state). Append-only.
 */
typedef enum bw_reason {
    BW_REASON_NONE = 0,                 /* not a state change */
    BW_REASON_INITIAL = 1,              /* the state the breaker was made in (no transition yet) */
    BW_REASON_FAILURE_RATE = 2,         /* CLOSED -> OPEN: the window's failure rate reached failure_rate
                                           (rate: the rate; total: the calls in the window) */
    BW_REASON_SLOW_RATE = 3,            /* CLOSED -> OPEN: the slow-call rate reached slow_call_rate
                                           (rate, total as above) */
    BW_REASON_CONSECUTIVE_FAILURES = 4, /* CLOSED -> OPEN, consecutive policy: `count` failures in a row */
    BW_REASON_WAIT_ENDED = 5,           /* OPEN -> HALF_OPEN: the open wait ended */
    BW_REASON_PROBES_PASSED = 6,        /* HALF_OPEN -> CLOSED: the probe round passed (total: its probes;
                                           rate: their failure rate) */
    BW_REASON_PROBES_FAILED = 7,        /* HALF_OPEN -> OPEN: the round failed (rate policy: rate is the
                                           failure or slow rate that failed it, total its probes; consecutive:
                                           count is the failures in a row) */
    BW_REASON_PROBES_INCONCLUSIVE = 8,  /* HALF_OPEN -> OPEN: as many probes came back UNREACHABLE as the round
                                           admits (permitted_probes; success_threshold for the consecutive
                                           policy), so it learned nothing (count: those probes); or a
                                           consecutive round completed 1,000,000 probes without a verdict */
    BW_REASON_HALF_OPEN_TIMEOUT = 9,    /* HALF_OPEN -> OPEN: the round outlived max_wait_in_half_open */
    BW_REASON_SHARED = 10,              /* adopted from the store's shared circuit (another process tripped,
                                           probed or recovered it, or this breaker follows it again once
                                           its store answers) */
    BW_REASON_OPERATOR = 11,            /* an operator verb: reset, force_open, disable, metrics_only */
    BW_REASON_RETRY_AFTER = 12,         /* -> OPEN: the dependency said when to come back (bw_breaker_open_for,
                                           e.g. an HTTP 429/503 with Retry-After) */
    BW_REASON_STORE_DOWN = 13           /* the store failed (BW_EVENT_STORE_DEGRADED): a coordinated breaker
                                           stops following the fleet's circuit and shows its own local one
                                           until the store answers; says nothing of the dependency or of the
                                           fleet (an OPEN -> CLOSED for this reason is no recovery) */
} bw_reason;

/*
 * bw_reason_name — "none", "initial", "failure_rate", "slow_rate",
 * "consecutive_failures", "wait_ended", "probes_passed", "probes_failed",
 * "probes_inconclusive", "half_open_timeout", "shared", "operator", "retry_after", "store_down", or
 * "unknown". Static string. Thread safety: any thread.
 */
BW_API const char *bw_reason_name(bw_reason reason);

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
    int64_t duration_ns;        /* CALL: settle time minus acquire time, as precise as the
                                   breaker's clock (breaker.h, TIME); 0 when the breaker does not
                                   time its calls (no slow-call detection, counters off, and no
                                   CALL listener when it was made) */
    int64_t retry_after_ns;     /* REJECTED: time until OPEN admits a probe, or BW_NO_TIME */
    const char *key;            /* a keyed circuit's key; NULL for a breaker's own circuit */
    int attempt;                /* RETRY: the attempt that just ended (1 = the first call) */
    int64_t delay_ns;           /* RETRY: the wait before the next attempt */
    int status;                 /* RETRY, FALLBACK: the status of the outcome that caused it
                                   (BW_OK with a failing code, BW_REJECTED, BW_ETIMEDOUT, ...);
                                   BULKHEAD_REJECTED: BW_EFULL; STORE_DEGRADED: the store's
                                   error (BW_ESYS, BW_ELIMIT, BW_ETIMEDOUT, ...) */
    int rc;                     /* RETRY, FALLBACK: the call's return code when status is BW_OK;
                                   CALL: the failure code given at settle (bw_settle_ex) */
    int fallback_reason;        /* FALLBACK: the BW_FALLBACK_ON_* bit the fallback stood in for */
    const char *message;        /* STORE_DEGRADED: the store's error message ("" when it gave none);
                                   STORE_CORRUPT: what was wrong; CALL: the message given at settle
                                   (bw_settle_msg), else NULL; NULL for other types */
    /* STATE_CHANGE: why (see bw_reason for what rate, total and count hold for each reason). */
    bw_reason reason;
    double rate;    /* the rate that decided it, 0..1 */
    uint64_t total; /* the calls (or probes) the rate was taken over */
    uint32_t count; /* consecutive failures, or inconclusive probes */
} bw_event;

/*
 * The listener callback. `user` is the pointer given with it. It runs with no
 * breakwater lock held; it must not free the breaker that produced the event.
 */
typedef void (*bw_listener_cb)(const bw_event *event, void *user);

/*
 * A listener to add to a breaker or a registry (bw_breaker_add_listener,
 * bw_registry_add_listener). The struct is copied; `user` is borrowed.
 * `release` (may be NULL) is called once with `user` when no delivery can
 * reach `fn` any more: soon after the listener was removed and every delivery
 * that had started by then ended (no quiet moment is needed: it happens under
 * constant load too), or when its breaker or registry is freed. That is when
 * `user` may be freed: bw_*_remove_listener itself does not wait for a
 * delivery running on another thread. `release` runs with no breakwater lock
 * held, on a thread that removes or adds a listener on the same breaker or
 * registry, on a thread whose delivery there ends, or on the thread that frees
 * the breaker or registry.
 */
typedef struct bw_listener {
    unsigned mask;               /* BW_EVENT_MASK bits of the events it wants; not 0 */
    bw_listener_cb fn;           /* not NULL */
    void *user;                  /* passed to fn and release */
    void (*release)(void *user); /* optional */
} bw_listener;

#ifdef __cplusplus
}
#endif
#endif
