/*
 * store_impl.h — what the store front end (store.c) and the built-in backends
 * (memory.c, shm.c, sqlite.c) share (internal).
 *
 * A backend's open function fills the store's ops table and ctx. Its update
 * reads the store's clock through bw__store_now(store), so that tests can
 * inject a manual clock; its ctx keeps the bw_store pointer for that.
 */
#ifndef BW_STORE_IMPL_H
#define BW_STORE_IMPL_H

#include <stdatomic.h>
#include <string.h>

#include "core/internal.h"
#include "breakwater/store.h"

#define BW__URL_MAX_OPTS 8

/* A parsed URL: scheme ":" path ["?" key "=" value {"&" key "=" value}]. */
typedef struct bw__url {
    char scheme[16];
    char path[4096];
    int nopts;
    struct {
        char key[32];
        char value[128];
    } opt[BW__URL_MAX_OPTS];
} bw__url;

/* The value of option `key`, or NULL when absent (store.c checked every key is known). */
const char *bw__url_opt(bw__url *u, const char *key);
/*
 * Option `key` as a whole number in [lo, hi] (dflt when absent), or as a
 * duration ("5s", "1h", "off" = 0) when `duration`. BW_EINVAL with *err naming
 * the option otherwise.
 */
int bw__url_int(bw__url *u, const char *key, int64_t lo, int64_t hi, int64_t dflt, int duration, int64_t *out,
                bw_error *err);

/* The default clocks of the backends. */
enum { BW__STORE_MONOTONIC = 0, BW__STORE_REALTIME = 1 };

struct bw_store {
    bw_store_ops ops;
    void *ctx;
    _Atomic(bw_clock *) clock; /* set by bw_store_set_clock; NULL = the default */
    int default_clock;         /* BW__STORE_MONOTONIC or BW__STORE_REALTIME */
    struct lane *lane;         /* coordinated breakers' lane (coord.c), made on first use */
};

/*
 * Read name's entry without writing or waiting (a breaker's name, validated
 * already), through the store's optional read. BW_OK with *found (0 when
 * absent or expired) and *now (the store's clock); BW_ESTATE when the store has
 * no read or could not answer at once; another error from the store.
 */
int bw__store_try_read(bw_store *s, const char *name, int64_t *now, bw_store_entry *out, int *found);
/*
 * An update by breakwater itself: a breaker's name, validated already, and an
 * update function (bw__shared_apply) whose verdicts need no guard.
 */
int bw__store_update(bw_store *s, const char *name, bw_store_update_fn fn, void *arg, bw_error *err);

/* Stop the store's lane, if it has one (coord.c). */
void bw__lane_stop(bw_store *s);

/* The store's clock, in ns. */
int64_t bw__store_now(const bw_store *s);

/* Backends: fill s->ops, s->ctx and s->default_clock, or fail with *err filled. */
int bw__memory_open(bw_store *s, bw__url *u, bw_error *err);
int bw__shm_open(bw_store *s, bw__url *u, bw_error *err);
#ifdef BW_HAVE_SQLITE
int bw__sqlite_open(bw_store *s, bw__url *u, bw_error *err);
#endif

/*
 * shm.c's fault-injection hook for tests: when set, a commit calls it at each
 * point (the journal written but not yet pending; pending set but nothing
 * applied; half the entry's data applied), e.g. to kill the process there.
 */
enum { BW__SHM_FAULT_JOURNAL = 1, BW__SHM_FAULT_PENDING = 2, BW__SHM_FAULT_APPLY = 3 };
extern void (*bw__shm_fault)(int point);

/* Copy an entry's used bytes (for backends that keep entries). */
static inline void bw__entry_copy(bw_store_entry *dst, const bw_store_entry *src)
{
    dst->expires_at = src->expires_at;
    dst->len = src->len;
    memcpy(dst->data, src->data, src->len);
}

#endif
