/*
 * registry.c — name -> breaker, made on demand, never removed.
 *
 * The table is open addressing with linear probing, at most half full, so every
 * probe sequence ends at an empty slot. Readers take no lock: they load the
 * table pointer and each slot's breaker pointer with acquire order; a writer
 * (holding `mu`) fills a slot's hash first and publishes its breaker pointer
 * last, with release order. Slots are never emptied or reused. To grow, the
 * writer fills a new table and publishes it; the old one stays allocated
 * (chained on `older`) until bw_registry_free, because a reader may still be
 * probing it — it finds every name it held, and one it lacks sends the reader
 * to the locked path, which looks again in the current table. The old tables
 * add up to less than the current one.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/hash.h"
#include "base/name.h"
#include "core/core.h"
#include "core/fanout.h"
#include "registry/keyed_internal.h"

/* A slot: the breaker, its name's hash, and the name's first bytes (so that a lookup reads no breaker). */
#define PREFIX 16
typedef struct rslot {
    _Atomic(bw_breaker *) b;
    uint64_t h;
    char prefix[PREFIX]; /* the name's first PREFIX bytes, NUL-padded */
} rslot;

typedef struct rtab {
    struct rtab *older;
    size_t mask;
    rslot s[];
} rtab;

struct bw_registry {
    _Atomic(rtab *) tab;
    uint64_t seed;
    pthread_mutex_t apply_mu; /* serialises bw_registry_apply calls */
    pthread_mutex_t mu;       /* guards everything below and every write to the table */
    bw_config cfg;
    bw_breaker **order; /* insertion order */
    size_t count, cap;
    int preset;        /* the state new breakers start in (bw_registry_apply), or -1 */
    bw_verb preset_by; /* the verb that set it */
    bw__owner owner;   /* what its breakers are made with: its listeners (fan) */
    bw__fanout *fan;   /* the registry's listeners, heard by every breaker after its own */
};

static rtab *tab_new(size_t slots)
{
    rtab *t = calloc(1, sizeof *t + slots * sizeof(rslot));
    if (t)
        t->mask = slots - 1;
    return t;
}

static void tab_put(rtab *t, bw_breaker *b, uint64_t h)
{
    size_t i = h & t->mask;
    while (atomic_load_explicit(&t->s[i].b, memory_order_relaxed))
        i = (i + 1) & t->mask;
    const char *name = bw_breaker_name(b);
    t->s[i].h = h;
    strncpy(t->s[i].prefix, name, PREFIX); /* NUL-padded when shorter */
    atomic_store_explicit(&t->s[i].b, b, memory_order_release);
}

static bw_breaker *find(bw_registry *r, const char *name, size_t len, uint64_t h)
{
    const rtab *t = atomic_load_explicit(&r->tab, memory_order_acquire);
    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        bw_breaker *b = atomic_load_explicit(&((rtab *)t)->s[i].b, memory_order_acquire);
        if (!b)
            return NULL;
        if (t->s[i].h != h)
            continue;
        /* The name with its NUL: what fits in the prefix, then the rest from the breaker. */
        if (len < PREFIX ? bw__same(t->s[i].prefix, name, len + 1)
                         : bw__same(t->s[i].prefix, name, PREFIX) &&
                               memcmp(bw_breaker_name(b) + PREFIX, name + PREFIX, len + 1 - PREFIX) == 0)
            return b;
    }
}

int bw_registry_new(const bw_config *defaults, bw_registry **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    bw_config *d = defaults ? bw_config_copy(defaults) : bw_config_new();
    if (!d)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    int rc = bw_config_validate(d, err);
    if (rc != BW_OK) {
        bw_config_free(d);
        return rc;
    }
    bw_registry *r = calloc(1, sizeof *r);
    rtab *t = tab_new(64);
    if (!r || !t) {
        free(r);
        free(t);
        bw_config_free(d);
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    }
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        free(t);
        bw_config_free(d);
        return bw__fail(err, BW_ESYS, "", "could not create the registry's mutex");
    }
    if (pthread_mutex_init(&r->apply_mu, NULL) != 0) {
        pthread_mutex_destroy(&r->mu);
        free(r);
        free(t);
        bw_config_free(d);
        return bw__fail(err, BW_ESYS, "", "could not create the registry's mutex");
    }
    r->fan = bw__fanout_new(NULL);
    if (!r->fan) {
        pthread_mutex_destroy(&r->mu);
        pthread_mutex_destroy(&r->apply_mu);
        free(r);
        free(t);
        bw_config_free(d);
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    }
    r->owner.fan = r->fan;
    r->cfg = *d;
    bw_config_free(d);
    atomic_init(&r->tab, t);
    r->seed = bw__hash_seed(r);
    r->preset = -1;
    *out = r;
    return BW_OK;
}

void bw_registry_free(bw_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->count; i++)
        bw__breaker_destroy(r->order[i]);
    rtab *t = atomic_load_explicit(&r->tab, memory_order_relaxed);
    while (t) {
        rtab *older = t->older;
        free(t);
        t = older;
    }
    free(r->order);
    bw__fanout_free(r->fan);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->apply_mu);
    free(r);
}

/* Room for one more breaker in the order array and the table. Call with mu held. */
static int reserve_locked(bw_registry *r)
{
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        bw_breaker **o = realloc(r->order, cap * sizeof *o);
        if (!o)
            return BW_ENOMEM;
        r->order = o;
        r->cap = cap;
    }
    rtab *t = atomic_load_explicit(&r->tab, memory_order_relaxed);
    if ((r->count + 1) * 2 <= t->mask + 1)
        return BW_OK;
    rtab *n = tab_new((t->mask + 1) * 2);
    if (!n)
        return BW_ENOMEM;
    for (size_t i = 0; i < r->count; i++) {
        bw_breaker *b = r->order[i];
        const char *nm = bw_breaker_name(b);
        tab_put(n, b, bw__hash(r->seed, nm, strlen(nm)));
    }
    n->older = t;
    atomic_store_explicit(&r->tab, n, memory_order_release);
    return BW_OK;
}

/* The miss path: make the breaker under the lock, unless another thread just did. */
static BW_NOINLINE int create(bw_registry *r, const char *name, size_t len, uint64_t h, const bw_config *override,
                              bw_breaker **out, bw_error *err)
{
    int rc = bw__check_name(name, "name", err);
    if (rc != BW_OK)
        return rc;
    bw_config merged;
    if (override) { /* what the override leaves unset comes from the registry's defaults */
        merged = *override;
        if (!merged.clock)
            merged.clock = r->cfg.clock;
        if (!merged.listener) {
            merged.listener = r->cfg.listener;
            merged.listener_mask = r->cfg.listener_mask;
            merged.listener_user = r->cfg.listener_user;
        }
        if (!merged.classifier) {
            merged.classifier = r->cfg.classifier;
            merged.classifier_user = r->cfg.classifier_user;
        }
    }
    pthread_mutex_lock(&r->mu);
    bw_breaker *b = find(r, name, len, h);
    if (b) {
        pthread_mutex_unlock(&r->mu);
        *out = b;
        return BW_OK;
    }
    if ((rc = reserve_locked(r)) != BW_OK) {
        pthread_mutex_unlock(&r->mu);
        return bw__fail(err, rc, "", "out of memory");
    }
    /* The registry's defaults live as long as its breakers: borrowed; an override is copied. */
    rc = bw__breaker_make(name, override ? &merged : &r->cfg, !override, &r->owner, 0, &b, NULL, err);
    if (rc != BW_OK) {
        pthread_mutex_unlock(&r->mu);
        return rc;
    }
    if (r->preset >= 0) { /* as if bw_registry_apply had reached it */
        bw__breaker_preset(b, r->preset);
        bw__keyed_apply(b, r->preset_by, r->preset);
    }
    r->order[r->count++] = b;
    tab_put(atomic_load_explicit(&r->tab, memory_order_relaxed), b, h);
    pthread_mutex_unlock(&r->mu);
    *out = b;
    return BW_OK;
}

int bw_registry_get(bw_registry *r, const char *name, const bw_config *override, bw_breaker **out, bw_error *err)
{
    if (BW_UNLIKELY(!r || !out))
        return bw__fail(err, BW_EINVAL, "", "registry and out must not be NULL");
    if (BW_UNLIKELY(!name))
        return bw__check_name(name, "name", err);
    size_t len = strnlen(name, BW__NAME_MAX + 1);
    if (BW_UNLIKELY(len == 0 || len > BW__NAME_MAX))
        return bw__check_name(name, "name", err);
    uint64_t h = bw__hash(r->seed, name, len);
    bw_breaker *b = find(r, name, len, h);
    if (BW_LIKELY(b != NULL)) {
        *out = b;
        return BW_OK;
    }
    return create(r, name, len, h, override, out, err);
}

bw_breaker *bw_registry_get_existing(bw_registry *r, const char *name)
{
    if (!r || !name)
        return NULL;
    size_t len = strnlen(name, BW__NAME_MAX + 1);
    if (len == 0 || len > BW__NAME_MAX)
        return NULL;
    return find(r, name, len, bw__hash(r->seed, name, len));
}

size_t bw_registry_count(bw_registry *r)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&r->mu);
    size_t n = r->count;
    pthread_mutex_unlock(&r->mu);
    return n;
}

size_t bw_registry_list(bw_registry *r, const char **names, bw_breaker **breakers, size_t cap)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&r->mu);
    size_t n = r->count;
    for (size_t i = 0; i < n && i < cap; i++) {
        if (names)
            names[i] = bw_breaker_name(r->order[i]);
        if (breakers)
            breakers[i] = r->order[i];
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

int bw_registry_apply(bw_registry *r, bw_verb v)
{
    int state = bw__verb_state(v);
    if (!r || state < 0)
        return BW_EINVAL;
    pthread_mutex_lock(&r->apply_mu);
    pthread_mutex_lock(&r->mu);
    size_t n = r->count;
    bw_breaker **all = malloc((n ? n : 1) * sizeof *all);
    if (!all) {
        pthread_mutex_unlock(&r->mu);
        pthread_mutex_unlock(&r->apply_mu);
        return BW_ENOMEM;
    }
    if (n)
        memcpy(all, r->order, n * sizeof *all);
    r->preset = v == BW_VERB_RESET ? -1 : state;
    r->preset_by = v;
    pthread_mutex_unlock(&r->mu);
    int rc = BW_OK;
    for (size_t i = 0; i < n; i++) {
        bw_breaker_apply(all[i], v);
        if (bw_keyed_apply(all[i], v) != BW_OK)
            rc = BW_ENOMEM;
    }
    pthread_mutex_unlock(&r->apply_mu);
    free(all);
    return rc;
}

/* After the registry's listeners changed (rc BW_OK): every breaker (and circuit) reads what it must report
   again; one made meanwhile read it under mu. Returns rc. */
static int refresh_all(bw_registry *r, int rc)
{
    if (rc != BW_OK)
        return rc;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->count; i++)
        bw__breaker_refresh(r->order[i]);
    pthread_mutex_unlock(&r->mu);
    return BW_OK;
}

int bw_registry_add_listener(bw_registry *r, const bw_listener *l, uint64_t *id)
{
    if (!r || !l || !l->fn || !l->mask)
        return BW_EINVAL;
    return refresh_all(r, bw__fanout_add(r->fan, l, id));
}

int bw_registry_remove_listener(bw_registry *r, uint64_t id)
{
    return r ? refresh_all(r, bw__fanout_remove(r->fan, id)) : BW_EINVAL;
}
