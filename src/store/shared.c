/*
 * shared.c — the operations on a circuit kept in a store (see shared.h).
 *
 * Entry layout: u8 format (2), u8 0, u16 0, u64 born, then the machine image.
 *
 * Generations. A new circuit's generation starts at the wall clock in ns (read
 * finely here, not the store's coarse clock), so a circuit deleted and made
 * again does not reuse a generation an old permit may still carry; `born`
 * keeps that first generation. A CLOSED circuit with no entry admits without
 * writing anything, so its permits cannot carry the generation of an entry that
 * does not exist: they carry BW__GEN_NO_ENTRY instead, and count if the circuit
 * has an entry that has not moved since it was born (CLOSED, generation ==
 * born). An outcome that finds no entry at all counts into the fresh CLOSED
 * circuit, whatever its permit: the entry it was admitted by was deleted, and
 * a CLOSED window is the only place it can land. So the one imprecision: an
 * outcome of a call that lasted through a whole trip, recovery and deletion
 * lands in the next CLOSED window; never in a probe round.
 */
#define _POSIX_C_SOURCE 200809L
#include "shared.h"

#include <string.h>
#include <time.h>

#include "../core/persist.h"

#define FORMAT 2
#define HEAD 12

int bw__shared_fits(const bw__mcfg *cfg)
{
    return HEAD + bw__machine_image_bytes(cfg) <= BW_STORE_DATA_MAX;
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

/* An entry written with lifetime `expires` needs no rewrite yet: at least half its ttl is left. */
static int lasts(const bw_store_entry *cur, int64_t expires, int64_t ttl)
{
    return cur->expires_at >= expires - ttl / 2;
}

/* Nothing worth keeping: CLOSED, an empty window, no counters, no backoff. */
static int forgettable(bw__machine *m, bw__now *now)
{
    if (m->state != BW_STATE_CLOSED || m->cerr || m->csucc || m->failed_rounds)
        return 0;
    if (m->cfg.policy != BW_POLICY_RATE)
        return 1;
    bw__window_expire(&m->win, bw__now_get(now));
    return m->win.total == 0;
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
    if (op->op != BW__OP_ACQUIRE || op->snap || !cur || cur->len < HEAD || cur->data[0] != FORMAT ||
        bw__machine_image_peek(cur->data + HEAD, cur->len - HEAD, &state, &gen) != 0)
        return 0;
    if (state != BW_STATE_CLOSED && state != BW_STATE_DISABLED && state != BW_STATE_METRICS_ONLY)
        return 0;
    if (!lasts(cur, state == BW_STATE_CLOSED ? bw__sat_add(now, op->ttl) : BW_STORE_NEVER, op->ttl))
        return 0; /* due for renewal: the full path rewrites it */
    return admitted(op, now, state, gen, 1);
}

int bw__shared_admit_read(bw__shared_op *op, int64_t now, const bw_store_entry *cur)
{
    if (cur)
        return admit_fast(op, now, cur);
    if (op->op != BW__OP_ACQUIRE || op->snap || op->cfg->initial_state != BW_STATE_CLOSED)
        return 0;
    return admitted(op, now, BW_STATE_CLOSED, BW__GEN_NO_ENTRY, 0); /* a fresh CLOSED circuit: nothing to write */
}

bw_store_verdict bw__shared_apply(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    bw__shared_op *op = arg;
    if (admit_fast(op, now, cur))
        return BW_STORE_KEEP;
    unsigned char wmem[BW_STORE_DATA_MAX];
    bw__machine m;
    uint64_t born;
    op->found = cur && cur->len >= HEAD && cur->data[0] == FORMAT &&
                bw__machine_load(&m, op->cfg, wmem, cur->data + HEAD, cur->len - HEAD) == 0;
    if (op->found) {
        born = get64(cur->data + 4);
    } else { /* a fresh circuit (or an unreadable entry, replaced) */
        bw__machine_init(&m, op->cfg, wmem);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        m.gen = born = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
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
        if (!op->found || (gen == BW__GEN_NO_ENTRY && m.state == BW_STATE_CLOSED && m.gen == born))
            gen = m.gen; /* see the design notes */
        op->ok = bw__machine_record(&m, gen, op->outcome, op->slow, &t);
        break;
    }
    case BW__OP_TRIP:
        op->ok = bw__machine_trip(&m, now);
        break;
    case BW__OP_ADVANCE:
        op->ok = bw__machine_advance(&m, now);
        break;
    case BW__OP_VERB:
        bw__machine_apply(&m, op->state);
        op->ok = 1;
        break;
    default: /* READ */
        break;
    }
    op->after = m.state;
    if (op->op != BW__OP_ACQUIRE || !op->ok)
        op->out_gen = m.gen;
    op->open_until = m.state == BW_STATE_OPEN ? bw__sat_add(m.opened_at, m.open_wait) : INT64_MAX;
    if (op->snap)
        bw__machine_snapshot(&m, &t, op->snap);

    if (forgettable(&m, &t)) {
        if (op->found)
            return BW_STORE_DELETE; /* closing deletes the entry */
        if (op->op == BW__OP_ACQUIRE && op->ok)
            op->out_gen = BW__GEN_NO_ENTRY; /* see the design notes */
        return BW_STORE_KEEP;
    }
    int64_t expires =
        m.state == BW_STATE_FORCED_OPEN || m.state == BW_STATE_DISABLED || m.state == BW_STATE_METRICS_ONLY
            ? BW_STORE_NEVER /* an operator hold never expires */
            : bw__sat_add(m.state == BW_STATE_OPEN && op->open_until > now ? op->open_until : now, op->ttl);
    /* An admission in CLOSED changes nothing: no write unless the entry needs its lifetime renewed. */
    if (op->found && op->op == BW__OP_ACQUIRE && m.gen == gen0 && m.state == BW_STATE_CLOSED &&
        lasts(cur, expires, op->ttl))
        return BW_STORE_KEEP;
    next->data[0] = FORMAT;
    next->data[1] = next->data[2] = next->data[3] = 0;
    put64(next->data + 4, born);
    size_t len = HEAD + bw__machine_save(&m, next->data + HEAD);
    next->len = (uint32_t)len;
    next->expires_at = expires;
    if (op->found && !(op->op == BW__OP_RECORD && op->ok == 1) && cur->len == len &&
        memcmp(cur->data, next->data, len) == 0 && lasts(cur, expires, op->ttl))
        return BW_STORE_KEEP; /* unchanged, and not close to expiring: no write */
    return BW_STORE_PUT;
}
