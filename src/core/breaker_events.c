/*
 * breaker_events.c — a breaker's events and listeners: the names of reasons
 * and call kinds, the events gathered under the lock (pending) and delivered
 * after it, and adding and removing a breaker's own listeners. The rejection's
 * and a settle's events are built on the hot paths' side (breaker.c) from the
 * helpers here.
 *
 * Locking: events are gathered with the breaker's lock held and delivered with
 * none (a listener may call back into the breaker); a breaker's fanout is read
 * without a lock (fanout.h). `fan_mu` serialises giving a breaker a fanout of
 * its own (the first listener added to it).
 */
#include <pthread.h>
#include <string.h>

#include "core/engine.h"

/* ---- events ---- */

const char *bw_reason_name(bw_reason reason)
{
    static const char *const names[] = {
        "none",       "initial",       "failure_rate",  "slow_rate",           "consecutive_failures",
        "wait_ended", "probes_passed", "probes_failed", "probes_inconclusive", "half_open_timeout",
        "shared",     "operator",      "retry_after",   "store_down"};
    return (unsigned)reason < sizeof names / sizeof names[0] ? names[reason] : "unknown";
}

const char *bw_call_kind_name(bw_call_kind kind)
{
    static const char *const names[] = {"success", "failure",     "slow_success", "slow_failure",
                                        "ignored", "unreachable", "stale"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

bw_event bw__event_of(const bw_breaker *b, bw_event_type type)
{
    bw_event e = bw__event(type, b->name);
    e.breaker = (bw_breaker *)b;
    e.key = b->key;
    return e;
}

/*
 * A state change's event: from -> AFTER_STATE(to), because of AFTER_WHY(to)
 * (none given: the store's shared circuit moved). Its figures come from the
 * breaker's record of its last transition when that is this one (another may
 * have followed at once: then the event carries the reason without them).
 */
void bw__add_change(bw_breaker *b, pending *p, int from, int to)
{
    int st = AFTER_STATE(to), why = AFTER_WHY(to);
    if (from == st || !(lmask(b) & BW_EVENT_MASK(BW_EVENT_STATE_CHANGE)))
        return;
    bw_event e = bw__event_of(b, BW_EVENT_STATE_CHANGE);
    e.from = (bw_state)from;
    e.to = (bw_state)st;
    e.reason = why ? (bw_reason)why : BW_REASON_SHARED;
    uint32_t seq = atomic_load_explicit(&b->why_seq, memory_order_acquire);
    uint32_t rec = atomic_load_explicit(&b->why, memory_order_relaxed);
    uint64_t bits = atomic_load_explicit(&b->why_rate, memory_order_relaxed);
    uint64_t total = atomic_load_explicit(&b->why_total, memory_order_relaxed);
    uint32_t count = atomic_load_explicit(&b->why_count, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (!(seq & 1) && seq == atomic_load_explicit(&b->why_seq, memory_order_relaxed) &&
        rec == ((uint32_t)st << 8 | (uint32_t)why)) {
        memcpy(&e.rate, &bits, sizeof e.rate);
        e.total = total;
        e.count = count;
    }
    p->ev[p->n++] = e;
}

void bw__count_store(bw_breaker *b, int type)
{
    if (b->cold && type >= BW_EVENT_STORE_DEGRADED && type <= BW_EVENT_STORE_WRITE_DROPPED)
        atomic_fetch_add_explicit(&b->cold->store[type - BW_EVENT_STORE_DEGRADED], 1, memory_order_relaxed);
}

void bw__add_event(bw_breaker *b, pending *p, int type, int status, const char *message)
{
    bw__count_store(b, type);
    if (!(lmask(b) & BW_EVENT_MASK(type)))
        return;
    bw_event e = bw__event_of(b, (bw_event_type)type);
    e.status = status;
    e.message = message;
    p->ev[p->n++] = e;
}

void bw__deliver(bw_breaker *b, const pending *p)
{
    for (int i = 0; i < p->n; i++)
        deliver(b, &p->ev[i]);
}

void bw__announce(bw_breaker *b, pending *p, int before, int after, int reset)
{
    bw__add_change(b, p, before, after);
    if (reset && (lmask(b) & BW_EVENT_MASK(BW_EVENT_RESET)))
        p->ev[p->n++] = bw__event_of(b, BW_EVENT_RESET);
    bw__deliver(b, p);
}

/* ---- listeners ---- */

/* Serialises giving a breaker a fanout of its own (the first listener added to it). */
static pthread_mutex_t fan_mu = PTHREAD_MUTEX_INITIALIZER;

int bw_breaker_add_listener(bw_breaker *b, const bw_listener *l, uint64_t *id)
{
    if (!b || !l || !l->fn || !l->mask || b->parent)
        return BW_EINVAL;
    pthread_mutex_lock(&fan_mu);
    if (!b->own_fan) {
        bw__fanout *f = bw__fanout_new(atomic_load_explicit(&b->fan, memory_order_relaxed));
        if (!f) {
            pthread_mutex_unlock(&fan_mu);
            return BW_ENOMEM;
        }
        atomic_store_explicit(&b->fan, f, memory_order_release);
        b->own_fan = 1;
    }
    bw__fanout *f = atomic_load_explicit(&b->fan, memory_order_relaxed);
    pthread_mutex_unlock(&fan_mu);
    int rc = bw__fanout_add(f, l, id);
    if (rc == BW_OK)
        bw__breaker_refresh(b);
    return rc;
}

int bw_breaker_remove_listener(bw_breaker *b, uint64_t id)
{
    if (!b)
        return BW_EINVAL;
    pthread_mutex_lock(&fan_mu);
    bw__fanout *f = b->own_fan ? atomic_load_explicit(&b->fan, memory_order_relaxed) : NULL;
    pthread_mutex_unlock(&fan_mu);
    if (!f || id == 0)
        return BW_ESTATE;
    int rc = bw__fanout_remove(f, id);
    if (rc == BW_OK)
        bw__breaker_refresh(b);
    return rc;
}
