/*
 * breaker_state.c — what a breaker is in and what an operator makes of it:
 * its state, snapshot and last failure, an owner's classification of it
 * (core.h: bw__breaker_class), the operator verbs and open_for, and the
 * counters. Cold: none of it runs on acquire or settle (breaker.c).
 *
 * Locking: every change to the machine goes through bw__change_begin /
 * bw__change_end (breaker.c: all locks, publication, the timer's kick); a
 * snapshot holds lock_all for the machine's read only (engine.h's Locking).
 * Events are delivered after the locks are released.
 */
#include <string.h>

#include "core/engine.h"

bw__class bw__breaker_class(bw_breaker *c, int64_t now)
{
    lazy_clock lc = {c, now, 1};
    bw__now t = {0, 0, bw__lazy_read, &lc};
    bw_snapshot s;
    bw__class k = {BW__HELD, INT64_MIN, 0, INT64_MIN};
    lock_all(c);
    bw__machine_snapshot(&c->m, &t, &s);
    k.releases = c->releases;
    k.released_at = c->released_at;
    unlock_all(c);
    switch (s.state) {
    case BW_STATE_CLOSED:
        k.cls = s.failed_calls || s.slow_calls || s.consecutive_failures || s.failed_rounds ? BW__HISTORY : BW__QUIET;
        break;
    case BW_STATE_OPEN:
        k.wait_end = atomic_load_explicit(&c->open_until, memory_order_relaxed);
        k.cls = BW__HISTORY;
        break;
    case BW_STATE_HALF_OPEN:
        k.cls = BW__HISTORY;
        break;
    default:
        break;
    }
    return k;
}

/* ---- inspection ---- */

int bw_breaker_state(const bw_breaker *b)
{
    if (!b)
        return BW_EINVAL;
    unsigned st = (unsigned)(load_word(b) & 7);
    if (BW_UNLIKELY(st == WORD_STORED))
        return bw__link_stored_state(link_of(b));
    return (int)st;
}

int bw_breaker_snapshot(bw_breaker *b, bw_snapshot *out)
{
    if (!b || !out)
        return BW_EINVAL;
    const bw__link *l = link_of(b);
    if (BW_UNLIKELY(l && l->c.mode == BW_STORE_STORED) && bw__shared_snapshot(b, out) == BW_OK)
        return BW_OK;
    lazy_clock lc = {b, 0, 0};
    bw__now now = {0, 0, bw__lazy_read, &lc};
    lock_all(b);
    bw__machine_snapshot(&b->m, &now, out);
    if (b->extra && following(b)) { /* the fleet's circuit governs: report it */
        const bw__view *v = &b->extra->view;
        out->state = (bw_state)v->state;
        out->shared = 1;
        out->generation = v->gen;
        out->open_wait_ns = v->wait;
        out->failed_rounds = v->failed;
        out->retry_after_ns = v->state == BW_STATE_OPEN ? bw__time_left(v->until, bw__now_get(&now)) : BW_NO_TIME;
    }
    unlock_all(b);
    return BW_OK;
}

int bw_breaker_last_failure(const bw_breaker *b, int *code)
{
    if (!b || !code)
        return BW_EINVAL;
    uint64_t lf = atomic_load_explicit(&((bw_breaker *)b)->last_failure, memory_order_relaxed);
    if (!(lf & 1))
        return BW_ESTATE;
    *code = (int)(uint32_t)(lf >> 1);
    return BW_OK;
}

/* ---- operator verbs ---- */

/*
 * An operator verb: the machine, then (stored mode) the fleet's circuit;
 * events unless `quiet`. A stored circuit lives in the store: the verb's
 * update there moves it, and its result tells (and counts) that move, once
 * (store_result). Only when the store was not reached is the local circuit's
 * move, which then serves, this breaker's to tell.
 */
static int apply_verb(bw_breaker *b, int target, int quiet)
{
    pending ev;
    ev.n = 0;
    const bw__link *l = link_of(b);
    int stored = l && l->c.mode == BW_STORE_STORED;
    change c = bw__change_begin(b);
    c.nocount = quiet || stored; /* a preset is not a transition anyone made */
    bw__machine_apply(&b->m, target);
    if (target == BW_STATE_CLOSED)
        atomic_store_explicit(&b->last_failure, 0, memory_order_relaxed);
    int after = bw__change_end(b, &c);
    if (target == BW_STATE_CLOSED && !quiet && b->cold)
        atomic_fetch_add_explicit(&b->cold->resets, 1, memory_order_relaxed);
    int told = stored && bw__shared_verb(b, target) == BW_OK;
    if (stored && !told && !quiet && AFTER_STATE(after) != c.before)
        bw__count_change(b, c.before, AFTER_STATE(after), BW_REASON_OPERATOR);
    if (!quiet)
        bw__announce(b, &ev, c.before, told ? c.before : after, target == BW_STATE_CLOSED);
    return BW_OK;
}

/*
 * Open b until now + ns: its own machine, and with a store the fleet's
 * circuit, through the mechanisms a trip and a verb use (attach_store.c): a
 * stored breaker's one update, whose result tells the state and brings the
 * event (the local change is its own only when the store was not reached); a
 * coordinated one's queued write, as its local trip's.
 */
int bw_breaker_open_for(bw_breaker *b, int64_t ns)
{
    if (!b)
        return BW_EINVAL;
    if (ns <= 0 || ns > BW__OPEN_FOR_MAX)
        return BW_ERANGE;
    const bw__link *l = link_of(b);
    int stored = l && l->c.mode == BW_STORE_STORED;
    pending ev;
    ev.n = 0;
    change c = bw__change_begin(b);
    c.nocount = stored; /* a stored breaker's transition is counted as its store's */
    int st = b->m.state;
    int moved = bw__machine_open_for(&b->m, now_of(b), ns);
    int after = bw__change_end(b, &c);
    int rc = moved || st == BW_STATE_OPEN ? BW_OK : BW_ESTATE; /* an operator state wins */
    if (stored) {
        int shared = bw__shared_open_for(b, ns);
        if (shared >= 0)
            return shared ? BW_OK : BW_ESTATE; /* the fleet's circuit decided, and its result told */
        if (moved) /* the store was not reached: the local circuit, which serves meanwhile, moved */
            bw__count_change(b, c.before, AFTER_STATE(after), BW_REASON_RETRY_AFTER);
    }
    bw__announce(b, &ev, c.before, after, 0);
    if (l && !stored && rc == BW_OK)
        bw__coord_open_for(b, ns); /* the fleet's circuit decides whether it opens, or is open longer */
    return rc;
}

void bw__breaker_preset(bw_breaker *b, int target)
{
    apply_verb(b, target, 1);
}

static int verb(bw_breaker *b, int target)
{
    return b ? apply_verb(b, target, 0) : BW_EINVAL;
}

int bw_breaker_reset(bw_breaker *b)
{
    return verb(b, BW_STATE_CLOSED);
}

int bw_breaker_force_open(bw_breaker *b)
{
    return verb(b, BW_STATE_FORCED_OPEN);
}

int bw_breaker_disable(bw_breaker *b)
{
    return verb(b, BW_STATE_DISABLED);
}

int bw_breaker_metrics_only(bw_breaker *b)
{
    return verb(b, BW_STATE_METRICS_ONLY);
}

int bw__verb_state(bw_verb v)
{
    static const int states[] = {BW_STATE_CLOSED, BW_STATE_FORCED_OPEN, BW_STATE_DISABLED, BW_STATE_METRICS_ONLY};
    return (unsigned)v < sizeof states / sizeof states[0] ? states[v] : -1;
}

int bw_breaker_apply(bw_breaker *b, bw_verb v)
{
    int target = bw__verb_state(v);
    if (target < 0)
        return BW_EINVAL;
    return verb(b, target);
}

/* ---- counters ---- */

static uint64_t ld(const _Atomic uint64_t *c)
{
    return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

/* Add what `cells` counted (stamp units summed into *sum). */
static void add_cells(bw_counters *out, const bw_cells *c, uint64_t *sum)
{
    for (int k = 0; k < BW_CALL_KINDS; k++)
        out->calls[k] += ld(&c->calls[k]);
    for (int i = 0; i < BW_DURATION_BUCKETS; i++)
        out->duration_buckets[i] += ld(&c->buckets[i]);
    *sum += ld(&c->sum);
}

int bw_breaker_counters(const bw_breaker *cb, bw_counters *out)
{
    if (!cb || !out)
        return BW_EINVAL;
    bw_breaker *b = (bw_breaker *)cb;
    memset(out, 0, sizeof *out);
    out->counting = b->counting;
    out->timed = b->counting && b->timed;
    out->state = (bw_state)bw_breaker_state(b);
    uint32_t why = atomic_load_explicit(&b->why, memory_order_relaxed);
    out->reason = why ? (bw_reason)(why & 0xff) : BW_REASON_INITIAL;
    uint64_t lf = atomic_load_explicit(&b->last_failure, memory_order_relaxed);
    out->has_last_failure = (int)(lf & 1);
    out->last_failure_code = (int)(uint32_t)(lf >> 1);
    bw_cold *c = b->cold;
    if (!c)
        return BW_OK;
    uint64_t sum = 0;
    add_cells(out, b->cells, &sum);
    for (uint32_t i = 0; i < b->nstripes; i++)
        add_cells(out, &b->stripes[i].cells, &sum);
    for (int i = 0; i < BW_DURATION_BUCKETS; i++)
        out->duration_count += out->duration_buckets[i];
    out->duration_sum_s = (double)span_ns(b, (int64_t)(sum > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : sum)) / 1e9;
    for (int s = 0; s < 3; s++)
        out->rejected[BW_STATE_OPEN + s] = ld(&c->rejected[s]);
    for (int f = 0; f < 6; f++)
        for (int t = 0; t < 6; t++)
            out->transitions[f][t] = atomic_load_explicit(&c->transitions[f][t], memory_order_relaxed);
    out->rounds_passed = ld(&c->rounds_passed);
    out->rounds_failed = ld(&c->rounds_failed);
    out->resets = ld(&c->resets);
    out->store_degraded = ld(&c->store[0]);
    out->store_recovered = ld(&c->store[1]);
    out->store_dropped = ld(&c->store[2]);
    if (out->has_last_failure) {
        int64_t at = atomic_load_explicit(&c->failed_at, memory_order_relaxed);
        if (at != INT64_MIN) {
            int64_t age = now_of(b) - stamp_ns(b, at);
            out->last_failure_age_ns = age > 0 ? age : 0;
        }
        /* The message, if it belongs to the failure read above (bounded: one short critical section). */
        bw__spin_lock(&c->msg_lock);
        if (atomic_load_explicit(&c->msg_word, memory_order_relaxed) == lf)
            memcpy(out->last_failure_message, c->msg, sizeof c->msg);
        bw__spin_unlock(&c->msg_lock);
    }
    return BW_OK;
}

void bw_counters_add(bw_counters *dst, const bw_counters *src)
{
    if (!dst || !src)
        return;
    for (int k = 0; k < BW_CALL_KINDS; k++)
        dst->calls[k] += src->calls[k];
    for (int s = 0; s < 6; s++)
        dst->rejected[s] += src->rejected[s];
    for (int f = 0; f < 6; f++)
        for (int t = 0; t < 6; t++)
            dst->transitions[f][t] += src->transitions[f][t];
    dst->rounds_passed += src->rounds_passed;
    dst->rounds_failed += src->rounds_failed;
    dst->store_degraded += src->store_degraded;
    dst->store_recovered += src->store_recovered;
    dst->store_dropped += src->store_dropped;
    dst->resets += src->resets;
    for (int i = 0; i < BW_DURATION_BUCKETS; i++)
        dst->duration_buckets[i] += src->duration_buckets[i];
    dst->duration_count += src->duration_count;
    dst->duration_sum_s += src->duration_sum_s;
}
