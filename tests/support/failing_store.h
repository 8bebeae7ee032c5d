/*
 * failing_store.h — store wrappers for the tests (tests/support/): a store
 * over a real one (any URL) that fails on command, and one that counts what
 * reaches the real one. Both are custom stores (bw_store_custom) whose ctx
 * starts with the wrapped store, so they share wrapped_sweep and
 * wrapped_close; a test's own wrapper may use them too. The test keeps the
 * wrapper's struct and the wrapped store alive and closes the wrapper first.
 */
#ifndef BW_TEST_FAILING_STORE_H
#define BW_TEST_FAILING_STORE_H

#include <stdatomic.h>

#include "harness.h"
#include "store/front.h"

/* ---- for every wrapper: ctx starts with the wrapped store ---- */

/* The sweep of a wrapper: the wrapped store's. */
static inline int wrapped_sweep(void *ctx, int max, int *deleted, bw_error *err)
{
    bw_store *inner = *(bw_store **)ctx;
    return bw_store_sweep(inner, max, deleted, err);
}

/* The close of a wrapper: nothing (the test owns the wrapped store). */
static inline void wrapped_close(void *ctx)
{
    (void)ctx;
}

/* The sweep of a test's store that keeps nothing worth sweeping. */
static inline int nothing_swept(void *ctx, int max, int *deleted, bw_error *err)
{
    (void)ctx;
    (void)max;
    (void)err;
    *deleted = 0;
    return BW_OK;
}

/* A store over a test's own ops table and ctx (a failure is a failed check, and NULL). */
static inline bw_store *custom_store(const bw_store_ops *ops, void *ctx)
{
    bw_store *s = NULL;
    bw_error e;
    if (bw_store_custom(ops, ctx, &s, &e) != BW_OK)
        H_FAIL("bw_store_custom: %s", e.message);
    return s;
}

/* ---- a store that fails on command ---- */

typedef struct failing_store {
    bw_store *inner;  /* first: wrapped_sweep reads it */
    atomic_int fail;  /* while set, every update fails with `code` and FAILING_MESSAGE */
    atomic_int calls; /* updates asked for, failed or not */
    atomic_int code;  /* the failure's code: 0 for BW_ESYS (failing_set_code) */
} failing_store;

#define FAILING_MESSAGE "down on command"

static inline int failing_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    failing_store *f = ctx;
    atomic_fetch_add(&f->calls, 1);
    if (atomic_load(&f->fail)) {
        int code = atomic_load(&f->code) ? atomic_load(&f->code) : BW_ESYS;
        if (err) {
            err->code = code;
            err->field[0] = 0;
            snprintf(err->message, sizeof err->message, FAILING_MESSAGE);
        }
        return code;
    }
    return bw_store_update(f->inner, name, fn, arg, err);
}

/* No read: every admission goes through update, where the failure is. */
static const bw_store_ops failing_ops = {.version = BW_STORE_OPS_VERSION,
                                         .scheme = "failing",
                                         .update = failing_update,
                                         .sweep = wrapped_sweep,
                                         .close = wrapped_close,
                                         .read = NULL};

/* Wrap inner in *f (working until failing_set): the wrapper store. */
static inline bw_store *failing_wrap(failing_store *f, bw_store *inner)
{
    f->inner = inner;
    atomic_store(&f->fail, 0);
    atomic_store(&f->calls, 0);
    atomic_store(&f->code, 0);
    return custom_store(&failing_ops, f);
}

/* Make every update fail (on = 1) or work again (on = 0). */
static inline void failing_set(failing_store *f, int on)
{
    atomic_store(&f->fail, on);
}

/* Make every update fail with `code` (BW_ECONFLICT: it lost every race to other writers), or work again (BW_OK). */
static inline void failing_set_code(failing_store *f, int code)
{
    atomic_store(&f->code, code);
    atomic_store(&f->fail, code != BW_OK);
}

/* ---- a store that counts what reaches the real one ---- */

typedef struct counting_store {
    bw_store *inner; /* first: wrapped_sweep reads it */
    atomic_int updates, reads;
} counting_store;

static inline int counting_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    counting_store *c = ctx;
    atomic_fetch_add(&c->updates, 1);
    return bw_store_update(c->inner, name, fn, arg, err);
}

/* A batched read counts once; a wrapped store with no read_many is read one name at a time. */
static inline int counting_read_many(void *ctx, size_t n, const char *const *names, int64_t *now, bw_store_entry *out,
                                     int *found, bw_error *err)
{
    (void)err;
    counting_store *c = ctx;
    atomic_fetch_add(&c->reads, 1);
    int rc = bw__store_read_many(c->inner, n, names, now, out, found);
    for (size_t i = 0; rc == BW_ESTATE && i < n; i++) /* a store with no batched read: one at a time */
        rc = bw__store_try_read(c->inner, names[i], now, &out[i], &found[i]);
    return rc;
}

static const bw_store_ops counting_ops = {.version = BW_STORE_OPS_VERSION,
                                          .scheme = "counting",
                                          .update = counting_update,
                                          .sweep = wrapped_sweep,
                                          .close = wrapped_close,
                                          .read_many = counting_read_many};

/* Wrap inner in *c, counts at 0: the wrapper store. */
static inline bw_store *counting_wrap(counting_store *c, bw_store *inner)
{
    c->inner = inner;
    atomic_store(&c->updates, 0);
    atomic_store(&c->reads, 0);
    return custom_store(&counting_ops, c);
}

#endif
