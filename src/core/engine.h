/*
 * engine.h — the breaker engine's own interface, shared by the engine's files
 * (internal; core layer, not for the layers above: they use core.h).
 *
 * breaker.c holds the engine's hot paths: the locks, the published word,
 * publication, admission and settling (plain and striped), in one translation
 * unit so that they stay inlined. The cold parts have files of their own, as
 * SQLite's vdbe*.c: construction and destruction (breaker_new.c), state,
 * snapshot, verbs and counters (breaker_state.c), events and listeners
 * (breaker_events.c); they reach the hot file only through the functions
 * declared below. What a breaker may have
 * beyond the common case hangs in its `extra` block and lives in files of its
 * own: the auto-transition timer (attach_timer.c) and the store attachment
 * (attach_store.c: the glue between the engine and its link, view and lane in
 * share/ and machine/, which hold the rules).
 *
 * Locking (the whole engine):
 * - `lock` (a spin lock, base/spin.h) guards `m`, the machine, and the view in
 *   `extra` (a coordinated breaker's picture of the fleet's circuit). It is
 *   held only for a machine call and the publication; never while user code
 *   runs. Every path that may change the machine takes it through lock_all.
 * - `word` mirrors (generation << 3 | state) and `open_until` mirrors the end of
 *   the current OPEN wait (in stamp units). Both are written only under `lock`,
 *   open_until first, word last with release order, and read without it. That
 *   lets bw_acquire admit in CLOSED/DISABLED/METRICS_ONLY and reject in
 *   OPEN/FORCED_OPEN with one atomic load and no lock. A reader that sees a
 *   stale word decides as of an instant just before the transition, which is
 *   linearisable; anything that must change the machine (OPEN whose wait
 *   ended, HALF_OPEN) takes the lock and decides again.
 * - The generation only grows, so a settle whose permit generation differs from
 *   the published one is stale and is dropped without taking the lock.
 * - Striped time windows: a rate-policy breaker with a time window (that is
 *   neither a keyed circuit nor stored) splits its window into `nstripes`
 *   stripes, one per CPU up to 8 (one on one CPU), each behind its own tally
 *   lock (base/spin.h). A CLOSED or METRICS_ONLY settle records into its thread's
 *   stripe holding only that stripe's lock; everything else holds `lock` and
 *   then every stripe lock in order (lock_all). So the word read under one
 *   stripe lock is exact: nobody can publish while that lock is held. Lock
 *   order: `lock`, then stripes 0..n-1; a stripe lock alone is never followed
 *   by `lock`.
 * - A store link's own lock (share/link.h) may be taken under `lock`, never the
 *   other way round. No store call runs with any engine lock held.
 * - Timed transitions run on the clock's scheduler (time/sched.h), which takes
 *   `lock` in the entry's deadline() with its own mutex held; the engine kicks
 *   the scheduler only with no engine lock held.
 * - Listener events are collected while `lock` is held and delivered after it is
 *   released, so a listener may call back into the breaker.
 *
 * Stamps: the hot paths work in raw stamps: a permit keeps the acquire stamp,
 * slowness compares a stamp difference with the threshold converted once at
 * creation, and the OPEN rejection compares with open_until in stamps. Only what
 * is reported (a duration, retry_after) or what the machine needs (an instant)
 * is converted. On the system clock a breaker whose timing needs no more than a
 * coarse clock (slow-call detection at 100 ms or more, or none, and no CALL
 * events) reads the coarse clock (base/tick.h: one load, ns, to within a period
 * of at most 10 ms); any other on the system clock reads the TSC (base/systime.h:
 * ticks, converted); on manual and custom clocks a stamp is bw_clock_now's ns.
 */
#ifndef BW_CORE_ENGINE_H
#define BW_CORE_ENGINE_H

#include <stdalign.h>
#include <stdatomic.h>

#include "base/compiler.h"
#include "base/spin.h"
#include "base/systime.h"
#include "base/tick.h"
#include "core/core.h"
#include "core/fanout.h"
#include "machine/machine.h"
#include "machine/view.h"
#include "share/lane.h"
#include "share/link.h"
#include "time/sched.h"

#define PERMIT_LIVE 0x6277706Du    /* "bwpm" */
#define PERMIT_SETTLED 0x6277736Cu /* settled or rejected */
#define PERMIT_STORED 0x62777374u  /* live, admitted by the store (stored mode) */
#define PERMIT_LEASED 0x6277706Cu  /* live, a probe leased from the store (coordinated) */
#define PERMIT_PIN                                                                                                     \
    0x80000000u        /* or'ed into a live permit's magic: it pins its breaker (the owner's unpin runs at settle) */
#define WORD_STORED 7u /* word state of a stored-mode breaker: ask the store */

/*
 * Counters that a settle writes under the lock it already holds (the breaker's,
 * or its stripe's): a relaxed load and a relaxed store each, no locked
 * instruction; read without the lock by bw_breaker_counters. Calls by
 * bw_call_kind, the duration histogram and its sum in stamp units.
 */
typedef struct bw_cells {
    alignas(64) const int64_t *bounds; /* the histogram's bounds in stamp units (bw__bounds_ns or _sys) */
    _Atomic uint64_t calls[BW_CALL_KINDS];
    _Atomic uint64_t sum;
    _Atomic uint64_t buckets[BW_DURATION_BUCKETS];
} bw_cells;

/*
 * The counters of everything else (rejections, which hold no lock, and rare
 * events): atomic additions. Made with the breaker when it counts (else NULL).
 */
typedef struct bw_cold {
    _Atomic uint64_t rejected[3]; /* OPEN, HALF_OPEN, FORCED_OPEN */
    _Atomic uint32_t transitions[6][6];
    _Atomic uint64_t rounds_passed, rounds_failed, resets;
    _Atomic uint64_t store[3]; /* degraded, recovered, write dropped */
    _Atomic int64_t failed_at; /* the stamp of the last failure, or INT64_MIN */
    bw__spin msg_lock;         /* guards msg */
    _Atomic uint64_t msg_word; /* the last_failure word msg belongs to; 0: no message */
    char msg[BW_FAILURE_MESSAGE_MAX];
} bw_cold;

/* One stripe of a striped time window: its own line, lock and buckets. */
typedef struct bw_stripe {
    alignas(64) bw__spin lock; /* a tally lock (spin.h): failed or slow calls recorded here since eval_bucket's test */
    bw__window win;
    bw_cells cells;
} bw_stripe;

/* Auto-transition: an entry in the scheduler the breakers of its clock share (attach_timer.c). */
typedef struct bw_timer {
    bw__sched *sched;
    bw__sched_entry entry;
    struct bw_breaker *b;
} bw_timer;

/* What a breaker may have beyond the common case: a timer, a store (attach_store.c). */
typedef struct bw_extra {
    bw_timer timer;
    bw__link link;
    bw__view view;    /* coordinated: the fleet's circuit as last seen; under `lock` */
    bw__coord *coord; /* coordinated: the lane's side */
    uint8_t has_timer, has_link;
} bw_extra;

/* Where a breaker's stamps come from (engine.h's top says what a stamp is). */
enum {
    STAMP_TICK = 0, /* the coarse clock (base/tick.h): the system clock's ns, to within a period */
    STAMP_SYS = 1,  /* the system clock inlined: TSC ticks, or CLOCK_MONOTONIC ns */
    STAMP_CLOCK = 2 /* a manual or custom clock: bw_clock_now's ns */
};

struct bw_breaker {
    /* Line 0, read by every call; written only by transitions (and eval_bucket). */
    _Atomic uint64_t word;
    _Atomic int64_t open_until;     /* stamp */
    int64_t slow_stamp;             /* slow_call_duration in stamp units; INT64_MAX = off (no span reaches it) */
    _Atomic unsigned listener_mask; /* what the listeners of its fanout chain want (bw__breaker_refresh) */
    uint8_t stamp_mode;             /* STAMP_* */
    uint8_t timed;                  /* acquire and settle read the clock (slow calls, counters or CALL events) */
    uint8_t unrecorded;             /* bit per outcome that records nothing outside HALF_OPEN */
    uint8_t fast;               /* BW__FAST_* (machine.h): the machine's fast CLOSED record it takes; TIME: striped */
    _Atomic uint8_t quick;      /* fast, and nothing to report to a listener: bw_settle's quick path (breaker.c) */
    _Atomic uint8_t reject_now; /* an OPEN rejection needs no call: the coarse clock, no listener (bw_acquire) */
    uint8_t counting;           /* counters on: `cells` and `cold` count */
    bw_cells *cells;            /* counted under `lock` (counters on: in the block; else NULL) */
    struct bw_breaker *parent;  /* a keyed circuit's breaker (owner.parent), whose bw_settle settles its permits */
    bw_clock *clock;
    /* Line 1, written by every unstriped settle: the lock, a keyed circuit's pin releases, then what a CLOSED
       record writes (machine.h). */
    alignas(64) bw__spin lock;
    uint32_t releases;   /* pins released (core.h's Pins), under `lock` */
    int64_t released_at; /* the stamp of the last, under `lock`; INT64_MIN = none */
    bw__machine m;
    /* Cold. */
    bw_cold *cold;                   /* counters on: in the block; else NULL */
    _Atomic(bw__fanout *) fan;       /* its listeners (own, or its registry's); a keyed circuit's: NULL */
    uint8_t own_fan;                 /* `fan` is its own (freed with it) */
    uint8_t quick_base, reject_base; /* quick and reject_now when no listener wants anything */
    _Atomic uint32_t why_seq;        /* the last transition's record, below: odd while being written */
    _Atomic uint32_t why;            /* (to << 8) | bw_reason */
    _Atomic uint64_t why_rate;       /* a double's bits */
    _Atomic uint64_t why_total;
    _Atomic uint32_t why_count;
    _Atomic int64_t eval_bucket; /* striped windows: breaker.c's design notes; INT64_MIN = none */
    uint64_t headroom;     /* failed or slow calls eval_bucket's test leaves before a rate could reach its threshold */
    uint8_t clear_tallies; /* unlock_all zeroes the stripes' tallies (a new base) */
    bw_extra *extra;       /* NULL when it has neither timer nor store (read by every locked change) */
    _Atomic uint64_t last_failure; /* (code << 1) | 1, or 0 for none */
    bw_classifier_cb classifier;
    void *classifier_user;
    const char *name;
    const char *key;      /* a keyed circuit's key, else NULL */
    const bw_config *cfg; /* what it was made with: its own copy, or its owner's */
    bw__owner owner;      /* owned breakers: who */
    bw_stripe *stripes;   /* NULL when the window is not striped */
    uint32_t nstripes;    /* 0 when not striped, else a power of two (1 on one CPU) */
    uint32_t bytes;
    uint8_t owned;          /* made by bw__breaker_make: its owner frees it */
    _Atomic(bw__ext *) ext; /* what a layer above hangs on it (core.h) */
    /* The machine's window memory (unless striped), the name, the key, the config copy, the owner's tail, stripes. */
    alignas(8) unsigned char data[];
};

/*
 * A state callers see, and why it changed: change_end returns the state, with
 * the bw_reason in bits 8 and up when it differs from the state before (so
 * `before != after` still says whether it moved).
 */
#define AFTER_STATE(a) ((a)&0xff)
#define AFTER_WHY(a) ((a) >> 8)

static BW_ALWAYS_INLINE unsigned lmask(const bw_breaker *b)
{
    return atomic_load_explicit(&((bw_breaker *)b)->listener_mask, memory_order_relaxed);
}

/* Events gathered under the lock and delivered after it. */
typedef struct pending {
    int n;
    bw_event ev[3];
} pending;

/* Every change to the machine goes through change_begin / change_end (breaker.c). */
typedef struct change {
    int before;  /* the state callers saw */
    int mbefore; /* the machine's own state */
    uint64_t gen;
    int trip;    /* set by change_end: the machine tripped CLOSED -> OPEN */
    int force;   /* publish even if nothing above moved (a new shared view) */
    int nocount; /* a change the counters do not count (a preset; a stored breaker's verb: its store's counts) */
    int why;     /* the reason of a change the machine did not make (0: BW_REASON_SHARED, the store's view moved) */
} change;

static inline bw__link *link_of(const bw_breaker *b)
{
    return b->extra && b->extra->has_link ? &b->extra->link : NULL;
}

static inline bw_timer *timer_of(const bw_breaker *b)
{
    return b->extra && b->extra->has_timer ? &b->extra->timer : NULL;
}

/* Take the breaker's lock, then every stripe's in order (Locking, above). */
static inline void lock_all(bw_breaker *b)
{
    bw__spin_lock(&b->lock);
    for (uint32_t i = 0; i < b->nstripes; i++)
        (void)bw__spin_lock_tally(&b->stripes[i].lock, 0);
}

/* Release a stripe's tally lock, keeping its tally or (clear) zeroing it. */
static inline void stripe_unlock(bw_stripe *s, int clear)
{
    if (BW_UNLIKELY(bw__spin_release_tally(&s->lock, clear)))
        bw__spin_wake(&s->lock);
}

static inline void unlock_all(bw_breaker *b)
{
    int clear = b->clear_tallies;
    b->clear_tallies = 0;
    for (uint32_t i = b->nstripes; i-- > 0;)
        stripe_unlock(&b->stripes[i], clear);
    bw__spin_unlock(&b->lock);
}

/* The fanout b's events go to: its own (or its registry's); a keyed circuit's breaker's. */
static inline bw__fanout *fan_of(const bw_breaker *b)
{
    const bw_breaker *o = b->parent ? b->parent : b;
    return atomic_load_explicit(&((bw_breaker *)o)->fan, memory_order_acquire);
}

static inline void deliver(bw_breaker *b, const bw_event *e)
{
    bw__fanout_deliver(fan_of(b), e);
}

/* Whether a coordinated breaker now follows the fleet's circuit (its view governs). Lock held. */
static BW_ALWAYS_INLINE int following(const bw_breaker *b)
{
    const bw__link *l = link_of(b);
    return l && l->c.mode == BW_STORE_COORDINATED && !bw__link_degraded(l) &&
           bw__view_governs(&b->extra->view, b->m.state);
}

/*
 * note_failure for the quick paths, which have the settle's stamp at hand and
 * carry no message (bw_settle_msg takes the general path): no call, so that
 * they stay frameless.
 */
static BW_ALWAYS_INLINE void note_failure_at(bw_breaker *b, bw_outcome outcome, int code, int64_t stamp)
{
    if (outcome == BW_FAILURE) {
        atomic_store_explicit(&b->last_failure, ((uint64_t)(uint32_t)code << 1) | 1, memory_order_relaxed);
        if (b->cold) {
            atomic_store_explicit(&b->cold->failed_at, stamp, memory_order_relaxed);
            atomic_store_explicit(&b->cold->msg_word, 0, memory_order_relaxed);
        }
    }
}

/* The histogram's bounds in stamp units: nanoseconds, or (STAMP_SYS) TSC ticks (breaker_new.c). */
extern const int64_t bw__bounds_ns[BW_DURATION_BUCKETS - 1];
extern int64_t bw__bounds_sys[BW_DURATION_BUCKETS - 1];

/* The histogram bucket of a span (stamp units): the first bound it does not exceed, or the last (+Inf). */
static BW_ALWAYS_INLINE unsigned bucket_of(const bw_cells *c, int64_t span)
{
    unsigned i = 0;
    while (i < BW_DURATION_BUCKETS - 1 && span > c->bounds[i])
        i++;
    return i;
}

static BW_ALWAYS_INLINE void cell_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* The bw_call_kind of a settled call (not stale). */
static BW_ALWAYS_INLINE unsigned kind_of(bw_outcome outcome, unsigned slow)
{
    return outcome <= BW_FAILURE ? (unsigned)outcome | slow << 1 : outcome == BW_IGNORED ? 4u : 5u;
}

/* A settled call to count once, under whichever lock records it (`done` once counted). */
typedef struct tally {
    unsigned kind; /* bw_call_kind */
    int64_t span;  /* stamp units */
    int done;
} tally;

/*
 * Count a call of `kind` that took `span` (stamp units) in cells whose lock the
 * caller holds. A breaker that counts times every call (b->timed).
 */
static BW_ALWAYS_INLINE void count_locked(bw_cells *c, unsigned kind, int64_t span)
{
    span = span > 0 ? span : 0; /* a clock read on another CPU may be a little behind */
    cell_add(&c->calls[kind], 1);
    cell_add(&c->buckets[bucket_of(c, span)], 1);
    cell_add(&c->sum, (uint64_t)span);
}

/* Count t in cells c (may be NULL: not counting) with their lock held, unless t is NULL or counted already. */
static BW_ALWAYS_INLINE void tally_locked(bw_cells *c, tally *t)
{
    if (c && t && !t->done) {
        count_locked(c, t->kind, t->span);
        t->done = 1;
    }
}

static BW_ALWAYS_INLINE int64_t stamp_of(const bw_breaker *b)
{
    if (BW_LIKELY(b->stamp_mode == STAMP_TICK))
        return bw__tick_now();
    return b->stamp_mode == STAMP_SYS ? bw__sys_stamp() : bw_clock_now(b->clock);
}

/* Keep `msg` (bw_settle_msg's) with b's last failure, whose word this settle just stored. */
void bw__note_message(bw_breaker *b, uint64_t word, const char *msg);

/* A BW_FAILURE settle's code becomes the breaker's last failure (in any state; no lock). */
static BW_ALWAYS_INLINE void note_failure(bw_breaker *b, bw_outcome outcome, int code, const char *msg)
{
    if (outcome == BW_FAILURE) {
        uint64_t word = ((uint64_t)(uint32_t)code << 1) | 1;
        atomic_store_explicit(&b->last_failure, word, memory_order_relaxed);
        if (b->cold) {
            atomic_store_explicit(&b->cold->failed_at, stamp_of(b), memory_order_relaxed);
            if (BW_UNLIKELY(msg != NULL))
                bw__note_message(b, word, msg);
            else
                atomic_store_explicit(&b->cold->msg_word, 0, memory_order_relaxed); /* a failure with no message */
        }
    }
}

static inline int64_t stamp_ns(const bw_breaker *b, int64_t stamp)
{
    return b->stamp_mode == STAMP_SYS ? bw__sys_stamp_ns(stamp) : stamp;
}

static inline int64_t span_ns(const bw_breaker *b, int64_t span)
{
    return b->stamp_mode == STAMP_SYS ? bw__sys_span_ns(span) : span;
}

/* Nanoseconds (a span, or an instant when `instant`) as the breaker's stamp units. */
static inline int64_t ns_stamp(const bw_breaker *b, int64_t ns, int instant)
{
    return b->stamp_mode == STAMP_SYS ? bw__sys_ns_to_stamp(ns, instant) : ns;
}

static inline int64_t now_of(const bw_breaker *b)
{
    return stamp_ns(b, stamp_of(b));
}

static inline uint64_t load_word(const bw_breaker *b)
{
    return atomic_load_explicit(&((bw_breaker *)b)->word, memory_order_acquire);
}

/* The machine's lazy "now" (bw__now) for a call: the stamp it read, converted only if the machine asks. */
typedef struct lazy_clock {
    const bw_breaker *b;
    int64_t stamp;
    int have;
} lazy_clock;
int64_t bw__lazy_read(void *ctx);

/* ---- breaker*.c, for one another and the attachments ---- */

/* Take every lock and note the state before; change_end publishes, unlocks and kicks the timer. */
change bw__change_begin(bw_breaker *b);
int bw__change_end(bw_breaker *b, change *c);
/* The breaker's event of `type`, and the pending list's helpers. */
bw_event bw__event_of(const bw_breaker *b, bw_event_type type);
void bw__add_change(bw_breaker *b, pending *p, int from, int to);
void bw__add_event(bw_breaker *b, pending *p, int type, int status, const char *message);
void bw__deliver(bw_breaker *b, const pending *p);
/* After a change, with no lock held: the events in p, then the state change (and RESET after a reset). */
void bw__announce(bw_breaker *b, pending *p, int before, int after, int reset);
/* The locked paths of acquire and settle, the rejection and the events of a settle. */
int bw__acquire_locked(bw_breaker *b, bw_permit *p, bw_rejection *why, int64_t stamp);
int bw__settle_locked(bw_breaker *b, uint64_t gen, bw_outcome outcome, int slow, bw__now *now, int *before, int *after);
void bw__fill_rejection(bw_breaker *b, bw_rejection *why, int state, int64_t retry_after);
void bw__settle_events(bw_breaker *b, bw_outcome outcome, int code, const char *msg, int slow, int64_t span,
                       int applied, int before, int after);
/* Count a settled call (taking b's lock for it): `applied` as the machine's record says (-1 stale). */
void bw__count_call(bw_breaker *b, bw_outcome outcome, int slow, int64_t span, int applied);
/* A stored breaker's transition in its store (no engine lock held): record why (as change_end does) and count it. */
void bw__note_shared(bw_breaker *b, int from, int to, int why);
/* Count a state change from -> to because of `why` (bw_reason), and a probe round it ended (counters on). */
void bw__count_change(bw_breaker *b, int from, int to, int why);
/* Count a store event (BW_EVENT_STORE_*). */
void bw__count_store(bw_breaker *b, int type);
/* The extra block, made on first need (NULL when out of memory). */
bw_extra *bw__extra_of(bw_breaker *b);

/* ---- attach_timer.c ---- */

int bw__timer_attach(bw_breaker *b);
void bw__timer_detach(bw_breaker *b);
void bw__timer_kick(bw_breaker *b);

/* ---- attach_store.c ---- */

/* Bind a new breaker to cfg's store (link, view, and for the coordinated mode its lane). */
int bw__store_attach(bw_breaker *b, const bw_config *cfg, bw_error *err);
/*
 * Unbind, in two steps around the timer's removal: stop (the lane calls back no
 * more; `wait` lets queued writes run for up to store_close_timeout), then
 * release (nothing of the store is left). Between them a timer's trip may still
 * queue a write, which is dropped.
 */
void bw__store_stop(bw_breaker *b, int wait);
void bw__store_release(bw_breaker *b);
/* A local CLOSED -> OPEN trip of a coordinated breaker: queue its write to the store. */
void bw__coord_trip(bw_breaker *b);
/* bw_breaker_open_for on a coordinated breaker: queue the write that opens the fleet's circuit for ns. */
void bw__coord_open_for(bw_breaker *b, int64_t ns);
/*
 * bw_breaker_open_for on a stored breaker: one update that opens the fleet's
 * circuit for ns (its result handled as every operation's: events, health).
 * Returns 1 when the circuit is OPEN after it, 0 when it is in an operator
 * state, -1 when the store was not reached (failed, or degraded and not due
 * for a retry).
 */
int bw__shared_open_for(bw_breaker *b, int64_t ns);
/* Admission, settlement, snapshot and verbs of a breaker with a store. */
int bw__shared_acquire(bw_breaker *b, bw_permit *p, bw_rejection *why, int64_t stamp, unsigned st);
int bw__shared_settle(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out,
                      const char *msg);
int bw__shared_snapshot(bw_breaker *b, bw_snapshot *out);
/* A stored breaker's verb: one update of its circuit (its result handled as every operation's); the store's status. */
int bw__shared_verb(bw_breaker *b, int target);

#endif
