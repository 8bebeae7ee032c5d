/*
 * clock.c — the system, manual and custom clocks.
 *
 * Locking: a manual clock's `mu` protects its watcher list. Advancing stores the
 * new time, then calls every watcher's fire() with `mu` held, so that
 * bw__clock_unwatch (which takes `mu`) cannot return while a fire is running on
 * another thread. fire() takes a breaker's lock, so the order is clock mu, then
 * breaker lock; no path takes them the other way round. A custom clock's `mu`
 * guards only the lazy creation of its timer service.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"
#include "core/timer.h"

struct bw_clock {
    int kind;
    _Atomic int64_t now; /* manual */
    pthread_mutex_t mu;  /* manual: watcher list; custom: `timers` creation */
    bw__watch *watchers;
    bw_clock_now_cb fn; /* custom */
    void *user;
    bw__timers *timers; /* custom: the auto-transition service, made on first use */
};

static bw_clock system_clock = {.kind = BW__CLOCK_SYSTEM};

bw_clock *bw_clock_system(void)
{
    bw__systime_init();
    return &system_clock;
}

int bw_clock_manual_new(int64_t start_ns, bw_clock **out)
{
    if (!out)
        return BW_EINVAL;
    bw_clock *c = calloc(1, sizeof *c);
    if (!c)
        return BW_ENOMEM;
    c->kind = BW__CLOCK_MANUAL;
    atomic_init(&c->now, start_ns);
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return BW_ESYS;
    }
    *out = c;
    return BW_OK;
}

int bw_clock_custom_new(bw_clock_now_cb fn, void *user, bw_clock **out)
{
    if (!fn || !out)
        return BW_EINVAL;
    bw_clock *c = calloc(1, sizeof *c);
    if (!c)
        return BW_ENOMEM;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return BW_ESYS;
    }
    c->kind = BW__CLOCK_CUSTOM;
    c->fn = fn;
    c->user = user;
    *out = c;
    return BW_OK;
}

int bw_clock_manual_set(bw_clock *c, int64_t now_ns)
{
    if (!c || c->kind != BW__CLOCK_MANUAL)
        return BW_EINVAL;
    pthread_mutex_lock(&c->mu);
    if (now_ns < atomic_load(&c->now)) {
        pthread_mutex_unlock(&c->mu);
        return BW_EINVAL;
    }
    atomic_store(&c->now, now_ns);
    for (bw__watch *w = c->watchers; w; w = w->next)
        w->fire(w->ctx, now_ns);
    pthread_mutex_unlock(&c->mu);
    return BW_OK;
}

int bw_clock_manual_advance(bw_clock *c, int64_t delta_ns)
{
    if (!c || c->kind != BW__CLOCK_MANUAL || delta_ns < 0)
        return BW_EINVAL;
    pthread_mutex_lock(&c->mu);
    int64_t now = atomic_load(&c->now);
    now = now > INT64_MAX - delta_ns ? INT64_MAX : now + delta_ns;
    atomic_store(&c->now, now);
    for (bw__watch *w = c->watchers; w; w = w->next)
        w->fire(w->ctx, now);
    pthread_mutex_unlock(&c->mu);
    return BW_OK;
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

void bw_clock_free(bw_clock *c)
{
    if (!c || c == &system_clock)
        return;
    bw__timers_free(c->timers);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static bw__timers *system_timers;

static void make_system_timers(void)
{
    system_timers = bw__timers_new(&system_clock);
}

bw__timers *bw__clock_timers(bw_clock *c)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (c->kind == BW__CLOCK_SYSTEM) {
        pthread_once(&once, make_system_timers);
        return system_timers; /* lives as long as the process */
    }
    if (c->kind != BW__CLOCK_CUSTOM)
        return NULL;
    pthread_mutex_lock(&c->mu);
    if (!c->timers)
        c->timers = bw__timers_new(c);
    bw__timers *t = c->timers;
    pthread_mutex_unlock(&c->mu);
    return t;
}

int bw__clock_kind(const bw_clock *c)
{
    return c->kind;
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
