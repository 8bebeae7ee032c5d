/*
 * shared.c — the operations on a circuit kept in a store (see shared.h).
 *
 * Entry layout: u8 format (1), u8 0, u16 0, then the machine image. A new
 * circuit's generation starts at the store's clock in ns, so a circuit deleted
 * and made again never reuses a generation an old permit may still carry.
 */
#include "shared.h"

#include <string.h>

#include "../core/persist.h"

#define FORMAT 1
#define HEAD 4

int bw__shared_fits(const bw__mcfg *cfg)
{
    return HEAD + bw__machine_image_bytes(cfg) <= BW_STORE_DATA_MAX;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* Nothing worth keeping: CLOSED, an empty window, no counters, no backoff. */
static int forgettable(bw__machine *m, bw__now *now)
{
    if (m->state != BW_STATE_CLOSED)
        return 0;
    bw_snapshot s;
    bw__machine_snapshot(m, now, &s);
    return s.total_calls == 0 && m->cerr == 0 && m->csucc == 0 && m->failed_rounds == 0;
}

bw_store_verdict bw__shared_apply(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    bw__shared_op *op = arg;
    unsigned char wmem[BW_STORE_DATA_MAX];
    bw__machine m;
    bw__machine_init(&m, op->cfg, wmem);
    op->found = cur && cur->len >= HEAD && cur->data[0] == FORMAT &&
                bw__machine_load(&m, cur->data + HEAD, cur->len - HEAD) == 0;
    if (!op->found) { /* a fresh circuit (or an unreadable entry, replaced) */
        bw__machine_init(&m, op->cfg, wmem);
        m.gen = (uint64_t)now;
    }
    bw__now t = bw__now_at(now);
    op->now = now;
    op->before = m.state;
    op->ok = 0;
    switch (op->op) {
    case BW__OP_ACQUIRE:
        op->ok = bw__machine_acquire(&m, &t, &op->out_gen);
        break;
    case BW__OP_RECORD:
        op->ok = bw__machine_record(&m, op->gen, op->outcome, op->slow, &t);
        break;
    case BW__OP_TRIP:
        op->ok = bw__machine_trip(&m, now);
        break;
    case BW__OP_ADVANCE:
        op->ok = bw__machine_advance(&m, now);
        break;
    case BW__OP_VERB:
        if (op->state == BW_STATE_CLOSED)
            bw__machine_reset(&m);
        else
            bw__machine_override(&m, op->state);
        op->ok = 1;
        break;
    default: /* READ */
        break;
    }
    op->after = m.state;
    if (op->op != BW__OP_ACQUIRE || !op->ok)
        op->out_gen = m.gen;
    op->open_until = m.state == BW_STATE_OPEN ? sat_add(m.opened_at, m.open_wait) : INT64_MAX;
    op->ho_deadline =
        m.state == BW_STATE_HALF_OPEN && m.cfg.max_wait_ho > 0 ? sat_add(m.ho_since, m.cfg.max_wait_ho) : INT64_MAX;
    if (op->want_snapshot)
        bw__machine_snapshot(&m, &t, &op->snap);

    if (forgettable(&m, &t))
        return op->found ? BW_STORE_DELETE : BW_STORE_KEEP; /* closing deletes the entry */
    next->data[0] = FORMAT;
    next->data[1] = next->data[2] = next->data[3] = 0;
    size_t len = HEAD + bw__machine_save(&m, next->data + HEAD);
    next->len = (uint32_t)len;
    if (m.state == BW_STATE_FORCED_OPEN || m.state == BW_STATE_DISABLED || m.state == BW_STATE_METRICS_ONLY)
        next->expires_at = BW_STORE_NEVER; /* an operator hold never expires */
    else
        next->expires_at = sat_add(m.state == BW_STATE_OPEN && op->open_until > now ? op->open_until : now, op->ttl);
    if (op->found && cur->len == len && memcmp(cur->data, next->data, len) == 0 &&
        cur->expires_at >= next->expires_at - op->ttl / 2)
        return BW_STORE_KEEP; /* unchanged, and not close to expiring: no write */
    return BW_STORE_PUT;
}
