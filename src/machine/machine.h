/*
 * machine.h — the pure circuit-breaker state machine (internal).
 *
 * Every rule of docs/states.md lives here and only here: both trip policies, the
 * six states, probe rounds, inconclusive probes, generations, open-wait backoff,
 * the half-open deadline and the operator verbs. The machine takes no locks,
 * reads no clock (time is an argument, read lazily through bw__now so that a
 * count-window call that trips nothing never reads it), and allocates nothing:
 * the window memory is given to bw__machine_init. The engine (core/breaker.c)
 * wraps it in a lock; the model-based test drives it directly.
 */
#ifndef BW_MACHINE_MACHINE_H
#define BW_MACHINE_MACHINE_H

#include <stdint.h>

#include "base/sat.h"
#include "breakwater/breaker.h"
#include "machine/window.h"

/* Largest wait the backoff can reach when uncapped (about 73 years). */
#define BW__WAIT_CEILING (INT64_MAX / 4)
/*
 * The range of every instant a machine holds (stamps of opening, of a round's
 * start, a window's second in ns): +-2^62 ns, about 146 years either side of
 * the clock's zero. With waits at most BW__WAIT_CEILING, no instant plus a wait
 * overflows. Images read back from a store are checked against it (machine/image.c).
 */
#define BW__INSTANT_MAX (INT64_MAX / 2)
/* The largest generation an image may carry: room to grow, far below the "no entry" mark. */
#define BW__GEN_MAX (UINT64_MAX / 2)
/* Open-wait growth stops after this many consecutive failed rounds. */
#define BW__BACKOFF_ROUNDS 64
/* The longest wait bw__machine_open_for takes (a Retry-After's: bw_breaker_open_for, 365 days). */
#define BW__OPEN_FOR_MAX (INT64_C(365) * 86400 * 1000000000)

/* A lazily read instant: `read(ctx)` is called at most once, when first needed. */
typedef struct bw__now {
    int64_t ns;
    int known;
    int64_t (*read)(void *ctx);
    void *ctx;
} bw__now;

static inline int64_t bw__now_get(bw__now *t)
{
    if (!t->known) {
        t->ns = t->read(t->ctx);
        t->known = 1;
    }
    return t->ns;
}

static inline bw__now bw__now_at(int64_t ns)
{
    bw__now t = {ns, 1, 0, 0};
    return t;
}

/* The thresholds the machine needs, resolved from a bw_config. */
/* The most probes a round may admit (config.h: permitted_probes); a stored image claiming more is corrupt. */
#define BW__PROBES_MAX UINT32_C(1000000)

typedef struct bw__mcfg {
    uint8_t policy;             /* bw_policy */
    uint8_t window_kind;        /* bw_window_kind */
    uint8_t initial_state;      /* bw_state */
    uint8_t ignore_unreachable; /* UNREACHABLE is not recorded in CLOSED (0: recorded as a failure) */
    uint32_t window_size;       /* calls or seconds (rate policy) */
    uint32_t min_calls;
    uint32_t permitted;          /* rate: probes per round */
    uint32_t max_concurrent;     /* rate: probes at once */
    uint32_t error_threshold;    /* consecutive */
    uint32_t success_threshold;  /* consecutive */
    uint32_t half_open_capacity; /* consecutive: probes at once */
    double failure_rate;
    double slow_rate;
    double wait_multiplier;
    int64_t wait;        /* ns, > 0 */
    int64_t wait_max;    /* ns, 0 = uncapped */
    int64_t max_wait_ho; /* ns, 0 = a round may wait forever */
} bw__mcfg;

/*
 * The fields a CLOSED record writes come first (consecutive counters, the
 * window's totals and head), so that the engine's lock and they share a cache
 * line (core/engine.h).
 */
typedef struct bw__machine {
    /* Consecutive policy counters. */
    uint32_t cerr, csucc;
    bw__window win;         /* rate policy only (size 0 otherwise) */
    uint64_t gen;           /* bumped exactly once by every transition and verb */
    int64_t opened_at;      /* when the current OPEN period started */
    int64_t open_wait;      /* length of the current OPEN period */
    int64_t ho_since;       /* when the current HALF_OPEN round started */
    uint32_t failed_rounds; /* consecutive failed rounds since the last close */
    /* Probe round (both policies). */
    uint32_t admitted, in_flight, completed, probe_failures, probe_slows, inconclusive;
    uint8_t state;
    /*
     * The window is the union of `nwin` sub-windows (stripes) whose counts are
     * summed: `wins` points at the first, the next is `stride` bytes further.
     * By default one: &win. The engine stripes a time window across threads
     * (bw__machine_use_stripes); a union of time windows over the same seconds is
     * exactly the whole window, so no rule changes.
     */
    bw__window *wins;
    uint32_t stride;
    uint32_t nwin;
    bw__mcfg cfg; /* read-only after init */
    /* Why the last transition happened (bw_reason), with its figures (listener.h); cold: set by transitions. */
    uint8_t why;
    uint32_t why_count;
    uint64_t why_total;
    double why_rate;
} bw__machine;

/* Bytes of window memory bw__machine_init needs for this configuration. */
size_t bw__machine_window_bytes(const bw__mcfg *cfg);
/*
 * Start in cfg->initial_state, generation 0, empty window, no backoff. With the
 * rate policy, window_mem (bw__machine_window_bytes long) holds the window; NULL
 * means stripes will be given by bw__machine_use_stripes before any other call.
 */
void bw__machine_init(bw__machine *m, const bw__mcfg *cfg, void *window_mem);

/*
 * The part of init that a load (machine/image.c) needs too: the configuration and the
 * window's memory, with no state set and no memory cleared.
 */
void bw__machine_bind(bw__machine *m, const bw__mcfg *cfg, void *window_mem);

/*
 * Use `n` initialised, empty time windows of the machine's size as its stripes;
 * the first is at `first`, each next one `stride` bytes further.
 */
void bw__machine_use_stripes(bw__machine *m, bw__window *first, size_t stride, uint32_t n);

/* Stripe i of the machine's window. */
static inline bw__window *bw__machine_stripe(const bw__machine *m, uint32_t i)
{
    return (bw__window *)((char *)m->wins + (size_t)i * m->stride);
}

/*
 * Admission. Returns 1 and sets *gen to the generation the permit must carry, or
 * 0 for a rejection. May move OPEN -> HALF_OPEN (the caller is probe 1) and an
 * expired HALF_OPEN -> OPEN.
 */
int bw__machine_acquire(bw__machine *m, bw__now *now, uint64_t *gen);

/*
 * Settlement of a permit of generation `gen`. Returns 1 when the outcome was
 * applied, 0 when the current state records nothing (or it was IGNORED outside
 * HALF_OPEN), -1 when it was dropped as stale (the generation moved on).
 */
int bw__machine_record(bw__machine *m, uint64_t gen, int outcome, int slow, bw__now *now);

/* The same, recording into stripe `stripe` of the window (< nwin). */
int bw__machine_record_in(bw__machine *m, uint32_t stripe, uint64_t gen, int outcome, int slow, bw__now *now);

/*
 * The fast paths of a CLOSED record: the record split out of
 * bw__machine_record so that the engine runs it under one lock (or a stripe's),
 * testing for a trip only when it says so. bw__machine_fast_path says which a
 * machine of this configuration takes; the engine takes no other, so a new
 * policy takes none (the general bw__machine_record) until it says so here.
 * - BW__FAST_NONE: every record through bw__machine_record.
 * - BW__FAST_COUNT (the rate policy on a count window): bw__machine_closed_count,
 *   then the trip test (bw__machine_evaluate) when it returns 1.
 * - BW__FAST_CONSECUTIVE: bw__machine_closed_consecutive, then bw__machine_trip
 *   when it returns 1.
 * - BW__FAST_TIME (the rate policy on a time window): the window may be split
 *   into stripes (bw__machine_use_stripes), each recorded into by
 *   bw__window_time_record, then the trip test (bw__machine_evaluate) over
 *   them all. A count window ("the last N calls") has one order and cannot be
 *   split, and consecutive counters are a single sequence.
 */
enum { BW__FAST_NONE = 0, BW__FAST_COUNT = 1, BW__FAST_CONSECUTIVE = 2, BW__FAST_TIME = 3 };
int bw__machine_fast_path(const bw__mcfg *cfg);

/*
 * The CLOSED record of a rate policy on one count window, which is what
 * bw__machine_record does there, split for the engine's fast path: it records
 * (`failed` for FAILURE and a recorded UNREACHABLE) and returns 1 when the trip
 * test must run now (bw__machine_evaluate), 0 when the rates cannot have
 * reached a threshold: nothing failed or was slow in the window, or it holds
 * fewer than min_calls, or this record was a success that left the count as it
 * was (a full window: a success can only lower both rates).
 */
static inline int bw__machine_closed_count(bw__machine *m, int failed, int slow)
{
    int grew = bw__window_count_record(&m->win, failed != 0, slow != 0);
    if (grew < 0 || !(m->win.failed | m->win.slow) || (!failed && !slow && !grew))
        return 0; /* no count moved; or nothing failed or was slow; or a success in a full window */
    return m->win.total >= m->cfg.min_calls;
}

/*
 * The CLOSED record of the consecutive policy (bw__machine_record's rule, for
 * the engine's fast path): returns 1 when the failures reached error_threshold
 * and the circuit must trip (bw__machine_trip).
 */
static inline int bw__machine_closed_consecutive(bw__machine *m, int failed)
{
    if (!failed) {
        m->cerr = 0;
        m->csucc += m->csucc < UINT32_MAX;
        return 0;
    }
    m->csucc = 0;
    m->cerr += m->cerr < UINT32_MAX;
    return m->cerr >= m->cfg.error_threshold;
}

/*
 * part / total >= rate, decided as that division in doubles decides it, but by
 * multiplication: a division runs only when the two are within 2^-40 of each
 * other (at the threshold itself). total > 0.
 */
static inline int bw__rate_reached(uint64_t part, uint64_t total, double rate)
{
    double x = (double)part, t = (double)total, r = rate * t;
    if (x > r * (1 + 0x1p-40))
        return 1;
    if (x < r * (1 - 0x1p-40))
        return 0;
    return x / t >= rate;
}

/*
 * HALF_OPEN, split for the engine's fast path (the caller checked the state and
 * the generation). bw__machine_round_expired: whether the round has outlived
 * max_wait_in_half_open at `now` (then the general path must reopen it).
 * bw__machine_probe_admit: admit one more probe, as bw__machine_acquire does,
 * or return 0 for the caps. bw__machine_probe_tally: tally a SUCCESS or
 * FAILURE probe as bw__machine_record does when that decides nothing, and
 * return 1; return 0 without changing anything when it would decide the round.
 */
static inline int bw__machine_round_expired(const bw__machine *m, int64_t now)
{
    return m->cfg.max_wait_ho > 0 && now >= bw__sat_add(m->ho_since, m->cfg.max_wait_ho);
}

static inline int bw__machine_probe_admit(bw__machine *m)
{
    uint32_t cap = m->cfg.policy == BW_POLICY_RATE ? m->cfg.max_concurrent : m->cfg.half_open_capacity;
    uint32_t most = m->cfg.policy == BW_POLICY_RATE ? m->cfg.permitted : BW__PROBES_MAX;
    if (m->in_flight >= cap || m->admitted >= most)
        return 0;
    m->admitted++;
    m->in_flight++;
    return 1;
}

static inline int bw__machine_probe_tally(bw__machine *m, unsigned failed, unsigned slow)
{
    if (!m->in_flight)
        return 0; /* no probe of this round to tally: the general path drops it */
    if (m->cfg.policy == BW_POLICY_RATE) {
        if (m->completed + 1 >= m->cfg.permitted)
            return 0;
    } else if (failed ? m->cerr + 1 >= m->cfg.error_threshold : m->csucc + 1 >= m->cfg.success_threshold) {
        return 0;
    } else if (m->completed + 1 >= BW__PROBES_MAX) {
        return 0;
    }
    m->in_flight--;
    m->completed++;
    m->probe_failures += failed;
    m->probe_slows += slow;
    if (m->cfg.policy == BW_POLICY_CONSECUTIVE) {
        m->cerr = failed ? m->cerr + 1 : 0;
        m->csucc = failed ? 0 : m->csucc + 1;
    }
    return 1;
}

/*
 * The CLOSED trip test over the whole window as of now (for an engine that
 * recorded into a stripe itself). Returns 1 when it tripped, 0 when the window
 * holds at least min_calls and stayed below both thresholds, -1 otherwise (not
 * CLOSED, or below min_calls).
 */
int bw__machine_evaluate(bw__machine *m, bw__now *now);

/* The whole window's counts as of now (a time window's stripes expired first). */
void bw__machine_counts(bw__machine *m, bw__now *now, uint64_t *total, uint64_t *failed, uint64_t *slow);

/*
 * Timed transitions that need no caller (auto_transition): OPEN -> HALF_OPEN
 * without admitting anyone once the wait ended, and HALF_OPEN -> OPEN once the
 * round outlived max_wait_in_half_open. Returns 1 when a transition happened.
 */
int bw__machine_advance(bw__machine *m, int64_t now);

/* The instant of the next timed transition, or INT64_MAX when none is pending. */
int64_t bw__machine_deadline(const bw__machine *m);

/* OPEN: max(0, remaining wait); any other state: BW_NO_TIME. */
int64_t bw__machine_retry_after(const bw__machine *m, int64_t now);

/* CLOSED -> OPEN as a trip would (a trip learned elsewhere); returns 1, or 0 in any other state. */
int bw__machine_trip(bw__machine *m, int64_t now);

/*
 * Open m at `now` for `wait` (in (0, BW__OPEN_FOR_MAX]), as a dependency asked
 * (Retry-After): CLOSED and HALF_OPEN move to OPEN (a half-open round ends,
 * not as a failed one), an OPEN that would end sooner starts a new OPEN period
 * of `wait`; an OPEN that ends later, an operator state, and a wait out of
 * range are left alone (0). Returns 1 when m changed (the generation moved).
 */
int bw__machine_open_for(bw__machine *m, int64_t now, int64_t wait);

/*
 * The longest open wait a machine of this configuration can be in: its
 * backoff's longest (wait grown by wait_multiplier up to wait_max, or up to
 * BW__WAIT_CEILING without one), or an open_for's BW__OPEN_FOR_MAX, whichever
 * is longer. A stored OPEN that would last longer from now was written by no
 * breaker of this configuration (share/circuit.c reads it as corrupt).
 */
int64_t bw__machine_longest_wait(const bw__mcfg *cfg);

/* Operator verbs (see breaker.h). */
void bw__machine_reset(bw__machine *m);
void bw__machine_override(bw__machine *m, int state); /* FORCED_OPEN, DISABLED, METRICS_ONLY */
/* The verb that leads to `state`: reset for CLOSED, else override. */
void bw__machine_apply(bw__machine *m, int state);

/* Fill the counter part of a snapshot (expires a time window first). */
void bw__machine_snapshot(bw__machine *m, bw__now *now, bw_snapshot *out);

#endif
