/*
 * memory.c — the memory: store: a hash map behind one mutex, in this process.
 * The reference implementation of the store contract: the contract tests run
 * every other store against the behaviour this one defines.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "store/backend.h"

typedef struct node {
    struct node *next;
    bw_store_entry entry;
    char name[];
} node;

typedef struct mem {
    const bw__store_clock *clock;
    pthread_mutex_t mu;
    node **tab;
    size_t mask, count;
    uint64_t seed;
} mem;

static node **slot_of(mem *m, const char *name)
{
    node **pp = &m->tab[bw__hash(m->seed, name, strlen(name)) & m->mask];
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    return pp;
}

static void grow(mem *m)
{
    size_t mask = m->mask * 2 + 1;
    node **tab = calloc(mask + 1, sizeof *tab);
    if (!tab)
        return; /* keep longer chains */
    for (size_t i = 0; i <= m->mask; i++)
        for (node *n = m->tab[i], *next; n; n = next) {
            next = n->next;
            node **pp = &tab[bw__hash(m->seed, n->name, strlen(n->name)) & mask];
            n->next = *pp;
            *pp = n;
        }
    free(m->tab);
    m->tab = tab;
    m->mask = mask;
}

static int mem_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    mem *m = ctx;
    bw_store_entry next;
    pthread_mutex_lock(&m->mu);
    int64_t now = bw__store_clock_now(m->clock);
    node **pp = slot_of(m, name);
    node *n = *pp;
    const bw_store_entry *cur = n && n->entry.expires_at > now ? &n->entry : NULL;
    int rc = BW_OK;
    switch (fn(arg, now, cur, &next)) {
    case BW_STORE_KEEP:
        break;
    case BW_STORE_PUT: /* store.c checked the verdict and the length */
        if (!n) {
            size_t nl = strlen(name);
            n = malloc(sizeof *n + nl + 1);
            if (!n) {
                rc = bw__fail(err, BW_ENOMEM, "", "out of memory");
                break;
            }
            memcpy(n->name, name, nl + 1);
            n->next = NULL;
            *pp = n;
            if (++m->count > m->mask + 1)
                grow(m);
        }
        bw__entry_copy(&n->entry, &next);
        break;
    case BW_STORE_DELETE:
        if (n) {
            *pp = n->next;
            free(n);
            m->count--;
        }
        break;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* Many entries under one hold of the mutex (the lane's polls): no cheaper single read exists here. */
static int mem_read_many(void *ctx, size_t n, const char *const *names, int64_t *now, bw_store_entry *out, int *found,
                         bw_error *err)
{
    (void)err;
    mem *m = ctx;
    pthread_mutex_lock(&m->mu);
    *now = bw__store_clock_now(m->clock);
    for (size_t i = 0; i < n; i++) {
        const node *e = *slot_of(m, names[i]);
        found[i] = e && e->entry.expires_at > *now;
        if (found[i])
            bw__entry_copy(&out[i], &e->entry);
    }
    pthread_mutex_unlock(&m->mu);
    return BW_OK;
}

static int mem_sweep(void *ctx, int max, int *deleted, bw_error *err)
{
    (void)err;
    mem *m = ctx;
    int n = 0;
    pthread_mutex_lock(&m->mu);
    int64_t now = bw__store_clock_now(m->clock);
    for (size_t i = 0; i <= m->mask && n < max; i++)
        for (node **pp = &m->tab[i]; *pp && n < max;) {
            if ((*pp)->entry.expires_at <= now) {
                node *dead = *pp;
                *pp = dead->next;
                free(dead);
                m->count--;
                n++;
            } else {
                pp = &(*pp)->next;
            }
        }
    pthread_mutex_unlock(&m->mu);
    *deleted = n;
    return BW_OK;
}

/*
 * A page of keys in name order: the `max` smallest live names after the
 * cursor (the last name of the page before), found by one walk of the table
 * with an insertion into a sorted page. The cursor is a name, so it survives
 * the table growing between pages.
 */
static int mem_scan(void *ctx, const char *cursor, char *next, int max, bw_store_key *keys, int *n, bw_error *err)
{
    mem *m = ctx;
    const node **page = malloc((size_t)max * sizeof *page);
    if (!page)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    int got = 0, more = 0;
    pthread_mutex_lock(&m->mu);
    int64_t now = bw__store_clock_now(m->clock);
    for (size_t i = 0; i <= m->mask; i++)
        for (const node *e = m->tab[i]; e; e = e->next) {
            if (e->entry.expires_at <= now || (cursor[0] && strcmp(e->name, cursor) <= 0))
                continue;
            int j = got;
            if (got == max) {
                more = 1; /* this name or the page's last one is for a later page */
                if (strcmp(e->name, page[max - 1]->name) > 0)
                    continue;
                j = max - 1;
            } else {
                got++;
            }
            for (; j > 0 && strcmp(page[j - 1]->name, e->name) > 0; j--)
                page[j] = page[j - 1];
            page[j] = e;
        }
    for (int i = 0; i < got; i++)
        memcpy(keys[i].name, page[i]->name, strlen(page[i]->name) + 1);
    pthread_mutex_unlock(&m->mu);
    *n = got;
    next[0] = 0;
    if (more)
        memcpy(next, keys[got - 1].name, strlen(keys[got - 1].name) + 1);
    free(page);
    return BW_OK;
}

static void mem_close(void *ctx)
{
    mem *m = ctx;
    for (size_t i = 0; i <= m->mask; i++)
        for (node *n = m->tab[i], *next; n; n = next) {
            next = n->next;
            free(n);
        }
    free(m->tab);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static int mem_open(const bw__url *u, const bw__store_clock *clock, bw_store_ops *ops, void **ctx, bw_error *err)
{
    if (u->path[0])
        return bw__fail(err, BW_EINVAL, "path", "a memory: store takes no path, got '%.100s'", u->path);
    mem *m = calloc(1, sizeof *m);
    node **tab = calloc(64, sizeof *tab);
    if (!m || !tab || pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        free(tab);
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    }
    m->clock = clock;
    m->tab = tab;
    m->mask = 63;
    m->seed = bw__hash_seed(m);
    static const bw_store_ops mem_ops = {BW_STORE_OPS_VERSION, "memory", mem_update, mem_sweep, mem_close, NULL,
                                         mem_read_many,        mem_scan};
    *ops = mem_ops;
    *ctx = m;
    return BW_OK;
}

const bw__backend bw__backend_memory = {"memory", {NULL}, BW__STORE_MONOTONIC, mem_open, NULL, NULL};
