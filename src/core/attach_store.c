/*
 * attach_store.c — the engine's side of a breaker with a store: the glue
 * between the published word and permits (breaker.c) and the link, lane and
 * view that hold the rules (share/link.h, share/lane.h, machine/view.h;
 * docs/stores.md). engine.h has the locking.
 *
 * Stored mode keeps the circuit in the store: the word's state is WORD_STORED,
 * which no lock-free path accepts, so every acquire comes here and runs one
 * store operation; its permits are PERMIT_STORED and settle with another. The
 * local machine serves the calls made while the store fails.
 *
 * Coordinated mode keeps the machine local and follows the store's shared
 * OPEN / HALF_OPEN as a view: publish() makes the view the breaker's state
 * while it governs, so CLOSED and OPEN admissions stay lock-free with no store
 * round trip. An acquire that finds the view's wait over, or the view
 * HALF_OPEN, leases a probe from the store (PERMIT_LEASED); leased outcomes and
 * local trips are written by the lane, which reports every result it gets back
 * through store_result, as an inline operation does.
 */
#include <string.h>

#include "base/error.h"
#include "core/engine.h"
#include "machine/machine.h"

/* A write the store did not take: the queue was full (status BW_OK), or it lost every race (BW_ECONFLICT). */
static void write_dropped(bw_breaker *b, int rc, const char *message)
{
    pending ev;
    ev.n = 0;
    bw__add_event(b, &ev, BW_EVENT_STORE_WRITE_DROPPED, rc, message);
    bw__deliver(b, &ev);
}

/*
 * The result of a store operation, inline or the lane's: the link's health
 * (degraded, recovered), the view it reports (coordinated), the state the store
 * holds (stored), and the events that follow.
 */
static void store_result(bw_breaker *b, int rc, const bw__shared_op *op, const bw_error *err)
{
    bw__link *l = link_of(b);
    int stored = l->c.mode == BW_STORE_STORED;
    pending ev;
    ev.n = 0;
    if (rc == BW_ECONFLICT) {
        /* Other writers of the entry won every race: contention, not a failing store. The write is dropped. */
        write_dropped(b, rc, err ? err->message : "");
        return;
    }
    if (rc == BW_OK && op->corrupt)
        bw__add_event(b, &ev, BW_EVENT_STORE_CORRUPT, BW_OK, "the stored entry was malformed; it was replaced");
    if (rc == BW_OK && stored && !bw__link_degraded(l)) {
        /* Stored, and nothing to recover: the word never changes, so no engine lock. */
        bw__link_health(l, rc, op);
        if (BW_UNLIKELY(op->before != op->after)) {
            bw__note_shared(b, op->before, op->after, op->why);
            bw__add_change(b, &ev, op->before, op->after | op->why << 8);
        }
        bw__deliver(b, &ev);
        return;
    }
    int64_t now = rc == BW_OK && !stored ? now_of(b) : 0;
    change c = bw__change_begin(b);
    c.force = 1;
    int health = bw__link_health(l, rc, op);
    if (health == BW__LINK_RECOVERED)
        bw__add_event(b, &ev, BW_EVENT_STORE_RECOVERED, BW_OK, NULL);
    else if (health == BW__LINK_DEGRADED) {
        bw__add_event(b, &ev, BW_EVENT_STORE_DEGRADED, rc, err ? err->message : "");
        c.why = BW_REASON_STORE_DOWN; /* the state callers see is this process's own again: no fleet change */
    }
    if (rc == BW_OK && !stored)
        bw__view_adopt(&b->extra->view, &b->m, op->after, op->out_gen, bw__time_left(op->open_until, op->now),
                       op->open_wait, op->failed_rounds, now);
    /*
     * Back from a failing store, a coordinated breaker OPEN on its own (it
     * tripped, or a Retry-After opened it, while that could not be written)
     * writes it now, while its wait lasts, so the fleet is not left unaware.
     */
    int retrip = health == BW__LINK_RECOVERED && !stored && b->m.state == BW_STATE_OPEN &&
                 b->extra->view.state == BW_STATE_CLOSED && bw__machine_deadline(&b->m) > now;
    /* An OPEN a Retry-After made is written as what it is: the fleet's circuit opens for what is left of it. */
    int64_t held = retrip && b->m.why == BW_REASON_RETRY_AFTER ? bw__machine_deadline(&b->m) - now : 0;
    int after = bw__change_end(b, &c);
    if (rc == BW_OK && stored && op->before != op->after) {
        bw__note_shared(b, op->before, op->after, op->why);
        bw__add_change(b, &ev, op->before, op->after | op->why << 8);
    }
    bw__announce(b, &ev, c.before, after, 0);
    if (held > 0)
        bw__coord_open_for(b, held);
    else if (c.trip || retrip)
        bw__coord_trip(b);
}

/* The lane's result callback. */
static void lane_result(void *owner, int rc, const bw__shared_op *op, const bw_error *err)
{
    store_result(owner, rc, op, err);
}

int bw__store_attach(bw_breaker *b, const bw_config *cfg, bw_error *err)
{
    bw__link_cfg lc;
    memset(&lc, 0, sizeof lc);
    lc.store = cfg->store;
    lc.mode = cfg->store_mode;
    lc.scfg = b->m.cfg;
    lc.ttl = cfg->store_ttl;
    if (b->key) {
        /*
         * A keyed circuit's quiet entry (nothing but successes) lives keyed_idle
         * (the time after which a quiet resident circuit becomes evictable;
         * keyed.h), and no longer than a time window keeps its calls: a flood of
         * keys that only succeed does not fill the store. keyed_idle 0: no entry
         * is kept. The successes of an expired entry's window are forgotten
         * (keyed.h says what that costs a sparse key).
         */
        int64_t q = cfg->keyed_idle;
        if (lc.scfg.policy == BW_POLICY_RATE && lc.scfg.window_kind == BW_WINDOW_TIME &&
            (int64_t)lc.scfg.window_size * BW_NS_PER_S < q)
            q = (int64_t)lc.scfg.window_size * BW_NS_PER_S;
        lc.quiet_ttl = q > 0 ? q : -1;
    }
    lc.retry = cfg->store_retry;
    lc.retry_max = cfg->store_retry_max;
    lc.retry_mult = cfg->store_retry_multiplier;
    lc.retry_jitter = cfg->store_retry_jitter;
    lc.clock = b->clock;
    lc.quorum = lc.mode == BW_STORE_COORDINATED ? cfg->store_quorum : 1;
    if (lc.mode == BW_STORE_COORDINATED) {
        /* The shared machine only opens, probes and closes: a one-call window it never fills. */
        lc.scfg.window_kind = BW_WINDOW_COUNT;
        lc.scfg.window_size = 1;
        lc.scfg.min_calls = UINT32_MAX;
        lc.scfg.initial_state = BW_STATE_CLOSED;
    } else if (!bw__shared_fits(&lc.scfg)) {
        return bw__fail(err, BW_ERANGE, "window",
                        "in stored mode the window must fit in a store entry (%d bytes): count:N up to %u calls, got "
                        "count:%u (any time:N fits)",
                        BW_STORE_DATA_MAX, bw__shared_count_max(), lc.scfg.window_size);
    }
    bw_extra *x = bw__extra_of(b);
    if (!x)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    if (bw__link_init(&x->link, &lc, b->name, b->key, b->m.state) != BW_OK)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    bw__view_init(&x->view);
    x->has_link = 1;
    change c = bw__change_begin(b);
    c.force = 1; /* publish: a stored breaker's word says "ask the store" */
    bw__change_end(b, &c);
    if (lc.mode == BW_STORE_COORDINATED) {
        bw__coord_cfg cc = {b->clock, cfg->store_poll, cfg->store_queue, cfg->store_close_timeout};
        int rc = bw__coord_new(&x->link, &cc, lane_result, b, &x->coord);
        if (rc != BW_OK) {
            x->has_link = 0;
            bw__link_fini(&x->link);
            return bw__fail(err, rc, "", "could not start the store coordinator");
        }
    }
    return BW_OK;
}

void bw__store_stop(bw_breaker *b, int wait)
{
    if (link_of(b) && b->extra->coord)
        bw__coord_stop(b->extra->coord, wait); /* the lane calls b back no more */
}

void bw__store_release(bw_breaker *b)
{
    if (!link_of(b))
        return;
    if (b->extra->coord)
        bw__coord_release(b->extra->coord);
    b->extra->coord = NULL;
    b->extra->has_link = 0;
    bw__link_fini(&b->extra->link);
}

BW_NOINLINE void bw__coord_trip(bw_breaker *b)
{
    bw__coord *coord = b->extra ? b->extra->coord : NULL;
    if (coord && bw__coord_enqueue(coord, BW__OP_TRIP, 0, 0, 0, 0) != 0)
        write_dropped(b, BW_OK, NULL);
}

void bw__coord_open_for(bw_breaker *b, int64_t ns)
{
    bw__coord *coord = b->extra ? b->extra->coord : NULL;
    if (coord && bw__coord_enqueue(coord, BW__OP_OPEN_FOR, 0, 0, 0, ns) != 0)
        write_dropped(b, BW_OK, NULL);
}

/* One update of b's circuit in its store, and its result. */
static int store_op(bw_breaker *b, bw__shared_op *op)
{
    bw_error err;
    err.message[0] = '\0';
    int rc = bw__link_update(link_of(b), op, &err);
    store_result(b, rc, op, &err);
    return rc;
}

static bw__shared_op new_op(int kind)
{
    bw__shared_op op;
    memset(&op, 0, sizeof op);
    op.op = kind;
    return op;
}

BW_NOINLINE int bw__shared_acquire(bw_breaker *b, bw_permit *p, bw_rejection *why, int64_t stamp, unsigned st)
{
    bw__link *l = link_of(b);
    int leased = l->c.mode == BW_STORE_COORDINATED;
    if (leased) {
        /* Only a shared OPEN whose wait ended, or a shared HALF_OPEN, needs the store. */
        bw__spin_lock(&b->lock);
        int follow = following(b);
        bw__spin_unlock(&b->lock);
        if (!follow)
            return bw__acquire_locked(b, p, why, stamp);
    } else if (st != WORD_STORED) {
        return bw__acquire_locked(b, p, why, stamp);
    }
    if (!bw__link_gate(l))
        return bw__acquire_locked(b, p, why, stamp); /* degraded: local rules */
    bw__shared_op op = new_op(BW__OP_ACQUIRE);
    /* A degraded breaker due for a retry asks by an update: only a write can show the store is back. */
    if (!leased && !bw__link_degraded(l) && bw__link_admit_read(l, &op))
        store_result(b, BW_OK, &op, NULL);
    else if (store_op(b, &op) != BW_OK)
        return bw__acquire_locked(b, p, why, stamp);
    if (op.ok && leased && op.after != BW_STATE_HALF_OPEN)
        return bw__acquire_locked(b, p, why, stamp); /* the shared circuit closed meanwhile: local rules */
    if (!op.ok) {
        int64_t ra = BW_NO_TIME;
        if (op.after == BW_STATE_OPEN) {
            ra = bw__time_left(op.open_until, op.now);
            ra = ra > 0 ? ra : 1;
        }
        p->magic_ = PERMIT_SETTLED;
        bw__fill_rejection(b, why, op.after, ra);
        return BW_REJECTED;
    }
    p->breaker_ = b;
    p->generation_ = op.out_gen;
    p->start_ns_ = stamp;
    p->magic_ = leased ? PERMIT_LEASED : PERMIT_STORED;
    return BW_OK;
}

BW_NOINLINE int bw__shared_settle(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out,
                                  const char *msg)
{
    bw__link *l = link_of(b);
    int leased = p->magic_ == PERMIT_LEASED;
    p->magic_ = PERMIT_SETTLED;
    int64_t span = stamp_of(b) - p->start_ns_;
    int slow = timed_out ? b->slow_stamp != INT64_MAX : span >= b->slow_stamp;
    note_failure(b, outcome, failure_code, msg);
    int applied = -1, stored = 0, before = 0, after = 0;
    int st = bw__link_stored_state(l);
    if (!leased && ((b->unrecorded >> outcome) & 1) &&
        (st == BW_STATE_CLOSED || st == BW_STATE_METRICS_ONLY || st == BW_STATE_DISABLED)) {
        applied = 0; /* records nothing there: no store round trip (HALF_OPEN still hands its slot back) */
        stored = 1;
    } else if (leased) {
        if (bw__coord_enqueue(b->extra->coord, BW__OP_RECORD, p->generation_, outcome, slow, 0) != 0)
            write_dropped(b, BW_OK, NULL);
        applied = 1;
        stored = 1;
    } else if (bw__link_gate(l)) {
        bw__shared_op op = new_op(BW__OP_RECORD);
        op.gen = p->generation_;
        op.outcome = outcome;
        op.slow = slow;
        if (store_op(b, &op) == BW_OK) {
            applied = op.ok;
            stored = 1;
        }
    }
    if (!stored) { /* the store is out: the local circuit, which serves meanwhile, learns the outcome */
        lazy_clock lc = {b, 0, 0};
        bw__now now = {0, 0, bw__lazy_read, &lc};
        applied = bw__settle_locked(b, load_word(b) >> 3, outcome, slow, &now, &before, &after);
    }
    bw__count_call(b, outcome, slow, span, applied);
    if (lmask(b) || before != after)
        bw__settle_events(b, outcome, failure_code, msg, slow, span, applied, before, after);
    return BW_OK;
}

int bw__shared_snapshot(bw_breaker *b, bw_snapshot *out)
{
    bw__link *l = link_of(b);
    if (bw__link_degraded(l))
        return BW_ESTATE; /* the local circuit serves: report it (a read cannot show the store is back) */
    bw__shared_op op = new_op(BW__OP_READ);
    op.snap = out;
    int rc = bw__link_peek(l, &op); /* a read, never a write */
    if (rc != BW_OK)
        rc = store_op(b, &op);
    out->shared = rc == BW_OK;
    return rc;
}

int bw__shared_open_for(bw_breaker *b, int64_t ns)
{
    if (!bw__link_gate(link_of(b)))
        return -1;
    bw__shared_op op = new_op(BW__OP_OPEN_FOR);
    op.wait = ns;
    if (store_op(b, &op) != BW_OK)
        return -1;
    return op.after == BW_STATE_OPEN;
}

int bw__shared_verb(bw_breaker *b, int target)
{
    bw__shared_op op = new_op(BW__OP_VERB);
    op.state = target;
    return store_op(b, &op);
}
