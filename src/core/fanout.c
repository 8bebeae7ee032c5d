/*
 * fanout.c — listener lists read without a lock (fanout.h has the locking
 * rules and why a replaced list is safe to free when `active` reads 0).
 */
#include "core/fanout.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "breakwater/common.h"

typedef struct entry {
    bw_listener l;
    uint64_t id;
} entry;

typedef struct list {
    struct list *retired_next;
    uint64_t retired_at;  /* the epoch when it was replaced: freed once the epoch is 2 more */
    void (*gone)(void *); /* the release of the listener removed when this list was replaced, or NULL */
    void *gone_user;
    uint32_t n;
    unsigned mask;
    entry v[];
} list;

struct bw__fanout {
    _Atomic(list *) cur;        /* NULL: no listener */
    _Atomic unsigned mask;      /* cur's mask */
    _Atomic uint64_t epoch;     /* deliveries count themselves in active[epoch & 1] */
    _Atomic uint32_t active[2]; /* deliveries running, by the parity of the epoch they read */
    _Atomic int has_retired;    /* `retired` is not empty (read without the mutex) */
    pthread_mutex_t mu;         /* writers and reclaimers; guards `retired` */
    list *retired;              /* newest first */
    bw__fanout *up;
};

static _Atomic uint64_t next_id = 1;

bw__fanout *bw__fanout_new(bw__fanout *up)
{
    bw__fanout *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    if (pthread_mutex_init(&f->mu, NULL) != 0) {
        free(f);
        return NULL;
    }
    atomic_init(&f->cur, NULL);
    atomic_init(&f->mask, 0);
    atomic_init(&f->epoch, 2); /* so that retired_at + 2 never wraps below */
    atomic_init(&f->active[0], 0);
    atomic_init(&f->active[1], 0);
    atomic_init(&f->has_retired, 0);
    f->up = up;
    return f;
}

/* Free a chain of retired lists, running the releases of the listeners they outlived (no lock held). */
static void free_chain(list *l)
{
    while (l) {
        list *next = l->retired_next;
        if (l->gone)
            l->gone(l->gone_user);
        free(l);
        l = next;
    }
}

/*
 * With f->mu held: move the epoch on while the parity before it has drained
 * (at most twice: that is all a retired list needs), and take the retired
 * lists replaced at least two epochs ago (fanout.h says why that is safe). The
 * caller frees them after unlocking.
 */
static list *reclaim_locked(bw__fanout *f)
{
    if (!f->retired)
        return NULL;
    for (int i = 0; i < 2; i++) {
        uint64_t e = atomic_load(&f->epoch);
        if (f->retired->retired_at + 2 <= e || atomic_load(&f->active[(e - 1) & 1]) != 0)
            break;
        atomic_store(&f->epoch, e + 1);
    }
    uint64_t e = atomic_load(&f->epoch);
    list **at = &f->retired;
    while (*at && (*at)->retired_at + 2 > e)
        at = &(*at)->retired_next;
    list *done = *at; /* older ones were replaced earlier still */
    *at = NULL;
    atomic_store(&f->has_retired, f->retired != NULL);
    return done;
}

/* The end of a writer's critical section: unlock, free what is done, and look once more (see fanout.h). */
static void writer_done(bw__fanout *f)
{
    list *done = reclaim_locked(f);
    pthread_mutex_unlock(&f->mu);
    free_chain(done);
    if (atomic_load(&f->has_retired)) { /* a delivery that ended while we held mu could not reclaim */
        pthread_mutex_lock(&f->mu);
        done = reclaim_locked(f);
        pthread_mutex_unlock(&f->mu);
        free_chain(done);
    }
}

void bw__fanout_free(bw__fanout *f)
{
    if (!f)
        return;
    list *cur = atomic_load(&f->cur);
    if (cur) {
        for (uint32_t i = 0; i < cur->n; i++)
            if (cur->v[i].l.release)
                cur->v[i].l.release(cur->v[i].l.user);
        free(cur);
    }
    free_chain(f->retired);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* Publish `next` (may be NULL) in place of the current list, which retires with `gone` to release. */
static void replace_locked(bw__fanout *f, list *next, void (*gone)(void *), void *gone_user)
{
    list *old = atomic_exchange(&f->cur, next);
    atomic_store(&f->mask, next ? next->mask : 0u);
    if (old) {
        old->gone = gone;
        old->gone_user = gone_user;
        old->retired_at = atomic_load(&f->epoch);
        old->retired_next = f->retired;
        f->retired = old;
        atomic_store(&f->has_retired, 1);
    }
}

static list *list_new(uint32_t n)
{
    list *l = malloc(sizeof *l + (size_t)n * sizeof(entry));
    if (l) {
        memset(l, 0, sizeof *l);
        l->n = n;
    }
    return l;
}

int bw__fanout_add(bw__fanout *f, const bw_listener *li, uint64_t *id)
{
    pthread_mutex_lock(&f->mu);
    list *old = atomic_load_explicit(&f->cur, memory_order_relaxed);
    uint32_t n = old ? old->n : 0;
    list *l = list_new(n + 1);
    if (!l) {
        writer_done(f);
        return BW_ENOMEM;
    }
    if (n)
        memcpy(l->v, old->v, n * sizeof(entry));
    l->v[n].l = *li;
    l->v[n].id = atomic_fetch_add(&next_id, 1);
    l->mask = (old ? old->mask : 0u) | li->mask;
    if (id)
        *id = l->v[n].id;
    replace_locked(f, l, NULL, NULL);
    writer_done(f);
    return BW_OK;
}

int bw__fanout_remove(bw__fanout *f, uint64_t id)
{
    pthread_mutex_lock(&f->mu);
    list *old = atomic_load_explicit(&f->cur, memory_order_relaxed);
    uint32_t at = UINT32_MAX;
    for (uint32_t i = 0; old && i < old->n; i++)
        if (old->v[i].id == id)
            at = i;
    if (at == UINT32_MAX) {
        writer_done(f);
        return BW_ESTATE;
    }
    list *l = NULL;
    if (old->n > 1) {
        /* One entry fewer; a copy that cannot be made leaves the list as it was (no event is lost). */
        l = list_new(old->n - 1);
        if (!l) {
            writer_done(f);
            return BW_ENOMEM;
        }
        for (uint32_t i = 0, j = 0; i < old->n; i++)
            if (i != at) {
                l->v[j++] = old->v[i];
                l->mask |= old->v[i].l.mask;
            }
    }
    replace_locked(f, l, old->v[at].l.release, old->v[at].l.user);
    writer_done(f);
    return BW_OK;
}

unsigned bw__fanout_mask(const bw__fanout *f)
{
    unsigned m = 0;
    for (; f; f = f->up)
        m |= atomic_load_explicit(&((bw__fanout *)f)->mask, memory_order_acquire);
    return m;
}

void bw__fanout_deliver(bw__fanout *f, const bw_event *e)
{
    unsigned bit = 1u << (unsigned)e->type;
    for (; f; f = f->up) {
        if (!(atomic_load_explicit(&f->mask, memory_order_relaxed) & bit))
            continue;
        unsigned parity = (unsigned)(atomic_load(&f->epoch) & 1);
        atomic_fetch_add(&f->active[parity], 1);
        list *l = atomic_load(&f->cur);
        for (uint32_t i = 0; l && i < l->n; i++)
            if (l->v[i].l.mask & bit)
                l->v[i].l.fn(e, l->v[i].l.user);
        /* The last of its parity to end moves reclamation on; a writer holding mu looks again after it. */
        if (atomic_fetch_sub(&f->active[parity], 1) == 1 && atomic_load(&f->has_retired) &&
            pthread_mutex_trylock(&f->mu) == 0) {
            list *done = reclaim_locked(f);
            pthread_mutex_unlock(&f->mu);
            free_chain(done);
        }
    }
}
