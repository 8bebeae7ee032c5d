/*
 * clock.c — the system, manual and custom clocks (breakwater/clock.h, clock.h).
 *
 * Locking: a clock's `mu` guards its watcher list and its attachment slot.
 * Advancing a manual clock stores the new time, then runs every watcher's
 * fire() with `mu` held, so that bw__clock_unwatch (which takes `mu`) cannot
 * return while a fire is running on another thread. A fire (a scheduler's
 * manual run, sched.c) takes the scheduler's mutex and then an owner's lock (a
 * breaker's, a lane's), so the order is clock mu, then those; nothing takes the
 * clock's mu while holding them. Taken briefly, with nothing else under it, by
 * watch and unwatch (a scheduler made or freed: with share/lane.c's `lanes_mu`
 * or a registry's mutex held above it) and by the attachment's lookup.
 */
#define _POSIX_C_SOURCE 200809L
#include "time/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/systime.h"

struct bw_clock {
    int kind;
    uint64_t serial;
    _Atomic int64_t now; /* manual */
    pthread_mutex_t mu;  /* the watcher list and the attachment */
    bw__watch *watchers;
    bw_clock_now_cb fn; /* custom */
    void *user;
    void *att; /* the attachment (bw__clock_attachment) */
    void (*att_drop)(void *att);
};

static bw_clock system_clock = {.kind = BW__CLOCK_SYSTEM, .mu = PTHREAD_MUTEX_INITIALIZER};

bw_clock *bw_clock_system(void)
{
    bw__systime_init();
    return &system_clock;
}

static int clock_new(int kind, bw_clock **out)
{
    static atomic_uint_fast64_t serials;
    bw_clock *c = calloc(1, sizeof *c);
    if (!c)
        return BW_ENOMEM;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return BW_ESYS;
    }
    c->kind = kind;
    c->serial = atomic_fetch_add(&serials, 1) + 1;
    *out = c;
    return BW_OK;
}

int bw_clock_manual_new(int64_t start_ns, bw_clock **out)
{
    if (!out)
        return BW_EINVAL;
    int rc = clock_new(BW__CLOCK_MANUAL, out);
    if (rc == BW_OK)
        atomic_init(&(*out)->now, start_ns);
    return rc;
}

int bw_clock_custom_new(bw_clock_now_cb fn, void *user, bw_clock **out)
{
    if (!fn || !out)
        return BW_EINVAL;
    int rc = clock_new(BW__CLOCK_CUSTOM, out);
    if (rc == BW_OK) {
        (*out)->fn = fn;
        (*out)->user = user;
    }
    return rc;
}

/* Move a manual clock to `now` (not earlier than it is) and run its watchers. */
static int manual_move(bw_clock *c, int64_t now, int relative)
{
    pthread_mutex_lock(&c->mu);
    int64_t t = atomic_load(&c->now);
    if (relative)
        now = t > INT64_MAX - now ? INT64_MAX : t + now;
    if (now < t) {
        pthread_mutex_unlock(&c->mu);
        return BW_EINVAL;
    }
    atomic_store(&c->now, now);
    for (bw__watch *w = c->watchers; w; w = w->next)
        w->fire(w->ctx, now);
    pthread_mutex_unlock(&c->mu);
    return BW_OK;
}

int bw_clock_manual_set(bw_clock *c, int64_t now_ns)
{
    if (!c || c->kind != BW__CLOCK_MANUAL)
        return BW_EINVAL;
    return manual_move(c, now_ns, 0);
}

int bw_clock_manual_advance(bw_clock *c, int64_t delta_ns)
{
    if (!c || c->kind != BW__CLOCK_MANUAL || delta_ns < 0)
        return BW_EINVAL;
    return manual_move(c, delta_ns, 1);
}

int64_t bw_clock_now(const bw_clock *c)
{
    if (!c)
        return 0;
    switch (c->kind) {
    case BW__CLOCK_MANUAL:
        return atomic_load_explicit(&((bw_clock *)c)->now, memory_order_acquire);
    case BW__CLOCK_CUSTOM:
        return c->fn(c->user);
    default:
        return bw__sys_now();
    }
}

/* Drop c's attachment; its mutex is not held (the drop may unwatch c). */
static void drop_attachment(bw_clock *c)
{
    pthread_mutex_lock(&c->mu);
    void *att = c->att;
    void (*drop)(void *) = c->att_drop;
    c->att = NULL;
    pthread_mutex_unlock(&c->mu);
    if (att)
        drop(att);
}

void bw_clock_free(bw_clock *c)
{
    if (!c || c == &system_clock)
        return;
    drop_attachment(c);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void bw__clock_system_fini(void)
{
    drop_attachment(&system_clock);
}

void *bw__clock_attachment(bw_clock *c, void *(*make)(bw_clock *c), void (*drop)(void *att))
{
    pthread_mutex_lock(&c->mu);
    void *att = c->att;
    pthread_mutex_unlock(&c->mu);
    if (att)
        return att;
    void *mine = make(c); /* without the mutex: making may watch c */
    if (!mine)
        return NULL;
    pthread_mutex_lock(&c->mu);
    if (!c->att) {
        c->att = mine;
        c->att_drop = drop;
        mine = NULL;
    }
    att = c->att;
    pthread_mutex_unlock(&c->mu);
    if (mine)
        drop(mine); /* another thread made it first */
    return att;
}

int bw__clock_kind(const bw_clock *c)
{
    return c->kind;
}

uint64_t bw__clock_serial(const bw_clock *c)
{
    return c->serial;
}

void bw__clock_watch(bw_clock *c, bw__watch *w)
{
    pthread_mutex_lock(&c->mu);
    w->next = c->watchers;
    c->watchers = w;
    pthread_mutex_unlock(&c->mu);
}

void bw__clock_unwatch(bw_clock *c, bw__watch *w)
{
    pthread_mutex_lock(&c->mu);
    for (bw__watch **p = &c->watchers; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
}
