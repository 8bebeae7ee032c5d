/*
 * circuit.c — the operations on a circuit kept in a store (see circuit.h).
 *
 * Entry layout: u8 format (2), u8 flags (FLAG_FENCE), u8 votes (n), u8 0, u64
 * born, the machine image, then n votes of (u64 instance, i64 when) (a
 * coordinated quorum's, below; n is 0 otherwise, and the same layout as before
 * quorums existed).
 *
 * Retry-After. BW__OP_OPEN_FOR (bw_breaker_open_for, both modes) writes no
 * field of its own: the machine's OPEN (opened_at, open_wait = the asked
 * wait) holds it, so its entry is any OPEN one's (older versions read it), and
 * the OPEN wait read back is checked against the longest either could set
 * (load_entry). It is not a vote: it opens the shared circuit whatever K.
 *
 * Quorum. With a quorum K > 1 a coordinated TRIP is a vote: the entry keeps
 * the distinct instances that tripped within the last open wait (`wait`; older
 * votes are dropped), and only the K-th distinct one trips the shared circuit,
 * which clears the votes (so does an operator verb that reaches the store:
 * stored mode's; a coordinated breaker's verbs stay local, and its vote
 * expires). A vote of an instance already counted moves its time; a vote
 * dated more than one wait ahead is dropped as stale. The votes are read back as
 * untrusted as the rest: at most K_MAX - 1 of them, no instance twice.
 *
 * Generations. A new circuit's generation starts at the wall clock in ns (read
 * finely here, not the store's coarse clock), so a circuit deleted and made
 * again does not reuse a generation an old permit may still carry; `born`
 * keeps that first generation. A CLOSED circuit with no entry admits without
 * writing anything, so its permits cannot carry the generation of an entry that
 * does not exist: they carry BW__GEN_NO_ENTRY instead, and count if the circuit
 * has no entry or an entry that has not moved since it was born (CLOSED,
 * generation == born). A permit of any other generation that finds no entry is
 * stale: the entry it was admitted by is gone (closed by a probe round, or
 * expired), and so is its era. So that a reset makes every outcome in flight
 * stale, as breaker.h promises, a reset does not delete the entry: it keeps it
 * as a fence, CLOSED at its new generation (an entry of a fresh circuit moves
 * from born to born + 1), until the generation moves again or the entry
 * expires. The one imprecision left: a call admitted in CLOSED that outlasts the
 * deletion or expiry of its entry (its time window emptied, or a quiet keyed
 * entry's short lifetime ended) is dropped, not counted.
 *
 * Lifetimes. An entry lives `ttl` after its last write (an OPEN one `ttl`
 * after its wait ends; an operator hold for ever), except a quiet one (CLOSED
 * with nothing but successes: no failure or slow call in its window, no
 * consecutive failure, no failed round, no fence, no vote) when the operation
 * gives quiet entries a lifetime of their own, `quiet_ttl` (a keyed circuit's
 * keyed_idle, at most its time window: attach_store.c): min(quiet_ttl, ttl),
 * or no entry at all when quiet_ttl < 0 (keyed_idle 0). So a flood of keys
 * that only succeed leaves entries for quiet_ttl, not for a day; what holds a
 * failure keeps `ttl`. An expired quiet entry takes its window's successes
 * with it: a sparse key's next failure is judged on the calls since (keyed.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "share/circuit.h"

#include <string.h>
#include <time.h>

#include "machine/image.h"

#define FORMAT 2
#define HEAD 12
#define FLAG_FENCE 1u /* header byte 1: a reset's entry, kept while its generation stands */
#define VOTE_BYTES 16
#define VOTES_MAX (BW_STORE_QUORUM_MAX - 1) /* the K-th vote trips: at most K - 1 are ever kept */

/* The trips an entry holds toward a quorum. */
typedef struct votes {
    int n;
    uint64_t id[VOTES_MAX];
    int64_t at[VOTES_MAX];
} votes;

int bw__shared_fits(const bw__mcfg *cfg)
{
    return HEAD + bw__machine_image_bytes(cfg) <= BW_STORE_DATA_MAX;
}

uint32_t bw__shared_count_max(void)
{
    bw__mcfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = BW_POLICY_RATE;
    cfg.window_kind = BW_WINDOW_COUNT; /* size 0: the image without its slots, one byte a call */
    return (uint32_t)(BW_STORE_DATA_MAX - HEAD - bw__machine_image_bytes(&cfg));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/*
 * Quiet: nothing but successes (keyed.h's word): CLOSED, no failure or slow
 * call in the window, no consecutive failure, no failed round behind it.
 */
static int quiet(bw__machine *m, bw__now *now)
{
    if (m->state != BW_STATE_CLOSED || m->cerr || m->failed_rounds)
        return 0;
    if (m->cfg.policy != BW_POLICY_RATE)
        return 1;
    bw__window_expire(&m->win, bw__now_get(now));
    return m->win.failed == 0 && m->win.slow == 0;
}

/* Nothing worth keeping: quiet, with an empty window and no consecutive successes either. */
static int forgettable(bw__machine *m, bw__now *now)
{
    return quiet(m, now) && !m->csucc && (m->cfg.policy != BW_POLICY_RATE || m->win.total == 0);
}

/* The bytes of cur's machine image (after the header, before the votes), or -1 when the header is malformed. */
static long image_len(const bw_store_entry *cur)
{
    if (cur->len < HEAD || cur->len > BW_STORE_DATA_MAX || cur->data[0] != FORMAT || (cur->data[1] & ~FLAG_FENCE) ||
        cur->data[2] > VOTES_MAX || cur->data[3])
        return -1;
    long n = (long)cur->len - HEAD - (long)cur->data[2] * VOTE_BYTES;
    return n >= 0 ? n : -1;
}

/* Decode the votes after an image of `len` bytes: -1 when one instance is there twice. */
static int load_votes(const bw_store_entry *cur, long len, votes *v)
{
    const unsigned char *p = cur->data + HEAD + len;
    v->n = cur->data[2];
    for (int i = 0; i < v->n; i++, p += VOTE_BYTES) {
        v->id[i] = get64(p);
        v->at[i] = (int64_t)get64(p + 8);
        for (int j = 0; j < i; j++)
            if (v->id[j] == v->id[i])
                return -1;
    }
    return 0;
}

/*
 * Decode an entry into m and *v, checking everything the encoder could not
 * have written (machine/image.c checks the image), and, when `capped`, that an
 * OPEN circuit's wait ends no later from `now` than its configuration could
 * have set (circuit.h). Returns 1 when loaded, 0 when there is no entry, -1
 * when it is corrupt (m is then unusable).
 */
static int load_entry(const bw__shared_op *op, bw__machine *m, void *wmem, const bw_store_entry *cur, int64_t now,
                      int capped, uint64_t *born, unsigned *flags, votes *v)
{
    v->n = 0;
    if (!cur)
        return 0;
    long len = image_len(cur);
    if (len < 0)
        return -1;
    *born = get64(cur->data + 4);
    *flags = cur->data[1];
    if (bw__machine_load(m, op->cfg, wmem, cur->data + HEAD, (size_t)len) != 0 || *born > m->gen)
        return -1; /* the generation starts at born and only grows */
    /* Both sides are range-checked instants and waits (image.c): no sum overflows. */
    if (capped && m->state == BW_STATE_OPEN &&
        bw__machine_deadline(m) > bw__sat_add(now, bw__machine_longest_wait(op->cfg)))
        return -1; /* held open longer than any breaker of this configuration, or a Retry-After, could */
    if (load_votes(cur, len, v) != 0) {
        v->n = 0;
        return -1;
    }
    return 1;
}

/*
 * A local trip's vote toward the quorum, in CLOSED: drop the votes older than
 * one open wait, count this instance's (once), and tell whether K distinct
 * instances have now tripped. Returns 1 when the shared circuit should trip.
 */
static int vote(const bw__shared_op *op, votes *v, int64_t now)
{
    int64_t wait = op->cfg->wait; /* in (0, 365d] */
    int64_t since = now >= INT64_MIN + wait ? now - wait : INT64_MIN;
    int64_t until = bw__sat_add(now, wait); /* a vote dated further ahead came from no clock of ours: stale */
    int k = 0, mine = -1;
    for (int i = 0; i < v->n; i++) {
        if (v->at[i] < since || v->at[i] > until)
            continue; /* older than one open wait (or from the future) */
        v->id[k] = v->id[i];
        v->at[k] = v->at[i];
        if (v->id[k] == op->instance)
            mine = k;
        k++;
    }
    v->n = k;
    int distinct = k + (mine < 0);
    if ((uint32_t)distinct >= op->quorum) {
        v->n = 0;
        return 1;
    }
    if (mine >= 0) {
        v->at[mine] = now;
    } else if (v->n < VOTES_MAX) { /* distinct < quorum <= BW_STORE_QUORUM_MAX: always true */
        v->id[v->n] = op->instance;
        v->at[v->n++] = now;
    }
    return 0;
}

/* Nothing recorded and nothing moved (a time window's expiry aside): no write, and so no renewal. */
static int no_op(const bw__shared_op *op, const bw__machine *m, uint64_t gen0)
{
    if (m->gen != gen0)
        return 0;
    switch (op->op) {
    case BW__OP_ACQUIRE:
        return m->state == BW_STATE_CLOSED || m->state == BW_STATE_DISABLED || m->state == BW_STATE_METRICS_ONLY;
    case BW__OP_RECORD:
        return op->ok != 1;
    default:
        return !op->ok;
    }
}

/* An admission decided without running the machine: fill op as bw__shared_apply would. */
static int admitted(bw__shared_op *op, int64_t now, int state, uint64_t gen, int found)
{
    op->now = now;
    op->before = op->after = state;
    op->ok = 1;
    op->out_gen = gen;
    op->found = found;
    op->open_until = INT64_MAX;
    op->why = 0; /* as a first run leaves them: an optimistic store may run this again after a lost race */
    op->open_wait = 0;
    op->failed_rounds = 0;
    return 1;
}

/*
 * The common case, an admission by a CLOSED (or DISABLED, METRICS_ONLY) stored
 * circuit whose lifetime needs no renewal: read two fields of the image and
 * write nothing. Returns 1 when it answered.
 */
static int admit_fast(bw__shared_op *op, int64_t now, const bw_store_entry *cur)
{
    int state;
    uint64_t gen;
    long len;
    if (op->op != BW__OP_ACQUIRE || op->snap || op->must_write || !cur || (len = image_len(cur)) < 0 ||
        bw__machine_image_peek(cur->data + HEAD, (size_t)len, &state, &gen) != 0)
        return 0;
    if (state != BW_STATE_CLOSED && state != BW_STATE_DISABLED && state != BW_STATE_METRICS_ONLY)
        return 0;
    return admitted(op, now, state, gen, 1);
}

static int reject_read(bw__shared_op *op, int64_t now, const bw_store_entry *cur);

int bw__shared_admit_read(bw__shared_op *op, int64_t now, const bw_store_entry *cur)
{
    if (cur)
        return admit_fast(op, now, cur) || reject_read(op, now, cur);
    if (op->op != BW__OP_ACQUIRE || op->snap || op->cfg->initial_state != BW_STATE_CLOSED)
        return 0;
    return admitted(op, now, BW_STATE_CLOSED, BW__GEN_NO_ENTRY, 0); /* a fresh CLOSED circuit: nothing to write */
}

/* The verdict, noted in op (only a write tells that the store works: link.c). */
static bw_store_verdict verdict(bw__shared_op *op, bw_store_verdict v)
{
    op->wrote = v != BW_STORE_KEEP;
    return v;
}

/*
 * Decode cur into m, or make m a fresh circuit when there is no entry or it is
 * corrupt; op->found says which. A fresh circuit's generation starts at the
 * wall clock (see the top). Returns as load_entry.
 */
static int load_or_fresh(bw__shared_op *op, bw__machine *m, void *wmem, const bw_store_entry *cur, int64_t now,
                         uint64_t *born, unsigned *flags, votes *v)
{
    int loaded = load_entry(op, m, wmem, cur, now, 1, born, flags, v);
    op->found = loaded == 1;
    if (!op->found) { /* a fresh circuit (or a corrupt entry, replaced) */
        *flags = 0;
        bw__machine_init(m, op->cfg, wmem);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        m->gen = *born = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    return loaded;
}

/* What every operation reports of the circuit after it. */
static void report(bw__shared_op *op, const bw__machine *m)
{
    op->after = m->state;
    op->why = op->before != m->state ? m->why : 0;
    if (op->op != BW__OP_ACQUIRE || !op->ok)
        op->out_gen = m->gen;
    op->open_until = m->state == BW_STATE_OPEN ? bw__sat_add(m->opened_at, m->open_wait) : INT64_MAX;
    op->open_wait = m->open_wait;
    op->failed_rounds = m->failed_rounds;
}

/*
 * A rejection the read entry alone decides: FORCED_OPEN, or OPEN before its
 * wait ends. The update would answer the same and write nothing (the machine
 * does not move, and an OPEN rejection touches no window), so a rejected
 * caller takes no store lock either: `breakwater run` on an open circuit, or
 * a stored fleet hammering one. Returns 1 with op filled as the update would.
 */
static int reject_read(bw__shared_op *op, int64_t now, const bw_store_entry *cur)
{
    unsigned char wmem[BW_STORE_DATA_MAX];
    bw__machine m;
    uint64_t born = 0;
    unsigned flags = 0;
    votes v;
    if (op->op != BW__OP_ACQUIRE || op->snap || op->must_write ||
        load_entry(op, &m, wmem, cur, now, 1, &born, &flags, &v) != 1)
        return 0;
    if ((m.state != BW_STATE_OPEN && m.state != BW_STATE_FORCED_OPEN) || bw__machine_deadline(&m) <= now)
        return 0;
    op->now = now;
    op->before = m.state;
    op->ok = 0;
    op->found = 1;
    op->corrupt = 0;
    op->wrote = 0;
    op->votes = v.n;
    report(op, &m);
    return 1;
}

int bw__shared_poll_read(bw__shared_op *op, int64_t now, const bw_store_entry *cur)
{
    unsigned char wmem[BW_STORE_DATA_MAX];
    bw__machine m;
    uint64_t born = 0;
    unsigned flags = 0;
    votes v;
    op->op = BW__OP_ADVANCE;
    op->wrote = 0;
    op->corrupt = 0;
    if (load_or_fresh(op, &m, wmem, cur, now, &born, &flags, &v) < 0 || bw__machine_deadline(&m) <= now)
        return 0; /* corrupt (an update replaces it), or a timed transition is due: only an update does it */
    op->now = now;
    op->before = m.state;
    op->ok = 0;
    op->votes = v.n;
    report(op, &m);
    return 1;
}

bw_store_verdict bw__shared_apply(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    bw__shared_op *op = arg;
    op->wrote = 0;
    op->corrupt = 0;
    if (admit_fast(op, now, cur))
        return BW_STORE_KEEP;
    unsigned char wmem[BW_STORE_DATA_MAX];
    bw__machine m;
    uint64_t born = 0;
    unsigned flags = 0;
    votes v;
    int loaded = load_or_fresh(op, &m, wmem, cur, now, &born, &flags, &v);
    int voted = 0;
    op->corrupt = loaded < 0 && op->op != BW__OP_READ; /* a read replaces nothing: the next update reports it */
    bw__now t = bw__now_at(now);
    op->now = now;
    op->before = m.state;
    op->ok = 0;
    uint64_t gen0 = m.gen;
    switch (op->op) {
    case BW__OP_ACQUIRE:
        op->ok = bw__machine_acquire(&m, &t, &op->out_gen);
        break;
    case BW__OP_RECORD: {
        uint64_t gen = op->gen;
        /* Admitted with no entry: it counts into the circuit made since, unless that moved (a reset, a trip). */
        if (gen == BW__GEN_NO_ENTRY && (!op->found || (m.state == BW_STATE_CLOSED && m.gen == born)))
            gen = m.gen;
        op->ok = bw__machine_record(&m, gen, op->outcome, op->slow, &t);
        break;
    }
    case BW__OP_TRIP:
        if (op->quorum > 1 && m.state == BW_STATE_CLOSED && !vote(op, &v, now)) {
            voted = 1; /* a vote short of the quorum: the shared circuit stays CLOSED */
            break;
        }
        op->ok = bw__machine_trip(&m, now);
        break;
    case BW__OP_ADVANCE:
        op->ok = bw__machine_advance(&m, now);
        break;
    case BW__OP_VERB:
        bw__machine_apply(&m, op->state);
        op->ok = 1;
        break;
    case BW__OP_OPEN_FOR: /* not a vote: the dependency itself said so */
        op->ok = bw__machine_open_for(&m, now, op->wait);
        break;
    default: /* READ */
        break;
    }
    if (m.state != BW_STATE_CLOSED || op->op == BW__OP_VERB)
        v.n = 0; /* votes count toward a trip from CLOSED only; a trip, a reset or an override ends them */
    op->votes = v.n;
    report(op, &m);
    if (op->snap)
        bw__machine_snapshot(&m, &t, op->snap);
    if (op->op == BW__OP_READ)
        return BW_STORE_KEEP; /* a read never writes */

    /* A reset keeps its entry (a fence): the generation it moved to makes every outcome in flight stale. */
    int fence = (op->op == BW__OP_VERB && op->state == BW_STATE_CLOSED) || ((flags & FLAG_FENCE) && m.gen == gen0);
    /* A quiet circuit with a lifetime of its own (a keyed circuit's: see the top) that is none keeps no entry. */
    int short_lived = op->quiet_ttl != 0 && !fence && v.n == 0 && quiet(&m, &t);
    if (!fence && !op->must_write && v.n == 0 && ((short_lived && op->quiet_ttl < 0) || forgettable(&m, &t))) {
        if (op->op == BW__OP_ACQUIRE && op->ok)
            op->out_gen = BW__GEN_NO_ENTRY; /* its circuit has no entry after this: see the design notes */
        if (op->found || op->corrupt)
            return verdict(op, BW_STORE_DELETE); /* closing deletes the entry */
        return BW_STORE_KEEP;
    }
    if (op->found && !voted && no_op(op, &m, gen0)) {
        if (!op->must_write)
            return BW_STORE_KEEP;
        next->expires_at = cur->expires_at; /* the same bytes and lifetime: a write that changes nothing */
        next->len = cur->len;
        memcpy(next->data, cur->data, cur->len);
        return verdict(op, BW_STORE_PUT);
    }
    next->data[0] = FORMAT;
    next->data[1] = (unsigned char)(fence ? FLAG_FENCE : 0);
    next->data[3] = 0;
    put64(next->data + 4, born);
    size_t len = HEAD + bw__machine_save(&m, next->data + HEAD);
    int nv = 0; /* the votes that fit (a coordinated circuit's image is small: all of them) */
    for (; nv < v.n && len + VOTE_BYTES <= BW_STORE_DATA_MAX; nv++, len += VOTE_BYTES) {
        put64(next->data + len, v.id[nv]);
        put64(next->data + len + 8, (uint64_t)v.at[nv]);
    }
    next->data[2] = (unsigned char)nv;
    next->len = (uint32_t)len;
    int64_t ttl = short_lived && op->quiet_ttl < op->ttl ? (op->quiet_ttl > 0 ? op->quiet_ttl : 1) : op->ttl;
    next->expires_at =
        m.state == BW_STATE_FORCED_OPEN || m.state == BW_STATE_DISABLED || m.state == BW_STATE_METRICS_ONLY
            ? BW_STORE_NEVER /* an operator hold never expires */
            : bw__sat_add(m.state == BW_STATE_OPEN && op->open_until > now ? op->open_until : now, ttl);
    if (op->found && !op->must_write && !(op->op == BW__OP_RECORD && op->ok == 1) && cur->len == len &&
        memcmp(cur->data, next->data, len) == 0)
        return BW_STORE_KEEP; /* unchanged: no write */
    return verdict(op, BW_STORE_PUT);
}

int bw__shared_inspect(const bw_store_entry *cur, int64_t now, bw_store_circuit *out)
{
    long len = image_len(cur);
    int policy, kind;
    uint32_t size;
    out->readable = 0;
    out->bytes = cur->len;
    if (len < 0 || bw__machine_image_shape(cur->data + HEAD, (size_t)len, &policy, &kind, &size) != 0)
        return -1;
    /* The entry's own shape; the thresholds are not in it, and a read needs none (any valid value will do). */
    bw__mcfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = (uint8_t)policy;
    cfg.window_kind = (uint8_t)kind;
    cfg.window_size = policy == BW_POLICY_RATE ? size : 0;
    cfg.min_calls = cfg.permitted = cfg.max_concurrent = 1;
    cfg.error_threshold = cfg.success_threshold = cfg.half_open_capacity = 1;
    cfg.failure_rate = cfg.slow_rate = cfg.wait_multiplier = 1;
    cfg.wait = BW_NS_PER_S;
    if (policy == BW_POLICY_RATE && !bw__shared_fits(&cfg))
        return -1;
    bw__shared_op op;
    memset(&op, 0, sizeof op);
    op.cfg = &cfg;
    unsigned char wmem[BW_STORE_DATA_MAX];
    bw__machine m;
    uint64_t born = 0;
    unsigned flags = 0;
    votes v;
    if (load_entry(&op, &m, wmem, cur, now, 0, &born, &flags, &v) != 1)
        return -1; /* uncapped: a reader without the configuration cannot tell its longest wait, and only reads */
    bw__now t = bw__now_at(now);
    bw__machine_snapshot(&m, &t, &out->snap);
    out->snap.shared = 1;
    out->readable = 1;
    out->policy = (bw_policy)policy;
    out->window = (bw_window_kind)kind;
    out->window_size = cfg.window_size;
    out->fence = (flags & FLAG_FENCE) != 0;
    out->votes = v.n;
    return 0;
}
