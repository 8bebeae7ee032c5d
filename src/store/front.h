/*
 * front.h — what the layers above the store layer use of it beyond the public
 * API (internal; store layer).
 *
 * Keys are store keys (base/name.h), checked already by the caller. A store
 * tells the layers above that it is closing through close hooks they register:
 * the store layer knows nothing of what uses it.
 */
#ifndef BW_STORE_FRONT_H
#define BW_STORE_FRONT_H

#include "breakwater/store.h"

/*
 * One update by breakwater itself: `key` checked already, `fn` one whose
 * verdicts and lengths need no guard (share/circuit.c's). Returns as
 * bw_store_update.
 */
int bw__store_update(bw_store *s, const char *key, bw_store_update_fn fn, void *arg, bw_error *err);

/*
 * Read key's entry without writing or waiting, through the store's optional
 * read. BW_OK with *found (0 when absent or expired) and *now (the store's
 * clock); BW_ESTATE when the store has no read or could not answer at once;
 * another error from the store.
 */
int bw__store_try_read(bw_store *s, const char *key, int64_t *now, bw_store_entry *out, int *found);

/*
 * Read n entries in one call, through the store's optional read_many: BW_OK
 * with out[i], found[i] and *now; BW_ESTATE when the store has none; another
 * error from the store.
 */
int bw__store_read_many(bw_store *s, size_t n, const char *const *keys, int64_t *now, bw_store_entry *out, int *found);

/* A hook bw_store_close runs first, before anything of the store is released. */
typedef struct bw__store_hook {
    struct bw__store_hook *next;
    void (*fn)(struct bw__store_hook *h);
} bw__store_hook;

/* Register / remove a close hook (any thread; h stays the caller's). */
void bw__store_on_close(bw_store *s, bw__store_hook *h);
void bw__store_off_close(bw_store *s, bw__store_hook *h);

#endif
