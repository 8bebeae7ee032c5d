/*
 * breaker_new.c — a breaker's construction and its end: the block's layout
 * (engine.h: `data`), the stripes, the stamp mode, the fast path its machine
 * allows, the listener mask, the attachments; destruction; the accessors.
 * The hot paths are breaker.c's; nothing here runs on them.
 *
 * Design notes: construction decides once what the hot paths then only read
 * (`fast`, `quick_base`, `reject_base`, `stamp_mode`, `slow_stamp`), so that
 * acquire and settle test fields instead of the configuration.
 *
 * Locking: a breaker under construction is nobody else's yet: no engine lock
 * is taken. `refresh_mu` serialises bw__breaker_refresh (below); destruction
 * stops the store and the timer before the block goes (engine.h's Locking).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/duration.h"
#include "base/error.h"
#include "base/name.h"
#include "core/engine.h"
#include "time/clock.h"

#define MAX_STRIPES 8

static inline uint64_t word_of(const bw__machine *m)
{
    return (m->gen << 3) | m->state;
}

/* ---- construction ---- */

/*
 * Stripes for a window the machine lets split (BW__FAST_TIME, machine.h): one
 * per CPU, as a power of two, at most MAX_STRIPES (one on one CPU: its tally
 * lock still spares the breaker's lock); 0 (none) otherwise.
 */
static uint32_t stripes_for(const bw__mcfg *mc)
{
    if (bw__machine_fast_path(mc) != BW__FAST_TIME)
        return 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t n = 1;
    while (n < MAX_STRIPES && (long)n < cpus)
        n *= 2;
    return n;
}

bw_extra *bw__extra_of(bw_breaker *b)
{
    if (!b->extra) {
        b->extra = calloc(1, sizeof *b->extra);
        if (b->extra)
            b->bytes += (uint32_t)sizeof *b->extra;
    }
    return b->extra;
}

/*
 * The stamps a breaker on `clock` reads. The coarse clock serves the system
 * clock's breakers whose slow-call threshold is 100 ms or more (or off) and that
 * report no CALL durations: to within a hundredth of the threshold, timing a
 * call then costs two loads instead of two TSC reads. (The ticker it needs
 * starts here; if it cannot, the coarse clock reads the system clock.)
 */
static int stamp_mode_for(bw_clock *clock, int64_t slow_ns, int call_events)
{
    if (bw__clock_kind(clock) != BW__CLOCK_SYSTEM)
        return STAMP_CLOCK;
    if (call_events || (slow_ns > 0 && slow_ns < 100 * BW_NS_PER_MS))
        return STAMP_SYS;
    bw__tick_need(bw__tick_period_for(slow_ns > 0 ? slow_ns : BW__MAX_DURATION));
    return STAMP_TICK;
}

/* The histogram's bounds in nanoseconds, and in TSC ticks (made once, for STAMP_SYS). */
const int64_t bw__bounds_ns[BW_DURATION_BUCKETS - 1] = BW_DURATION_BOUNDS_NS;
int64_t bw__bounds_sys[BW_DURATION_BUCKETS - 1];
static pthread_once_t bounds_once = PTHREAD_ONCE_INIT;

static void make_bounds_sys(void)
{
    for (int i = 0; i < BW_DURATION_BUCKETS - 1; i++)
        bw__bounds_sys[i] = bw__sys_ns_to_stamp(bw__bounds_ns[i], 0);
}

/* quick and reject_now for what the listeners want now (`mask`). */
static void set_listener_mask(bw_breaker *b, unsigned mask)
{
    atomic_store_explicit(&b->listener_mask, mask, memory_order_relaxed);
    atomic_store_explicit(&b->quick, (uint8_t)(b->quick_base && !mask), memory_order_relaxed);
    atomic_store_explicit(&b->reject_now, (uint8_t)(b->reject_base && !mask), memory_order_relaxed);
}

/*
 * Serialises reading a breaker's fanout chain with storing what it wants, so
 * that two refreshes racing cannot store an older reading last. Never held
 * while taking another lock (a keyed map's lock may be held around it).
 */
static pthread_mutex_t refresh_mu = PTHREAD_MUTEX_INITIALIZER;

void bw__breaker_refresh(bw_breaker *b)
{
    pthread_mutex_lock(&refresh_mu);
    set_listener_mask(b, bw__fanout_mask(fan_of(b)));
    pthread_mutex_unlock(&refresh_mu);
    bw__ext *x = atomic_load_explicit(&b->ext, memory_order_acquire);
    if (x && x->listeners_changed)
        x->listeners_changed(x);
}

/* Undo a construction that failed after the breaker's block was made. */
static void unmake(bw_breaker *b)
{
    bw__timer_detach(b);
    if (b->own_fan)
        bw__fanout_free(atomic_load_explicit(&b->fan, memory_order_relaxed));
    free(b->extra);
    free(b);
}

/* Offsets of the parts of a breaker's block (engine.h: `data`). */
typedef struct layout {
    size_t window, name, key, cfg, tail, stripes, cells, cold, size;
} layout;

static size_t align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

static layout layout_of(size_t wbytes, uint32_t nstripes, size_t nlen, size_t klen, int copy_cfg, size_t tail, int cold)
{
    layout L;
    size_t at = offsetof(bw_breaker, data); /* 64-aligned */
    L.tail = at;                            /* the owner's first: its lookups read it, at a line's start */
    at += align_up(tail, 8);
    L.window = at;
    at += nstripes ? 0 : wbytes; /* the machine's own window, unless striped */
    L.name = at;
    at += nlen + 1;
    L.key = at;
    at += klen ? klen + 1 : 0;
    L.cfg = at = align_up(at, 8);
    at += copy_cfg ? sizeof(bw_config) : 0;
    L.stripes = at = align_up(at, 64);
    at += nstripes ? nstripes * (sizeof(bw_stripe) + align_up(wbytes, 64)) : 0;
    L.cells = at; /* 64-aligned: stripes end on a line */
    at += cold ? sizeof(bw_cells) : 0;
    L.cold = at;
    at += cold ? sizeof(bw_cold) : 0;
    L.size = at;
    return L;
}

int bw__breaker_make(const char *name, const bw_config *cfg, int borrow, const bw__owner *owner, size_t tail,
                     bw_breaker **out, void **tail_out, bw_error *err)
{
    int rc = borrow ? BW_OK : bw_config_validate(cfg, err); /* a borrowed one was validated by its owner */
    if (rc != BW_OK)
        return rc;
    bw__mcfg mc = bw__config_mcfg(cfg);
    const char *key = owner ? owner->key : NULL;
    /* A stored circuit's window lives in its store: the local one only serves while the store is out. */
    int striped = !(owner && owner->parent) && !(cfg->store && cfg->store_mode == BW_STORE_STORED);
    uint32_t nstripes = striped ? stripes_for(&mc) : 0;
    size_t wbytes = bw__machine_window_bytes(&mc);
    layout L = layout_of(wbytes, nstripes, strlen(name), key ? strlen(key) : 0, !borrow, tail, cfg->counters);
    void *mem = NULL;
    if (posix_memalign(&mem, 64, L.size) != 0)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    bw_breaker *b = mem;
    memset(b, 0, offsetof(bw_breaker, data));
    char *base = mem;
    b->bytes = (uint32_t)L.size;
    b->name = memcpy(base + L.name, name, strlen(name) + 1);
    b->key = key ? memcpy(base + L.key, key, strlen(key) + 1) : NULL;
    b->cfg = borrow ? cfg : memcpy(base + L.cfg, cfg, sizeof *cfg);
    if (owner) {
        b->owned = 1;
        b->owner = *owner;
        b->owner.key = b->key;
        b->parent = owner->parent;
    }
    if (owner && !owner->node && tail)
        b->owner.node = base + L.tail;
    if (tail_out)
        *tail_out = tail ? base + L.tail : NULL;
    b->clock = cfg->clock ? cfg->clock : bw_clock_system();
    /* Listeners: a keyed circuit's are its breaker's; others have their own when the config names one, on
       top of their owner's (a registry's). */
    bw__fanout *up = owner && !owner->parent ? owner->fan : NULL;
    atomic_init(&b->fan, up);
    if (!(owner && owner->parent) && cfg->listener) {
        bw__fanout *f = bw__fanout_new(up);
        bw_listener li = {cfg->listener_mask, cfg->listener, cfg->listener_user, NULL};
        if (!f || bw__fanout_add(f, &li, NULL) != BW_OK) {
            bw__fanout_free(f);
            free(b);
            return bw__fail(err, BW_ENOMEM, "", "out of memory");
        }
        atomic_init(&b->fan, f);
        b->own_fan = 1;
    }
    unsigned mask = bw__fanout_mask(fan_of(b));
    b->classifier = cfg->classifier;
    b->classifier_user = cfg->classifier_user;
    int call_events = (mask & BW_EVENT_MASK(BW_EVENT_CALL)) != 0;
    b->counting = cfg->counters != 0;
    b->cold = b->counting ? (bw_cold *)(base + L.cold) : NULL;
    b->cells = b->counting ? (bw_cells *)(base + L.cells) : NULL;
    if (b->cold) {
        memset(b->cells, 0, sizeof *b->cells);
        memset(b->cold, 0, sizeof *b->cold);
        atomic_init(&b->cold->failed_at, INT64_MIN);
    }
    b->timed = cfg->slow_ns > 0 || call_events || b->counting;
    b->stamp_mode = stamp_mode_for(b->clock, cfg->slow_ns, call_events);
    if (b->stamp_mode == STAMP_SYS)
        pthread_once(&bounds_once, make_bounds_sys);
    const int64_t *bounds = b->stamp_mode == STAMP_SYS ? bw__bounds_sys : bw__bounds_ns;
    if (b->cells)
        b->cells->bounds = bounds;
    b->slow_stamp = cfg->slow_ns > 0 ? ns_stamp(b, cfg->slow_ns, 0) : INT64_MAX;
    if (b->slow_stamp < 1)
        b->slow_stamp = 1;
    /* The machine's fast CLOSED record; a time window that is not striped (a keyed circuit's, a stored one's)
       takes the general record. */
    int fast = bw__machine_fast_path(&mc);
    b->fast = (uint8_t)(fast != BW__FAST_TIME || nstripes ? fast : BW__FAST_NONE);
    /* The quick settle: a fast record, nothing to report, and stamps that need no call (a tick or the TSC;
       a time window's, in nanoseconds: the tick). */
    b->quick_base = b->fast != BW__FAST_NONE &&
                    (b->fast == BW__FAST_TIME ? b->stamp_mode == STAMP_TICK
                                              : !b->timed || b->stamp_mode == STAMP_TICK ||
                                                    (b->stamp_mode == STAMP_SYS && bw__tsc_state.use_tsc));
    b->reject_base = b->stamp_mode == STAMP_TICK;
    set_listener_mask(b, mask);
    b->unrecorded = (uint8_t)(1u << BW_IGNORED | (mc.ignore_unreachable ? 1u << BW_UNREACHABLE : 0));
    atomic_init(&b->lock.v, 0);
    atomic_init(&b->last_failure, 0);
    atomic_init(&b->eval_bucket, INT64_MIN);
    atomic_init(&b->ext, NULL);
    b->released_at = INT64_MIN;
    bw__machine_init(&b->m, &mc, nstripes ? NULL : base + L.window);
    atomic_init(&b->word, word_of(&b->m));
    atomic_init(&b->open_until, 0);
    if (nstripes) {
        b->nstripes = nstripes;
        b->stripes = (bw_stripe *)(base + L.stripes);
        char *buckets = (char *)(b->stripes + nstripes);
        size_t stripe_mem = align_up(wbytes, 64);
        for (uint32_t i = 0; i < nstripes; i++) {
            memset(&b->stripes[i].cells, 0, sizeof b->stripes[i].cells);
            b->stripes[i].cells.bounds = bounds;
            atomic_init(&b->stripes[i].lock.v, 0);
            bw__window_init(&b->stripes[i].win, mc.window_kind, mc.window_size, buckets + i * stripe_mem);
        }
        bw__machine_use_stripes(&b->m, &b->stripes[0].win, sizeof(bw_stripe), nstripes);
    }
    if (cfg->auto_transition && (rc = bw__timer_attach(b)) != BW_OK) {
        unmake(b);
        return bw__fail(err, rc, "", "could not create the auto-transition timer");
    }
    if (cfg->store && (rc = bw__store_attach(b, cfg, err)) != BW_OK) {
        unmake(b);
        return rc;
    }
    *out = b;
    return BW_OK;
}

int bw_breaker_new(const char *name, const bw_config *cfg, bw_breaker **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    int rc = bw__check_name(name, "name", err);
    if (rc != BW_OK)
        return rc;
    if (cfg)
        return bw__breaker_make(name, cfg, 0, NULL, 0, out, NULL, err);
    bw_config *d = bw_config_new();
    if (!d)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    rc = bw__breaker_make(name, d, 0, NULL, 0, out, NULL, err);
    bw_config_free(d);
    return rc;
}

void bw__breaker_destroy(bw_breaker *b)
{
    /* Each background that may reach b stops before the other's part goes: a lane result kicks the timer, a
       timed trip queues for the lane. A circuit does not wait for its writes: eviction must not stall a lookup. */
    bw__store_stop(b, !b->owner.parent);
    bw__timer_detach(b);
    bw__store_release(b);
    free(b->extra);
    bw__ext *x = atomic_load_explicit(&b->ext, memory_order_acquire);
    if (x)
        x->free(x); /* before b: it may hold breakers made from b's configuration */
    if (b->own_fan)
        bw__fanout_free(atomic_load_explicit(&b->fan, memory_order_relaxed));
    free(b);
}

void bw_breaker_free(bw_breaker *b)
{
    if (b && !b->owned) /* a registry or a family frees its own */
        bw__breaker_destroy(b);
}

const bw_config *bw__breaker_config(const bw_breaker *b)
{
    return b->cfg;
}

const bw__owner *bw__breaker_owner(const bw_breaker *b)
{
    return b->owned ? &b->owner : NULL;
}

bw__ext *bw__breaker_ext(const bw_breaker *b)
{
    return atomic_load_explicit(&((bw_breaker *)b)->ext, memory_order_acquire);
}

bw__ext *bw__breaker_ext_install(bw_breaker *b, bw__ext *e)
{
    bw__ext *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(&b->ext, &expected, e, memory_order_acq_rel, memory_order_acquire))
        return e;
    return expected;
}

int64_t bw__breaker_stamp(const bw_breaker *b)
{
    return stamp_of(b);
}

int64_t bw__breaker_span_stamp(const bw_breaker *b, int64_t ns)
{
    return ns_stamp(b, ns, 0);
}

const char *bw_breaker_key(const bw_breaker *b)
{
    return b ? b->key : NULL;
}

const char *bw_breaker_name(const bw_breaker *b)
{
    return b ? b->name : NULL;
}

size_t bw_breaker_bytes(const bw_breaker *b)
{
    return b ? b->bytes : 0;
}
