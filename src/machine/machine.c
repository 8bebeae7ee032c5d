/*
 * machine.c — the pure state machine (see machine.h and docs/states.md).
 *
 * Design notes: every transition goes through one of five helpers (trip, reopen,
 * to_half_open, close_, override) and each bumps the generation exactly once, so
 * an outcome from an older era can always be recognised and dropped. The rate and
 * consecutive policies differ only in what CLOSED records and in how a probe
 * round is decided; admission, expiry, backoff and the verbs are shared.
 */
#include "machine/machine.h"

#include <string.h>

/* The wait after k consecutive failed rounds: wait * multiplier^min(k, 64), capped. */
static int64_t backoff_wait(const bw__mcfg *c, uint32_t k)
{
    int64_t cap = c->wait_max > 0 ? c->wait_max : BW__WAIT_CEILING;
    double w =
        bw__grow((double)c->wait, c->wait_multiplier, k < BW__BACKOFF_ROUNDS ? k : BW__BACKOFF_ROUNDS, (double)cap);
    return w >= (double)cap ? cap : (int64_t)w;
}

static void clear_probes(bw__machine *m)
{
    m->admitted = m->in_flight = m->completed = 0;
    m->probe_failures = m->probe_slows = m->inconclusive = 0;
}

/* Note why the transition being made happens (bw_reason and its figures). */
static void because(bw__machine *m, int why, double rate, uint64_t total, uint32_t count)
{
    m->why = (uint8_t)why;
    m->why_rate = rate;
    m->why_total = total;
    m->why_count = count;
}

static void trip(bw__machine *m, int64_t now)
{
    m->state = BW_STATE_OPEN;
    m->opened_at = now;
    m->failed_rounds = 0;
    m->open_wait = m->cfg.wait;
    m->cerr = m->csucc = 0;
    m->gen++;
}

/* HALF_OPEN -> OPEN. A failed round grows the backoff; an inconclusive one keeps it. */
static void reopen(bw__machine *m, int64_t now, int failed_round)
{
    if (failed_round && m->failed_rounds < UINT32_MAX)
        m->failed_rounds++;
    m->state = BW_STATE_OPEN;
    m->opened_at = now;
    m->open_wait = backoff_wait(&m->cfg, m->failed_rounds);
    m->cerr = m->csucc = 0;
    m->gen++;
}

static void to_half_open(bw__machine *m, int64_t now)
{
    m->state = BW_STATE_HALF_OPEN;
    m->ho_since = now;
    clear_probes(m);
    m->cerr = m->csucc = 0;
    m->gen++;
}

static void close_(bw__machine *m)
{
    m->state = BW_STATE_CLOSED;
    if (m->cfg.policy == BW_POLICY_RATE)
        for (uint32_t i = 0; i < m->nwin; i++)
            bw__window_clear(bw__machine_stripe(m, i));
    clear_probes(m);
    m->failed_rounds = 0;
    m->open_wait = m->cfg.wait;
    m->cerr = m->csucc = 0;
    m->gen++;
}

size_t bw__machine_window_bytes(const bw__mcfg *cfg)
{
    return cfg->policy == BW_POLICY_RATE ? bw__window_bytes(cfg->window_kind, cfg->window_size) : 0;
}

int bw__machine_fast_path(const bw__mcfg *cfg)
{
    switch (cfg->policy) {
    case BW_POLICY_RATE:
        return cfg->window_kind == BW_WINDOW_COUNT  ? BW__FAST_COUNT
               : cfg->window_kind == BW_WINDOW_TIME ? BW__FAST_TIME
                                                    : BW__FAST_NONE;
    case BW_POLICY_CONSECUTIVE:
        return BW__FAST_CONSECUTIVE;
    default:
        return BW__FAST_NONE; /* a policy with no fast record of its own: the general record */
    }
}

void bw__machine_bind(bw__machine *m, const bw__mcfg *cfg, void *window_mem)
{
    m->cfg = *cfg;
    m->wins = &m->win;
    m->stride = (uint32_t)sizeof m->win;
    m->nwin = 1;
    if (cfg->policy == BW_POLICY_RATE && window_mem)
        bw__window_bind(&m->win, cfg->window_kind, cfg->window_size, window_mem);
    else if (cfg->policy == BW_POLICY_RATE)
        m->nwin = 0; /* stripes to come */
}

void bw__machine_init(bw__machine *m, const bw__mcfg *cfg, void *window_mem)
{
    memset(m, 0, sizeof *m);
    bw__machine_bind(m, cfg, window_mem);
    m->state = cfg->initial_state;
    because(m, BW_REASON_INITIAL, 0, 0, 0);
    m->open_wait = cfg->wait;
    if (cfg->policy == BW_POLICY_RATE && window_mem)
        bw__window_clear(&m->win);
}

void bw__machine_use_stripes(bw__machine *m, bw__window *first, size_t stride, uint32_t n)
{
    m->wins = first;
    m->stride = (uint32_t)stride;
    m->nwin = n;
}

/* The whole window's counts as of now: expire every time stripe, then sum. */
void bw__machine_counts(bw__machine *m, bw__now *now, uint64_t *total, uint64_t *failed, uint64_t *slow)
{
    if (m->nwin == 1) { /* the common case, without the loop */
        bw__window *w = m->wins;
        if (w->kind == BW_WINDOW_TIME)
            bw__window_expire(w, bw__now_get(now));
        *total = w->total;
        *failed = w->failed;
        *slow = w->slow;
        return;
    }
    *total = *failed = *slow = 0;
    for (uint32_t i = 0; i < m->nwin; i++) {
        bw__window *w = bw__machine_stripe(m, i);
        if (w->kind == BW_WINDOW_TIME)
            bw__window_expire(w, bw__now_get(now));
        *total += w->total;
        *failed += w->failed;
        *slow += w->slow;
    }
}

/* The trip test over the whole window; see bw__machine_evaluate. */
static int evaluate(bw__machine *m, bw__now *now)
{
    uint64_t total, failed, slow;
    bw__machine_counts(m, now, &total, &failed, &slow);
    if (total < m->cfg.min_calls)
        return -1;
    /* Both rates are 0 without a failed or slow call: skip the divisions. */
    if (failed == 0 && slow == 0)
        return 0;
    if (bw__rate_reached(failed, total, m->cfg.failure_rate)) {
        because(m, BW_REASON_FAILURE_RATE, (double)failed / (double)total, total, 0);
        trip(m, bw__now_get(now));
        return 1;
    }
    if (bw__rate_reached(slow, total, m->cfg.slow_rate)) {
        because(m, BW_REASON_SLOW_RATE, (double)slow / (double)total, total, 0);
        trip(m, bw__now_get(now));
        return 1;
    }
    return 0;
}

int bw__machine_evaluate(bw__machine *m, bw__now *now)
{
    return m->state == BW_STATE_CLOSED && m->cfg.policy == BW_POLICY_RATE ? evaluate(m, now) : -1;
}

static int open_elapsed(const bw__machine *m, int64_t now)
{
    return now >= bw__sat_add(m->opened_at, m->open_wait);
}

/* An expired half-open round reopens as a failed round: its probes hung. */
static void expire_half_open(bw__machine *m, bw__now *now)
{
    if (m->state == BW_STATE_HALF_OPEN && m->cfg.max_wait_ho > 0) {
        int64_t t = bw__now_get(now);
        if (bw__machine_round_expired(m, t)) {
            because(m, BW_REASON_HALF_OPEN_TIMEOUT, 0, m->completed, 0);
            reopen(m, t, 1);
        }
    }
}

int bw__machine_acquire(bw__machine *m, bw__now *now, uint64_t *gen)
{
    expire_half_open(m, now);
    switch (m->state) {
    case BW_STATE_OPEN: {
        int64_t t = bw__now_get(now);
        if (!open_elapsed(m, t))
            return 0;
        because(m, BW_REASON_WAIT_ENDED, 0, 0, 0);
        to_half_open(m, t);
        break; /* the caller becomes probe 1 */
    }
    case BW_STATE_HALF_OPEN:
        break;
    case BW_STATE_FORCED_OPEN:
        return 0;
    default: /* CLOSED, DISABLED, METRICS_ONLY */
        *gen = m->gen;
        return 1;
    }
    if (!bw__machine_probe_admit(m))
        return 0;
    *gen = m->gen;
    return 1;
}

/* CLOSED or METRICS_ONLY: record into a stripe and, when `check`, decide whether to trip. */
static void record_closed(bw__machine *m, uint32_t stripe, int outcome, int slow, bw__now *now, int check)
{
    int failed = outcome == BW_FAILURE || outcome == BW_UNREACHABLE;
    if (m->cfg.policy == BW_POLICY_CONSECUTIVE) {
        if (bw__machine_closed_consecutive(m, failed) && check) {
            because(m, BW_REASON_CONSECUTIVE_FAILURES, 0, 0, m->cerr);
            trip(m, bw__now_get(now));
        }
        return;
    }
    bw__window *w = bw__machine_stripe(m, stripe);
    if (m->nwin == 1 && w->kind == BW_WINDOW_COUNT) { /* the engine's fast path runs the same */
        if (bw__machine_closed_count(m, failed, slow) && check)
            evaluate(m, now);
        return;
    }
    bw__window_record(w, failed, slow, w->kind == BW_WINDOW_TIME ? bw__now_get(now) : 0);
    /* One window, just brought up to date: most records need no trip test. */
    if (check && (m->nwin > 1 || (w->total >= m->cfg.min_calls && (w->failed | w->slow))))
        evaluate(m, now);
}

/*
 * HALF_OPEN: tally one probe and decide the round when it is complete. Every
 * probe admitted is in flight until it settles (admitted == in_flight +
 * completed, which a stored image must show: machine/image.c), so an outcome
 * that finds none in flight belongs to no probe of this round (a stored permit
 * the local machine learns while its store is out, or a stored entry's counts
 * that no machine wrote): it is dropped as stale (-1), counting nothing.
 * Returns 1 otherwise.
 */
static int record_probe(bw__machine *m, int outcome, int slow, bw__now *now)
{
    if (!m->in_flight)
        return -1;
    m->in_flight--;
    if (outcome == BW_IGNORED || outcome == BW_UNREACHABLE) {
        /* No verdict: the slot and the budget unit come back. */
        m->admitted--;
        if (outcome == BW_IGNORED)
            return 1;
        m->inconclusive++;
        uint32_t limit = m->cfg.policy == BW_POLICY_RATE ? m->cfg.permitted : m->cfg.success_threshold;
        if (m->inconclusive >= limit) {
            because(m, BW_REASON_PROBES_INCONCLUSIVE, 0, m->inconclusive, m->inconclusive);
            reopen(m, bw__now_get(now), 0); /* nothing was learned: wait again */
        }
        return 1;
    }
    int failed = outcome == BW_FAILURE;
    m->completed++;
    m->probe_failures += (uint32_t)failed;
    m->probe_slows += (uint32_t)(slow != 0);
    if (m->cfg.policy == BW_POLICY_CONSECUTIVE) {
        if (failed) {
            m->cerr++;
            m->csucc = 0;
            if (m->cerr >= m->cfg.error_threshold) {
                because(m, BW_REASON_PROBES_FAILED, 0, m->completed, m->cerr);
                reopen(m, bw__now_get(now), 1);
            }
        } else {
            m->csucc++;
            m->cerr = 0;
            if (m->csucc >= m->cfg.success_threshold) {
                because(m, BW_REASON_PROBES_PASSED, 0, m->completed, m->csucc);
                close_(m);
            }
        }
        if (m->state == BW_STATE_HALF_OPEN && m->completed >= BW__PROBES_MAX) {
            /* Failures and successes alternating for BW__PROBES_MAX probes: the round ends undecided. */
            because(m, BW_REASON_PROBES_INCONCLUSIVE, 0, m->completed, m->completed);
            reopen(m, bw__now_get(now), 0);
        }
        return 1;
    }
    if (m->completed < m->cfg.permitted)
        return 1;
    double done = (double)m->completed;
    if (bw__rate_reached(m->probe_failures, m->completed, m->cfg.failure_rate)) {
        because(m, BW_REASON_PROBES_FAILED, m->probe_failures / done, m->completed, 0);
        reopen(m, bw__now_get(now), 1);
    } else if (bw__rate_reached(m->probe_slows, m->completed, m->cfg.slow_rate)) {
        because(m, BW_REASON_PROBES_FAILED, m->probe_slows / done, m->completed, 0);
        reopen(m, bw__now_get(now), 1);
    } else {
        because(m, BW_REASON_PROBES_PASSED, m->probe_failures / done, m->completed, 0);
        close_(m);
    }
    return 1;
}

int bw__machine_record(bw__machine *m, uint64_t gen, int outcome, int slow, bw__now *now)
{
    return bw__machine_record_in(m, 0, gen, outcome, slow, now);
}

int bw__machine_record_in(bw__machine *m, uint32_t stripe, uint64_t gen, int outcome, int slow, bw__now *now)
{
    int st = m->state;
    if (st == BW_STATE_HALF_OPEN) {
        expire_half_open(m, now);
        st = m->state;
    }
    if (gen != m->gen)
        return -1;
    if (st == BW_STATE_CLOSED || st == BW_STATE_METRICS_ONLY) {
        if (outcome == BW_IGNORED || (outcome == BW_UNREACHABLE && m->cfg.ignore_unreachable))
            return 0;
        record_closed(m, stripe, outcome, slow, now, st == BW_STATE_CLOSED);
        return 1;
    }
    if (st == BW_STATE_HALF_OPEN)
        return record_probe(m, outcome, slow, now);
    return 0; /* OPEN, FORCED_OPEN, DISABLED record nothing */
}

int bw__machine_advance(bw__machine *m, int64_t now)
{
    if (m->state == BW_STATE_OPEN && open_elapsed(m, now)) {
        because(m, BW_REASON_WAIT_ENDED, 0, 0, 0);
        to_half_open(m, now);
        return 1;
    }
    uint64_t before = m->gen;
    bw__now t = bw__now_at(now);
    expire_half_open(m, &t);
    return m->gen != before;
}

int64_t bw__machine_deadline(const bw__machine *m)
{
    if (m->state == BW_STATE_OPEN)
        return bw__sat_add(m->opened_at, m->open_wait);
    if (m->state == BW_STATE_HALF_OPEN && m->cfg.max_wait_ho > 0)
        return bw__sat_add(m->ho_since, m->cfg.max_wait_ho);
    return INT64_MAX;
}

int64_t bw__machine_retry_after(const bw__machine *m, int64_t now)
{
    if (m->state != BW_STATE_OPEN)
        return BW_NO_TIME;
    return bw__time_left(bw__sat_add(m->opened_at, m->open_wait), now);
}

int bw__machine_trip(bw__machine *m, int64_t now)
{
    if (m->state != BW_STATE_CLOSED)
        return 0;
    if (m->cfg.policy == BW_POLICY_CONSECUTIVE && m->cerr >= m->cfg.error_threshold)
        because(m, BW_REASON_CONSECUTIVE_FAILURES, 0, 0, m->cerr);
    else
        because(m, BW_REASON_SHARED, 0, 0, 0); /* a trip learned elsewhere */
    trip(m, now);
    return 1;
}

int64_t bw__machine_longest_wait(const bw__mcfg *cfg)
{
    int64_t w = backoff_wait(cfg, BW__BACKOFF_ROUNDS);
    return w > BW__OPEN_FOR_MAX ? w : BW__OPEN_FOR_MAX;
}

int bw__machine_open_for(bw__machine *m, int64_t now, int64_t wait)
{
    int st = m->state;
    if (wait <= 0 || wait > BW__OPEN_FOR_MAX)
        return 0;
    if (st != BW_STATE_CLOSED && st != BW_STATE_OPEN && st != BW_STATE_HALF_OPEN)
        return 0; /* an operator state wins */
    if (st == BW_STATE_OPEN && bw__sat_add(m->opened_at, m->open_wait) >= bw__sat_add(now, wait))
        return 0; /* open at least that long already */
    because(m, BW_REASON_RETRY_AFTER, 0, 0, 0);
    if (st == BW_STATE_CLOSED) {
        trip(m, now);
    } else if (st == BW_STATE_HALF_OPEN) {
        reopen(m, now, 0); /* not a failed round: the backoff stays */
    } else {
        m->opened_at = now; /* a new OPEN period: permits of the old one are stale */
        m->gen++;
    }
    m->open_wait = wait;
    return 1;
}

void bw__machine_reset(bw__machine *m)
{
    because(m, BW_REASON_OPERATOR, 0, 0, 0);
    close_(m);
}

void bw__machine_apply(bw__machine *m, int state)
{
    if (state == BW_STATE_CLOSED)
        bw__machine_reset(m);
    else
        bw__machine_override(m, state);
}

void bw__machine_override(bw__machine *m, int state)
{
    because(m, BW_REASON_OPERATOR, 0, 0, 0);
    m->state = (uint8_t)state;
    clear_probes(m);
    m->cerr = m->csucc = 0;
    m->gen++;
}

void bw__machine_snapshot(bw__machine *m, bw__now *now, bw_snapshot *out)
{
    memset(out, 0, sizeof *out);
    out->state = (bw_state)m->state;
    if (m->cfg.policy == BW_POLICY_RATE)
        bw__machine_counts(m, now, &out->total_calls, &out->failed_calls, &out->slow_calls);
    if (out->total_calls) {
        out->failure_rate = (double)out->failed_calls / (double)out->total_calls;
        out->slow_call_rate = (double)out->slow_calls / (double)out->total_calls;
    }
    out->consecutive_failures = m->cerr;
    out->consecutive_successes = m->csucc;
    out->probes_admitted = m->admitted;
    out->probes_in_flight = m->in_flight;
    out->probes_completed = m->completed;
    out->probes_inconclusive = m->inconclusive;
    out->failed_rounds = m->failed_rounds;
    out->open_wait_ns = m->open_wait;
    out->retry_after_ns = m->state == BW_STATE_OPEN ? bw__machine_retry_after(m, bw__now_get(now)) : BW_NO_TIME;
    out->generation = m->gen;
}
