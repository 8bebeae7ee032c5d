/*
 * breaker.c — the breaker engine's hot paths: the machine behind a lock,
 * lock-free admission, permits, durations, the classifier, publication and the
 * record of a transition. engine.h has the locking rules and the layout; the
 * cold parts live in breaker_new.c (construction), breaker_state.c (state,
 * snapshot, verbs, counters) and breaker_events.c (events, listeners), the
 * timer and the store attachment in attach_timer.c and attach_store.c.
 *
 * Design notes: what the hot paths do not need (listener events, the locked
 * acquire, filling a rejection, the striped settle, anything of a store) lives
 * in functions of its own, kept out of line: a small frame for acquire and
 * settle was worth 3 ns a call.
 *
 * A striped record need not always run the trip test. If a test earlier in
 * the same bucket of the time window passed (at least min_calls, both rates
 * below their thresholds; `eval_bucket` remembers the bucket), then nothing
 * has expired since (a window drops whole buckets), so the window is that
 * test's counts plus what was recorded since. A success only adds to the
 * total: both rates can only fall.
 * A failed or slow call adds to a rate, but the test's counts say how many
 * calls, each taken as both failed and slow, it would take to reach either
 * threshold (`headroom`); while fewer than that were failed or slow since, no
 * threshold can have been reached. Each stripe counts its own in the tally of
 * its lock word (base/spin.h), added by the same sequentially consistent
 * compare-and-swap that takes the lock; a call reads every stripe's tally after
 * its own swap. Of any set of such calls, the one whose swap came last sees all
 * the others' tallies, so if together they reach the headroom, that one runs
 * the test: the breaker trips on exactly the call it would trip on unstriped.
 * A test that passes sets a new headroom and clears the tallies (under every
 * lock); a new bucket, or a tally that reaches the headroom, runs the test.
 */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "core/engine.h"

int64_t bw__lazy_read(void *ctx)
{
    const lazy_clock *c = ctx;
    return c->have ? stamp_ns(c->b, c->stamp) : now_of(c->b);
}

/* This thread's stripe: threads are numbered round-robin on first use. */
static _Thread_local uint32_t thread_slot;
static atomic_uint next_slot;

static inline bw_stripe *my_stripe(bw_breaker *b)
{
    uint32_t s = thread_slot;
    if (BW_UNLIKELY(!s))
        s = thread_slot = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed) + 1;
    return &b->stripes[s & (b->nstripes - 1)];
}

/* The state callers see: the machine's, unless a coordinated breaker follows the fleet. Lock held. */
static int effective(const bw_breaker *b)
{
    return following(b) ? b->extra->view.state : b->m.state;
}

/* Mirror the machine (or the view it follows) into the lock-free fields. Call with lock_all held. */
static void publish(bw_breaker *b)
{
    atomic_store_explicit(&b->eval_bucket, INT64_MIN, memory_order_relaxed);
    int follow = b->extra && following(b);
    int st = follow ? b->extra->view.state : b->m.state;
    if (st == BW_STATE_OPEN) {
        int64_t until = follow ? b->extra->view.until : bw__machine_deadline(&b->m);
        atomic_store_explicit(&b->open_until, ns_stamp(b, until, 1), memory_order_relaxed);
    }
    const bw__link *l = link_of(b);
    unsigned shown = l && l->c.mode == BW_STORE_STORED ? WORD_STORED : (unsigned)st;
    atomic_store_explicit(&b->word, (b->m.gen << 3) | shown, memory_order_release);
}

/*
 * Every change to the machine goes through change_begin / change_end: all locks
 * held, the state before noted, the result published if the generation moved.
 */
static inline change change_begin(bw_breaker *b)
{
    lock_all(b);
    change c = {b->extra ? effective(b) : b->m.state, b->m.state, b->m.gen, 0, 0, 0, 0};
    return c;
}

/* The end of a change that moved a breaker with a timer or a store: publish, unlock, the timer's new deadline. */
static BW_NOINLINE void change_end_moved(bw_breaker *b)
{
    publish(b);
    unlock_all(b);
    bw__timer_kick(b);
}

/*
 * A state change (locks held): count it, keep why it happened (the machine's
 * reason when the machine moved, else the store's view moved: shared) in the
 * breaker's record, which its events read, and return `after` with the reason
 * (AFTER_WHY).
 */
/* Write the record of the last transition (b's lock held: its writers are serialised). */
static void write_why(bw_breaker *b, int after, int why, double rate, uint64_t total, uint32_t count)
{
    uint32_t seq = atomic_load_explicit(&b->why_seq, memory_order_relaxed);
    atomic_store_explicit(&b->why_seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&b->why, (uint32_t)after << 8 | (uint32_t)why, memory_order_relaxed);
    uint64_t bits;
    memcpy(&bits, &rate, sizeof bits);
    atomic_store_explicit(&b->why_rate, bits, memory_order_relaxed);
    atomic_store_explicit(&b->why_total, total, memory_order_relaxed);
    atomic_store_explicit(&b->why_count, count, memory_order_relaxed);
    atomic_store_explicit(&b->why_seq, seq + 2, memory_order_release);
}

static BW_NOINLINE int note_change(bw_breaker *b, const change *c, int after, int moved)
{
    int why = moved ? b->m.why : c->why ? c->why : BW_REASON_SHARED;
    if (moved)
        write_why(b, after, why, b->m.why_rate, b->m.why_total, b->m.why_count);
    else
        write_why(b, after, why, 0, 0, 0);
    if (!c->nocount)
        bw__count_change(b, c->before, after, why);
    return after | why << 8;
}

void bw__note_shared(bw_breaker *b, int from, int to, int why)
{
    if (!why)
        why = BW_REASON_SHARED;
    bw__spin_lock(&b->lock);
    write_why(b, to, why, 0, 0, 0);
    bw__spin_unlock(&b->lock);
    bw__count_change(b, from, to, why);
}

/* Count a state change from -> to because of `why` (bw_reason), and a probe round it ended. */
void bw__count_change(bw_breaker *b, int from, int to, int why)
{
    if (!b->cold || (unsigned)from > BW_STATE_METRICS_ONLY || (unsigned)to > BW_STATE_METRICS_ONLY)
        return;
    atomic_fetch_add_explicit(&b->cold->transitions[from][to], 1, memory_order_relaxed);
    if (from == BW_STATE_HALF_OPEN && (to == BW_STATE_CLOSED || to == BW_STATE_OPEN) && why != BW_REASON_OPERATOR &&
        why != BW_REASON_SHARED && why != BW_REASON_RETRY_AFTER &&
        why != BW_REASON_STORE_DOWN) /* a Retry-After ends a round, not as failed; a failed store none */
        atomic_fetch_add_explicit(to == BW_STATE_CLOSED ? &b->cold->rounds_passed : &b->cold->rounds_failed, 1,
                                  memory_order_relaxed);
}

/* Publish, release every lock, and return the state callers see after the change (with AFTER_WHY if it moved). */
static inline int change_end(bw_breaker *b, change *c)
{
    int after = b->m.state;
    int moved = b->m.gen != c->gen;
    if (BW_UNLIKELY(b->extra != NULL)) {
        after = effective(b);
        c->trip = c->mbefore == BW_STATE_CLOSED && b->m.state == BW_STATE_OPEN;
        if (moved || after != c->before || c->force) { /* a store's view moves without the generation */
            if (after != c->before)
                after = note_change(b, c, after, moved);
            change_end_moved(b);
            return after;
        }
    } else if (moved) {
        if (after != c->before)
            after = note_change(b, c, after, moved);
        publish(b);
    }
    unlock_all(b);
    return after;
}

change bw__change_begin(bw_breaker *b)
{
    return change_begin(b);
}

int bw__change_end(bw_breaker *b, change *c)
{
    return change_end(b, c);
}

/* After a change: a local CLOSED -> OPEN trip of a coordinated breaker is written to its store. */
static inline void coord_trip(bw_breaker *b, const change *c)
{
    if (BW_UNLIKELY(c->trip))
        bw__coord_trip(b);
}

void bw__breaker_unpin(bw_breaker *b, int64_t stamp)
{
    bw__spin_lock(&b->lock);
    b->releases++;
    b->released_at = stamp;
    bw__spin_unlock(&b->lock);
}

/* ---- admission ---- */

/* A rejection's state, retry_after and the breaker's last failure, into *why. */
static BW_ALWAYS_INLINE void put_why(const bw_breaker *b, bw_rejection *why, int state, int64_t retry_after)
{
    uint64_t lf = atomic_load_explicit(&b->last_failure, memory_order_relaxed);
    why->state = (bw_state)state;
    why->retry_after_ns = retry_after;
    why->has_last_failure = (int)(lf & 1);
    why->last_failure = (int)(uint32_t)(lf >> 1);
}

/* Count a rejection by the rejecting state (OPEN, HALF_OPEN or FORCED_OPEN). */
static BW_ALWAYS_INLINE void count_rejection(bw_breaker *b, int state)
{
    if (b->cold && state >= BW_STATE_OPEN && state <= BW_STATE_FORCED_OPEN)
        atomic_fetch_add_explicit(&b->cold->rejected[state - BW_STATE_OPEN], 1, memory_order_relaxed);
}

BW_NOINLINE void bw__fill_rejection(bw_breaker *b, bw_rejection *why, int state, int64_t retry_after)
{
    state = AFTER_STATE(state);
    if (why)
        put_why(b, why, state, retry_after);
    count_rejection(b, state);
    if (lmask(b) & BW_EVENT_MASK(BW_EVENT_REJECTED)) {
        bw_event e = bw__event_of(b, BW_EVENT_REJECTED);
        e.from = e.to = (bw_state)state;
        e.retry_after_ns = retry_after;
        deliver(b, &e);
    }
}

BW_NOINLINE int bw__acquire_locked(bw_breaker *b, bw_permit *p, bw_rejection *why, int64_t stamp)
{
    pending ev;
    ev.n = 0;
    int64_t now = stamp_ns(b, stamp);
    bw__now t = bw__now_at(now);
    uint64_t gen = 0;
    change c = change_begin(b);
    int ok = bw__machine_acquire(&b->m, &t, &gen);
    int64_t retry_after = ok ? BW_NO_TIME : bw__machine_retry_after(&b->m, now);
    int after = change_end(b, &c);
    bw__announce(b, &ev, c.before, after, 0);
    coord_trip(b, &c);
    if (!ok) {
        p->magic_ = PERMIT_SETTLED;
        bw__fill_rejection(b, why, after, retry_after);
        return BW_REJECTED;
    }
    p->breaker_ = b;
    p->generation_ = gen;
    p->start_ns_ = stamp;
    p->magic_ = PERMIT_LIVE;
    return BW_OK;
}

/*
 * A probe's admission in a HALF_OPEN round that goes on (the breaker without a
 * timer or store): the breaker's lock only, as the probe counters need no
 * stripe and nothing is published. Anything else (the round expired, another
 * state) goes to the locked acquire, which decides as if this had not looked.
 */
static BW_NOINLINE int acquire_probe(bw_breaker *b, bw_permit *p, bw_rejection *why, uint64_t w)
{
    int64_t stamp = stamp_of(b);
    bw__spin_lock(&b->lock);
    if (BW_UNLIKELY(load_word(b) != w || bw__machine_round_expired(&b->m, stamp_ns(b, stamp)))) {
        bw__spin_unlock(&b->lock);
        return bw__acquire_locked(b, p, why, stamp);
    }
    int ok = bw__machine_probe_admit(&b->m);
    bw__spin_unlock(&b->lock);
    if (!ok) {
        p->magic_ = PERMIT_SETTLED;
        bw__fill_rejection(b, why, BW_STATE_HALF_OPEN, BW_NO_TIME);
        return BW_REJECTED;
    }
    p->breaker_ = b;
    p->generation_ = w >> 3;
    p->start_ns_ = stamp;
    p->magic_ = PERMIT_LIVE;
    return BW_OK;
}

/* Every acquire the word does not admit at once: a rejection, a probe, or a store to ask. */
static BW_NOINLINE int acquire_other(bw_breaker *b, bw_permit *p, bw_rejection *why, uint64_t w)
{
    unsigned st = (unsigned)(w & 7);
    if (st == BW_STATE_FORCED_OPEN) {
        p->magic_ = PERMIT_SETTLED;
        bw__fill_rejection(b, why, BW_STATE_FORCED_OPEN, BW_NO_TIME);
        return BW_REJECTED;
    }
    if (st == BW_STATE_HALF_OPEN && !b->extra)
        return acquire_probe(b, p, why, w);
    int64_t stamp = stamp_of(b);
    if (st == BW_STATE_OPEN) {
        int64_t until = atomic_load_explicit(&b->open_until, memory_order_relaxed);
        if (BW_LIKELY(stamp < until)) {
            int64_t retry_after = span_ns(b, until - stamp);
            p->magic_ = PERMIT_SETTLED;
            bw__fill_rejection(b, why, BW_STATE_OPEN, retry_after > 0 ? retry_after : 1);
            return BW_REJECTED;
        }
    }
    if (BW_UNLIKELY(b->extra != NULL) && link_of(b))
        return bw__shared_acquire(b, p, why, stamp, st);
    return bw__acquire_locked(b, p, why, stamp);
}

/* The states whose admission is one load of the word: CLOSED, DISABLED, METRICS_ONLY. */
#define ADMITTED ((1u << BW_STATE_CLOSED) | (1u << BW_STATE_DISABLED) | (1u << BW_STATE_METRICS_ONLY))

/* An admission by the word whose stamp takes a call (a clock object, the monotonic clock, no tick yet). */
static BW_NOINLINE int acquire_timed(bw_breaker *b, bw_permit *p, uint64_t w)
{
    p->breaker_ = b;
    p->generation_ = w >> 3;
    p->start_ns_ = stamp_of(b);
    p->magic_ = PERMIT_LIVE;
    return BW_OK;
}

/* Every call out of it is a tail call, so that it needs no frame of its own (as the quick settle). */
int bw_acquire(bw_breaker *b, bw_permit *p, bw_rejection *why)
{
    if (BW_UNLIKELY(!b || !p))
        return BW_EINVAL;
    uint64_t w = load_word(b);
    unsigned st = (unsigned)(w & 7);
    if (BW_UNLIKELY(st != BW_STATE_CLOSED && !((ADMITTED >> st) & 1))) { /* CLOSED first: one test */
        /* OPEN on the coarse clock with no listener: the rejection without a call. */
        if (st == BW_STATE_OPEN && atomic_load_explicit(&b->reject_now, memory_order_relaxed)) {
            int64_t t = atomic_load_explicit(&bw__tick_word, memory_order_relaxed);
            int64_t until = atomic_load_explicit(&b->open_until, memory_order_relaxed);
            if (BW_LIKELY(t != 0 && t < until)) {
                p->magic_ = PERMIT_SETTLED;
                count_rejection(b, BW_STATE_OPEN);
                if (why)
                    put_why(b, why, BW_STATE_OPEN, until - t);
                return BW_REJECTED;
            }
        }
        return acquire_other(b, p, why, w);
    }
    int64_t t = 0;
    if (b->timed) {
        if (BW_LIKELY(b->stamp_mode == STAMP_TICK))
            t = atomic_load_explicit(&bw__tick_word, memory_order_relaxed);
        else if (b->quick_base) /* STAMP_SYS with the TSC in use (the quick settle's rule) */
            t = bw__sys_tsc();
        if (BW_UNLIKELY(t == 0))
            return acquire_timed(b, p, w);
    }
    p->breaker_ = b;
    p->generation_ = w >> 3;
    p->start_ns_ = t;
    p->magic_ = PERMIT_LIVE;
    return BW_OK;
}

/* ---- settlement ---- */

/* Record through the machine with every lock held. */
static inline int settle_locked(bw_breaker *b, uint64_t gen, bw_outcome outcome, int slow, bw__now *now, int *before,
                                int *after, tally *t)
{
    change c = change_begin(b);
    uint32_t stripe = 0;
    if (b->stripes) {
        stripe = (uint32_t)(my_stripe(b) - b->stripes);
        /* A record into a stripe without a tally: no later call may skip the trip test on the last base. */
        atomic_store_explicit(&b->eval_bucket, INT64_MIN, memory_order_relaxed);
    }
    int applied = bw__machine_record_in(&b->m, stripe, gen, outcome, slow, now);
    if (t && applied < 0)
        t->kind = BW_CALL_STALE;
    tally_locked(b->cells, t);
    *before = c.before;
    *after = change_end(b, &c);
    coord_trip(b, &c);
    return applied;
}

int bw__settle_locked(bw_breaker *b, uint64_t gen, bw_outcome outcome, int slow, bw__now *now, int *before, int *after)
{
    return settle_locked(b, gen, outcome, slow, now, before, after, NULL);
}

/*
 * How many calls, each both failed and slow, could be added to `part` of
 * `total` calls before part / total reaches `rate` (the fewest that do, or
 * fewer: never more). The rate is not reached by part / total itself.
 */
static uint64_t headroom_for(uint64_t part, uint64_t total, double rate)
{
    if (rate >= 1.0)
        return UINT64_MAX; /* part < total, and adding to both keeps it so */
    double k0 = ((double)total * rate - (double)part) / (1.0 - rate);
    uint64_t k = k0 < 2.0 ? 0 : k0 > 0x1p62 ? (uint64_t)1 << 62 : (uint64_t)k0 - 2;
    if (bw__rate_reached(part + k, total + k, rate))
        return 0; /* the estimate was off: test every time (never seen) */
    /* k0 is within a call of the answer: step up to it, a few calls at most. */
    for (int i = 0; i < 8 && !bw__rate_reached(part + k + 1, total + k + 1, rate); i++)
        k++;
    return k + 1;
}

/*
 * Whether a failed or slow call recorded in eval_bucket can be left without the
 * trip test: the failed or slow calls tallied by every stripe since that test
 * (this one's included) are fewer than its headroom (breaker.c's design notes).
 * Call with this thread's stripe lock held, taken with its tally added.
 */
static BW_ALWAYS_INLINE int striped_below(const bw_breaker *b)
{
    uint64_t bad = 0;
    for (uint32_t i = 0; i < b->nstripes; i++)
        bad += bw__spin_tally(&b->stripes[i].lock);
    return bad < b->headroom;
}

/*
 * Whether a CLOSED record just made into stripe s (its lock held, taken with
 * the tally `bad` added when `tallied`) needs no trip test: a test passed in
 * the bucket the record went into, and the record was a success, or a failed or
 * slow call that every stripe's tally leaves below the headroom.
 */
static BW_ALWAYS_INLINE int stripe_done(const bw_breaker *b, const bw_stripe *s, unsigned bad, int tallied)
{
    return atomic_load_explicit(&b->eval_bucket, memory_order_relaxed) == s->win.cur &&
           (!bad || (tallied && striped_below(b)));
}

/* What stripe_record found (the trip test's cases are the caller's). */
enum { STRIPE_MOVED = -1, STRIPE_NOT_CLOSED = -2, STRIPE_TEST = 0, STRIPE_DONE = 1 };

/*
 * Record a call at t (ns) into this thread's stripe if the breaker is still at
 * generation gen in CLOSED or METRICS_ONLY. STRIPE_DONE: recorded, and no trip
 * test is needed (METRICS_ONLY, or the design notes' rules); STRIPE_TEST:
 * recorded, and the trip test must run; STRIPE_MOVED (another generation) and
 * STRIPE_NOT_CLOSED (another state): nothing recorded. The tally this adds
 * before it knows is at worst an overcount, which only makes a test run.
 */
static BW_ALWAYS_INLINE int stripe_record(bw_breaker *b, uint64_t gen, unsigned failed, unsigned slow, int64_t t,
                                          tally *ty)
{
    unsigned bad = failed | slow;
    bw_stripe *s = my_stripe(b);
    int tallied = bw__spin_lock_tally(&s->lock, bad);
    uint64_t w = load_word(b); /* exact: publishing needs this lock too */
    unsigned st = (unsigned)(w & 7);
    int r;
    if ((w >> 3) != gen) {
        r = STRIPE_MOVED;
    } else if (st != BW_STATE_CLOSED && st != BW_STATE_METRICS_ONLY) {
        r = STRIPE_NOT_CLOSED;
    } else {
        bw__window_time_record(&s->win, failed, slow, t);
        tally_locked(b->cells ? &s->cells : NULL, ty);
        r = st == BW_STATE_METRICS_ONLY || stripe_done(b, s, bad, tallied) ? STRIPE_DONE : STRIPE_TEST;
    }
    stripe_unlock(s, 0);
    return r;
}

/* The trip test after a striped record at t (ns); a pass in this bucket becomes the new base. */
static BW_NOINLINE int striped_test(bw_breaker *b, uint64_t gen, bw__now *now, int64_t t, int *before, int *after)
{
    change c = change_begin(b);
    if (b->m.gen == gen && bw__machine_evaluate(&b->m, now) == 0) {
        uint64_t total, failed, slow;
        bw__machine_counts(&b->m, now, &total, &failed, &slow);
        uint64_t hf = headroom_for(failed, total, b->m.cfg.failure_rate);
        uint64_t hs = headroom_for(slow, total, b->m.cfg.slow_rate);
        b->headroom = hf < hs ? hf : hs;
        b->clear_tallies = 1; /* what the base holds leaves the tallies as the stripes are released */
        atomic_store_explicit(&b->eval_bucket, bw__window_bucket_of(b->m.wins, t), memory_order_relaxed);
    }
    *before = c.before;
    *after = change_end(b, &c);
    coord_trip(b, &c);
    return 1;
}

/* CLOSED or METRICS_ONLY on a striped window: record into this thread's stripe. */
static BW_NOINLINE int settle_striped(bw_breaker *b, uint64_t gen, bw_outcome outcome, int slow, bw__now *now,
                                      int *before, int *after, tally *ty)
{
    unsigned failed = outcome == BW_FAILURE || outcome == BW_UNREACHABLE;
    int64_t t = bw__now_get(now);
    switch (stripe_record(b, gen, failed, slow != 0, t, ty)) {
    case STRIPE_MOVED:
        return -1;
    case STRIPE_NOT_CLOSED:
        return settle_locked(b, gen, outcome, slow, now, before, after, ty);
    case STRIPE_DONE:
        return 1;
    default:
        return striped_test(b, gen, now, t, before, after);
    }
}

void bw__note_message(bw_breaker *b, uint64_t word, const char *msg)
{
    bw_cold *k = b->cold;
    bw__spin_lock(&k->msg_lock);
    size_t n = strnlen(msg, sizeof k->msg - 1);
    memcpy(k->msg, msg, n);
    k->msg[n] = 0;
    atomic_store_explicit(&k->msg_word, word, memory_order_relaxed);
    bw__spin_unlock(&k->msg_lock);
}

/* The events of a settle (CALL, then any state change). */
BW_NOINLINE void bw__settle_events(bw_breaker *b, bw_outcome outcome, int code, const char *msg, int slow, int64_t span,
                                   int applied, int before, int after)
{
    pending ev;
    ev.n = 0;
    if (lmask(b) & BW_EVENT_MASK(BW_EVENT_CALL)) {
        bw_event e = bw__event_of(b, BW_EVENT_CALL);
        e.outcome = outcome;
        e.slow = slow;
        e.stale = applied < 0;
        e.duration_ns = b->timed ? span_ns(b, span) : 0;
        e.rc = code;
        e.message = msg;
        ev.ev[ev.n++] = e;
    }
    bw__announce(b, &ev, before, after, 0);
}

/*
 * Count a settled call off the quick paths, in the breaker's cells under its
 * lock (one mechanism for every call count; these paths take locks anyway).
 */
BW_NOINLINE void bw__count_call(bw_breaker *b, bw_outcome outcome, int slow, int64_t span, int applied)
{
    if (!b->cells)
        return;
    bw__spin_lock(&b->lock);
    count_locked(b->cells, applied < 0 ? BW_CALL_STALE : kind_of(outcome, slow != 0), span);
    bw__spin_unlock(&b->lock);
}

static BW_NOINLINE int settle_other(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out,
                                    const char *msg);

void bw__permit_pin(bw_permit *p)
{
    p->magic_ |= PERMIT_PIN;
}

/*
 * What a CLOSED settle trips on the fast path: the machine's trip test (a count
 * window) or its trip (consecutive failures), with b's lock held on entry; then
 * what any change does (change_end: publication, the timer, a coordinated
 * trip's write). Out of line: it runs when the rates or the count say so.
 */
static BW_NOINLINE int settle_fast_trip(bw_breaker *b, uint64_t w, int64_t stamp, int have, int *before, int *after)
{
    lazy_clock lc = {b, stamp, have};
    bw__now now = {0, 0, bw__lazy_read, &lc};
    change c = {BW_STATE_CLOSED, BW_STATE_CLOSED, w >> 3, 0, 0, 0, 0}; /* the word said CLOSED, under the lock */
    if (b->fast == BW__FAST_COUNT)
        bw__machine_evaluate(&b->m, &now);
    else
        bw__machine_trip(&b->m, bw__now_get(&now));
    *before = c.before;
    *after = change_end(b, &c);
    coord_trip(b, &c);
    return 1;
}

/*
 * A CLOSED settle of a breaker whose CLOSED record is the machine's fast case
 * (b->fast: one count window, or consecutive counts): one lock, the record, and
 * no trip test unless the record calls for it. The word is read again under the
 * lock: if anything moved since the caller read it, the general path decides.
 */
static BW_ALWAYS_INLINE int settle_fast(bw_breaker *b, uint64_t w, bw_outcome outcome, int slow, int64_t stamp,
                                        int have, int *before, int *after, tally *t)
{
    int failed = outcome == BW_FAILURE || outcome == BW_UNREACHABLE; /* b->unrecorded filtered the rest */
    bw__spin_lock(&b->lock);
    if (BW_UNLIKELY(atomic_load_explicit(&b->word, memory_order_relaxed) != w)) {
        bw__spin_unlock(&b->lock);
        return -2;
    }
    tally_locked(b->cells, t);
    int test = b->fast == BW__FAST_COUNT ? bw__machine_closed_count(&b->m, failed, slow)
                                         : bw__machine_closed_consecutive(&b->m, failed);
    if (BW_UNLIKELY(test))
        return settle_fast_trip(b, w, stamp, have, before, after);
    bw__spin_unlock(&b->lock);
    return 1;
}

/*
 * A probe's SUCCESS or FAILURE in a HALF_OPEN round that it does not decide
 * (the breaker without a timer or store): the breaker's lock only, as for its
 * admission. Returns -2 when the general path must decide (the breaker moved,
 * the round expired, or this probe decides it), having changed nothing.
 */
static BW_ALWAYS_INLINE int settle_probe(bw_breaker *b, uint64_t w, bw_outcome outcome, int slow, int64_t stamp,
                                         int have, tally *t)
{
    int64_t now = b->m.cfg.max_wait_ho > 0 ? (have ? stamp_ns(b, stamp) : now_of(b)) : 0;
    bw__spin_lock(&b->lock);
    int ok = load_word(b) == w && !bw__machine_round_expired(&b->m, now) &&
             bw__machine_probe_tally(&b->m, outcome == BW_FAILURE, slow != 0);
    if (ok)
        tally_locked(b->cells, t);
    bw__spin_unlock(&b->lock);
    return ok ? 1 : -2;
}

/* Everything but the fast CLOSED record: a striped window, or the machine under every lock. */
static BW_NOINLINE int settle_general(bw_breaker *b, uint64_t gen, unsigned st, bw_outcome outcome, int slow,
                                      int64_t stamp, int have, int *before, int *after, tally *t)
{
    lazy_clock lc = {b, stamp, have};
    bw__now now = {0, 0, bw__lazy_read, &lc};
    if (b->stripes && (st == BW_STATE_CLOSED || st == BW_STATE_METRICS_ONLY))
        return settle_striped(b, gen, outcome, slow, &now, before, after, t);
    return settle_locked(b, gen, outcome, slow, &now, before, after, t);
}

/*
 * Every settle: `timed_out` marks the call slow whenever slow-call detection is
 * on; `msg` (may be NULL) is bw_settle_msg's message.
 */
static inline int settle(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out,
                         const char *msg)
{
    if (BW_UNLIKELY(!b || !p || (unsigned)outcome > BW_UNREACHABLE))
        return BW_EINVAL;
    if (BW_UNLIKELY(p->magic_ != PERMIT_LIVE || p->breaker_ != b))
        return settle_other(b, p, outcome, failure_code, timed_out, msg);
    p->magic_ = PERMIT_SETTLED;

    int slow = 0, have = 0;
    int64_t stamp = 0, span = 0;
    if (b->timed) {
        stamp = stamp_of(b); /* reused if the machine needs the time */
        have = 1;
        span = stamp - p->start_ns_;
        slow = timed_out ? b->slow_stamp != INT64_MAX : span >= b->slow_stamp;
    }
    note_failure(b, outcome, failure_code, msg);

    int applied = -1; /* stale unless the generation is still the permit's */
    int before = 0, after = 0;
    tally t = {kind_of(outcome, slow != 0), span, 0}; /* counted by whichever lock records the call */
    uint64_t w = load_word(b);
    if (BW_LIKELY((w >> 3) == p->generation_)) {
        unsigned st = (unsigned)(w & 7);
        if (st == BW_STATE_DISABLED || (((b->unrecorded >> outcome) & 1) && st != BW_STATE_HALF_OPEN))
            applied = 0; /* nothing to record: no lock needed */
        else if (BW_LIKELY(st == BW_STATE_CLOSED && b->fast && b->fast != BW__FAST_TIME) &&
                 (applied = settle_fast(b, w, outcome, slow, stamp, have, &before, &after, &t)) != -2)
            ;
        else if (st == BW_STATE_HALF_OPEN && !b->extra && outcome <= BW_FAILURE &&
                 (applied = settle_probe(b, w, outcome, slow, stamp, have, &t)) != -2)
            ;
        else
            applied = settle_general(b, w >> 3, st, outcome, slow, stamp, have, &before, &after, &t);
    }
    if (b->cells && !t.done)
        bw__count_call(b, outcome, slow, span, applied);
    if (BW_UNLIKELY(lmask(b) | (unsigned)(before != after)))
        bw__settle_events(b, outcome, failure_code, msg, slow, span, applied, before, after);
    return BW_OK;
}

/*
 * Two copies of settle() only (the general one, and the rare one for a timed-out
 * call or a message): with more, link-time inlining stopped inlining the
 * machine's record into them, which cost 1.4 ns a call.
 */
static BW_NOINLINE BW_FLATTEN int settle_general_entry(bw_breaker *b, bw_permit *p, bw_outcome outcome, int code)
{
    return settle(b, p, outcome, code, 0, NULL);
}

static BW_NOINLINE int settle_rare(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out,
                                   const char *msg)
{
    return settle(b, p, outcome, failure_code, timed_out, msg);
}

/* A trip on the quick path (below), with b's lock held on entry. */
static BW_NOINLINE int settle_quick_trip(bw_breaker *b, uint64_t w)
{
    int before, after;
    settle_fast_trip(b, w, 0, 0, &before, &after);
    return BW_OK;
}

/* A quick settle that found, under the lock, that the breaker moved meanwhile: decide again, generally. */
static BW_NOINLINE int settle_quick_moved(bw_breaker *b, bw_permit *p, bw_outcome outcome, int code)
{
    bw__spin_unlock(&b->lock);
    return settle_general_entry(b, p, outcome, code);
}

/* The count of a quick settle that recorded nothing (no lock held): a tail call, so the quick path needs no frame. */
static BW_NOINLINE int settle_quick_count(bw_breaker *b, bw_outcome outcome, int slow, int64_t span)
{
    bw__count_call(b, outcome, slow, span, 0);
    return BW_OK;
}

/* The end of a quick settle whose lock release (the breaker's or a stripe's) found a parked waiter. */
static BW_NOINLINE int settle_quick_wake(bw__spin *l)
{
    bw__spin_wake(l);
    return BW_OK;
}

/* A quick time settle that found, under the stripe lock, that the breaker moved or the bucket changed. */
static BW_NOINLINE int settle_quick_time_other(bw_breaker *b, bw_permit *p, bw_outcome outcome, int code, bw_stripe *s)
{
    stripe_unlock(s, 0); /* nothing recorded; its tally is at worst an overcount */
    return settle_general_entry(b, p, outcome, code);
}

/* A quick time settle that recorded and must run the trip test (the stripe lock released: wake its waiter if `wake`).
 */
static BW_NOINLINE int settle_quick_time_test(bw_breaker *b, uint64_t gen, int64_t t, bw_stripe *wake)
{
    if (wake)
        bw__spin_wake(&wake->lock);
    lazy_clock lc = {b, t, 1};
    bw__now now = {0, 0, bw__lazy_read, &lc};
    int before, after;
    striped_test(b, gen, &now, t, &before, &after);
    return BW_OK;
}

/*
 * Whether a quick settle's call was slow (0 or 1), from the coarse clock or the
 * TSC as b->quick allows; -1 when the tick is not running (a forked child): the
 * general path then starts it.
 */
static BW_ALWAYS_INLINE int quick_slow(const bw_breaker *b, const bw_permit *p, int64_t *span)
{
    *span = 0;
    if (!b->timed)
        return 0;
    int64_t t;
    if (BW_LIKELY(b->stamp_mode == STAMP_TICK)) {
        t = atomic_load_explicit(&bw__tick_word, memory_order_relaxed);
        if (BW_UNLIKELY(t == 0))
            return -1;
    } else {
        t = bw__sys_tsc(); /* STAMP_SYS: b->quick says the TSC is in use */
    }
    *span = t - p->start_ns_;
    return *span >= b->slow_stamp;
}

/* The end of a quick pinned settle that tripped its circuit: then release its pin. */
static BW_NOINLINE int settle_quick_pinned_trip(bw_breaker *c, uint64_t w, int64_t t)
{
    settle_quick_trip(c, w);
    bw__breaker_unpin(c, t); /* the last touch */
    return BW_OK;
}

/*
 * A pinned permit (a keyed circuit's, from bw_keyed_acquire) of a quick count
 * window in CLOSED, settled through the circuit's breaker or its parent: the
 * record and the pin's release in one critical section (core.h's Pins); the
 * lock's release is the last touch. Anything else goes to the general path.
 */
static BW_NOINLINE int settle_quick_pinned(bw_breaker *b, bw_permit *p, bw_outcome outcome, int code)
{
    bw_breaker *c = p->breaker_;
    if (BW_UNLIKELY(!c || (c != b && c->parent != b) || !atomic_load_explicit(&c->quick, memory_order_relaxed) ||
                    c->fast != BW__FAST_COUNT || ((c->unrecorded >> outcome) & 1)))
        return settle_general_entry(b, p, outcome, code);
    uint64_t w = load_word(c);
    int64_t t = 0; /* the stamp of the release: the tick, or the TSC (STAMP_SYS); else the general path */
    if (BW_LIKELY(c->stamp_mode == STAMP_TICK))
        t = atomic_load_explicit(&bw__tick_word, memory_order_relaxed);
    else if (c->stamp_mode == STAMP_SYS && bw__tsc_state.use_tsc)
        t = bw__sys_tsc();
    if (BW_UNLIKELY(w != ((p->generation_ << 3) | BW_STATE_CLOSED) || t == 0 || !bw__spin_try(&c->lock)))
        return settle_general_entry(b, p, outcome, code);
    if (BW_UNLIKELY(atomic_load_explicit(&c->word, memory_order_relaxed) != w)) {
        bw__spin_unlock(&c->lock);
        return settle_general_entry(b, p, outcome, code);
    }
    p->magic_ = PERMIT_SETTLED;
    note_failure_at(c, outcome, code, t);
    int slow = t - p->start_ns_ >= c->slow_stamp;
    if (c->cells)
        count_locked(c->cells, kind_of(outcome, (unsigned)slow), t - p->start_ns_);
    if (BW_UNLIKELY(bw__machine_closed_count(&c->m, outcome == BW_FAILURE, slow)))
        return settle_quick_pinned_trip(c, w, t);
    c->releases++;
    c->released_at = t;
    if (BW_UNLIKELY(bw__spin_release(&c->lock)))
        return settle_quick_wake(&c->lock);
    return BW_OK;
}

/*
 * A probe's SUCCESS or FAILURE on the quick settle (settle_quick's case): the
 * probe path of settle_probe without the general settle's frame; whatever it
 * cannot tally goes to the general path, which decides as if it had not looked.
 */
static BW_NOINLINE int settle_quick_probe(bw_breaker *b, bw_permit *p, bw_outcome outcome, int code, uint64_t w)
{
    if (b->extra || lmask(b))
        return settle_general_entry(b, p, outcome, code);
    int64_t stamp = 0;
    int slow = 0;
    if (b->timed || b->m.cfg.max_wait_ho > 0) {
        stamp = stamp_of(b);
        slow = stamp - p->start_ns_ >= b->slow_stamp;
    }
    tally t = {kind_of(outcome, (unsigned)slow), stamp - p->start_ns_, 0};
    if (settle_probe(b, w, outcome, slow, stamp, 1, &t) == -2)
        return settle_general_entry(b, p, outcome, code);
    p->magic_ = PERMIT_SETTLED;
    note_failure_at(b, outcome, code, stamp);
    return BW_OK;
}

/*
 * The quick settle of a striped time window (settle_quick's case; as it, every
 * call out of it is a tail call): take this thread's stripe lock at once, with
 * the call's tally, and record at the tick's instant within the stripe's
 * current bucket. Anything else goes to the general path.
 */
static BW_NOINLINE int settle_quick_time(bw_breaker *b, bw_permit *p, bw_outcome outcome, int code)
{
    int64_t t = atomic_load_explicit(&bw__tick_word, memory_order_relaxed);
    unsigned failed = outcome != BW_SUCCESS; /* FAILURE, or an UNREACHABLE that counts */
    unsigned slow = t - p->start_ns_ >= b->slow_stamp;
    unsigned bad = failed | slow;
    bw_stripe *s = my_stripe(b);
    unsigned v = atomic_load_explicit(&s->lock.v, memory_order_relaxed);
    unsigned add = bad ? bw__tally_room(v) : 0u;
    if (BW_UNLIKELY(t == 0 || (v & BW__SPIN_STATE) || add != bad * BW__TALLY_ONE ||
                    !atomic_compare_exchange_strong_explicit(&s->lock.v, &v, (v | 1u) + add, memory_order_seq_cst,
                                                             memory_order_relaxed)))
        return settle_general_entry(b, p, outcome, code); /* no tick (a forked child), held, or full */
    uint64_t w = atomic_load_explicit(&b->word, memory_order_relaxed);
    if (BW_UNLIKELY(w != ((p->generation_ << 3) | BW_STATE_CLOSED) || t < s->win.cur_lo || t >= s->win.cur_hi))
        return settle_quick_time_other(b, p, outcome, code, s);
    bw__window_time_record(&s->win, failed, slow, t); /* within the current bucket: no call */
    if (b->cells)
        count_locked(&s->cells, kind_of(outcome, slow), t - p->start_ns_);
    int done = stripe_done(b, s, bad, 1);
    p->magic_ = PERMIT_SETTLED;
    note_failure_at(b, outcome, code, t);
    int wake = bw__spin_release_tally(&s->lock, 0);
    if (BW_UNLIKELY(!done))
        return settle_quick_time_test(b, w >> 3, t, wake ? s : NULL);
    if (BW_UNLIKELY(wake))
        return settle_quick_wake(&s->lock);
    return BW_OK;
}

/*
 * The quick settle: a live permit of this breaker, in CLOSED at its generation,
 * on a breaker whose CLOSED record is the fast case, that reports nothing to a
 * listener, and whose stamps need no call (b->quick); its lock free. Everything
 * else, and a breaker that moved or whose lock was held, goes to the general
 * path, which decides as if the quick one had not looked. Every call out of it
 * is a tail call, so that it needs no frame of its own.
 */

static BW_ALWAYS_INLINE int settle_quick(bw_breaker *b, bw_permit *p, bw_outcome outcome, int code)
{
    if (BW_UNLIKELY(!b || !p || p->breaker_ != b || p->magic_ != PERMIT_LIVE || (unsigned)outcome > BW_UNREACHABLE)) {
        if (b && p && p->magic_ == (PERMIT_LIVE | PERMIT_PIN) && outcome <= BW_FAILURE)
            return settle_quick_pinned(b, p, outcome, code);
        return settle_general_entry(b, p, outcome, code);
    }
    uint64_t w = load_word(b);
    if (BW_UNLIKELY(w != ((p->generation_ << 3) | BW_STATE_CLOSED) ||
                    !atomic_load_explicit(&b->quick, memory_order_relaxed))) {
        if (w == ((p->generation_ << 3) | BW_STATE_HALF_OPEN) && outcome <= BW_FAILURE)
            return settle_quick_probe(b, p, outcome, code, w);
        return settle_general_entry(b, p, outcome, code);
    }
    if (BW_LIKELY(outcome == BW_SUCCESS && b->fast == BW__FAST_COUNT)) {
        /* The commonest settle, on its own so that the record is compiled for a success. */
        int64_t span;
        int slow = quick_slow(b, p, &span);
        if (BW_UNLIKELY(slow < 0 || !bw__spin_try(&b->lock)))
            return settle_general_entry(b, p, outcome, code); /* no tick, or held: the general path waits */
        if (BW_UNLIKELY(atomic_load_explicit(&b->word, memory_order_relaxed) != w))
            return settle_quick_moved(b, p, outcome, code);
        p->magic_ = PERMIT_SETTLED;
        if (b->cells)
            count_locked(b->cells, (unsigned)slow << 1, span);
        if (BW_UNLIKELY(bw__machine_closed_count(&b->m, 0, slow)))
            return settle_quick_trip(b, w);
        if (BW_UNLIKELY(bw__spin_release(&b->lock)))
            return settle_quick_wake(&b->lock);
        return BW_OK;
    }
    if (b->fast == BW__FAST_TIME && !((b->unrecorded >> outcome) & 1))
        return settle_quick_time(b, p, outcome, code);
    int64_t span;
    int slow = quick_slow(b, p, &span);
    if (BW_UNLIKELY(slow < 0))
        return settle_general_entry(b, p, outcome, code);
    if ((b->unrecorded >> outcome) & 1) {
        note_failure_at(b, outcome, code, p->start_ns_ + span);
        p->magic_ = PERMIT_SETTLED; /* nothing to record: no lock */
        if (b->cells)
            return settle_quick_count(b, outcome, slow, span);
        return BW_OK;
    }
    if (BW_UNLIKELY(!bw__spin_try(&b->lock)))
        return settle_general_entry(b, p, outcome, code); /* held: the general path waits for it */
    if (BW_UNLIKELY(atomic_load_explicit(&b->word, memory_order_relaxed) != w))
        return settle_quick_moved(b, p, outcome, code);
    p->magic_ = PERMIT_SETTLED;
    note_failure_at(b, outcome, code, p->start_ns_ + span);
    if (b->cells)
        count_locked(b->cells, kind_of(outcome, (unsigned)slow), span);
    int failed = outcome != BW_SUCCESS; /* FAILURE, or an UNREACHABLE that counts */
    int test = b->fast == BW__FAST_COUNT ? bw__machine_closed_count(&b->m, failed, slow)
                                         : bw__machine_closed_consecutive(&b->m, failed);
    if (BW_UNLIKELY(test))
        return settle_quick_trip(b, w);
    if (BW_UNLIKELY(bw__spin_release(&b->lock)))
        return settle_quick_wake(&b->lock);
    return BW_OK;
}

int bw_settle_ex(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code)
{
    return settle_quick(b, p, outcome, failure_code);
}

/*
 * A permit admitted by a store (stored mode, or a coordinated probe lease), a
 * permit of a keyed circuit settled through its parent, or a pinned permit
 * (bw_keyed_acquire): settle it on its breaker, then drop the pin. The unpin
 * is the last touch of the breaker: after it its owner may free it.
 */
static BW_NOINLINE int settle_other(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out,
                                    const char *msg)
{
    uint32_t magic = p->magic_ & ~PERMIT_PIN;
    int pinned = (p->magic_ & PERMIT_PIN) != 0;
    bw_breaker *c = p->breaker_;
    if ((magic != PERMIT_LIVE && magic != PERMIT_STORED && magic != PERMIT_LEASED) || !c ||
        (c != b && !(c->owned && c->owner.parent == b)))
        return BW_EPERMIT;
    p->magic_ = magic;
    int rc;
    if (magic != PERMIT_LIVE)
        rc = bw__shared_settle(c, p, outcome, failure_code, timed_out, msg);
    else
        rc = timed_out || msg ? settle_rare(c, p, outcome, failure_code, timed_out, msg)
                              : settle_general_entry(c, p, outcome, failure_code);
    if (pinned)
        bw__breaker_unpin(c, stamp_of(c)); /* the last touch */
    return rc;
}

int bw_settle(bw_breaker *b, bw_permit *p, bw_outcome outcome)
{
    return settle_quick(b, p, outcome, 0);
}

int bw_settle_timeout(bw_breaker *b, bw_permit *p, int failure_code)
{
    return settle_rare(b, p, BW_FAILURE, failure_code, 1, NULL);
}

bw_outcome bw__classify(bw_classifier_cb fn, void *user, int rc, void *arg)
{
    if (!fn)
        return rc == 0 ? BW_SUCCESS : BW_FAILURE;
    bw_outcome o = fn(rc, arg, user);
    return (unsigned)o > BW_UNREACHABLE ? BW_FAILURE : o;
}

bw_outcome bw__breaker_classify(const bw_breaker *b, int rc, void *arg)
{
    return bw__classify(b->classifier, b->classifier_user, rc, arg);
}

bw_outcome bw__breaker_classify_or(const bw_breaker *b, bw_classifier_cb fn, void *user, int rc, void *arg)
{
    return b->classifier ? bw__classify(b->classifier, b->classifier_user, rc, arg) : bw__classify(fn, user, rc, arg);
}

int bw_breaker_call(bw_breaker *b, bw_call_fn fn, void *arg, int *rc, bw_rejection *why)
{
    if (!b || !fn)
        return BW_EINVAL;
    bw_permit p;
    int st = bw_acquire(b, &p, why);
    if (st != BW_OK)
        return st;
    int r = fn(arg);
    bw_settle_ex(b, &p, bw__breaker_classify(b, r, arg), r);
    if (rc)
        *rc = r;
    return BW_OK;
}

int bw_settle_msg(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, const char *message)
{
    /* The quick paths carry no message: the general one keeps it with the failure (while the settle still
       holds a keyed circuit) and gives it to the CALL event. */
    return message ? settle_rare(b, p, outcome, failure_code, 0, message) : settle_quick(b, p, outcome, failure_code);
}
