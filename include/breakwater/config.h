/*
 * breakwater/config.h — the breaker configuration: an opaque object with typed,
 * validated setters and a text form for files and command lines.
 *
 * A configuration is a template: bw_breaker_new copies it, so one config may
 * make many breakers and may be changed or freed afterwards without affecting
 * them. Every setter checks its value at once and, when it is out of range,
 * returns BW_ERANGE (NaN and infinities included) with a message naming the field
 * and the allowed range, leaving the config unchanged. Checks that involve two
 * fields (max_concurrent_probes <= permitted_probes, wait_max >= wait, the
 * keyed_* and store_* bounds, and every knob that the others would leave
 * without effect: NOTHING IS SILENTLY IGNORED, below) run in
 * bw_config_validate, which bw_breaker_new also calls, so the order of the
 * setters never matters.
 *
 * The knobs, their text names, defaults and ranges (docs/configuration.md has the
 * full reference):
 *
 *   policy                rate | consecutive                     rate
 *   failure_rate          (0, 1]                                 0.5
 *   slow_call_rate        (0, 1]                                 1.0
 *   slow_call_duration    off, or (0, 365d]                      60s
 *   min_calls             [1, 1000000000], and at most N of a    10, or N of a
 *                         count:N window                         smaller count:N
 *   window                count:N (N in [1, 1000000]) or
 *                         time:Ns (N in [1, 2592000] seconds:    count:100
 *                         30 days)
 *   permitted_probes      [1, 1000000]                           10
 *   max_concurrent_probes [1, permitted_probes]                  1
 *   wait                  (0, 365d]           60s (rate), 30s (consecutive)
 *   wait_multiplier       [1, 1000]                              1
 *   wait_max              none, or [wait, 365d]                  none
 *   max_wait_in_half_open off, or (0, 365d]; >= 10ms on the     60s
 *                         system clock (bw_config_validate)
 *   auto_transition       true | false                           false
 *   counters              true | false                           true
 *   unreachable_counts    true | false                           true
 *   initial_state         closed | forced_open | disabled | metrics_only   closed
 *   error_threshold       [1, 1000000000]  (consecutive)         5
 *   success_threshold     [1, 1000000]  (consecutive)            2
 *   half_open_capacity    [1, 1000000]  (consecutive)            1
 *   keyed_maxsize         [0, 1000000000]  (0 = unbounded)       1024
 *   keyed_limit           0 (= 2 x keyed_maxsize), or
 *                         [keyed_maxsize, 1000000000]            0
 *   keyed_idle            [0, 365d]                              300s
 *   keyed_history_idle    (0, 365d], and >= keyed_idle           1h
 *   store_ttl             (0, 365d]                              1d
 *   store_poll            (0, 365d]  (coordinated)               1s
 *   store_queue           [1, 1000000]  (coordinated)            128
 *   store_quorum          [1, BW_STORE_QUORUM_MAX = 16] (coordinated) 1
 *   store_retry           (0, 365d]                              5s
 *   store_retry_multiplier [1, 1000]                             2
 *   store_retry_max       none, or [store_retry, 365d]           1m
 *   store_retry_jitter    [0, 1]                                 0.2
 *   store_close_timeout   (0, 365d]  (coordinated)               5s
 *
 * The keyed_* knobs bound a breaker's keyed circuits (keyed.h says how; with a
 * store, keyed_idle is also the lifetime of a quiet keyed circuit's entry). The
 * store_* knobs apply to a breaker with a store (bw_config_set_store): the
 * lifetime of its stored entry after the last write (an OPEN entry never expires
 * before its wait ends; a keyed circuit's entry holding nothing but successes
 * lives min(keyed_idle, store_ttl)), the coordinated poll interval and write queue, the
 * delay before a failing store is tried again (store_retry, times the
 * multiplier per consecutive failure, capped by store_retry_max, plus up to
 * store_retry_jitter of itself at random), and how long bw_breaker_free waits
 * for queued writes.
 *
 * A CONFIGURATION THAT CANNOT TRIP OR CLOSE IS AN ERROR. min_calls left at its
 * default follows a count window smaller than 10 (count:5 trips on its 5th
 * call, as resilience4j clamps it); set above a count window's size it could
 * never be reached, and bw_config_validate refuses it, naming both knobs. A
 * consecutive round ends undecided after 1,000,000 probes, so
 * success_threshold and half_open_capacity stop there, as the rate policy's
 * probe counts do. Rates above 1 and time windows below 1 s (or not whole
 * seconds) are out of range.
 *
 * NOTHING IS SILENTLY IGNORED. A knob is "set" when it differs from what
 * bw_config_new holds (so a formatted configuration, which writes every knob,
 * validates as its source did). bw_config_validate refuses a set knob that no
 * breaker made from the configuration could read, naming it and the knob that
 * leaves it unread, the fix first:
 *   failure_rate, slow_call_rate, min_calls, window, permitted_probes,
 *     max_concurrent_probes                 with policy=consecutive
 *   error_threshold, success_threshold,
 *     half_open_capacity                    with policy=rate
 *   slow_call_rate                          with slow_call_duration=off
 *   wait_max                                with wait_multiplier=1
 *   store_retry_max                         with store_retry_multiplier=1
 * Not refused, because they apply to a part the text does not decide: the
 * keyed_* knobs (any breaker makes keyed circuits on its first
 * bw_keyed_acquire), and the store_* knobs without a store or in the other
 * store mode (the store and its mode are set in C or by the command's
 * --store, and one configuration serves every process of a circuit, the
 * command in stored mode and a service in coordinated mode alike; the command
 * runs on a local circuit when its store is down). slow_call_duration is read
 * by both policies (the slow flag of CALL events and the counters). The one
 * exception is store_quorum above 1, refused without a coordinated store: a
 * quorum changes when the circuit opens, and alone it would open on the first
 * trip.
 *
 * Thread safety: a config is not thread-safe; use one from one thread at a time.
 * Reading it from several threads at once (bw_breaker_new) is safe.
 */
#ifndef BREAKWATER_CONFIG_H
#define BREAKWATER_CONFIG_H

#include "clock.h"
#include "common.h"
#include "listener.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_config bw_config;

/* How a breaker decides to trip. */
typedef enum bw_policy {
    BW_POLICY_RATE = 0,       /* failure and slow-call rates over a sliding window (interlock) */
    BW_POLICY_CONSECUTIVE = 1 /* consecutive failures and successes (grelmicro, gobreaker) */
} bw_policy;

/* Sliding window kinds for the rate policy. */
typedef enum bw_window_kind {
    BW_WINDOW_COUNT = 0, /* the last N calls */
    BW_WINDOW_TIME = 1   /* the last N seconds, in at most 60 buckets of ceil(N / 60) s (docs/states.md) */
} bw_window_kind;

/*
 * A classifier maps a finished call to an outcome for bw_breaker_call: `rc` is
 * what the guarded function returned, `arg` the argument it was given, `user` the
 * pointer registered with the classifier. The default classifier says
 * BW_SUCCESS for rc == 0 and BW_FAILURE otherwise. It runs on the calling
 * thread, with no breakwater lock held.
 */
typedef bw_outcome (*bw_classifier_cb)(int rc, void *arg, void *user);

/*
 * bw_config_new — a configuration holding every default. Free with
 * bw_config_free. Returns NULL when out of memory. Thread safety: any thread.
 */
BW_API bw_config *bw_config_new(void);

/*
 * bw_config_copy — a new configuration equal to src; NULL if src is NULL or out
 * of memory. Thread safety: src must not be modified concurrently.
 */
BW_API bw_config *bw_config_copy(const bw_config *src);

/* bw_config_free — release a configuration; NULL is ignored. Thread safety: no other use of cfg at once. */
BW_API void bw_config_free(bw_config *cfg);

/*
 * Typed setters. Each returns BW_OK, BW_EINVAL when cfg is NULL or an enum value
 * is unknown, or BW_ERANGE when the value is outside the range listed above; on
 * error the config is unchanged and *err (may be NULL) names the field and range.
 * Durations are nanoseconds; 0 means "off"/"none" where the table allows it.
 * Thread safety: one thread at a time per config.
 */
BW_API int bw_config_set_policy(bw_config *cfg, bw_policy policy, bw_error *err);
BW_API int bw_config_set_failure_rate(bw_config *cfg, double rate, bw_error *err);
BW_API int bw_config_set_slow_call_rate(bw_config *cfg, double rate, bw_error *err);
/* 0 turns slow-call detection off; then a CLOSED count-window call reads no clock. A threshold of 100 ms or more
 * is measured on the coarse clock, to within 1 % (breaker.h, TIME). */
BW_API int bw_config_set_slow_call_duration(bw_config *cfg, int64_t ns, bw_error *err);
/* Once set, min_calls stays as set whatever the window (bw_config_validate checks it against a count window). */
BW_API int bw_config_set_min_calls(bw_config *cfg, int64_t calls, bw_error *err);
/* size is calls for BW_WINDOW_COUNT and seconds for BW_WINDOW_TIME. */
BW_API int bw_config_set_window(bw_config *cfg, bw_window_kind kind, int64_t size, bw_error *err);
BW_API int bw_config_set_permitted_probes(bw_config *cfg, int64_t probes, bw_error *err);
BW_API int bw_config_set_max_concurrent_probes(bw_config *cfg, int64_t probes, bw_error *err);
BW_API int bw_config_set_wait(bw_config *cfg, int64_t ns, bw_error *err);
BW_API int bw_config_set_wait_multiplier(bw_config *cfg, double multiplier, bw_error *err);
/* 0 leaves the backed-off wait uncapped. */
BW_API int bw_config_set_wait_max(bw_config *cfg, int64_t ns, bw_error *err);
/* 0 lets a half-open round wait for its probes forever (interlock's behaviour). */
BW_API int bw_config_set_max_wait_in_half_open(bw_config *cfg, int64_t ns, bw_error *err);
BW_API int bw_config_set_auto_transition(bw_config *cfg, int enabled, bw_error *err);
/*
 * counters: keep cumulative counters (bw_breaker_counters: calls by kind, a
 * duration histogram, rejections, transitions) and time every call for the
 * histogram. Off, a breaker without slow-call detection reads no clock in
 * CLOSED. On by default; it costs about a nanosecond a call (docs/observability.md).
 */
BW_API int bw_config_set_counters(bw_config *cfg, int enabled, bw_error *err);
/*
 * Whether a BW_UNREACHABLE outcome (a classifier's "the call never reached the
 * dependency", e.g. the HTTP client's own connection pool was exhausted) counts
 * as a failure in CLOSED and METRICS_ONLY (nonzero, the default, as interlock
 * does: an exhausted pool usually is the dependency holding connections) or is
 * not recorded at all (0). In HALF_OPEN it is never a verdict either way
 * (docs/states.md). Local saturation in a pipeline (a full bulkhead) is not an
 * outcome at all, whatever this says (pipeline.h). Returns BW_OK, or BW_EINVAL
 * for a NULL cfg.
 */
BW_API int bw_config_set_unreachable_counts(bw_config *cfg, int counts, bw_error *err);
/*
 * Only the stable states CLOSED, FORCED_OPEN, DISABLED and METRICS_ONLY are
 * allowed: OPEN and HALF_OPEN give BW_ERANGE, an unknown value BW_EINVAL.
 */
BW_API int bw_config_set_initial_state(bw_config *cfg, bw_state state, bw_error *err);
BW_API int bw_config_set_error_threshold(bw_config *cfg, int64_t count, bw_error *err);
BW_API int bw_config_set_success_threshold(bw_config *cfg, int64_t count, bw_error *err);
BW_API int bw_config_set_half_open_capacity(bw_config *cfg, int64_t count, bw_error *err);
/* Circuits a breaker keeps resident before it evicts idle ones; 0 = unbounded (see keyed.h). */
BW_API int bw_config_set_keyed_maxsize(bw_config *cfg, int64_t circuits, bw_error *err);
/* The hard bound on resident keyed circuits; 0 = twice keyed_maxsize (see keyed.h). */
BW_API int bw_config_set_keyed_limit(bw_config *cfg, int64_t circuits, bw_error *err);
/* Unused time after which a quiet keyed circuit may be evicted. */
BW_API int bw_config_set_keyed_idle(bw_config *cfg, int64_t ns, bw_error *err);
/* Unused time after which a keyed circuit with failure history may be evicted. */
BW_API int bw_config_set_keyed_history_idle(bw_config *cfg, int64_t ns, bw_error *err);
/* Lifetime of a stored entry after its last write (an OPEN one also outlives its wait). */
BW_API int bw_config_set_store_ttl(bw_config *cfg, int64_t ns, bw_error *err);
/* How often a coordinated breaker's lane reads the shared state. */
BW_API int bw_config_set_store_poll(bw_config *cfg, int64_t ns, bw_error *err);
/* Coordinated writes (trips, probe outcomes) that may wait for the lane; one more is dropped. */
BW_API int bw_config_set_store_queue(bw_config *cfg, int64_t writes, bw_error *err);
/*
 * Quorum tripping (coordinated mode): the fleet's circuit opens only when this
 * many distinct instances (processes; docs/stores.md says how one is told from
 * another) tripped locally within one open wait (`wait`), each counted once
 * however many of its breakers trip. Until then an
 * instance that tripped is OPEN on its own and the others keep serving, so one
 * bad instance cannot take a healthy dependency away from all of them. 1 (the
 * default): the first trip opens the fleet's circuit. Above 1 it needs a store
 * in coordinated mode (bw_config_validate), and every instance of the circuit
 * running a breakwater that knows quorums (older ones read an entry holding
 * votes as corrupt and replace it).
 */
BW_API int bw_config_set_store_quorum(bw_config *cfg, int64_t instances, bw_error *err);
/* The first delay before a failing store is tried again. */
BW_API int bw_config_set_store_retry(bw_config *cfg, int64_t ns, bw_error *err);
/* The growth of that delay per consecutive failure. */
BW_API int bw_config_set_store_retry_multiplier(bw_config *cfg, double multiplier, bw_error *err);
/* The cap on that delay; 0 leaves it uncapped. */
BW_API int bw_config_set_store_retry_max(bw_config *cfg, int64_t ns, bw_error *err);
/* Up to this fraction of the delay is added at random. */
BW_API int bw_config_set_store_retry_jitter(bw_config *cfg, double jitter, bw_error *err);
/* How long bw_breaker_free waits for a coordinated breaker's queued writes. */
BW_API int bw_config_set_store_close_timeout(bw_config *cfg, int64_t ns, bw_error *err);

/*
 * bw_config_set_store — share breakers made from this config through `store`
 * (borrowed: it must outlive them) in `mode` (store.h); NULL store: none. The
 * breaker's name is its key in the store; all clients of one name should share
 * its configuration. With a store, max_wait_in_half_open must not be off
 * (bw_config_validate), and in BW_STORE_STORED mode the window must fit in a
 * store entry: count:N with N up to 892 (checked by bw_breaker_new); every
 * time:N fits (at most 60 buckets). Not text: set it in C. Returns BW_OK, or BW_EINVAL for a NULL
 * cfg or a mode other than BW_STORE_COORDINATED and BW_STORE_STORED (0 is taken
 * only with a NULL store). Thread safety: one thread at a time per config.
 */
BW_API int bw_config_set_store(bw_config *cfg, bw_store *store, bw_store_mode mode, bw_error *err);

/*
 * bw_config_set_clock — the clock breakers made from this config read; NULL means
 * the system clock. The clock is borrowed: it must outlive those breakers.
 * Returns BW_OK or BW_EINVAL (cfg NULL). Thread safety: one thread at a time per config.
 */
BW_API int bw_config_set_clock(bw_config *cfg, bw_clock *clock);

/*
 * bw_config_set_listener — the listener of breakers made from this config: `fn`
 * receives the event types whose bits are in `mask` (BW_EVENT_MASK, BW_EVENTS_ALL),
 * with `user` last. fn NULL removes the listener. `user` is borrowed: it must
 * outlive those breakers. Returns BW_OK, or BW_EINVAL for a NULL cfg or a
 * listener (fn not NULL) with an empty mask, which would receive nothing.
 * Thread safety: one thread at a time per config; fn itself is called from
 * several threads at once (see listener.h).
 */
BW_API int bw_config_set_listener(bw_config *cfg, unsigned mask, bw_listener_cb fn, void *user);

/*
 * bw_config_set_classifier — the classifier bw_breaker_call uses; NULL restores
 * the default (rc == 0 is success). `user` is borrowed. Returns BW_OK or BW_EINVAL.
 * Thread safety: one thread at a time per config; fn runs on whichever thread
 * calls bw_breaker_call.
 */
BW_API int bw_config_set_classifier(bw_config *cfg, bw_classifier_cb fn, void *user);

/*
 * bw_config_validate — run the cross-field checks, in this order: no knob of
 * the other policy set (NOTHING IS SILENTLY IGNORED, above);
 * max_wait_in_half_open off or at least 10ms on the system clock (its steps
 * are up to 10ms: a shorter round could end before its probes answer, and
 * the breaker never close); max_concurrent_probes <= permitted_probes; min_calls, when set, at most a
 * count window's size; slow_call_rate not set with slow_call_duration=off;
 * wait_max either none or >= wait, and not set with wait_multiplier=1;
 * keyed_limit 0 when keyed_maxsize is 0, else 0 or >= keyed_maxsize;
 * store_retry_max none or >= store_retry, and not set with
 * store_retry_multiplier=1; max_wait_in_half_open not off with a store;
 * store_quorum 1 without a coordinated store; keyed_history_idle >=
 * keyed_idle. Returns BW_OK, BW_EINVAL (cfg NULL) or BW_ERANGE with *err
 * naming the field, the other knob involved, and the fix first ("lower
 * min_calls=20 to at most 5 or widen window=count:5: ..."); durations in
 * human units ("wait_max must be none or at least wait = 1h, got 30m").
 * Thread safety: cfg must not be modified concurrently.
 */
BW_API int bw_config_validate(const bw_config *cfg, bw_error *err);

/*
 * bw_config_parse — apply settings written as text: space-separated key=value
 * pairs using the names in the table above, e.g.
 *   "policy=rate failure_rate=0.5 window=time:30s min_calls=20 wait=30s"
 * Durations need their unit: ns, us, ms, s, m, h or d ("1.5s", "250ms",
 * "time:30s"); a bare number other than 0 is BW_EPARSE, the message asking
 * which unit was meant ("2000ms or 2000s?"), since a number alone could mean
 * either. Whole-number knobs (min_calls, ...) are bare. Booleans are
 * true/false, on/off, yes/no or 1/0.
 * All or nothing: on any error the config is unchanged. Returns BW_OK; BW_EINVAL
 * (cfg or text NULL); BW_EPARSE for text that is not key=value, an unknown key
 * or a malformed value, with *err giving the byte offset and the offending text;
 * an unknown key also gets the knob it most likely means: the one another
 * library's name stands for (failureRateThreshold, FailureRatio, BreakDuration,
 * recovery_timeout, ...: docs/configuration.md) or the nearest in spelling
 * ("unknown setting 'failure_rat'; did you mean failure_rate?").
 * BW_ERANGE for a value out of range, with *err naming the field and range,
 * and the value as it was written ("got '-5m'").
 * Cross-field checks are left to bw_config_validate. Positive durations below
 * 1 ns round up to 1 ns; out-of-range and over-long numbers give BW_ERANGE.
 * Thread safety: one thread at a time per config.
 */
BW_API int bw_config_parse(bw_config *cfg, const char *text, bw_error *err);

/*
 * bw_duration_parse — read one duration written as bw_config_parse writes
 * them: a decimal number, a fraction allowed, and its unit ns, us, ms, s, m,
 * h or d ("1.5s", "250ms", "2m"); "off", "none" and a bare 0 are 0. No space
 * anywhere, no exponent. `bare_unit` says what a number without a unit means:
 * 0 refuses one other than 0 (BW_EPARSE, the message asking "30ms or 30s?",
 * the configuration text's rule); a unit in nanoseconds counts it in that
 * unit (BW_NS_PER_S: seconds, as timeout(1) and the breakwater command read
 * "30"). *ns gets the value in nanoseconds, exact to 9 fraction digits (the
 * tenth rounds), a positive value below 1 ns rounding up to 1 ns; it is left
 * unchanged on error.
 * Returns BW_OK; BW_EINVAL (text or ns NULL, bare_unit negative); BW_EPARSE
 * for malformed text or a refused bare number; BW_ERANGE for a value outside
 * [0, 365d]. *err (may be NULL) has field "duration" and a message quoting
 * the text. A caller applies its own narrower range (e.g. > 0).
 * Thread safety: any thread; it keeps nothing.
 */
BW_API int bw_duration_parse(const char *text, int64_t bare_unit, int64_t *ns, bw_error *err);

/*
 * bw_config_parse_env — apply settings from the environment: every variable
 * whose name starts with `prefix` (e.g. "BREAKWATER_PAYMENTS_") names a knob of
 * the table above by the rest of its name, in any case
 * (BREAKWATER_PAYMENTS_FAILURE_RATE=0.5, BREAKWATER_PAYMENTS_WINDOW=time:30s),
 * and its value is written as in bw_config_parse. Variables without the prefix
 * are ignored; one with it whose rest names no knob is an error (a typo must
 * not pass silently). All or nothing: on any error the config is unchanged.
 * Returns BW_OK (also when no variable has the prefix); BW_EINVAL (cfg or
 * prefix NULL, or a prefix of 0 or more than 200 bytes); BW_EPARSE for an
 * unknown knob or a malformed value, and BW_ERANGE for a value out of range,
 * with *err (may be NULL) naming the variable, the field and the range.
 * Cross-field checks are left to bw_config_validate. Applied over what cfg
 * holds, so a caller chooses the precedence by the order of its calls (the
 * breakwater command: defaults, then BREAKWATER_CONFIG or --config-file, then
 * the environment, then --config; docs/cli.md).
 * Thread safety: one thread at a time per config; it reads the environment
 * (environ), so no thread may change the environment (setenv, putenv) at the
 * same time.
 */
BW_API int bw_config_parse_env(bw_config *cfg, const char *prefix, bw_error *err);

/*
 * bw_config_format — write the configuration's knobs as text that
 * bw_config_parse reads back to the same values (clock, listener and classifier
 * are not text). wait and min_calls are written as they apply (their defaults
 * follow the policy and the window), so the text read back sets them. Writes at most `size` bytes including the
 * terminating NUL and returns the length the full text needs (like snprintf), or BW_EINVAL. Thread safety: cfg must not
 * be modified concurrently.
 */
BW_API int bw_config_format(const bw_config *cfg, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
