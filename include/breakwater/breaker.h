/*
 * breakwater/breaker.h — the circuit breaker.
 *
 * A breaker guards calls to one dependency. Each call is two steps:
 *
 *     bw_permit p;
 *     bw_rejection why;
 *     if (bw_acquire(b, &p, &why) == BW_REJECTED)
 *         return serve_cached(why.retry_after_ns);   // fast: no call was made
 *     int rc = call_dependency();
 *     bw_settle(b, &p, rc == 0 ? BW_SUCCESS : BW_FAILURE);
 *
 * bw_acquire admits or rejects in nanoseconds and fills a caller-owned permit
 * (no allocation); bw_settle reports how the call went and measures its duration
 * from the acquire for slow-call detection. bw_breaker_call does both around a
 * function and classifies its result with the configured classifier.
 *
 * States, transitions and every threshold comparison are in docs/states.md; the
 * knobs are in config.h.
 *
 * Thread safety: every function here is safe to call from any number of threads
 * at once on the same breaker, except bw_breaker_free, which must not race any
 * other call on that breaker. A permit belongs to the call it was acquired for;
 * it may be settled from another thread, but only once.
 */
#ifndef BREAKWATER_BREAKER_H
#define BREAKWATER_BREAKER_H

#include "common.h"
#include "config.h"
#include "listener.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_breaker bw_breaker;

/*
 * A permit: proof that bw_acquire admitted a call. Allocate it wherever the call's
 * state lives (stack, request struct); bw_acquire fills it and bw_settle consumes
 * it. The fields are private and may change between versions. A copy of a permit
 * is the same permit: settle only one of them (the library cannot tell copies
 * apart, so settling both would count the call twice).
 */
typedef struct bw_permit {
    struct bw_breaker *breaker_; /* private */
    uint64_t generation_;        /* private */
    int64_t start_ns_;           /* private */
    uint32_t magic_;             /* private */
} bw_permit;

/* Why bw_acquire said no. */
typedef struct bw_rejection {
    bw_state state;         /* the state that rejected: OPEN, HALF_OPEN or FORCED_OPEN */
    int64_t retry_after_ns; /* OPEN: time until the open wait ends (> 0); else BW_NO_TIME */
    int has_last_failure;   /* 1 when a failure was recorded since the last reset */
    int last_failure;       /* the failure code of the most recent failure (see bw_settle_ex) */
} bw_rejection;

/* A point-in-time view of a breaker, taken atomically (never torn). */
typedef struct bw_snapshot {
    bw_state state;
    uint64_t total_calls;           /* calls in the window (rate policy) */
    uint64_t failed_calls;          /* of which failures (UNREACHABLE counts as a failure) */
    uint64_t slow_calls;            /* of which slow */
    double failure_rate;            /* failed / total, 0 when the window is empty */
    double slow_call_rate;          /* slow / total, 0 when the window is empty */
    uint32_t consecutive_failures;  /* consecutive policy */
    uint32_t consecutive_successes; /* consecutive policy */
    uint32_t probes_admitted;       /* HALF_OPEN: probes admitted this round, settled or not */
    uint32_t probes_in_flight;      /* HALF_OPEN: probes admitted and not yet settled */
    uint32_t probes_completed;      /* HALF_OPEN: probes settled with a verdict */
    uint32_t probes_inconclusive;   /* HALF_OPEN: probes that came back UNREACHABLE */
    uint32_t failed_rounds;         /* consecutive failed half-open rounds (open-wait backoff) */
    int64_t open_wait_ns;           /* the wait of the current (or next) OPEN period */
    int64_t retry_after_ns;         /* OPEN: remaining wait (>= 0); else BW_NO_TIME */
    uint64_t generation;            /* bumped by every transition and operator verb */
    int shared;                     /* 1 when a store's shared circuit governs admission (store.h):
                                       stored mode, or a coordinated breaker following the fleet's
                                       OPEN or HALF_OPEN; then state, retry_after_ns, open_wait_ns,
                                       failed_rounds and generation are the shared circuit's (the
                                       window's counts stay this process's in coordinated mode) */
} bw_snapshot;

/*
 * bw_breaker_new — make a breaker named `name` (1 to 255 printable ASCII bytes,
 * no spaces: a name later becomes a store key)
 * from a copy of `cfg` (NULL means all defaults). No event is emitted.
 * Returns BW_OK and stores the breaker in *out (free with bw_breaker_free);
 * BW_EINVAL for a NULL out or a bad name; BW_ERANGE when the config fails
 * bw_config_validate (or, with a stored-mode store, a window that does not fit
 * an entry); BW_ENOMEM (also when the clock's timer service for auto_transition
 * cannot be made); BW_ESYS when a coordinated store's lane thread cannot start
 * (the first coordinated breaker on a store starts it). *err (may be NULL) says
 * which field is wrong.
 * Thread safety: safe from any thread; cfg must not be modified concurrently.
 */
BW_API int bw_breaker_new(const char *name, const bw_config *cfg, bw_breaker **out, bw_error *err);

/*
 * bw_breaker_free — cancel the breaker's timed transitions (waiting out one that
 * is running on the timer thread) and release it, with all its keyed circuits.
 * NULL is ignored, and so is a breaker this call does not own: one made by a
 * registry (bw_registry_free frees it) or a keyed circuit (see keyed.h).
 * No other call on the breaker or its circuits may run concurrently or later;
 * permits still outstanding must not be settled afterwards, and no circuit
 * handle may still be held. A coordinated breaker first lets its store's lane
 * run its queued writes (trips, probe outcomes), waiting at most
 * store_close_timeout; with none queued it waits for nothing, abandoning a
 * store call of its that may be running.
 * Thread safety: must not race any other call on this breaker (including a
 * listener still running for it, and its own timer's listener).
 */
BW_API void bw_breaker_free(bw_breaker *b);

/*
 * bw_breaker_name — the breaker's name (owned by the breaker), or NULL for NULL.
 * A keyed circuit has its breaker's name. Thread safety: any thread.
 */
BW_API const char *bw_breaker_name(const bw_breaker *b);

/*
 * bw_breaker_key — a keyed circuit's key (owned by the circuit, valid while the
 * circuit is pinned), or NULL for a breaker that is not a keyed circuit and for
 * NULL. Thread safety: any thread.
 */
BW_API const char *bw_breaker_key(const bw_breaker *b);

/*
 * TIME. On the system clock (no bw_config_set_clock) a breaker whose
 * slow_call_duration is 100 ms or more (the default is 60 s) or off, and that
 * was made with no listener taking BW_EVENT_CALL, reads the library's coarse
 * clock (so do its counters' durations, whose histogram's buckets are what it
 * resolves: BW_DURATION_BOUNDS_NS): the system
 * clock as of the last tick of a ticker thread (one per process, started by the
 * first such breaker, stopped by bw_fini), read with one load. Its period is a
 * hundredth of the smallest such threshold in the process, at least 1 ms and at
 * most 10 ms. So a call is timed, an open wait ends and a retry_after is
 * reported to within one period (plus however long the ticker waits for a CPU):
 * a slow call is one whose duration reached the threshold to within 1 %, and a
 * breaker may reject for up to a period after its wait has ended. Waking up
 * costs the ticker CPU (tens of microseconds a tick on a virtual machine), so
 * it ticks only while it pays: for 2 s after a breaker is made, and then for 2 s
 * at a time whenever one thread reads the clock a thousand times within 10 ms;
 * otherwise these breakers read the precise clock, and the ticker sleeps: an
 * idle process spends nothing on it. (It is a thread, so a process forks with
 * it: the child has none, and starts its own when it needs one; glibc allows
 * this, ThreadSanitizer only with die_after_fork=0. bw_fini ends it.) A breaker
 * with a shorter threshold, or CALL events (which carry durations), reads the
 * precise clock (the TSC where it is reliable). A forked child starts its own
 * ticker on first use. With a clock of your own (a manual clock in tests)
 * everything is exact.
 */

/*
 * bw_acquire — ask to make a call.
 * Returns BW_OK and fills *permit: make the call, then settle the permit exactly
 * once. Returns BW_REJECTED (not an error) when the breaker refuses: OPEN before
 * its wait ends, HALF_OPEN with its probe caps reached, or FORCED_OPEN; *why (may
 * be NULL) then says the state, retry_after and the last failure, and a
 * BW_EVENT_REJECTED is emitted. Returns BW_EINVAL if b or permit is NULL.
 * An OPEN breaker whose wait has ended moves to HALF_OPEN and admits this caller
 * as the first probe.
 * Cost: in CLOSED, one atomic load (plus a clock read when slow-call detection,
 * counters or a call listener need durations); no lock, no allocation. An OPEN
 * rejection is two loads more, and one atomic addition when counting. With a store
 * (store.h): a coordinated breaker costs the same in CLOSED and OPEN, and one
 * store update (a probe lease) in HALF_OPEN; a stored breaker reads or updates
 * its store on every call, which may block as long as the store does.
 * Thread safety: any number of threads at once on the same breaker.
 */
BW_API int bw_acquire(bw_breaker *b, bw_permit *permit, bw_rejection *why);

/*
 * bw_settle — report the outcome of an admitted call; same as
 * bw_settle_ex(b, permit, outcome, 0). Thread safety: as bw_settle_ex.
 */
BW_API int bw_settle(bw_breaker *b, bw_permit *permit, bw_outcome outcome);

/*
 * bw_settle_ex — report the outcome of an admitted call, with a failure code that
 * becomes the breaker's "last failure" when outcome is BW_FAILURE (in any state,
 * even when the outcome itself is dropped as stale; cleared only by reset).
 * The engine measures the call's duration from the acquire and marks it slow when
 * it reached slow_call_duration. An outcome from a permit issued before the
 * breaker's last transition or operator verb is stale and dropped (not counted).
 * `b` is the breaker the permit was acquired from; a keyed circuit's permit
 * (from bw_acquire on a handle or from bw_keyed_acquire) may be settled on the
 * circuit or on its breaker, and a bw_keyed_acquire permit unpins its circuit
 * here (keyed.h). A stored breaker's settle is one store update (blocking as
 * long as the store); a coordinated probe's outcome is queued for the lane.
 * To abandon a call without judging it (cancelled, shutting down), settle it
 * BW_IGNORED.
 * Returns BW_OK (also for a dropped stale outcome); BW_EINVAL for NULL b or
 * permit, or an unknown outcome; BW_EPERMIT when the permit was already settled,
 * never filled by bw_acquire, or belongs to another breaker — nothing is recorded
 * then. The permit is consumed by a BW_OK return.
 * Thread safety: any number of threads at once on the same breaker; a permit may
 * be settled from a thread other than the one that acquired it, but only once
 * and not from two threads at once.
 */
BW_API int bw_settle_ex(bw_breaker *b, bw_permit *permit, bw_outcome outcome, int failure_code);

/*
 * bw_settle_timeout — report that an admitted call timed out (the caller gave up
 * on it): recorded as BW_FAILURE with failure_code, and as slow whenever
 * slow-call detection is on, even when the measured duration is below
 * slow_call_duration (a timeout shorter than the slow threshold still says the
 * dependency is slow). With slow-call detection off it is a plain failure.
 * The pipeline's breaker layer uses it for BW_ETIMEDOUT (pipeline.h).
 * Returns and consumes the permit as bw_settle_ex.
 * Thread safety: as bw_settle_ex.
 */
BW_API int bw_settle_timeout(bw_breaker *b, bw_permit *permit, int failure_code);

/* A guarded function for bw_breaker_call: returns a code the classifier judges. */
typedef int (*bw_call_fn)(void *arg);

/*
 * bw_breaker_call — acquire, run fn(arg) on this thread, classify its return code
 * with the configured classifier, and settle (the code is the failure code).
 * Returns BW_OK with *rc (may be NULL) set to fn's return code; BW_REJECTED when
 * the breaker refused (fn not run; *why may be NULL); BW_EINVAL for NULL b or fn.
 * A classifier returning an unknown outcome is treated as BW_FAILURE.
 * Thread safety: as bw_acquire and bw_settle; fn and the classifier run on the
 * calling thread with no breakwater lock held.
 */
BW_API int bw_breaker_call(bw_breaker *b, bw_call_fn fn, void *arg, int *rc, bw_rejection *why);

/*
 * bw_breaker_state — the current state (a bw_state, >= 0), or BW_EINVAL for NULL.
 * An OPEN breaker whose wait has ended still reads OPEN until a call or the
 * auto-transition timer moves it. A coordinated breaker (store.h) reads the
 * shared OPEN or HALF_OPEN it follows; a stored one reads the state its store
 * reported at this breaker's last store operation (bw_breaker_snapshot asks the
 * store). Cost: one atomic load. Thread safety: any thread.
 */
BW_API int bw_breaker_state(const bw_breaker *b);

/*
 * bw_breaker_snapshot — fill *out with the breaker's counters and state, all
 * taken at one instant under the breaker's lock. A stored breaker reads its
 * circuit from the store (the store's lock-free read where it has one, else one
 * update that writes nothing: a snapshot never renews or changes the entry); if
 * the store fails it reports its local circuit. Returns BW_OK or BW_EINVAL.
 * Thread safety: any thread, concurrently with calls (it briefly takes the
 * breaker's locks).
 */
BW_API int bw_breaker_snapshot(bw_breaker *b, bw_snapshot *out);

/*
 * A circuit as a store holds it, read without a breaker (bw_store_read_circuit):
 * for tools that watch a fleet's circuits (the breakwater command's status).
 */
typedef struct bw_store_circuit {
    int found;             /* 1: the store holds a live entry under the name; 0: none (or expired) */
    int readable;          /* 1: the entry decoded as a circuit; 0: it did not (written by something
                              else, or corrupt: a breaker replaces it at its next update) */
    bw_snapshot snap;      /* the circuit (readable only): state, window counts and rates on the
                              store's clock, consecutive counts, probes, retry_after, generation;
                              shared is 1 */
    bw_policy policy;      /* the policy its entry records */
    bw_window_kind window; /* the rate policy's window, as its entry records it */
    uint32_t window_size;  /* calls (count) or seconds (time); 0 for the consecutive policy */
    int64_t expires_in_ns; /* the entry's lifetime left on the store's clock, or BW_NO_TIME: never */
    int hold;              /* 1 for an operator hold (FORCED_OPEN, DISABLED, METRICS_ONLY): it never
                              expires, until a reset */
    int fence;             /* 1 for a reset's fence: a CLOSED entry kept so that calls in flight
                              settle as stale (docs/stores.md) */
    int votes;             /* coordinated quorum: instances whose local trips it holds */
    uint32_t bytes;        /* the entry's size */
} bw_store_circuit;

/*
 * bw_store_read_circuit — read the circuit `name` (a store key: a breaker's
 * name, or "NAME KEY" for a keyed circuit) from store s, without a breaker and
 * without changing anything (the store's lock-free read where it has one,
 * else one update that writes nothing). The entry records the policy and the
 * window's kind and size, so no configuration is needed to decode it; the
 * thresholds (failure_rate, wait...) are not in it. A stored-mode circuit
 * holds its window; a coordinated one holds the shared state only (its
 * windows are each process's: counts 0). Returns BW_OK with *out filled
 * (out->found 0 when there is no live entry; out->readable 0 for an entry
 * that is not a circuit); BW_EINVAL (NULL s or out, a bad name: *err says
 * why); the store's errors. Thread safety: any thread.
 */
BW_API int bw_store_read_circuit(bw_store *s, const char *name, bw_store_circuit *out, bw_error *err);

/*
 * Cumulative counters. Every breaker counts from its creation (unless made with
 * bw_config_set_counters(cfg, 0, ...)), and never resets them (not even
 * bw_breaker_reset: they are counters in Prometheus' sense, totals that only
 * grow). Kinds of settled call, as bw_counters.calls is indexed:
 */
typedef enum bw_call_kind {
    BW_CALL_SUCCESS = 0,      /* SUCCESS, not slow */
    BW_CALL_FAILURE = 1,      /* FAILURE (and bw_settle_timeout), not slow */
    BW_CALL_SLOW_SUCCESS = 2, /* SUCCESS that took at least slow_call_duration */
    BW_CALL_SLOW_FAILURE = 3, /* FAILURE that was slow (or timed out with slow-call detection on) */
    BW_CALL_IGNORED = 4,      /* IGNORED */
    BW_CALL_UNREACHABLE = 5,  /* UNREACHABLE */
    BW_CALL_STALE = 6,        /* any outcome dropped as stale (the breaker moved on since its acquire) */
    BW_CALL_KINDS = 7
} bw_call_kind;

/* bw_call_kind_name — "success", "failure", "slow_success", "slow_failure", "ignored", "unreachable", "stale"
 * or "unknown". Static string. Thread safety: any thread. */
BW_API const char *bw_call_kind_name(bw_call_kind kind);

/*
 * The call-duration histogram's buckets: fixed, in nanoseconds. Bucket i counts
 * the settled calls (stale ones included) whose duration was at most
 * BW_DURATION_BOUNDS[i] and more than the bound before it; the last bucket
 * (index BW_DURATION_BUCKETS - 1) counts the rest (+Inf). The bounds in seconds:
 * 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60. They start at 10 ms because
 * that is what every clock a breaker may time its calls with resolves: the
 * coarse clock (TIME, above), which times calls by default, reads the time as
 * of its last tick, up to 10 ms apart, so a 3 ms call measures 0 or 10 ms and
 * a bucket of 1 ms or 5 ms could only be wrong. On it a call is counted to
 * within a period (plus however long the ticker waited for a CPU): one within
 * a period of a bound may be counted in the bucket next to it; each bucket is
 * at least a period wide. On the precise clock (and a manual or custom one)
 * durations are exact, and all calls of 10 ms or less share the first bucket;
 * bw_counters.duration_sum_s still gives their mean. A breaker that does not
 * time its calls (no slow-call detection and counters off) has no histogram.
 */
#define BW_DURATION_BUCKETS 13
#define BW_DURATION_BOUNDS_NS                                                                                          \
    {                                                                                                                  \
        10000000, 25000000, 50000000, 100000000, 250000000, 500000000, 1000000000, 2500000000, 5000000000,             \
            10000000000, 30000000000, 60000000000                                                                      \
    }

/* Bytes of the short message kept with the last failure, its terminating NUL included. */
#define BW_FAILURE_MESSAGE_MAX 64

/* What bw_breaker_counters reads. Each counter is exact; they are read one after another, not at one instant. */
typedef struct bw_counters {
    uint64_t calls[BW_CALL_KINDS];                  /* settled calls by bw_call_kind */
    uint64_t rejected[6];                           /* rejected acquires by the rejecting bw_state (OPEN, HALF_OPEN,
                                                       FORCED_OPEN; the others stay 0) */
    uint64_t transitions[6][6];                     /* state changes [from][to] (bw_state), operator verbs included */
    uint64_t rounds_passed, rounds_failed;          /* half-open probe rounds that closed or reopened the breaker
                                                       (inconclusive and timed-out rounds count as failed) */
    uint64_t store_degraded;                        /* BW_EVENT_STORE_DEGRADED events */
    uint64_t store_recovered;                       /* BW_EVENT_STORE_RECOVERED events */
    uint64_t store_dropped;                         /* BW_EVENT_STORE_WRITE_DROPPED events */
    uint64_t resets;                                /* bw_breaker_reset calls (BW_EVENT_RESET) */
    uint64_t duration_buckets[BW_DURATION_BUCKETS]; /* per bucket, not cumulative (see BW_DURATION_BOUNDS_NS) */
    uint64_t duration_count;                        /* sum of duration_buckets */
    double duration_sum_s;                          /* the durations' sum, in seconds */
    int timed;                                      /* 1 when the breaker times its calls (a histogram) */
    int counting;                                   /* 0 when made with counters off: every count is 0 */
    bw_state state;                                 /* the state now (bw_breaker_state) */
    bw_reason reason;                               /* why the breaker is in it (BW_REASON_INITIAL: made so) */
    int has_last_failure;                           /* 1 when a failure was settled since the last reset */
    int last_failure_code;                          /* its failure code (bw_settle_ex) */
    int64_t last_failure_age_ns;                    /* how long ago it was settled, on the breaker's clock */
    char last_failure_message[BW_FAILURE_MESSAGE_MAX]; /* its message (bw_settle_msg), "" if none */
} bw_counters;

/*
 * bw_breaker_counters — read b's cumulative counters into *out, without a lock
 * and without stopping calls (each counter is read with atomic loads; calls
 * settled meanwhile may or may not be in it). For a keyed breaker, the
 * breaker's own circuit only: bw_keyed_counters adds its circuits'. Returns
 * BW_OK or BW_EINVAL (NULL argument). Thread safety: any thread, at any time.
 */
BW_API int bw_breaker_counters(const bw_breaker *b, bw_counters *out);

/*
 * bw_counters_add — add every count of *src into *dst (for totals over many
 * breakers); the other fields of *dst are left alone. NULL arguments are ignored.
 */
BW_API void bw_counters_add(bw_counters *dst, const bw_counters *src);

/*
 * bw_settle_msg — bw_settle_ex with a short message (may be NULL) that, when
 * outcome is BW_FAILURE, is kept with the last failure (truncated to
 * BW_FAILURE_MESSAGE_MAX - 1 bytes; copied) and reported in bw_counters and in
 * the CALL event (the message is kept only when the breaker counts:
 * bw_config_set_counters). Returns and consumes the permit as bw_settle_ex.
 * With a message it takes the general settle path (a few tens of nanoseconds);
 * with NULL it is bw_settle_ex. Thread safety: as bw_settle_ex.
 */
BW_API int bw_settle_msg(bw_breaker *b, bw_permit *permit, bw_outcome outcome, int failure_code, const char *message);

/*
 * bw_breaker_add_listener — add a listener to b (listener.h): it receives the
 * events of b, and of b's keyed circuits, that its mask selects, from the next
 * event on. *id (may be NULL) receives a number for bw_breaker_remove_listener
 * (never 0). A listener added after the breaker was made reports CALL
 * durations as precisely as the breaker already timed its calls (breaker.h,
 * TIME). Returns BW_OK; BW_EINVAL for NULL b or l, NULL l->fn, an empty mask,
 * or b a keyed circuit (add it to the circuit's breaker); BW_ENOMEM.
 * Thread safety: any thread, concurrently with calls and deliveries, also from
 * inside a listener.
 */
BW_API int bw_breaker_add_listener(bw_breaker *b, const bw_listener *l, uint64_t *id);

/*
 * bw_breaker_remove_listener — remove the listener `id` of b. It receives no
 * event that starts after this returns; deliveries already running on other
 * threads finish, and then its release runs (bw_listener). Returns BW_OK;
 * BW_EINVAL for NULL b; BW_ESTATE when b has no listener `id` (removed already,
 * or the one of its configuration, which cannot be removed); BW_ENOMEM when the
 * shorter list cannot be made (the listener stays, unchanged).
 * Thread safety: as bw_breaker_add_listener.
 */
BW_API int bw_breaker_remove_listener(bw_breaker *b, uint64_t id);

/*
 * bw_breaker_last_failure — the failure code of the most recent failure since the
 * last reset. Returns BW_OK with *code set; BW_ESTATE when there is none;
 * BW_EINVAL for NULL arguments. Thread safety: any thread (one atomic load).
 */
BW_API int bw_breaker_last_failure(const bw_breaker *b, int *code);

/*
 * Operator verbs. Each bumps the generation (outcomes of calls in flight are
 * dropped as stale), resets the probe round, and emits BW_EVENT_STATE_CHANGE when
 * the state changed; a repeated override emits nothing.
 * - reset: CLOSED with a fresh window, no backoff and no last failure; always
 *   emits BW_EVENT_RESET (after any state change).
 * - force_open: FORCED_OPEN; rejects every call (no retry_after) until reset or
 *   another override. Window kept.
 * - disable: DISABLED; admits every call and records nothing. Window kept.
 * - metrics_only: METRICS_ONLY (shadow mode); admits every call and keeps
 *   recording into the window, but never trips.
 * On a stored breaker (store.h) a verb also updates the fleet's circuit in the
 * store (one blocking store update; a reset keeps the entry as a fence at its
 * new generation, so that calls in flight in every process settle as stale;
 * docs/stores.md); if the store fails, only this breaker's
 * local circuit changed and it is degraded. A coordinated breaker's verbs stay
 * local. Each returns BW_OK or BW_EINVAL (b NULL).
 * Thread safety: any thread, concurrently with calls; listeners run on the
 * calling thread after the breaker's locks are released.
 */
BW_API int bw_breaker_reset(bw_breaker *b);
/*
 * bw_breaker_open_for — open b now for `ns` (in (0, 365d]) because the
 * dependency said when to come back (an HTTP 429 or 503 with Retry-After;
 * curl.h does it for you with bw_curl_set_open_on_retry_after): CLOSED and
 * HALF_OPEN move to OPEN with that wait (reason BW_REASON_RETRY_AFTER; a
 * half-open round ends, its outcomes stale, and its backoff is kept, as the
 * round did not fail: it counts in neither rounds_passed nor rounds_failed),
 * an OPEN whose wait ends sooner starts a new OPEN period of `ns`, one that
 * ends later is left alone. After the wait, recovery goes as usual
 * (HALF_OPEN, probes; a later trip waits the configured wait again). Not an
 * operator state: it ends by itself.
 * With a store (store.h) the whole fleet honours it: the shared circuit opens
 * as a trip whose open wait is `ns`, counted from when the store applies it,
 * and every breaker on it rejects until then. Stored mode: one blocking store
 * update, as a verb (if the store fails, only this breaker's local circuit
 * opens, and it is degraded). Coordinated mode: this breaker opens at once
 * and its lane writes the fleet's OPEN as it writes a trip (store_queue: a
 * full queue drops it, BW_EVENT_STORE_WRITE_DROPPED; written late if the
 * store was failing and the wait is not over), never subject to store_quorum
 * (the dependency itself said so); the others follow it from their next poll.
 * A stored OPEN that would last longer than any breaker of the circuit's
 * configuration could open it for (its longest backoff, or 365 d) is read back
 * as corrupt (docs/stores.md).
 * Returns BW_OK (b is OPEN until at least now + ns); BW_ESTATE in an operator
 * state (FORCED_OPEN, DISABLED, METRICS_ONLY), which wins: the stored
 * circuit's in stored mode, this breaker's own in coordinated mode (whose
 * verbs stay local; nothing is written then); BW_ERANGE for ns out of range;
 * BW_EINVAL for NULL. Thread safety: any thread.
 */
BW_API int bw_breaker_open_for(bw_breaker *b, int64_t ns);
BW_API int bw_breaker_force_open(bw_breaker *b);
BW_API int bw_breaker_disable(bw_breaker *b);
BW_API int bw_breaker_metrics_only(bw_breaker *b);

/* The operator verbs as values, for applying one to many breakers at once. */
typedef enum bw_verb {
    BW_VERB_RESET = 0,       /* bw_breaker_reset */
    BW_VERB_FORCE_OPEN = 1,  /* bw_breaker_force_open */
    BW_VERB_DISABLE = 2,     /* bw_breaker_disable */
    BW_VERB_METRICS_ONLY = 3 /* bw_breaker_metrics_only */
} bw_verb;

/*
 * bw_breaker_apply — run the verb `v` on b, exactly as its function above.
 * Returns BW_OK, or BW_EINVAL for NULL b or an unknown verb. Thread safety: as
 * the verbs.
 */
BW_API int bw_breaker_apply(bw_breaker *b, bw_verb v);

/*
 * bw_breaker_bytes — the memory the breaker holds (struct, window, name, the copy
 * of its configuration that its keyed circuits are made from, timer, store link;
 * for a keyed circuit its key and map entry instead of a configuration; not its
 * keyed circuits, see bw_keyed_bytes), for capacity planning. 0 for NULL.
 * Thread safety: any thread.
 */
BW_API size_t bw_breaker_bytes(const bw_breaker *b);

#ifdef __cplusplus
}
#endif
#endif
