/*
 * keyed.c — keyed circuits: one family per breaker, mapping key -> circuit in
 * LRU order (a second-chance list: a lookup only marks its circuit; eviction
 * moves a marked circuit to the head as it scans), bounded as keyed.h describes. A circuit is a breaker the family
 * owns (core/core.h): made from its breaker's configuration, with its node in
 * the same block, freed by the family. The family hangs on its breaker as the
 * breaker's attachment, so it goes with it.
 *
 * Locking: a family's `lock` (a spin lock) guards the table, the LRU list,
 * `count`, `bytes` and `preset`. bw_keyed_apply calls on one family are
 * serialised by its `apply_mu`, so two at once cannot leave its circuits in a
 * mix of their verbs; different families apply at once. Pins: a lookup takes
 * one under `lock` (the node's `taken`, a plain count); the engine counts their
 * releases on the circuit, under the circuit's own lock (core.h's Pins: a
 * pinned permit's settle, bw__breaker_unpin), as the releasing thread's last
 * touch. Eviction, also under `lock`, reads the releases under the circuit's
 * lock (bw__breaker_class) and removes only a circuit whose every pin is
 * released; once removed nobody can find it, so nobody can pin it again, and it
 * is freed after `lock` is released.
 * Lock order: `apply_mu`, then a family's `lock`, then a circuit's own lock (its
 * class is read under it); nothing takes a family lock while holding a
 * circuit's. No listener runs and no circuit is freed with `lock` held.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/hash.h"
#include "base/name.h"
#include "base/spin.h"
#include "core/core.h"
#include "registry/keyed_internal.h"

#define SCAN_RECENT 32 /* step 1 looks past at most this many recently used circuits */
#define FOUND_NOT 1    /* lookup without creation: not resident */

/*
 * A circuit's node: its family's bookkeeping, first in the circuit's own block
 * (at a cache line's start): what a lookup reads comes first.
 */
#define PREFIX 16
typedef struct node {
    struct node *hnext; /* hash chain */
    uint64_t hash;
    uint16_t klen;
    uint8_t used;             /* looked up since it was last placed at the head (second chance) */
    uint32_t taken;           /* pins handed out (wraps); the circuit counts their releases */
    char prefix[PREFIX];      /* the key's first PREFIX bytes, NUL-padded */
    struct node *prev, *next; /* LRU list: head is the most recently placed (see `used`) */
    bw_breaker *b;            /* the circuit itself */
    const char *key;          /* the circuit's copy (bw_breaker_key) */
    int64_t touched;          /* stamp it was made at (its last use since: the circuit's last release) */
} node;

/* The keyed_* knobs in the units eviction uses. */
typedef struct params {
    uint32_t max;   /* 0 = unbounded */
    uint32_t limit; /* resolved: 0 only when max is 0 */
    int64_t idle;   /* stamp units */
    int64_t hidle;  /* stamp units */
} params;

typedef struct family {
    bw__ext ext; /* first: the breaker frees its family through it */
    bw__spin lock;
    pthread_mutex_t apply_mu;
    bw_breaker *parent;
    node **tab;
    uint32_t mask; /* buckets - 1 */
    uint32_t count;
    node *head, *tail; /* LRU: head is the most recently placed */
    params p;
    uint64_t seed;
    size_t bytes;     /* of the resident circuits */
    int preset;       /* the state new circuits start in (bw_keyed_apply), or -1 */
    bw_counters gone; /* what evicted circuits had counted (bw_keyed_counters) */
} family;

/* Release one pin of circuit c (not a permit's: its settle does that). The last touch of c. */
static void unpin(bw_breaker *c)
{
    bw__breaker_unpin(c, bw__breaker_stamp(c));
}

/* The node of circuit c, or NULL when c is not a keyed circuit. */
static node *node_of(const bw_breaker *c)
{
    const bw__owner *o = bw__breaker_owner(c);
    return o && o->parent ? o->node : NULL;
}

/* The breaker's listeners changed: every resident circuit reads them again (new ones do as they enter). */
static void listeners_changed(bw__ext *x)
{
    family *k = (family *)x;
    bw__spin_lock(&k->lock);
    for (node *c = k->head; c; c = c->next)
        bw__breaker_refresh(c->b);
    bw__spin_unlock(&k->lock);
}

static void free_family(bw__ext *x)
{
    family *k = (family *)x;
    node *c = k->head;
    while (c) {
        node *next = c->next;
        bw__breaker_destroy(c->b);
        c = next;
    }
    free(k->tab);
    pthread_mutex_destroy(&k->apply_mu);
    free(k);
}

/* The breaker's family, made on first use when `create`. NULL when there is none, or out of memory. */
static family *family_of(bw_breaker *b, int create)
{
    family *k = (family *)bw__breaker_ext(b);
    if (k || !create)
        return k;
    k = calloc(1, sizeof *k); /* the table comes with the first circuit */
    if (!k)
        return NULL;
    if (pthread_mutex_init(&k->apply_mu, NULL) != 0) {
        free(k);
        return NULL;
    }
    const bw_config *cfg = bw__breaker_config(b);
    k->ext.free = free_family;
    k->ext.listeners_changed = listeners_changed;
    atomic_init(&k->lock.v, 0);
    k->parent = b;
    k->p.max = cfg->keyed_max;
    k->p.limit = cfg->keyed_max == 0 ? 0 : cfg->keyed_limit ? cfg->keyed_limit : 2 * cfg->keyed_max;
    k->p.idle = bw__breaker_span_stamp(b, cfg->keyed_idle);
    k->p.hidle = bw__breaker_span_stamp(b, cfg->keyed_hidle);
    k->seed = bw__hash_seed(k);
    k->preset = -1;
    family *won = (family *)bw__breaker_ext_install(b, &k->ext);
    if (won != k)
        free_family(&k->ext); /* another thread made it first */
    return won;
}

/* ---- the map, under k->lock ---- */

static node *find_locked(const family *k, const char *key, size_t len, uint64_t h)
{
    if (!k->tab)
        return NULL;
    for (node *c = k->tab[h & k->mask]; c; c = c->hnext)
        if (c->hash == h && c->klen == len &&
            (len <= PREFIX
                 ? bw__same(c->prefix, key, len)
                 : bw__same(c->prefix, key, PREFIX) && memcmp(c->key + PREFIX, key + PREFIX, len - PREFIX) == 0))
            return c;
    return NULL;
}

static void lru_unlink(family *k, node *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        k->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        k->tail = c->prev;
}

static void lru_push(family *k, node *c)
{
    c->prev = NULL;
    c->next = k->head;
    if (k->head)
        k->head->prev = c;
    else
        k->tail = c;
    k->head = c;
}

/* A lookup's pin: marked used, and left in place (eviction moves it: its second chance). */
static void pin_locked(node *c)
{
    c->taken++;
    c->used = 1;
}

/*
 * Double the buckets when the table is half full (the first table has 16), so that a
 * lookup walks a chain of one node, mostly. Returns
 * BW_ENOMEM only when there is no table at all; a failed growth keeps longer
 * chains instead.
 */
static int grow_locked(family *k)
{
    if (k->tab && (k->count < (k->mask + 1) / 2 || k->mask >= (UINT32_MAX >> 1)))
        return BW_OK;
    uint32_t mask = k->tab ? k->mask * 2 + 1 : 15;
    node **tab = calloc((size_t)mask + 1, sizeof *tab);
    if (!tab)
        return k->tab ? BW_OK : BW_ENOMEM;
    for (node *c = k->head; c; c = c->next) {
        c->hnext = tab[c->hash & mask];
        tab[c->hash & mask] = c;
    }
    free(k->tab);
    k->tab = tab;
    k->mask = mask;
    return BW_OK;
}

static int insert_locked(family *k, node *c)
{
    if (grow_locked(k) != BW_OK)
        return BW_ENOMEM;
    node **slot = &k->tab[c->hash & k->mask];
    c->hnext = *slot;
    *slot = c;
    lru_push(k, c);
    k->count++;
    k->bytes += bw_breaker_bytes(c->b);
    return BW_OK;
}

static void remove_locked(family *k, node *c)
{
    node **pp = &k->tab[c->hash & k->mask];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
    lru_unlink(k, c);
    k->count--;
    k->bytes -= bw_breaker_bytes(c->b);
}

/* ---- eviction (keyed.h has the rule) ---- */

/*
 * What eviction knows of circuit c at `now`: its class, whether every pin it
 * handed out is released, and the stamp of its last use (lookup or release).
 */
typedef struct seen {
    bw__class k;
    int unpinned;
    int64_t used;
} seen;

static seen look(const node *c, int64_t now)
{
    seen s;
    s.k = bw__breaker_class(c->b, now);
    s.unpinned = s.k.releases == c->taken;
    s.used = s.k.released_at > c->touched ? s.k.released_at : c->touched;
    return s;
}

/* Step 1: the least recently used idle circuit, or NULL. */
static node *idle_victim(family *k, int64_t now)
{
    int recent = 0;
    for (node *c = k->tail, *prev; c; c = prev) {
        prev = c->prev;
        if (c->used) { /* looked up since it was placed: its second chance, at the head */
            c->used = 0;
            lru_unlink(k, c);
            lru_push(k, c);
            if (++recent >= SCAN_RECENT)
                break;
            continue;
        }
        if (now - c->touched < k->p.idle) { /* made lately: used lately */
            if (++recent >= SCAN_RECENT)
                break;
            continue;
        }
        seen s = look(c, now);
        if (!s.unpinned)
            continue;
        int64_t unused = now - s.used;
        if (unused < k->p.idle) {
            if (++recent >= SCAN_RECENT)
                break;
            continue;
        }
        if (s.k.cls == BW__QUIET || (s.k.cls == BW__HISTORY && unused >= k->p.hidle && now >= s.k.wait_end))
            return c;
    }
    return NULL;
}

/* Step 2: the least recently used quiet circuit, however recent, or NULL. */
static node *quiet_victim(family *k, int64_t now)
{
    for (node *c = k->tail; c; c = c->prev) {
        seen s = look(c, now);
        if (s.unpinned && s.k.cls == BW__QUIET)
            return c;
    }
    return NULL;
}

/*
 * Make room for one new circuit: evicted circuits are chained on *victims (by
 * hnext) for the caller to free after unlocking. BW_ELIMIT when the limit is
 * reached and nothing may go.
 */
static int make_room_locked(family *k, int64_t now, node **victims)
{
    if (k->p.max == 0)
        return BW_OK;
    while (k->count >= k->p.max) {
        node *c = idle_victim(k, now);
        if (!c && k->count >= k->p.limit && !(c = quiet_victim(k, now)))
            return BW_ELIMIT;
        if (!c)
            break;
        remove_locked(k, c);
        bw_counters n; /* its counts stay in the family's totals: counters never go down */
        if (bw_breaker_counters(c->b, &n) == BW_OK)
            bw_counters_add(&k->gone, &n);
        c->hnext = *victims;
        *victims = c;
    }
    return BW_OK;
}

static void free_chain(node *c)
{
    while (c) {
        node *next = c->hnext;
        bw__breaker_destroy(c->b);
        c = next;
    }
}

/* ---- lookup ---- */

static int no_room(const family *k, const char *key, bw_error *err)
{
    return bw__fail(err, BW_ELIMIT, "key",
                    "no room for key '%s': %u circuits resident (keyed_limit) and none evictable", key, k->p.limit);
}

/* A new circuit of k for `key` (checked), pinned once, not yet in the map. */
static int circuit_new(family *k, const char *key, size_t len, uint64_t h, int64_t now, node **out, bw_error *err)
{
    bw_breaker *b = k->parent;
    bw__owner o = {NULL, b, key, NULL};
    bw_breaker *c;
    void *tail;
    int rc = bw__breaker_make(bw_breaker_name(b), bw__breaker_config(b), 1, &o, sizeof(node), &c, &tail, err);
    if (rc != BW_OK)
        return rc;
    node *n = tail;
    memset(n, 0, sizeof *n);
    n->b = c;
    n->hash = h;
    n->klen = (uint16_t)len;
    n->key = bw_breaker_key(c);
    memcpy(n->prefix, key, len < PREFIX ? len : PREFIX); /* the rest stays 0 (memset above) */
    n->touched = now;
    n->taken = 1;
    *out = n;
    return BW_OK;
}

/*
 * The circuit of `key`, pinned, in *out: found, or (when `create`) made.
 * FOUND_NOT when not resident and not `create`.
 */
static int lookup(bw_breaker *b, const char *key, int create, bw_breaker **out, bw_error *err)
{
    if (!b || !out)
        return bw__fail(err, BW_EINVAL, "", "breaker and out must not be NULL");
    if (!key)
        return bw__check_name(key, "key", err);
    const bw__owner *o = bw__breaker_owner(b);
    if (o && o->parent)
        return bw__fail(err, BW_EINVAL, "breaker", "a keyed circuit has no keyed circuits of its own");
    size_t len = strnlen(key, BW__NAME_MAX + 1);
    if (len == 0 || len > BW__NAME_MAX)
        return bw__check_name(key, "key", err);
    family *k = family_of(b, create);
    if (!k)
        return create ? bw__fail(err, BW_ENOMEM, "", "out of memory") : FOUND_NOT;
    uint64_t h = bw__hash(k->seed, key, len);
    bw__spin_lock(&k->lock);
    node *c = find_locked(k, key, len, h);
    if (BW_LIKELY(c != NULL)) {
        pin_locked(c);
        bw__spin_unlock(&k->lock);
        *out = c->b;
        return BW_OK;
    }
    bw__spin_unlock(&k->lock);
    if (!create)
        return FOUND_NOT;
    int rc = bw__check_name(key, "key", err);
    if (rc != BW_OK)
        return rc;

    /* Room first, so that a key refused at the limit costs no allocation. */
    int64_t now = bw__breaker_stamp(b);
    node *victims = NULL;
    bw__spin_lock(&k->lock);
    rc = make_room_locked(k, now, &victims);
    bw__spin_unlock(&k->lock);
    free_chain(victims);
    if (rc != BW_OK)
        return no_room(k, key, err);

    /*
     * Make the circuit outside the lock, then insert it unless another thread
     * won. It must enter the map in the state bw_keyed_apply last set
     * (`preset`), which is applied outside the lock (a stored circuit's verb is
     * a store call): if an apply moved the preset meanwhile, apply again.
     */
    node *n;
    if ((rc = circuit_new(k, key, len, h, now, &n, err)) != BW_OK)
        return rc;
    int applied = -1; /* a new circuit is in its initial state */
    for (;;) {
        victims = NULL;
        bw__spin_lock(&k->lock);
        c = find_locked(k, key, len, h);
        if (c) {
            pin_locked(c);
            bw__spin_unlock(&k->lock);
            bw__breaker_destroy(n->b);
            *out = c->b;
            return BW_OK;
        }
        int preset = k->preset;
        if (preset == applied) {
            rc = make_room_locked(k, now, &victims); /* again: others may have filled it meanwhile */
            if (rc == BW_OK && (rc = insert_locked(k, n)) == BW_OK)
                bw__breaker_refresh(n->b); /* under the lock a listeners_changed walk takes: none is missed */
        }
        bw__spin_unlock(&k->lock);
        free_chain(victims);
        if (preset == applied)
            break;
        bw__breaker_preset(n->b, preset >= 0 ? preset : BW_STATE_CLOSED); /* -1 after an apply: a reset */
        applied = preset;
    }
    if (rc != BW_OK) {
        bw__breaker_destroy(n->b);
        return rc == BW_ENOMEM ? bw__fail(err, rc, "", "out of memory") : no_room(k, key, err);
    }
    *out = n->b;
    return BW_OK;
}

/* ---- the API ---- */

static inline int keyed_acquire(bw_breaker *b, const char *key, bw_permit *permit, bw_rejection *why, bw_error *err)
{
    if (!permit)
        return bw__fail(err, BW_EINVAL, "permit", "permit must not be NULL");
    bw_breaker *c;
    int rc = lookup(b, key, 1, &c, err);
    if (BW_UNLIKELY(rc != BW_OK))
        return rc;
    rc = bw_acquire(c, permit, why);
    if (BW_UNLIKELY(rc != BW_OK)) {
        unpin(c);
        return rc;
    }
    bw__permit_pin(permit);
    return BW_OK;
}

int bw_keyed_acquire(bw_breaker *b, const char *key, bw_permit *permit, bw_rejection *why)
{
    return keyed_acquire(b, key, permit, why, NULL);
}

int bw_keyed_acquire_ex(bw_breaker *b, const char *key, bw_permit *permit, bw_rejection *why, bw_error *err)
{
    return keyed_acquire(b, key, permit, why, err);
}

int bw_keyed_get(bw_breaker *b, const char *key, bw_breaker **out, bw_error *err)
{
    return lookup(b, key, 1, out, err);
}

bw_breaker *bw_keyed_find(bw_breaker *b, const char *key)
{
    bw_breaker *c = NULL;
    return lookup(b, key, 0, &c, NULL) == BW_OK ? c : NULL;
}

#define HANDLE_HELD 0x62776b68u /* "bwkh" */
#define HANDLE_DROPPED 0x62776b64u

int bw_keyed_hold(bw_breaker *b, const char *key, bw_keyed_handle *h, bw_error *err)
{
    if (!h)
        return bw__fail(err, BW_EINVAL, "handle", "handle must not be NULL");
    h->circuit = NULL;
    h->magic_ = HANDLE_DROPPED;
    bw_breaker *c;
    int rc = lookup(b, key, 1, &c, err);
    if (rc != BW_OK)
        return rc;
    h->circuit = c;
    h->magic_ = HANDLE_HELD;
    return BW_OK;
}

int bw_keyed_drop(bw_keyed_handle *h)
{
    if (!h)
        return BW_EINVAL;
    if (h->magic_ != HANDLE_HELD || !h->circuit)
        return BW_EPERMIT;
    bw_breaker *c = h->circuit;
    h->magic_ = HANDLE_DROPPED;
    h->circuit = NULL;
    unpin(c); /* the last touch: the family may free it after this */
    return BW_OK;
}

void bw_keyed_release(bw_breaker *c)
{
    if (c && node_of(c))
        unpin(c);
}

/* Pin every resident circuit of k into a new array (*out, *n). */
static int pin_all(family *k, node ***out, size_t *n)
{
    node **all = NULL;
    for (;;) {
        bw__spin_lock(&k->lock);
        size_t want = k->count;
        bw__spin_unlock(&k->lock);
        node **mem = realloc(all, (want + 16) * sizeof *mem);
        if (!mem) {
            free(all);
            return BW_ENOMEM;
        }
        all = mem;
        bw__spin_lock(&k->lock);
        if (k->count <= want + 16)
            break;
        bw__spin_unlock(&k->lock); /* grew meanwhile: size again */
    }
    size_t i = 0;
    for (node *c = k->head; c; c = c->next) {
        c->taken++;
        all[i++] = c;
    }
    bw__spin_unlock(&k->lock);
    *out = all;
    *n = i;
    return BW_OK;
}

/* Apply verb v (target state `state`) to b's family: new circuits from now on, then every resident one. */
int bw__keyed_apply(bw_breaker *b, bw_verb v, int state)
{
    int preset = v == BW_VERB_RESET ? -1 : state;
    family *k = family_of(b, preset >= 0); /* a reset with no family has nothing to reset */
    if (!k)
        return preset >= 0 ? BW_ENOMEM : BW_OK;
    pthread_mutex_lock(&k->apply_mu);
    bw__spin_lock(&k->lock);
    k->preset = preset;
    bw__spin_unlock(&k->lock);
    node **all = NULL;
    size_t n = 0;
    int rc = pin_all(k, &all, &n);
    for (size_t i = 0; i < n; i++) {
        bw_breaker_apply(all[i]->b, v);
        unpin(all[i]->b);
    }
    pthread_mutex_unlock(&k->apply_mu);
    free(all);
    return rc;
}

int bw_keyed_apply(bw_breaker *b, bw_verb v)
{
    int state = bw__verb_state(v);
    if (!b || state < 0)
        return BW_EINVAL;
    const bw__owner *o = bw__breaker_owner(b);
    if (o && o->parent)
        return BW_EINVAL; /* a keyed circuit has no circuits */
    return bw__keyed_apply(b, v, state);
}

/* The number of resident circuits, or (bytes) the memory they and the map hold. */
static size_t measure(bw_breaker *b, int bytes)
{
    family *k = b ? family_of(b, 0) : NULL;
    if (!k)
        return 0;
    bw__spin_lock(&k->lock);
    size_t n = !bytes ? k->count : sizeof *k + (k->tab ? ((size_t)k->mask + 1) * sizeof *k->tab : 0) + k->bytes;
    bw__spin_unlock(&k->lock);
    return n;
}

size_t bw_keyed_count(bw_breaker *b)
{
    return measure(b, 0);
}

size_t bw_keyed_bytes(bw_breaker *b)
{
    return measure(b, 1);
}

int bw_keyed_counters(bw_breaker *b, bw_counters *out)
{
    if (!b || !out)
        return BW_EINVAL;
    const bw__owner *o = bw__breaker_owner(b);
    if (o && o->parent)
        return BW_EINVAL;
    bw_counters own;
    int rc = bw_breaker_counters(b, &own);
    if (rc != BW_OK)
        return rc;
    memset(out, 0, sizeof *out);
    out->counting = own.counting;
    out->timed = own.timed;
    out->state = own.state;
    out->reason = own.reason;
    out->has_last_failure = own.has_last_failure;
    out->last_failure_code = own.last_failure_code;
    out->last_failure_age_ns = own.last_failure_age_ns;
    memcpy(out->last_failure_message, own.last_failure_message, sizeof own.last_failure_message);
    family *k = family_of(b, 0);
    if (!k)
        return BW_OK;
    bw__spin_lock(&k->lock);
    bw_counters_add(out, &k->gone);
    for (node *c = k->head; c; c = c->next) {
        bw_counters n;
        if (bw_breaker_counters(c->b, &n) == BW_OK)
            bw_counters_add(out, &n);
    }
    bw__spin_unlock(&k->lock);
    return BW_OK;
}

size_t bw_keyed_each(bw_breaker *b, size_t max, void (*fn)(bw_breaker *circuit, void *user), void *user)
{
    if (!b || !fn)
        return 0;
    const bw__owner *o = bw__breaker_owner(b);
    if (o && o->parent)
        return 0;
    family *k = family_of(b, 0);
    if (!k)
        return 0;
    size_t n = 0;
    bw__spin_lock(&k->lock);
    for (node *c = k->head; c && (max == 0 || n < max); c = c->next, n++)
        fn(c->b, user);
    bw__spin_unlock(&k->lock);
    return n;
}
