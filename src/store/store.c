/*
 * store.c — the store front end: opening a URL through the scheme table,
 * custom stores, the guard every outside update runs through, close hooks
 * (breakwater/store.h, front.h).
 *
 * Design notes: a URL's secrets never reach an error. bw_store_open scrubs
 * its own errors of them (url.c), and a store opened by URL keeps what the
 * scrub looks for (`needles`) to scrub the error of every later call that
 * takes one (update, scan, sweep; read and read_many take none), here at
 * the front end rather than in each backend: a reconnect's message from
 * libpq quotes the hosts it tried, and a password holding an '@' may be
 * read as part of one. Only a failed call pays for it; a URL without a
 * secret (and a custom store) has no needles.
 *
 * Locking: `hooks_mu` guards the close-hook list. Everything else of a store is
 * set before bw_store_open returns and read-only after, but the injected clock
 * (an atomic pointer). The backends do their own locking.
 */
#define _GNU_SOURCE /* CLOCK_MONOTONIC_COARSE */
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/compiler.h"
#include "base/component.h"
#include "store/backend.h"
#include "store/front.h"

struct bw_store {
    bw_store_ops ops;
    void *ctx;
    bw__store_clock clock;
    pthread_mutex_t hooks_mu;
    bw__store_hook *hooks;
    char *needles; /* what a scrub of its errors looks for (url.c), NULL: nothing */
    size_t needles_len;
};

static bw_store *store_new(void)
{
    bw_store *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (pthread_mutex_init(&s->hooks_mu, NULL) != 0) {
        free(s);
        return NULL;
    }
    atomic_init(&s->clock.clock, NULL);
    return s;
}

static void store_free(bw_store *s)
{
    pthread_mutex_destroy(&s->hooks_mu);
    if (s->needles) {
        bw__url_wipe(s->needles, s->needles_len);
        free(s->needles);
    }
    free(s);
}

/* rc, after scrubbing *err of the store's URL's secrets when it is an error (the cold path). */
static BW_NOINLINE int scrub(const bw_store *s, int rc, bw_error *err)
{
    if (err && s->needles) {
        bw__url_scrub_needles(s->needles, err->message, sizeof err->message);
        bw__url_scrub_needles(s->needles, err->field, sizeof err->field);
    }
    return rc;
}

#define SCRUBBED(s, rc, err) (BW_UNLIKELY((rc) != BW_OK) ? scrub((s), (rc), (err)) : BW_OK)

/* ---- opening ---- */

static int check_ops(const bw_store_ops *ops, bw_error *err)
{
    if (!ops)
        return bw__fail(err, BW_EINVAL, "ops", "ops must not be NULL");
    if (ops->version < 1)
        return bw__fail(err, BW_EINVAL, "ops", "ops version must be at least 1, got %d", ops->version);
    if (!ops->scheme || !ops->update || !ops->sweep || !ops->close)
        return bw__fail(err, BW_EINVAL, "ops", "ops must have scheme, update, sweep and close");
    return BW_OK;
}

/* Backend `scheme` of a component's library (base/component.h), loading it if need be. */
static int component_backend(const bw__backend *entry, const bw__backend **out, bw_error *err)
{
    char why[512];
    const bw__component *c = bw__component_get(entry->component, why, sizeof why);
    if (!c)
        return bw__fail(err, BW_ESTATE, "scheme", "%s: store: %s", entry->scheme, why);
    for (const void *const *i = c->items; i && *i; i++) {
        const bw__backend *b = *i;
        if (strcmp(b->scheme, entry->scheme) == 0 && b->open) {
            *out = b;
            return BW_OK;
        }
    }
    return bw__fail(err, BW_ESTATE, "scheme", "the %s component has no %s: store", entry->component, entry->scheme);
}

/* The backend of u's scheme; BW_EINVAL (unknown) or BW_ESTATE (not in this build) otherwise. */
static int find_backend(const bw__url *u, const bw__backend **out, bw_error *err)
{
    char known[160] = "";
    for (const bw__backend *const *b = bw__backends; *b; b++) {
        if (strcmp((*b)->scheme, u->scheme) == 0) {
            if ((*b)->absent)
                return bw__fail(err, BW_ESTATE, "scheme", "%s", (*b)->absent);
            if ((*b)->component)
                return component_backend(*b, out, err);
            *out = *b;
            return BW_OK;
        }
        size_t n = strlen(known);
        snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", (*b)->scheme);
    }
    return bw__fail(err, BW_EINVAL, "scheme", "unknown store scheme '%s' (%s)", u->scheme, known);
}

/* Every option the URL gives must be one the backend takes: checked before anything is created. */
static int check_options(const bw__backend *b, const bw__url *u, bw_error *err)
{
    for (int i = 0; i < u->nopts; i++) {
        int known = 0;
        for (int k = 0; b->options[k]; k++) /* "*": any, the backend checks it (backend.h) */
            known |= strcmp(b->options[k], u->opt[i].key) == 0 || strcmp(b->options[k], "*") == 0;
        if (!known)
            return bw__fail(err, BW_EINVAL, u->opt[i].key, "unknown option '%s' for a %s: store", u->opt[i].key,
                            b->scheme);
    }
    return BW_OK;
}

int bw_store_open(const char *url, bw_store **out, bw_error *err)
{
    if (!url || !out)
        return bw__fail(err, BW_EINVAL, "url", "url and out must not be NULL");
    bw__url *u = malloc(sizeof *u);
    bw_store *s = store_new();
    size_t nl = bw__url_needles(url, NULL, 0); /* first: every error below is scrubbed with them */
    char *needles = nl > 1 ? malloc(nl) : NULL;
    if (!u || !s || (nl > 1 && !needles)) {
        free(u);
        free(needles);
        if (s)
            store_free(s);
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    }
    bw__url_needles(url, needles, nl);
    s->needles = needles;
    s->needles_len = nl;
    const bw__backend *b = NULL;
    int rc = bw__url_parse(url, u, err);
    if (rc == BW_OK)
        rc = find_backend(u, &b, err);
    if (rc == BW_OK)
        rc = check_options(b, u, err);
    if (rc == BW_OK) {
        s->clock.fallback = b->clock;
        rc = b->open(u, &s->clock, &s->ops, &s->ctx, err);
    }
    free(u);
    if (rc != BW_OK) {
        scrub(s, rc, err); /* whatever a backend or its library quoted of the URL: never its secrets (url.c) */
        store_free(s);
        return rc;
    }
    *out = s;
    return BW_OK;
}

int bw_store_url_redact(const char *url, char *buf, size_t n, unsigned *masked)
{
    if (!url || (!buf && n > 0))
        return BW_EINVAL;
    size_t len = bw__url_redact(url, buf, n, masked);
    return len > INT_MAX ? INT_MAX : (int)len;
}

int bw_store_custom(const bw_store_ops *ops, void *ctx, bw_store **out, bw_error *err)
{
    int rc = check_ops(ops, err);
    if (rc != BW_OK)
        return rc;
    if (!out) {
        ops->close(ctx);
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    }
    bw_store *s = store_new();
    if (!s) {
        ops->close(ctx);
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    }
    /* The members its version has (a table only grows at its end); later members stay NULL. */
    size_t size = ops->version >= 3   ? sizeof s->ops
                  : ops->version == 2 ? offsetof(bw_store_ops, scan)
                                      : offsetof(bw_store_ops, read_many);
    memcpy(&s->ops, ops, size);
    s->ctx = ctx;
    *out = s;
    return BW_OK;
}

/* ---- close hooks ---- */

void bw__store_on_close(bw_store *s, bw__store_hook *h)
{
    pthread_mutex_lock(&s->hooks_mu);
    h->next = s->hooks;
    s->hooks = h;
    pthread_mutex_unlock(&s->hooks_mu);
}

void bw__store_off_close(bw_store *s, bw__store_hook *h)
{
    pthread_mutex_lock(&s->hooks_mu);
    for (bw__store_hook **p = &s->hooks; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    pthread_mutex_unlock(&s->hooks_mu);
}

void bw_store_close(bw_store *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->hooks_mu);
    bw__store_hook *h = s->hooks;
    s->hooks = NULL;
    pthread_mutex_unlock(&s->hooks_mu);
    while (h) {
        bw__store_hook *next = h->next; /* the hook may free h */
        h->fn(h);
        h = next;
    }
    s->ops.close(s->ctx);
    store_free(s);
}

/* ---- the clock ---- */

const char *bw_store_scheme(const bw_store *s)
{
    return s ? s->ops.scheme : NULL;
}

int bw_store_set_clock(bw_store *s, bw_clock *clock)
{
    if (!s)
        return BW_EINVAL;
    atomic_store(&s->clock.clock, clock);
    return BW_OK;
}

/* ---- updates, reads, sweeps ---- */

/*
 * Every update from outside runs the caller's function through this guard, so
 * that no store (built in or custom) ever sees an unknown verdict or a bad
 * length: those become "keep" and the update returns BW_EINVAL.
 */
typedef struct guard {
    bw_store_update_fn fn;
    void *arg;
    int bad; /* 1 bad length, 2 unknown verdict */
    uint32_t len;
} guard;

static bw_store_verdict guarded(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    guard *g = arg;
    bw_store_verdict v = g->fn(g->arg, now, cur, next);
    if (v == BW_STORE_PUT && (next->len < 1 || next->len > BW_STORE_DATA_MAX)) {
        g->bad = 1;
        g->len = next->len;
        return BW_STORE_KEEP;
    }
    if (v != BW_STORE_KEEP && v != BW_STORE_PUT && v != BW_STORE_DELETE) {
        g->bad = 2;
        return BW_STORE_KEEP;
    }
    return v;
}

int bw__store_update(bw_store *s, const char *key, bw_store_update_fn fn, void *arg, bw_error *err)
{
    int rc = s->ops.update(s->ctx, key, fn, arg, err);
    return SCRUBBED(s, rc, err);
}

int bw_store_update(bw_store *s, const char *key, bw_store_update_fn fn, void *arg, bw_error *err)
{
    if (!s || !fn)
        return bw__fail(err, BW_EINVAL, "", "store and fn must not be NULL");
    int rc = bw__check_store_key(key, "name", err);
    if (rc != BW_OK)
        return rc;
    guard g = {fn, arg, 0, 0};
    rc = s->ops.update(s->ctx, key, guarded, &g, err);
    if (rc != BW_OK)
        return scrub(s, rc, err);
    if (g.bad == 1)
        return bw__fail(err, BW_EINVAL, "len", "entry length must be in [1, %d], got %u", BW_STORE_DATA_MAX, g.len);
    if (g.bad == 2)
        return bw__fail(err, BW_EINVAL, "verdict", "the update function returned an unknown verdict");
    return rc;
}

int bw__store_try_read(bw_store *s, const char *key, int64_t *now, bw_store_entry *out, int *found)
{
    if (!s->ops.read)
        return BW_ESTATE;
    return s->ops.read(s->ctx, key, now, out, found, NULL);
}

int bw__store_read_many(bw_store *s, size_t n, const char *const *keys, int64_t *now, bw_store_entry *out, int *found)
{
    if (!s->ops.read_many)
        return BW_ESTATE;
    return s->ops.read_many(s->ctx, n, keys, now, out, found, NULL);
}

int bw_store_sweep(bw_store *s, int max, int *deleted, bw_error *err)
{
    int n = 0;
    if (!s || max < 1)
        return bw__fail(err, BW_EINVAL, "max", "store must not be NULL and max must be >= 1");
    int rc = s->ops.sweep(s->ctx, max, &n, err);
    if (deleted)
        *deleted = n;
    return SCRUBBED(s, rc, err);
}

_Static_assert(BW_STORE_KEY_MAX == BW__STORE_KEY_MAX, "the public and the internal key bounds agree");

int bw_store_scan(bw_store *s, bw_store_cursor *cursor, bw_store_key *keys, int max, int *n, bw_error *err)
{
    if (!s || !cursor || !keys || !n || max < 1)
        return bw__fail(err, BW_EINVAL, "", "store, cursor, keys and n must not be NULL, and max must be >= 1");
    *n = 0;
    if (cursor->done)
        return bw__fail(err, BW_EINVAL, "cursor", "the listing is complete (cursor done)");
    if (!memchr(cursor->pos, 0, sizeof cursor->pos))
        return bw__fail(err, BW_EINVAL, "cursor", "the cursor is not a string (not zeroed, or not the store's)");
    if (!s->ops.scan)
        return bw__fail(err, BW_ENOTSUP, "scheme", "a %s: store cannot list its circuits (no scan operation)",
                        s->ops.scheme);
    char next[BW_STORE_CURSOR_MAX];
    next[0] = 0;
    int got = 0;
    int rc = s->ops.scan(s->ctx, cursor->pos, next, max, keys, &got, err);
    if (rc != BW_OK)
        return scrub(s, rc, err);
    if (got < 0 || got > max)
        return bw__fail(err, BW_ESYS, "", "the store's scan listed %d keys for a page of %d", got, max);
    next[sizeof next - 1] = 0;
    for (int i = 0; i < got; i++)
        keys[i].name[BW_STORE_KEY_MAX] = 0;
    memcpy(cursor->pos, next, sizeof next);
    cursor->done = next[0] == 0;
    *n = got;
    return BW_OK;
}
