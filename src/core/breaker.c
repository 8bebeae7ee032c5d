/*
 * breaker.c — the breaker engine: the machine behind a lock, lock-free admission,
 * permits, durations, the classifier, listener dispatch and the auto-transition
 * timer.
 *
 * Locking:
 * - `lock` (a spin lock, spin.h) guards `m`, the machine. It is held only for a
 *   machine call and the publication below; never while user code runs. Every
 *   path that may change the machine takes it through lock_all (below).
 * - `word` mirrors (generation << 3 | state) and `open_until` mirrors the end of
 *   the current OPEN wait (in stamp units, see below). Both are written only
 *   under `lock`, open_until first, word last with release order, and read
 *   without it. That lets bw_acquire admit in CLOSED/DISABLED/METRICS_ONLY and
 *   reject in OPEN/FORCED_OPEN with one atomic load and no lock. A reader that
 *   sees a stale word decides as of an instant just before the transition,
 *   which is linearisable; anything that must change the machine (OPEN whose
 *   wait ended, HALF_OPEN) takes the lock and decides again.
 * - The generation only grows, so a settle whose permit generation differs from
 *   the published one is stale and is dropped without taking the lock.
 * - Striped time windows: a rate-policy breaker with a time window on a machine
 *   with several CPUs splits its window into `nstripes` stripes, each behind its
 *   own spin lock, so threads settling at once do not all write one cache line.
 *   A CLOSED or METRICS_ONLY settle records into its thread's stripe holding only
 *   that stripe's lock. Everything else (transitions, the trip test over the
 *   whole window, snapshots, verbs) holds `lock` and then every stripe lock in
 *   order (lock_all). So the word read under one stripe lock is exact: nobody
 *   can publish while that lock is held, and a stale permit is never recorded.
 *   Lock order: `lock`, then stripes 0..n-1; a stripe lock alone is never
 *   followed by `lock`.
 * - Timed transitions (auto_transition) run on the clock's timer service
 *   (timer.c), which may take `lock` while holding its own mutex to read the
 *   next deadline; this file calls into the service only with no lock held. A
 *   manual clock's mutex may be held while a timed transition takes lock_all
 *   (clock.c); never the other way round.
 * - Listener events are collected while `lock` is held and delivered after it is
 *   released, so a listener may call back into the breaker.
 *
 * Design notes: on the system clock the hot paths work in raw "stamps" (TSC
 * ticks, see internal.h): a permit keeps the acquire stamp, slowness compares a
 * stamp difference with the threshold converted once at creation, and the OPEN
 * rejection compares with open_until in stamps. Only what is reported (a
 * duration, retry_after) or what the machine needs (an instant) is converted to
 * nanoseconds. On manual and custom clocks a stamp is simply nanoseconds.
 *
 * What the hot paths do not need (listener events, the locked acquire, filling
 * a rejection, the striped settle) lives in functions of its own, kept out of
 * line: a small frame for acquire and settle was worth 3 ns a call.
 *
 * A striped success need not run the trip test: if a test earlier in the same
 * second found at least min_calls and both rates below their thresholds, a
 * success that is not slow only adds to the total (nothing expires within a
 * second), so both rates can only fall. `eval_sec` remembers that second; every
 * failure, slow call or new second runs the test as the machine would.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "store/share.h"
#include "store/front.h"
#include "core/circuit.h"
#include "base/hash.h"
#include "base/spin.h"
#include "time/clock.h"
#include "time/sched.h"

#define PERMIT_LIVE 0x6277706Du    /* "bwpm" */
#define PERMIT_SETTLED 0x6277736Cu /* settled or rejected */
#define PERMIT_PINNED 0x62777069u  /* live, and holding a pin on its keyed circuit */
#define PERMIT_STORED 0x62777374u  /* live, admitted by the store (stored mode) */
#define PERMIT_LEASED 0x6277706Cu  /* live, a probe leased from the store (coordinated) */
#define WORD_STORED 7u             /* word state of a stored-mode breaker: ask the store */
#define MAX_STRIPES 8

/* One stripe of a striped time window: its own line, lock and buckets. */
typedef struct bw_stripe {
    alignas(64) bw__spin lock;
    bw__window win;
} bw_stripe;

/* Auto-transition: an entry in the scheduler the breakers of its clock share. */
typedef struct bw_timer {
    bw__sched *sched;
    bw__sched_entry entry;
    struct bw_breaker *b;
} bw_timer;

/* What a breaker may have beyond the common case: a timer, a store. */
typedef struct bw_extra {
    bw_timer timer;
    bw__share share;
    uint8_t has_timer, has_share;
} bw_extra;

struct bw_breaker {
    /* Line 0, read by every call; written only by transitions (and eval_sec). */
    _Atomic uint64_t word;
    _Atomic int64_t open_until; /* stamp */
    int64_t slow_stamp;         /* slow_call_duration in stamp units; 0 = off */
    bw_clock *clock;
    bw_listener_cb listener;
    void *listener_user;
    _Atomic int64_t eval_sec; /* see the design notes; INT64_MIN = none */
    unsigned listener_mask;
    uint8_t clock_sys;           /* read the inlined system clock */
    uint8_t timed;               /* acquire and settle read the clock (slow calls or CALL events) */
    uint8_t kind;                /* BW__PLAIN, BW__OWNED or BW__CIRCUIT (circuit.h) */
    uint8_t unrecorded;          /* bit per outcome that records nothing outside HALF_OPEN */
    _Atomic signed char kpreset; /* the state new keyed circuits start in, or -1 */
    /* Written by every unstriped settle: the lock, then the machine. */
    alignas(64) bw__spin lock;
    bw_extra *extra;               /* NULL when it has neither timer nor store (read by every locked change) */
    _Atomic uint64_t last_failure; /* (code << 1) | 1, or 0 for none */
    bw__machine m;
    /* Cold. */
    bw_classifier_cb classifier;
    void *classifier_user;
    const char *name;
    bw_stripe *stripes; /* NULL when the window is not striped */
    uint32_t nstripes;  /* 0 when not striped, else a power of two >= 2 */
    uint32_t bytes;
    /* A breaker: its keyed circuits (made on first use). A circuit: its node. */
    _Atomic(void *) ext;
    bw__keyed_params keyed;
    /* The machine's window memory (unless striped), the name, then any stripes. */
    alignas(8) unsigned char data[];
};

/* Events gathered under the lock and delivered after it. */
typedef struct pending {
    int n;
    bw_event ev[3];
} pending;

static inline bw__share *share_of(const bw_breaker *b)
{
    return b->extra && b->extra->has_share ? &b->extra->share : NULL;
}

static inline bw_timer *timer_of(const bw_breaker *b)
{
    return b->extra && b->extra->has_timer ? &b->extra->timer : NULL;
}

static inline int64_t stamp_of(const bw_breaker *b)
{
    return BW_LIKELY(b->clock_sys) ? bw__sys_stamp() : bw_clock_now(b->clock);
}

static inline int64_t stamp_ns(const bw_breaker *b, int64_t stamp)
{
    return b->clock_sys ? bw__sys_stamp_ns(stamp) : stamp;
}

static inline int64_t span_ns(const bw_breaker *b, int64_t span)
{
    return b->clock_sys ? bw__sys_span_ns(span) : span;
}

static inline int64_t now_of(const bw_breaker *b)
{
    return stamp_ns(b, stamp_of(b));
}

/*
 * The machine's lazy "now" (bw__now) for a call: the stamp the call already
 * read, converted only if the machine asks, or else a fresh reading.
 */
typedef struct lazy_clock {
    const bw_breaker *b;
    int64_t stamp;
    int have;
} lazy_clock;

static int64_t lazy_read(void *ctx)
{
    const lazy_clock *c = ctx;
    return c->have ? stamp_ns(c->b, c->stamp) : now_of(c->b);
}

static inline void lock_all(bw_breaker *b)
{
    bw__spin_lock(&b->lock);
    for (uint32_t i = 0; i < b->nstripes; i++)
        bw__spin_lock(&b->stripes[i].lock);
}

static inline void unlock_all(bw_breaker *b)
{
    for (uint32_t i = b->nstripes; i-- > 0;)
        bw__spin_unlock(&b->stripes[i].lock);
    bw__spin_unlock(&b->lock);
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

static inline uint64_t word_of(const bw__machine *m)
{
    return (m->gen << 3) | m->state;
}

/*
 * The state callers see: the machine's, unless a coordinated breaker follows a
 * shared OPEN or HALF_OPEN (its own operator states still win, and a degraded
 * breaker runs on its own). Call with the lock held.
 */
static int following(const bw_breaker *b)
{
    const bw__share *s = share_of(b);
    int st = b->m.state;
    return s && s->mode == BW_STORE_COORDINATED && !s->degraded &&
           (s->ov_state == BW_STATE_OPEN || s->ov_state == BW_STATE_HALF_OPEN) &&
           (st == BW_STATE_CLOSED || st == BW_STATE_OPEN || st == BW_STATE_HALF_OPEN);
}

static int effective(const bw_breaker *b)
{
    return following(b) ? share_of(b)->ov_state : b->m.state;
}

/* Mirror the machine into the lock-free fields. Call with lock_all held. */
static void publish(bw_breaker *b)
{
    atomic_store_explicit(&b->eval_sec, INT64_MIN, memory_order_relaxed);
    const bw__share *s = share_of(b);
    int follow = following(b);
    int st = follow ? s->ov_state : b->m.state;
    if (st == BW_STATE_OPEN) {
        int64_t until = follow ? s->ov_until : bw__machine_deadline(&b->m);
        atomic_store_explicit(&b->open_until, b->clock_sys ? bw__sys_ns_to_stamp(until, 1) : until,
                              memory_order_relaxed);
    }
    unsigned shown = s && s->mode == BW_STORE_STORED ? WORD_STORED : (unsigned)st;
    atomic_store_explicit(&b->word, (b->m.gen << 3) | shown, memory_order_release);
}

/*
 * Every change to the machine goes through change_begin / change_end: all locks
 * held, the state before noted, the result published if the generation moved.
 */
typedef struct change {
    int before;  /* the state callers saw */
    int mbefore; /* the machine's own state */
    uint64_t gen;
    int trip;  /* set by change_end: the machine tripped CLOSED -> OPEN */
    int force; /* publish even if nothing above moved (a new shared view) */
} change;

static void timer_kick(bw_breaker *b);

static inline change change_begin(bw_breaker *b)
{
    lock_all(b);
    change c = {b->extra ? effective(b) : b->m.state, b->m.state, b->m.gen, 0, 0};
    return c;
}

/* Publish, release every lock, and return the state callers see after the change. */
static inline int change_end(bw_breaker *b, change *c)
{
    int after = b->m.state;
    int moved = b->m.gen != c->gen;
    if (BW_UNLIKELY(b->extra != NULL)) {
        after = effective(b);
        c->trip = c->mbefore == BW_STATE_CLOSED && b->m.state == BW_STATE_OPEN;
        moved |= after != c->before || c->force; /* a store's view moves without the generation */
    }
    if (moved)
        publish(b);
    unlock_all(b);
    if (BW_UNLIKELY(b->extra != NULL) && moved)
        timer_kick(b); /* the machine's next deadline may have moved */
    return after;
}

static BW_NOINLINE void coord_trip_write(bw_breaker *b);

/* After a change: a local CLOSED -> OPEN trip of a coordinated breaker is written to its store. */
static inline void coord_trip(bw_breaker *b, const change *c)
{
    if (BW_UNLIKELY(c->trip))
        coord_trip_write(b);
}

static bw_event event_of(bw_breaker *b, bw_event_type type)
{
    bw_event e = bw__event(type, b->name);
    e.breaker = b;
    e.key = b->kind == BW__CIRCUIT ? bw__circuit_node(b)->key : NULL;
    return e;
}

static void add_change(bw_breaker *b, pending *p, int from, int to)
{
    if (from == to || !(b->listener_mask & BW_EVENT_MASK(BW_EVENT_STATE_CHANGE)))
        return;
    bw_event e = event_of(b, BW_EVENT_STATE_CHANGE);
    e.from = (bw_state)from;
    e.to = (bw_state)to;
    p->ev[p->n++] = e;
}

static void deliver(bw_breaker *b, const pending *p)
{
    for (int i = 0; i < p->n; i++)
        b->listener(&p->ev[i], b->listener_user);
}

/*
 * After a change, with no lock held: the events gathered in p, then the state
 * change (and RESET after it, for a reset).
 */
static void announce(bw_breaker *b, pending *p, int before, int after, int reset)
{
    add_change(b, p, before, after);
    if (reset && (b->listener_mask & BW_EVENT_MASK(BW_EVENT_RESET)))
        p->ev[p->n++] = event_of(b, BW_EVENT_RESET);
    deliver(b, p);
}

/* ---- the auto-transition timer ---- */

/* Tell the scheduler the machine's next deadline may have changed. */
static void timer_kick(bw_breaker *b)
{
    bw_timer *t = timer_of(b);
    if (t)
        bw__sched_kick(t->sched, &t->entry);
}

/* Run due timed transitions at `now` (on the scheduler's thread, or a manual clock's advance). */
static void tick(bw_breaker *b, int64_t now)
{
    pending p;
    p.n = 0;
    change c = change_begin(b);
    bw__machine_advance(&b->m, now);
    int after = change_end(b, &c);
    announce(b, &p, c.before, after, 0);
    coord_trip(b, &c);
}

static void timer_fire(bw__sched_entry *e, int64_t now)
{
    tick(((bw_timer *)((char *)e - offsetof(bw_timer, entry)))->b, now);
}

/* Called by the scheduler with its lock held: take only the machine's lock. */
static int64_t timer_deadline(bw__sched_entry *e)
{
    bw_breaker *b = ((bw_timer *)((char *)e - offsetof(bw_timer, entry)))->b;
    bw__spin_lock(&b->lock);
    int64_t d = bw__machine_deadline(&b->m);
    bw__spin_unlock(&b->lock);
    return d;
}

/* The breaker's extra block, made on first need. */
static bw_extra *extra_of(bw_breaker *b)
{
    if (!b->extra) {
        b->extra = calloc(1, sizeof *b->extra);
        if (b->extra)
            b->bytes += (uint32_t)sizeof *b->extra;
    }
    return b->extra;
}

static int timer_new(bw_breaker *b)
{
    bw_extra *x = extra_of(b);
    if (!x)
        return BW_ENOMEM;
    bw_timer *t = &x->timer;
    t->sched = bw__sched_of(b->clock);
    if (!t->sched)
        return BW_ENOMEM;
    t->b = b;
    t->entry.deadline = timer_deadline;
    t->entry.fire = timer_fire;
    x->has_timer = 1;
    return BW_OK;
}

/* After this, no timed transition of b runs or starts. */
static void timer_free(bw_breaker *b)
{
    bw_timer *t = timer_of(b);
    if (!t)
        return;
    bw__sched_cancel(t->sched, &t->entry);
    b->extra->has_timer = 0;
}

/* Free the extra block (after timer_free and the store's detach). */
static void extra_free(bw_breaker *b)
{
    free(b->extra);
    b->extra = NULL;
}

/* ---- construction ---- */

/*
 * Stripes for a time window on a machine with several CPUs (a power of two, at
 * most MAX_STRIPES); 0 (none) otherwise. A count window ("the last N calls") has
 * one order and cannot be split, and consecutive counters are a single sequence.
 */
static uint32_t stripes_for(const bw__mcfg *mc)
{
    if (mc->policy != BW_POLICY_RATE || mc->window_kind != BW_WINDOW_TIME)
        return 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t n = 1;
    while (n < MAX_STRIPES && (long)n < cpus)
        n *= 2;
    return n > 1 ? n : 0;
}

static int share_new(bw_breaker *b, const bw_config *cfg, bw_error *err);

/* The state every new breaker and circuit starts with: a fresh machine, published; unlocked; nothing else. */
static void init_state(bw_breaker *b, const bw__mcfg *mc, void *window_mem)
{
    b->unrecorded = (uint8_t)(1u << BW_IGNORED | (mc->ignore_unreachable ? 1u << BW_UNREACHABLE : 0));
    atomic_init(&b->lock.v, 0);
    atomic_init(&b->last_failure, 0);
    atomic_init(&b->eval_sec, INT64_MIN);
    bw__machine_init(&b->m, mc, window_mem);
    atomic_init(&b->word, word_of(&b->m));
    atomic_init(&b->open_until, 0);
    atomic_init(&b->ext, NULL);
    atomic_init(&b->kpreset, -1);
}

int bw_breaker_new(const char *name, const bw_config *cfg, bw_breaker **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    int rc = bw__check_name(name, "name", err);
    if (rc != BW_OK)
        return rc;
    bw_config dflt;
    if (!cfg) {
        bw_config *d = bw_config_new();
        if (!d)
            return bw__fail(err, BW_ENOMEM, "", "out of memory");
        dflt = *d;
        bw_config_free(d);
        cfg = &dflt;
    }
    if ((rc = bw_config_validate(cfg, err)) != BW_OK)
        return rc;

    bw__mcfg mc = cfg->m;
    mc.wait = bw__config_wait(cfg);
    /* A stored circuit's window lives in its store: the local one only serves while the store is out. */
    uint32_t nstripes = cfg->store && cfg->store_mode == BW_STORE_STORED ? 0 : stripes_for(&mc);
    size_t wbytes = bw__machine_window_bytes(&mc);
    size_t stripe_mem = (wbytes + 63) / 64 * 64;
    size_t own = nstripes ? 0 : wbytes; /* the machine's own window, unless striped */
    size_t nlen = strlen(name);
    size_t size = offsetof(bw_breaker, data) + own + nlen + 1;
    size_t stripes_at = (size + 63) / 64 * 64;
    if (nstripes)
        size = stripes_at + nstripes * (sizeof(bw_stripe) + stripe_mem);
    void *mem = NULL;
    if (posix_memalign(&mem, 64, size) != 0)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    bw_breaker *b = mem;
    memset(b, 0, offsetof(bw_breaker, data));
    b->bytes = (uint32_t)size;
    b->clock = cfg->clock ? cfg->clock : bw_clock_system();
    b->clock_sys = bw__clock_kind(b->clock) == BW__CLOCK_SYSTEM;
    b->slow_stamp = b->clock_sys ? bw__sys_ns_to_stamp(cfg->slow_ns, 0) : cfg->slow_ns;
    if (cfg->slow_ns > 0 && b->slow_stamp < 1)
        b->slow_stamp = 1;
    b->listener = cfg->listener;
    b->listener_mask = cfg->listener ? cfg->listener_mask : 0;
    b->listener_user = cfg->listener_user;
    b->classifier = cfg->classifier;
    b->classifier_user = cfg->classifier_user;
    b->timed = cfg->slow_ns > 0 || (b->listener_mask & BW_EVENT_MASK(BW_EVENT_CALL));
    char *nm = (char *)b->data + own;
    memcpy(nm, name, nlen + 1);
    b->name = nm;
    init_state(b, &mc, own ? b->data : NULL);
    if (nstripes) {
        b->nstripes = nstripes;
        b->stripes = (bw_stripe *)((char *)b + stripes_at);
        char *buckets = (char *)(b->stripes + nstripes);
        for (uint32_t i = 0; i < nstripes; i++) {
            atomic_init(&b->stripes[i].lock.v, 0);
            bw__window_init(&b->stripes[i].win, mc.window_kind, mc.window_size, buckets + i * stripe_mem);
        }
        bw__machine_use_stripes(&b->m, &b->stripes[0].win, sizeof(bw_stripe), nstripes);
    }
    b->keyed.max = cfg->keyed_max;
    b->keyed.limit = cfg->keyed_max == 0 ? 0 : cfg->keyed_limit ? cfg->keyed_limit : 2 * cfg->keyed_max;
    b->keyed.idle = b->clock_sys ? bw__sys_ns_to_stamp(cfg->keyed_idle, 0) : cfg->keyed_idle;
    b->keyed.hidle = b->clock_sys ? bw__sys_ns_to_stamp(cfg->keyed_hidle, 0) : cfg->keyed_hidle;
    if (cfg->auto_transition && (rc = timer_new(b)) != BW_OK) {
        timer_free(b);
        extra_free(b);
        free(b);
        return bw__fail(err, rc, "", "could not create the auto-transition timer");
    }
    if (cfg->store && (rc = share_new(b, cfg, err)) != BW_OK) {
        timer_free(b);
        extra_free(b);
        free(b);
        return rc;
    }
    *out = b;
    return BW_OK;
}

/*
 * A keyed circuit: a copy of the parent's settings over a fresh machine, with
 * its own window memory (never striped: many circuits spread the load already)
 * and its node in the same block. The name is the parent's.
 */
int bw__circuit_new(bw_breaker *parent, size_t node_bytes, bw_breaker **out, bw__circuit **node)
{
    const bw__mcfg *mc = &parent->m.cfg;
    size_t wbytes = bw__machine_window_bytes(mc);
    size_t node_at = (offsetof(bw_breaker, data) + wbytes + 7) / 8 * 8;
    size_t size = node_at + node_bytes;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, size) != 0)
        return BW_ENOMEM;
    bw_breaker *c = mem;
    /* Field by field: the parent's atomics may be changing under other threads. */
    memset(c, 0, offsetof(bw_breaker, data));
    c->slow_stamp = parent->slow_stamp;
    c->clock = parent->clock;
    c->listener = parent->listener;
    c->listener_user = parent->listener_user;
    c->listener_mask = parent->listener_mask;
    c->clock_sys = parent->clock_sys;
    c->timed = parent->timed;
    c->classifier = parent->classifier;
    c->classifier_user = parent->classifier_user;
    c->name = parent->name;
    c->bytes = (uint32_t)size;
    c->kind = BW__CIRCUIT; /* no extra (a circuit's state stays in this process), no stripes, no keyed */
    init_state(c, mc, c->data);
    *node = (bw__circuit *)((char *)c + node_at);
    atomic_init(&c->ext, (void *)*node);
    if (timer_of(parent) && timer_new(c) != BW_OK) {
        timer_free(c);
        extra_free(c);
        free(c);
        return BW_ENOMEM;
    }
    *out = c;
    return BW_OK;
}

void bw__breaker_destroy(bw_breaker *b)
{
    bw__share *sh = share_of(b);
    if (sh && sh->coord)
        bw__coord_free(sh->coord); /* no lane touches b after this */
    timer_free(b);
    extra_free(b);
    if (b->kind != BW__CIRCUIT) {
        bw__keyed *k = atomic_load_explicit(&b->ext, memory_order_acquire);
        if (k)
            bw__keyed_free(k);
    }
    free(b);
}

void bw_breaker_free(bw_breaker *b)
{
    if (b && b->kind == BW__PLAIN) /* a registry or a family frees its own */
        bw__breaker_destroy(b);
}

int bw__breaker_kind(const bw_breaker *b)
{
    return b->kind;
}

void bw__breaker_set_kind(bw_breaker *b, int kind)
{
    b->kind = (uint8_t)kind;
}

bw__circuit *bw__circuit_node(const bw_breaker *b)
{
    if (b->kind != BW__CIRCUIT)
        return NULL;
    return atomic_load_explicit(&((bw_breaker *)b)->ext, memory_order_relaxed);
}

_Atomic(void *) *bw__breaker_ext(bw_breaker *b)
{
    return &b->ext;
}

const bw__keyed_params *bw__breaker_keyed_params(const bw_breaker *b)
{
    return &b->keyed;
}

int bw__breaker_keyed_preset(const bw_breaker *b)
{
    return atomic_load(&((bw_breaker *)b)->kpreset);
}

void bw__breaker_set_keyed_preset(bw_breaker *b, int state)
{
    atomic_store(&b->kpreset, (signed char)state);
}

int64_t bw__breaker_stamp(const bw_breaker *b)
{
    return stamp_of(b);
}

int bw__circuit_class(bw_breaker *c, int64_t now, int64_t *wait_end)
{
    lazy_clock lc = {c, now, 1};
    bw__now t = {0, 0, lazy_read, &lc};
    bw_snapshot s;
    lock_all(c);
    bw__machine_snapshot(&c->m, &t, &s);
    unlock_all(c);
    *wait_end = INT64_MIN;
    switch (s.state) {
    case BW_STATE_CLOSED:
        return s.failed_calls || s.slow_calls || s.consecutive_failures || s.failed_rounds ? BW__HISTORY : BW__QUIET;
    case BW_STATE_OPEN:
        *wait_end = atomic_load_explicit(&c->open_until, memory_order_relaxed);
        return BW__HISTORY;
    case BW_STATE_HALF_OPEN:
        return BW__HISTORY;
    default:
        return BW__HELD;
    }
}

const char *bw_breaker_key(const bw_breaker *b)
{
    const bw__circuit *n = b ? bw__circuit_node(b) : NULL;
    return n ? n->key : NULL;
}

const char *bw_breaker_name(const bw_breaker *b)
{
    return b ? b->name : NULL;
}

size_t bw_breaker_bytes(const bw_breaker *b)
{
    return b ? b->bytes : 0;
}

/* ---- breakers bound to a store (src/store; docs/stores.md) ---- */

static BW_NOINLINE void fill_rejection(bw_breaker *b, bw_rejection *why, int state, int64_t retry_after);
static BW_NOINLINE int acquire_locked(bw_breaker *b, bw_permit *p, bw_rejection *why, int64_t stamp);
static BW_NOINLINE void settle_events(bw_breaker *b, bw_outcome outcome, int slow, int64_t span, int applied,
                                      int before, int after);
static inline int settle_locked(bw_breaker *b, uint64_t gen, bw_outcome outcome, int slow, bw__now *now, int *before,
                                int *after);
static inline uint64_t load_word(const bw_breaker *b);

/*
 * Stored mode keeps the circuit in the store: the word's state is WORD_STORED,
 * which no lock-free path accepts, so every acquire comes here and runs one
 * store update; its permits are PERMIT_STORED and settle with another. The local
 * machine serves the calls made while the store fails.
 *
 * Coordinated mode keeps the machine local and follows the store's shared
 * OPEN / HALF_OPEN as a view (share->ov_*): publish() makes the view the
 * breaker's effective state, so CLOSED and OPEN admissions stay lock-free with
 * no store round trip. An acquire that finds the view's wait over, or the view
 * HALF_OPEN, leases a probe from the store (PERMIT_LEASED); leased outcomes and
 * local trips are written by the coordinator's lane (coord.c).
 */

static int share_new(bw_breaker *b, const bw_config *cfg, bw_error *err)
{
    bw__mcfg sc = b->m.cfg;
    if (cfg->store_mode == BW_STORE_COORDINATED) {
        /* The shared machine only opens, probes and closes: a one-call window it never fills. */
        sc.window_kind = BW_WINDOW_COUNT;
        sc.window_size = 1;
        sc.min_calls = UINT32_MAX;
        sc.initial_state = BW_STATE_CLOSED;
    } else if (!bw__shared_fits(&sc)) {
        return bw__fail(err, BW_ERANGE, "window",
                        "in stored mode the window must fit in a store entry (%d bytes): count:N up to about 900 "
                        "calls, time:N up to 74 s",
                        BW_STORE_DATA_MAX);
    }
    bw_extra *x = extra_of(b);
    if (!x)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    bw__share *s = &x->share;
    memset(s, 0, sizeof *s);
    s->store = cfg->store;
    s->mode = cfg->store_mode;
    s->scfg = sc;
    s->ttl = cfg->store_ttl;
    s->retry = cfg->store_retry;
    s->retry_max = cfg->store_retry_max;
    s->retry_mult = cfg->store_retry_multiplier;
    s->retry_jitter = cfg->store_retry_jitter;
    s->rng = bw__hash_seed(b);
    s->ov_state = BW_STATE_CLOSED;
    atomic_init(&s->stored_state, b->m.state);
    x->has_share = 1;
    lock_all(b);
    publish(b);
    unlock_all(b);
    if (s->mode == BW_STORE_COORDINATED) {
        int rc = bw__coord_new(b, s, cfg, &s->coord);
        if (rc != BW_OK) {
            x->has_share = 0;
            return bw__fail(err, rc, "", "could not start the store coordinator");
        }
    }
    return BW_OK;
}

int64_t bw__breaker_now(const bw_breaker *b)
{
    return now_of(b);
}

/* The delay before a failing store is tried again: base * multiplier^k, capped, plus jitter. */
static int64_t retry_delay(bw__share *s)
{
    double d = bw__grow((double)s->retry, s->retry_mult, s->failures, s->retry_max > 0 ? (double)s->retry_max : 1e18);
    d += d * s->retry_jitter * bw__unit(bw__splitmix(&s->rng));
    return d >= 9e18 ? INT64_MAX / 2 : (int64_t)d;
}

/*
 * Whether the store may be tried now. A degraded breaker whose retry time came
 * lets one caller through and moves the retry time on, so that one call per
 * retry period, not every call in it, waits for a store that may hang.
 */
int bw__breaker_store_gate(bw_breaker *b)
{
    bw__share *s = share_of(b);
    if (BW_LIKELY(!atomic_load_explicit(&s->degraded, memory_order_relaxed)))
        return 1; /* the common case: no lock, no clock */
    int64_t now = now_of(b);
    bw__spin_lock(&b->lock);
    int open = !s->degraded || now >= s->retry_at;
    if (open && s->degraded)
        s->retry_at = bw__sat_add(now, retry_delay(s)); /* this caller retries; the others stay local */
    bw__spin_unlock(&b->lock);
    return open;
}

/* Adopt a coordinated view from a store operation. Call with every lock held. */
static void adopt(bw_breaker *b, bw__share *s, const bw__shared_op *op)
{
    int prev = s->ov_state;
    uint64_t prev_gen = s->ov_gen;
    if (op->after == BW_STATE_OPEN) {
        s->ov_state = BW_STATE_OPEN;
        s->ov_until = bw__sat_add(now_of(b), bw__time_left(op->open_until, op->now));
    } else if (op->after == BW_STATE_HALF_OPEN) {
        s->ov_state = BW_STATE_HALF_OPEN;
    } else {
        s->ov_state = BW_STATE_CLOSED;
        /* A shared recovery cuts this process's own OPEN short (interlock's rule). */
        if ((prev == BW_STATE_OPEN || prev == BW_STATE_HALF_OPEN) && op->out_gen > prev_gen &&
            (b->m.state == BW_STATE_OPEN || b->m.state == BW_STATE_HALF_OPEN))
            bw__machine_reset(&b->m);
    }
    s->ov_gen = op->out_gen;
    s->ov_wait = op->open_wait;
    s->ov_failed = op->failed_rounds;
}

static void add_store_event(bw_breaker *b, pending *p, int type, int status, const char *message)
{
    if (!(b->listener_mask & BW_EVENT_MASK(type)))
        return;
    bw_event e = event_of(b, (bw_event_type)type);
    e.status = status;
    e.message = message;
    p->ev[p->n++] = e;
}

/*
 * What a store operation tells about the store's health. Only a write that
 * the store applied recovers a degraded stored breaker and resets the retry
 * backoff: a store that reads but cannot write (a read-only file system, a full
 * disk) stays degraded, its retries growing further apart. A coordinated
 * breaker also recovers on an update that needed no write (a poll), since the
 * shared view it governs by was read afresh, but its backoff still resets only
 * on a write.
 */
void bw__breaker_store_result(bw_breaker *b, int rc, const bw__shared_op *op, const bw_error *err)
{
    bw__share *s = share_of(b);
    pending ev;
    ev.n = 0;
    if (rc == BW_OK && op->corrupt)
        add_store_event(b, &ev, BW_EVENT_STORE_CORRUPT, BW_OK, "the stored entry was malformed; it was replaced");
    if (rc == BW_OK && s->mode == BW_STORE_STORED && !atomic_load_explicit(&s->degraded, memory_order_relaxed)) {
        /* Stored, and nothing to recover: the word never changes, so no lock (and no write of an unchanged state). */
        if (atomic_load_explicit(&s->stored_state, memory_order_relaxed) != op->after)
            atomic_store_explicit(&s->stored_state, op->after, memory_order_relaxed);
        if (BW_UNLIKELY(op->before != op->after))
            add_change(b, &ev, op->before, op->after);
        deliver(b, &ev);
        return;
    }
    int64_t now = rc == BW_OK ? 0 : now_of(b);
    change c = change_begin(b);
    c.force = 1;
    if (rc == BW_OK) {
        if (s->degraded && (op->wrote || s->mode == BW_STORE_COORDINATED)) {
            add_store_event(b, &ev, BW_EVENT_STORE_RECOVERED, BW_OK, NULL);
            s->degraded = 0;
        }
        if (op->wrote)
            s->failures = 0;
        if (s->mode == BW_STORE_COORDINATED)
            adopt(b, s, op);
    } else {
        if (!s->degraded)
            add_store_event(b, &ev, BW_EVENT_STORE_DEGRADED, rc, err ? err->message : "");
        s->degraded = 1;
        s->retry_at = bw__sat_add(now, retry_delay(s));
        if (s->failures < UINT32_MAX)
            s->failures++;
    }
    int after = change_end(b, &c);
    if (rc == BW_OK && s->mode == BW_STORE_STORED) {
        atomic_store_explicit(&s->stored_state, op->after, memory_order_relaxed);
        add_change(b, &ev, op->before, op->after);
    }
    announce(b, &ev, c.before, after, 0);
    coord_trip(b, &c);
}

void bw__breaker_write_dropped(bw_breaker *b)
{
    pending ev;
    ev.n = 0;
    add_store_event(b, &ev, BW_EVENT_STORE_WRITE_DROPPED, BW_OK, NULL);
    deliver(b, &ev);
}

/* A local CLOSED -> OPEN trip of a coordinated breaker: tell the store (queued). */
static BW_NOINLINE void coord_trip_write(bw_breaker *b)
{
    bw__share *s = share_of(b);
    if (s && s->coord && bw__coord_enqueue(s->coord, BW__OP_TRIP, 0, 0, 0) != 0)
        bw__breaker_write_dropped(b);
}

/* One update of b's circuit in its store. */
static int store_op(bw_breaker *b, bw__share *s, bw__shared_op *op)
{
    op->cfg = &s->scfg;
    op->ttl = s->ttl;
    /* A degraded stored breaker's retry must write: only a write shows the store works again. */
    op->must_write = s->mode == BW_STORE_STORED && atomic_load_explicit(&s->degraded, memory_order_relaxed);
    bw_error err;
    err.message[0] = '\0';
    int rc = bw__store_update(s->store, b->name, bw__shared_apply, op, &err);
    bw__breaker_store_result(b, rc, op, &err);
    return rc;
}

/*
 * A stored admission from a lock-free read of the entry (stores that have one:
 * shm:, sqlite:), when that alone decides it: CLOSED and not due for renewal.
 */
static int read_admits(bw_breaker *b, bw__share *s, bw__shared_op *op)
{
    bw_store_entry e;
    int found = 0;
    int64_t now;
    if (bw__store_try_read(s->store, b->name, &now, &e, &found) != BW_OK)
        return 0;
    return bw__shared_admit_read(op, now, found ? &e : NULL);
}

static BW_NOINLINE int shared_acquire(bw_breaker *b, bw_permit *p, bw_rejection *why, int64_t stamp, unsigned st)
{
    bw__share *s = share_of(b);
    if (s->mode == BW_STORE_COORDINATED) {
        /* Only a shared OPEN whose wait ended, or a shared HALF_OPEN, needs the store. */
        bw__spin_lock(&b->lock);
        int follow = following(b);
        bw__spin_unlock(&b->lock);
        if (!follow)
            return acquire_locked(b, p, why, stamp);
    } else if (st != WORD_STORED) {
        return acquire_locked(b, p, why, stamp);
    }
    if (!bw__breaker_store_gate(b))
        return acquire_locked(b, p, why, stamp); /* degraded: local rules */
    bw__shared_op op;
    memset(&op, 0, sizeof op);
    op.op = BW__OP_ACQUIRE;
    op.cfg = &s->scfg;
    op.ttl = s->ttl;
    /* A degraded breaker due for a retry asks by an update: only a write can show the store is back. */
    if (s->mode == BW_STORE_STORED && !atomic_load_explicit(&s->degraded, memory_order_relaxed) &&
        read_admits(b, s, &op)) {
        bw__breaker_store_result(b, BW_OK, &op, NULL);
    } else if (store_op(b, s, &op) != BW_OK) {
        return acquire_locked(b, p, why, stamp);
    }
    int leased = s->mode == BW_STORE_COORDINATED;
    if (op.ok && leased && op.after != BW_STATE_HALF_OPEN)
        return acquire_locked(b, p, why, stamp); /* the shared circuit closed meanwhile: local rules */
    if (!op.ok) {
        int64_t ra = BW_NO_TIME;
        if (op.after == BW_STATE_OPEN) {
            ra = bw__time_left(op.open_until, op.now);
            ra = ra > 0 ? ra : 1;
        }
        p->magic_ = PERMIT_SETTLED;
        fill_rejection(b, why, op.after, ra);
        return BW_REJECTED;
    }
    p->breaker_ = b;
    p->generation_ = op.out_gen;
    p->start_ns_ = stamp;
    p->magic_ = leased ? PERMIT_LEASED : PERMIT_STORED;
    return BW_OK;
}

static BW_NOINLINE int shared_settle(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out)
{
    bw__share *s = share_of(b);
    int leased = p->magic_ == PERMIT_LEASED;
    p->magic_ = PERMIT_SETTLED;
    int64_t span = stamp_of(b) - p->start_ns_;
    int slow = b->slow_stamp > 0 && (timed_out || span >= b->slow_stamp);
    if (outcome == BW_FAILURE)
        atomic_store_explicit(&b->last_failure, ((uint64_t)(uint32_t)failure_code << 1) | 1, memory_order_relaxed);
    int applied = -1, stored = 0, before = 0, after = 0;
    int st = atomic_load_explicit(&s->stored_state, memory_order_relaxed);
    if (!leased && ((b->unrecorded >> outcome) & 1) &&
        (st == BW_STATE_CLOSED || st == BW_STATE_METRICS_ONLY || st == BW_STATE_DISABLED)) {
        applied = 0; /* records nothing there: no store round trip (HALF_OPEN still hands its slot back) */
        stored = 1;
    } else if (leased) {
        if (bw__coord_enqueue(s->coord, BW__OP_RECORD, p->generation_, outcome, slow) != 0)
            bw__breaker_write_dropped(b);
        applied = 1;
        stored = 1;
    } else if (bw__breaker_store_gate(b)) {
        bw__shared_op op;
        memset(&op, 0, sizeof op);
        op.op = BW__OP_RECORD;
        op.gen = p->generation_;
        op.outcome = outcome;
        op.slow = slow;
        if (store_op(b, s, &op) == BW_OK) {
            applied = op.ok;
            stored = 1;
        }
    }
    if (!stored) { /* the store is out: the local circuit, which serves meanwhile, learns the outcome */
        lazy_clock lc = {b, 0, 0};
        bw__now now = {0, 0, lazy_read, &lc};
        applied = settle_locked(b, load_word(b) >> 3, outcome, slow, &now, &before, &after);
    }
    if (b->listener_mask || before != after)
        settle_events(b, outcome, slow, span, applied, before, after);
    return BW_OK;
}

static int shared_snapshot(bw_breaker *b, bw_snapshot *out)
{
    bw__share *s = share_of(b);
    if (atomic_load_explicit(&s->degraded, memory_order_relaxed))
        return BW_ESTATE; /* the local circuit serves: report it (a read cannot show the store is back) */
    bw__shared_op op;
    memset(&op, 0, sizeof op);
    op.op = BW__OP_READ;
    op.snap = out;
    op.cfg = &s->scfg;
    op.ttl = s->ttl;
    /* A read, never a write: through the store's lock-free read where it has one. */
    bw_store_entry e, unused;
    int found = 0;
    int64_t now;
    if (bw__store_try_read(s->store, b->name, &now, &e, &found) == BW_OK) {
        bw__shared_apply(&op, now, found ? &e : NULL, &unused);
        out->shared = 1;
        return BW_OK;
    }
    int rc = store_op(b, s, &op);
    out->shared = rc == BW_OK;
    return rc;
}

static void shared_verb(bw_breaker *b, int target)
{
    bw__share *s = share_of(b);
    bw__shared_op op;
    memset(&op, 0, sizeof op);
    op.op = BW__OP_VERB;
    op.state = target;
    store_op(b, s, &op);
}

/* ---- admission ---- */

static inline uint64_t load_word(const bw_breaker *b)
{
    return atomic_load_explicit(&((bw_breaker *)b)->word, memory_order_acquire);
}

static BW_NOINLINE void fill_rejection(bw_breaker *b, bw_rejection *why, int state, int64_t retry_after)
{
    uint64_t lf = atomic_load_explicit(&b->last_failure, memory_order_relaxed);
    if (why) {
        why->state = (bw_state)state;
        why->retry_after_ns = retry_after;
        why->has_last_failure = (int)(lf & 1);
        why->last_failure = (int)(uint32_t)(lf >> 1);
    }
    if (b->listener_mask & BW_EVENT_MASK(BW_EVENT_REJECTED)) {
        bw_event e = event_of(b, BW_EVENT_REJECTED);
        e.from = e.to = (bw_state)state;
        e.retry_after_ns = retry_after;
        b->listener(&e, b->listener_user);
    }
}

static BW_NOINLINE int acquire_locked(bw_breaker *b, bw_permit *p, bw_rejection *why, int64_t stamp)
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
    announce(b, &ev, c.before, after, 0);
    coord_trip(b, &c);
    if (!ok) {
        p->magic_ = PERMIT_SETTLED;
        fill_rejection(b, why, after, retry_after);
        return BW_REJECTED;
    }
    p->breaker_ = b;
    p->generation_ = gen;
    p->start_ns_ = stamp;
    p->magic_ = PERMIT_LIVE;
    return BW_OK;
}

static BW_NOINLINE int shared_acquire(bw_breaker *b, bw_permit *p, bw_rejection *why, int64_t stamp, unsigned st);

int bw_acquire(bw_breaker *b, bw_permit *p, bw_rejection *why)
{
    if (BW_UNLIKELY(!b || !p))
        return BW_EINVAL;
    uint64_t w = load_word(b);
    unsigned st = (unsigned)(w & 7);
    if (BW_LIKELY(st == BW_STATE_CLOSED || st == BW_STATE_DISABLED || st == BW_STATE_METRICS_ONLY)) {
        p->breaker_ = b;
        p->generation_ = w >> 3;
        p->start_ns_ = b->timed ? stamp_of(b) : 0;
        p->magic_ = PERMIT_LIVE;
        return BW_OK;
    }
    if (st == BW_STATE_FORCED_OPEN) {
        p->magic_ = PERMIT_SETTLED;
        fill_rejection(b, why, BW_STATE_FORCED_OPEN, BW_NO_TIME);
        return BW_REJECTED;
    }
    int64_t stamp = stamp_of(b);
    if (st == BW_STATE_OPEN) {
        int64_t until = atomic_load_explicit(&b->open_until, memory_order_relaxed);
        if (stamp < until) {
            int64_t retry_after = span_ns(b, until - stamp);
            p->magic_ = PERMIT_SETTLED;
            fill_rejection(b, why, BW_STATE_OPEN, retry_after > 0 ? retry_after : 1);
            return BW_REJECTED;
        }
    }
    if (BW_UNLIKELY(b->extra != NULL) && share_of(b))
        return shared_acquire(b, p, why, stamp, st);
    return acquire_locked(b, p, why, stamp);
}

/* ---- settlement ---- */

/* Record through the machine with every lock held. */
static inline int settle_locked(bw_breaker *b, uint64_t gen, bw_outcome outcome, int slow, bw__now *now, int *before,
                                int *after)
{
    change c = change_begin(b);
    uint32_t stripe = b->stripes ? (uint32_t)(my_stripe(b) - b->stripes) : 0;
    int applied = bw__machine_record_in(&b->m, stripe, gen, outcome, slow, now);
    *before = c.before;
    *after = change_end(b, &c);
    coord_trip(b, &c);
    return applied;
}

/* CLOSED or METRICS_ONLY on a striped window: record into this thread's stripe. */
static BW_NOINLINE int settle_striped(bw_breaker *b, uint64_t gen, bw_outcome outcome, int slow, bw__now *now,
                                      int *before, int *after)
{
    int failed = outcome == BW_FAILURE || outcome == BW_UNREACHABLE;
    int64_t t = bw__now_get(now);
    bw_stripe *s = my_stripe(b);
    bw__spin_lock(&s->lock);
    uint64_t w = load_word(b); /* exact: publishing needs this lock too */
    unsigned st = (unsigned)(w & 7);
    if ((w >> 3) != gen) {
        bw__spin_unlock(&s->lock);
        return -1;
    }
    if (st != BW_STATE_CLOSED && st != BW_STATE_METRICS_ONLY) {
        bw__spin_unlock(&s->lock);
        return settle_locked(b, gen, outcome, slow, now, before, after);
    }
    bw__window_record(&s->win, failed, slow, t);
    bw__spin_unlock(&s->lock);
    if (st == BW_STATE_METRICS_ONLY)
        return 1;
    int64_t sec = bw__second_of(t);
    if (!failed && !slow && atomic_load_explicit(&b->eval_sec, memory_order_relaxed) == sec)
        return 1; /* cannot trip: see the design notes */
    change c = change_begin(b);
    if (b->m.gen == gen && bw__machine_evaluate(&b->m, now) == 0)
        atomic_store_explicit(&b->eval_sec, sec, memory_order_relaxed); /* passed in this second */
    *before = c.before;
    *after = change_end(b, &c);
    coord_trip(b, &c);
    return 1;
}

/* The events of a settle (CALL, then any state change) and the timer's new deadline. */
static BW_NOINLINE void settle_events(bw_breaker *b, bw_outcome outcome, int slow, int64_t span, int applied,
                                      int before, int after)
{
    pending ev;
    ev.n = 0;
    if (b->listener_mask & BW_EVENT_MASK(BW_EVENT_CALL)) {
        bw_event e = event_of(b, BW_EVENT_CALL);
        e.outcome = outcome;
        e.slow = slow;
        e.stale = applied < 0;
        e.duration_ns = span_ns(b, span);
        ev.ev[ev.n++] = e;
    }
    announce(b, &ev, before, after, 0);
}

static BW_NOINLINE int settle_other(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out);
static BW_NOINLINE int shared_settle(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out);
static BW_NOINLINE int settle_timed_out(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code);

void bw__permit_pin(bw_permit *p)
{
    p->magic_ = PERMIT_PINNED;
}

/* Every settle: `timed_out` marks the call slow whenever slow-call detection is on. */
static inline int settle(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out)
{
    if (BW_UNLIKELY(!b || !p || (unsigned)outcome > BW_UNREACHABLE))
        return BW_EINVAL;
    if (BW_UNLIKELY(p->magic_ != PERMIT_LIVE || p->breaker_ != b))
        return settle_other(b, p, outcome, failure_code, timed_out);
    p->magic_ = PERMIT_SETTLED;

    lazy_clock lc = {b, 0, 0};
    bw__now now = {0, 0, lazy_read, &lc};
    int slow = 0;
    int64_t span = 0;
    if (b->timed) {
        lc.stamp = stamp_of(b); /* reused if the machine needs the time */
        lc.have = 1;
        span = lc.stamp - p->start_ns_;
        slow = b->slow_stamp > 0 && (timed_out || span >= b->slow_stamp);
    }
    if (outcome == BW_FAILURE)
        atomic_store_explicit(&b->last_failure, ((uint64_t)(uint32_t)failure_code << 1) | 1, memory_order_relaxed);

    int applied = -1;
    int before = 0, after = 0;
    uint64_t w = load_word(b);
    if ((w >> 3) == p->generation_) {
        unsigned st = (unsigned)(w & 7);
        if (st == BW_STATE_DISABLED || (((b->unrecorded >> outcome) & 1) && st != BW_STATE_HALF_OPEN))
            applied = 0; /* nothing to record: no lock needed */
        else if (b->stripes && (st == BW_STATE_CLOSED || st == BW_STATE_METRICS_ONLY))
            applied = settle_striped(b, p->generation_, outcome, slow, &now, &before, &after);
        else
            applied = settle_locked(b, p->generation_, outcome, slow, &now, &before, &after);
    }
    if (BW_UNLIKELY(b->listener_mask || before != after))
        settle_events(b, outcome, slow, span, applied, before, after);
    return BW_OK;
}

/*
 * A permit of a keyed circuit settled through its parent, or a pinned permit
 * (bw_keyed_acquire): settle it on its circuit, then drop the pin. The unpin is
 * the last touch of the circuit: after it the family may free it.
 */
static BW_NOINLINE int settle_other(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code, int timed_out)
{
    if (p->magic_ == PERMIT_STORED || p->magic_ == PERMIT_LEASED)
        return p->breaker_ == b ? shared_settle(b, p, outcome, failure_code, timed_out) : BW_EPERMIT;
    if (p->magic_ != PERMIT_LIVE && p->magic_ != PERMIT_PINNED)
        return BW_EPERMIT;
    bw_breaker *c = p->breaker_;
    if (!c || (c != b && !(c->kind == BW__CIRCUIT && bw__keyed_parent(c) == b)))
        return BW_EPERMIT;
    int pinned = p->magic_ == PERMIT_PINNED;
    p->magic_ = PERMIT_LIVE;
    int rc = timed_out ? settle_timed_out(c, p, outcome, failure_code) : bw_settle_ex(c, p, outcome, failure_code);
    if (pinned)
        bw__circuit_unpin(c, stamp_of(c));
    return rc;
}

BW_FLATTEN int bw_settle_ex(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code)
{
    return settle(b, p, outcome, failure_code, 0);
}

/*
 * Two copies of settle() only (bw_settle_ex and the rare timed-out one): with
 * more, link-time inlining stopped inlining the machine's record into them,
 * which cost 1.4 ns a call.
 */
static BW_NOINLINE int settle_timed_out(bw_breaker *b, bw_permit *p, bw_outcome outcome, int failure_code)
{
    return settle(b, p, outcome, failure_code, 1);
}

int bw_settle(bw_breaker *b, bw_permit *p, bw_outcome outcome)
{
    return bw_settle_ex(b, p, outcome, 0);
}

int bw_settle_timeout(bw_breaker *b, bw_permit *p, int failure_code)
{
    return settle_timed_out(b, p, BW_FAILURE, failure_code);
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

/* ---- inspection ---- */

int bw_breaker_state(const bw_breaker *b)
{
    if (!b)
        return BW_EINVAL;
    unsigned st = (unsigned)(load_word(b) & 7);
    if (BW_UNLIKELY(st == WORD_STORED))
        return atomic_load_explicit(&share_of(b)->stored_state, memory_order_relaxed);
    return (int)st;
}

static int shared_snapshot(bw_breaker *b, bw_snapshot *out);

int bw_breaker_snapshot(bw_breaker *b, bw_snapshot *out)
{
    if (!b || !out)
        return BW_EINVAL;
    bw__share *sh = share_of(b);
    if (BW_UNLIKELY(sh && sh->mode == BW_STORE_STORED) && shared_snapshot(b, out) == BW_OK)
        return BW_OK;
    lazy_clock lc = {b, 0, 0};
    bw__now now = {0, 0, lazy_read, &lc};
    lock_all(b);
    bw__machine_snapshot(&b->m, &now, out);
    if (b->extra && following(b)) { /* the fleet's circuit governs: report it */
        const bw__share *s = share_of(b);
        out->state = (bw_state)s->ov_state;
        out->shared = 1;
        out->generation = s->ov_gen;
        out->open_wait_ns = s->ov_wait;
        out->failed_rounds = s->ov_failed;
        out->retry_after_ns = s->ov_state == BW_STATE_OPEN ? bw__time_left(s->ov_until, bw__now_get(&now)) : BW_NO_TIME;
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

static void shared_verb(bw_breaker *b, int target);

/* An operator verb: the machine, then (stored mode) the fleet's circuit; events unless `quiet`. */
static int apply_verb(bw_breaker *b, int target, int quiet)
{
    pending ev;
    ev.n = 0;
    change c = change_begin(b);
    bw__machine_apply(&b->m, target);
    if (target == BW_STATE_CLOSED)
        atomic_store_explicit(&b->last_failure, 0, memory_order_relaxed);
    int after = change_end(b, &c);
    if (!quiet)
        announce(b, &ev, c.before, after, target == BW_STATE_CLOSED);
    bw__share *sh = share_of(b);
    if (sh && sh->mode == BW_STORE_STORED)
        shared_verb(b, target); /* a stored circuit lives in the store: the state goes there */
    return BW_OK;
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
