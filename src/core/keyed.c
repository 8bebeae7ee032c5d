/*
 * keyed.c — keyed circuits: one map of key -> circuit per breaker, kept in LRU
 * order, bounded as keyed.h describes.
 *
 * Locking: `lock` (a spin lock) guards the table, the LRU list, `count` and
 * `bytes`; a new circuit reads its parent's keyed preset under it.
 * bw_keyed_apply calls are serialised by `apply_mu`, so two at once cannot
 * leave the circuits in a mix of their verbs. Pins are atomic: a pin is taken only under `lock` (by a
 * lookup) and dropped without it (bw__circuit_unpin, from a settle or a
 * release). Eviction, also under `lock`, removes only a circuit with no pin; once
 * removed nobody can find it, so nobody can pin it again, and it is freed after
 * `lock` is released. The unpin stores `touched` before dropping the pin (release
 * order) and is the dropping thread's last access to the circuit.
 * Lock order: a family's `lock`, then a circuit's own lock (its class is read
 * under it); nothing takes a family lock while holding a circuit's. No listener
 * runs and no circuit is freed with `lock` held.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/circuit.h"
#include "base/hash.h"
#include "core/internal.h"
#include "base/spin.h"

#define SCAN_RECENT 32 /* step 1 looks past at most this many recently used circuits */
#define FOUND_NOT 1    /* lookup without creation: not resident */

struct bw__keyed {
    bw__spin lock;
    bw_breaker *parent;
    bw__circuit **tab;
    uint32_t mask; /* buckets - 1 */
    uint32_t count;
    bw__circuit *head, *tail; /* LRU: head is the most recently looked up */
    bw__keyed_params p;
    uint64_t seed;
    size_t bytes; /* of the resident circuits */
};

/* The breaker's family, made on first use when `create`. NULL when there is none, or out of memory. */
static bw__keyed *family(bw_breaker *b, int create)
{
    _Atomic(void *) *slot = bw__breaker_ext(b);
    bw__keyed *k = atomic_load(slot); /* seq_cst: see bw__breaker_keyed_preset */
    if (k || !create)
        return k;
    k = calloc(1, sizeof *k); /* the table comes with the first circuit */
    if (!k)
        return NULL;
    atomic_init(&k->lock.v, 0);
    k->parent = b;
    k->p = *bw__breaker_keyed_params(b);
    k->seed = bw__hash_seed(k);
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(slot, &expected, (void *)k)) {
        free(k);
        return expected; /* another thread made it first */
    }
    return k;
}

/* ---- the map, under k->lock ---- */

static bw__circuit *find_locked(const bw__keyed *k, const char *key, size_t len, uint64_t h)
{
    if (!k->tab)
        return NULL;
    for (bw__circuit *c = k->tab[h & k->mask]; c; c = c->hnext)
        if (c->hash == h && c->klen == len && memcmp(c->key, key, len) == 0)
            return c;
    return NULL;
}

static void lru_unlink(bw__keyed *k, bw__circuit *c)
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

static void lru_push(bw__keyed *k, bw__circuit *c)
{
    c->prev = NULL;
    c->next = k->head;
    if (k->head)
        k->head->prev = c;
    else
        k->tail = c;
    k->head = c;
}

static void pin_locked(bw__keyed *k, bw__circuit *c)
{
    atomic_fetch_add_explicit(&c->pins, 1, memory_order_relaxed);
    if (k->head != c) {
        lru_unlink(k, c);
        lru_push(k, c);
    }
}

/*
 * Double the buckets when the table is full (the first table has 16). Returns
 * BW_ENOMEM only when there is no table at all; a failed growth keeps longer
 * chains instead.
 */
static int grow_locked(bw__keyed *k)
{
    if (k->tab && (k->count < k->mask + 1 || k->mask >= (UINT32_MAX >> 1)))
        return BW_OK;
    uint32_t mask = k->tab ? k->mask * 2 + 1 : 15;
    bw__circuit **tab = calloc((size_t)mask + 1, sizeof *tab);
    if (!tab)
        return k->tab ? BW_OK : BW_ENOMEM;
    for (bw__circuit *c = k->head; c; c = c->next) {
        c->hnext = tab[c->hash & mask];
        tab[c->hash & mask] = c;
    }
    free(k->tab);
    k->tab = tab;
    k->mask = mask;
    return BW_OK;
}

static int insert_locked(bw__keyed *k, bw__circuit *c)
{
    if (grow_locked(k) != BW_OK)
        return BW_ENOMEM;
    bw__circuit **slot = &k->tab[c->hash & k->mask];
    c->hnext = *slot;
    *slot = c;
    lru_push(k, c);
    k->count++;
    k->bytes += bw_breaker_bytes(c->b);
    return BW_OK;
}

static void remove_locked(bw__keyed *k, bw__circuit *c)
{
    bw__circuit **pp = &k->tab[c->hash & k->mask];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
    lru_unlink(k, c);
    k->count--;
    k->bytes -= bw_breaker_bytes(c->b);
}

/* ---- eviction (keyed.h has the rule) ---- */

static int unpinned(bw__circuit *c)
{
    return atomic_load_explicit(&c->pins, memory_order_acquire) == 0;
}

/* Step 1: the least recently used idle circuit, or NULL. */
static bw__circuit *idle_victim(bw__keyed *k, int64_t now)
{
    int recent = 0;
    for (bw__circuit *c = k->tail; c; c = c->prev) {
        if (!unpinned(c))
            continue;
        int64_t unused = now - atomic_load_explicit(&c->touched, memory_order_relaxed);
        if (unused < k->p.idle) {
            if (++recent >= SCAN_RECENT)
                break;
            continue;
        }
        int64_t wait_end;
        int cls = bw__circuit_class(c->b, now, &wait_end);
        if (cls == BW__QUIET || (cls == BW__HISTORY && unused >= k->p.hidle && now >= wait_end))
            return c;
    }
    return NULL;
}

/* Step 2: the least recently used quiet circuit, however recent, or NULL. */
static bw__circuit *quiet_victim(bw__keyed *k, int64_t now)
{
    for (bw__circuit *c = k->tail; c; c = c->prev) {
        int64_t wait_end;
        if (unpinned(c) && bw__circuit_class(c->b, now, &wait_end) == BW__QUIET)
            return c;
    }
    return NULL;
}

/*
 * Make room for one new circuit: evicted circuits are chained on *victims (by
 * hnext) for the caller to free after unlocking. BW_ELIMIT when the limit is
 * reached and nothing may go.
 */
static int make_room_locked(bw__keyed *k, int64_t now, bw__circuit **victims)
{
    if (k->p.max == 0)
        return BW_OK;
    while (k->count >= k->p.max) {
        bw__circuit *c = idle_victim(k, now);
        if (!c && k->count >= k->p.limit && !(c = quiet_victim(k, now)))
            return BW_ELIMIT;
        if (!c)
            break;
        remove_locked(k, c);
        c->hnext = *victims;
        *victims = c;
    }
    return BW_OK;
}

static void free_chain(bw__circuit *c)
{
    while (c) {
        bw__circuit *next = c->hnext;
        bw__breaker_destroy(c->b);
        c = next;
    }
}

/* ---- lookup ---- */

static int no_room(const bw__keyed *k, const char *key, bw_error *err)
{
    return bw__fail(err, BW_ELIMIT, "key",
                    "no room for key '%s': %u circuits resident (keyed_limit) and none evictable", key, k->p.limit);
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
    if (bw__breaker_kind(b) == BW__CIRCUIT)
        return bw__fail(err, BW_EINVAL, "breaker", "a keyed circuit has no keyed circuits of its own");
    size_t len = strnlen(key, BW__NAME_MAX + 1);
    if (len == 0 || len > BW__NAME_MAX)
        return bw__check_name(key, "key", err);
    bw__keyed *k = family(b, create);
    if (!k)
        return create ? bw__fail(err, BW_ENOMEM, "", "out of memory") : FOUND_NOT;
    uint64_t h = bw__hash(k->seed, key, len);
    bw__spin_lock(&k->lock);
    bw__circuit *c = find_locked(k, key, len, h);
    if (BW_LIKELY(c != NULL)) {
        pin_locked(k, c);
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
    bw__circuit *victims = NULL;
    bw__spin_lock(&k->lock);
    rc = make_room_locked(k, now, &victims);
    bw__spin_unlock(&k->lock);
    free_chain(victims);
    if (rc != BW_OK)
        return no_room(k, key, err);

    /* Make the circuit outside the lock, then insert it unless another thread won. */
    bw_breaker *nb;
    bw__circuit *node;
    if (bw__circuit_new(b, sizeof(bw__circuit) + len + 1, &nb, &node) != BW_OK)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    memset(node, 0, sizeof *node);
    node->b = nb;
    node->fam = k;
    node->hash = h;
    node->klen = (uint32_t)len;
    memcpy(node->key, key, len + 1);
    atomic_init(&node->touched, now);
    atomic_init(&node->pins, 1);

    victims = NULL;
    bw__spin_lock(&k->lock);
    c = find_locked(k, key, len, h);
    if (c) {
        pin_locked(k, c);
        bw__spin_unlock(&k->lock);
        bw__breaker_destroy(nb);
        *out = c->b;
        return BW_OK;
    }
    rc = make_room_locked(k, now, &victims); /* again: others may have filled it meanwhile */
    if (rc == BW_OK) {
        int preset = bw__breaker_keyed_preset(b);
        if (preset >= 0)
            bw__breaker_preset(nb, preset);
        rc = insert_locked(k, node);
    }
    bw__spin_unlock(&k->lock);
    free_chain(victims);
    if (rc != BW_OK) {
        bw__breaker_destroy(nb);
        return rc == BW_ENOMEM ? bw__fail(err, rc, "", "out of memory") : no_room(k, key, err);
    }
    *out = nb;
    return BW_OK;
}

static void unpin(bw__circuit *n, int64_t stamp)
{
    atomic_store_explicit(&n->touched, stamp, memory_order_relaxed);
    atomic_fetch_sub_explicit(&n->pins, 1, memory_order_release);
}

void bw__circuit_unpin(bw_breaker *c, int64_t stamp)
{
    bw__circuit *n = bw__circuit_node(c);
    if (n)
        unpin(n, stamp);
}

bw_breaker *bw__keyed_parent(const bw_breaker *c)
{
    return bw__circuit_node(c)->fam->parent;
}

void bw__keyed_free(bw__keyed *k)
{
    bw__circuit *c = k->head;
    while (c) {
        bw__circuit *next = c->next;
        bw__breaker_destroy(c->b);
        c = next;
    }
    free(k->tab);
    free(k);
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
        bw__circuit_unpin(c, bw__breaker_stamp(c));
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
    bw__circuit_unpin(c, bw__breaker_stamp(c)); /* the last touch: the family may free it after this */
    return BW_OK;
}

void bw_keyed_release(bw_breaker *c)
{
    if (c && bw__breaker_kind(c) == BW__CIRCUIT)
        bw__circuit_unpin(c, bw__breaker_stamp(c));
}

static pthread_mutex_t apply_mu = PTHREAD_MUTEX_INITIALIZER;

/* Pin every resident circuit of k into a new array (*out, *n). */
static int pin_all(bw__keyed *k, bw__circuit ***out, size_t *n)
{
    bw__circuit **all = NULL;
    for (;;) {
        bw__spin_lock(&k->lock);
        size_t want = k->count;
        bw__spin_unlock(&k->lock);
        bw__circuit **mem = realloc(all, (want + 16) * sizeof *mem);
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
    for (bw__circuit *c = k->head; c; c = c->next) {
        atomic_fetch_add_explicit(&c->pins, 1, memory_order_relaxed);
        all[i++] = c;
    }
    bw__spin_unlock(&k->lock);
    *out = all;
    *n = i;
    return BW_OK;
}

int bw_keyed_apply(bw_breaker *b, bw_verb v)
{
    int state = bw__verb_state(v);
    if (!b || state < 0 || bw__breaker_kind(b) == BW__CIRCUIT)
        return BW_EINVAL;
    pthread_mutex_lock(&apply_mu);
    /* New circuits from now on; then every resident one (none without a family). */
    bw__breaker_set_keyed_preset(b, v == BW_VERB_RESET ? -1 : state);
    bw__keyed *k = family(b, 0);
    bw__circuit **all = NULL;
    size_t n = 0;
    int rc = k ? pin_all(k, &all, &n) : BW_OK;
    for (size_t i = 0; i < n; i++) {
        bw_breaker_apply(all[i]->b, v);
        unpin(all[i], bw__breaker_stamp(all[i]->b));
    }
    pthread_mutex_unlock(&apply_mu);
    free(all);
    return rc;
}

/* The number of resident circuits, or (bytes) the memory they and the map hold. */
static size_t measure(bw_breaker *b, int bytes)
{
    bw__keyed *k = b ? family(b, 0) : NULL;
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
