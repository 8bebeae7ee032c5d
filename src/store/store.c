/*
 * store.c — the store front end: URLs, the ops table, argument checks, the
 * store's clock.
 */
#define _GNU_SOURCE /* CLOCK_MONOTONIC_COARSE */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store_impl.h"

/* ---- URLs ---- */

/* scheme ":" path ["?" k=v {"&" k=v}]; each part bounded, nothing unescaped. */
static int parse_url(const char *url, bw__url *u, bw_error *err)
{
    memset(u, 0, sizeof *u);
    const char *colon = strchr(url, ':');
    if (!colon || colon == url)
        return bw__fail(err, BW_EINVAL, "url", "store URL must look like scheme:path, got '%.100s'", url);
    size_t n = (size_t)(colon - url);
    if (n >= sizeof u->scheme)
        return bw__fail(err, BW_EINVAL, "scheme", "unknown store scheme '%.*s'", (int)(n < 40 ? n : 40), url);
    memcpy(u->scheme, url, n);
    const char *p = colon + 1;
    const char *q = strchr(p, '?');
    size_t plen = q ? (size_t)(q - p) : strlen(p);
    if (plen >= sizeof u->path)
        return bw__fail(err, BW_EINVAL, "path", "store path is too long (%zu bytes, at most %zu)", plen,
                        sizeof u->path - 1);
    memcpy(u->path, p, plen);
    while (q) {
        const char *k = q + 1;
        q = strchr(k, '&');
        size_t len = q ? (size_t)(q - k) : strlen(k);
        const char *eq = memchr(k, '=', len);
        if (!eq || eq == k)
            return bw__fail(err, BW_EINVAL, "url", "store option must be key=value, got '%.*s'",
                            (int)(len < 60 ? len : 60), k);
        size_t kl = (size_t)(eq - k), vl = len - kl - 1;
        if (u->nopts == BW__URL_MAX_OPTS)
            return bw__fail(err, BW_EINVAL, "url", "at most %d store options", BW__URL_MAX_OPTS);
        if (kl >= sizeof u->opt[0].key || vl >= sizeof u->opt[0].value)
            return bw__fail(err, BW_EINVAL, "url", "store option '%.*s' is too long", (int)(kl < 32 ? kl : 32), k);
        for (int i = 0; i < u->nopts; i++)
            if (strlen(u->opt[i].key) == kl && memcmp(u->opt[i].key, k, kl) == 0)
                return bw__fail(err, BW_EINVAL, u->opt[i].key, "store option '%s' is given twice", u->opt[i].key);
        memcpy(u->opt[u->nopts].key, k, kl);
        memcpy(u->opt[u->nopts].value, eq + 1, vl);
        u->nopts++;
    }
    return BW_OK;
}

const char *bw__url_opt(bw__url *u, const char *key)
{
    for (int i = 0; i < u->nopts; i++)
        if (strcmp(u->opt[i].key, key) == 0)
            return u->opt[i].value;
    return NULL;
}

int bw__url_int(bw__url *u, const char *key, int64_t lo, int64_t hi, int64_t dflt, int duration, int64_t *out,
                bw_error *err)
{
    const char *v = bw__url_opt(u, key);
    if (!v) {
        *out = dflt;
        return BW_OK;
    }
    int64_t x = 0;
    /* The configuration text's rules: no spaces, exact durations, overflow reported as such. */
    int bad = duration ? bw__parse_duration(v, &x) : bw__parse_int(v, &x);
    if (bad == 1)
        return bw__fail(err, BW_EINVAL, key,
                        "%s must be a whole number in [%" PRId64 ", %" PRId64 "], got '%.60s' (too large)", key, lo, hi,
                        v);
    if (bad || x < lo || x > hi) {
        if (!duration)
            return bw__fail(err, BW_EINVAL, key, "%s must be a whole number in [%" PRId64 ", %" PRId64 "], got '%.60s'",
                            key, lo, hi, v);
        char a[32], b[32];
        bw__fmt_duration(a, sizeof a, lo, "off");
        bw__fmt_duration(b, sizeof b, hi, "off");
        return bw__fail(err, BW_EINVAL, key, "%s must be a duration in [%s, %s], got '%.60s'", key, a, b, v);
    }
    *out = x;
    return BW_OK;
}

/* ---- the front end ---- */

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

/* The built-in schemes, and the options each takes (checked before anything is created). */
typedef struct scheme {
    const char *name;
    int (*open)(bw_store *s, bw__url *u, bw_error *err);
    const char *options[3];
} scheme;

static const scheme schemes[] = {
    {"memory", bw__memory_open, {NULL}},
    {"shm", bw__shm_open, {"capacity", "lock_timeout", NULL}},
#ifdef BW_HAVE_SQLITE
    {"sqlite", bw__sqlite_open, {"busy_timeout", "sweep", NULL}},
#else
    {"sqlite", NULL, {NULL}},
#endif
};

static int check_options(const scheme *sc, const bw__url *u, bw_error *err)
{
    for (int i = 0; i < u->nopts; i++) {
        int known = 0;
        for (int k = 0; sc->options[k]; k++)
            known |= strcmp(sc->options[k], u->opt[i].key) == 0;
        if (!known)
            return bw__fail(err, BW_EINVAL, u->opt[i].key, "unknown option '%s' for a %s: store", u->opt[i].key,
                            sc->name);
    }
    return BW_OK;
}

int bw_store_open(const char *url, bw_store **out, bw_error *err)
{
    if (!url || !out)
        return bw__fail(err, BW_EINVAL, "url", "url and out must not be NULL");
    bw__url *u = malloc(sizeof *u);
    bw_store *s = calloc(1, sizeof *s);
    if (!u || !s) {
        free(u);
        free(s);
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    }
    int rc = parse_url(url, u, err);
    const scheme *sc = NULL;
    for (size_t i = 0; rc == BW_OK && i < sizeof schemes / sizeof schemes[0]; i++)
        if (strcmp(u->scheme, schemes[i].name) == 0)
            sc = &schemes[i];
    if (rc == BW_OK && !sc)
        rc = bw__fail(err, BW_EINVAL, "scheme", "unknown store scheme '%s' (memory, shm, sqlite)", u->scheme);
    else if (rc == BW_OK && !sc->open)
        rc = bw__fail(err, BW_ESTATE, "scheme", "this build of breakwater has no SQLite support");
    if (rc == BW_OK)
        rc = check_options(sc, u, err);
    if (rc == BW_OK) {
        atomic_init(&s->clock, NULL);
        rc = sc->open(s, u, err);
    }
    free(u);
    if (rc != BW_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return BW_OK;
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
    bw_store *s = calloc(1, sizeof *s);
    if (!s) {
        ops->close(ctx);
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    }
    s->ops = *ops; /* the version 1 members: a later table only appends, so its prefix is one */
    s->ctx = ctx;
    atomic_init(&s->clock, NULL);
    *out = s;
    return BW_OK;
}

void bw_store_close(bw_store *s)
{
    if (!s)
        return;
    bw__lane_stop(s);
    s->ops.close(s->ctx);
    free(s);
}

const char *bw_store_scheme(const bw_store *s)
{
    return s ? s->ops.scheme : NULL;
}

int bw_store_set_clock(bw_store *s, bw_clock *clock)
{
    if (!s)
        return BW_EINVAL;
    atomic_store(&s->clock, clock);
    return BW_OK;
}

/*
 * The default store clocks are the kernel's coarse clocks: about 5 ns a read
 * instead of about 22 on a VM, at a resolution of a few milliseconds (one
 * tick), which is finer than any time a store decides on (open waits, probe
 * rounds, one-second window buckets, lifetimes). Call durations are measured by
 * the breaker's own clock, never the store's.
 */
int64_t bw__store_now(const bw_store *s)
{
    bw_clock *c = atomic_load(&((bw_store *)s)->clock);
    if (c)
        return bw_clock_now(c);
    struct timespec ts;
    clock_gettime(s->default_clock == BW__STORE_REALTIME ? CLOCK_REALTIME_COARSE : CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * BW_NS_PER_S + ts.tv_nsec;
}

/*
 * Every update runs the caller's function through this guard, so that no store
 * (built in or custom) ever sees an unknown verdict or a bad length: those
 * become "keep" and the update returns BW_EINVAL.
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

int bw__store_update(bw_store *s, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    return s->ops.update(s->ctx, name, fn, arg, err);
}

int bw_store_update(bw_store *s, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    if (!s || !fn)
        return bw__fail(err, BW_EINVAL, "", "store and fn must not be NULL");
    int rc = bw__check_name(name, "name", err);
    if (rc != BW_OK)
        return rc;
    guard g = {fn, arg, 0, 0};
    rc = s->ops.update(s->ctx, name, guarded, &g, err);
    if (rc == BW_OK && g.bad == 1)
        return bw__fail(err, BW_EINVAL, "len", "entry length must be in [1, %d], got %u", BW_STORE_DATA_MAX, g.len);
    if (rc == BW_OK && g.bad == 2)
        return bw__fail(err, BW_EINVAL, "verdict", "the update function returned an unknown verdict");
    return rc;
}

int bw__store_try_read(bw_store *s, const char *name, int64_t *now, bw_store_entry *out, int *found)
{
    if (!s->ops.read)
        return BW_ESTATE;
    return s->ops.read(s->ctx, name, now, out, found, NULL);
}

int bw_store_sweep(bw_store *s, int max, int *deleted, bw_error *err)
{
    int n = 0;
    if (!s || max < 1)
        return bw__fail(err, BW_EINVAL, "max", "store must not be NULL and max must be >= 1");
    int rc = s->ops.sweep(s->ctx, max, &n, err);
    if (deleted)
        *deleted = n;
    return rc;
}
