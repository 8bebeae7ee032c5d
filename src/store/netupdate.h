/*
 * netupdate.h — the update algorithm of the network store backends, redis:
 * and postgresql: (internal; store layer, beside the connection pool).
 *
 * An update there is optimistic: fn runs in this process on the value the
 * backend last saw (or read), and the backend writes its verdict only if the
 * key still holds that value (a compare-and-set, no lock held across a round
 * trip). This file is that loop, once; a backend supplies its protocol as
 * bw__netupdate_ops and runs one call with bw__netupdate_run.
 *
 * - The cache: when the backend knows the key's value (ops->cached: the
 *   value it last saw, and `now` estimated), fn runs on it at once and its
 *   verdict is sent without a read first: one round trip. A stale value is
 *   only a conflict, never a write over another client's. Otherwise the key
 *   is read first (ops->read).
 * - A KEEP, or a DELETE where there is nothing at all, is no write: decided
 *   on a value the server answered in this call, the update ends there;
 *   decided on the cache, it is confirmed (ops->confirm: the key still holds
 *   what fn saw), and fn runs again on the current value when it does not (a
 *   changed value is no lost race: nothing was written). A DELETE confirmed
 *   on a key that now holds something (an expired row) deletes it.
 * - A conflict (ops->write answers the current value and the server's clock)
 *   is a lost race: fn runs again on that answer at once; from the second
 *   lost race on, after a random pause and a fresh read (ops->read), so that
 *   writers racing for one key spread out: the pause after the c-th is drawn
 *   from [0, min(4 ms, 16 us << c)) by the library's one random source
 *   (SplitMix64, base/hash.h), and never reaches past the call's deadline.
 * - It goes on until an operation fails. The backend's operations check the
 *   call's deadline before each command (bw__netpool_check: BW_ETIMEDOUT,
 *   nothing sent). An update that lost a race and then found its deadline
 *   passed between two commands (BW_ETIMEDOUT, the connection not broken,
 *   the deadline behind) fails with BW_ECONFLICT, saying how many races it
 *   lost: contention, not a failing store. One whose command the deadline cut
 *   (the backend sets `broken`) stays BW_ETIMEDOUT, as does a timeout the
 *   server reported before the deadline (postgresql:'s statement_timeout).
 *
 * Locking: none here; fn runs with no lock held (the backend's operations
 * take their own cache lock only to copy in or out).
 */
#ifndef BW_STORE_NETUPDATE_H
#define BW_STORE_NETUPDATE_H

#include <stdint.h>

#include "base/error.h"
#include "breakwater/store.h"
#include "store/netpool.h"

#define BW__NETUPDATE_PAUSE_MAX ((int64_t)4000000) /* ns: the longest pause between two lost races */

typedef struct bw__netupdate bw__netupdate;

/*
 * A backend's protocol. Each operation gets the call (the backend's own call
 * state begins with it) and keeps the value it last saw of the key in that
 * state ("the state" below); on an error it fills u->e (and sets u->broken
 * when its connection failed) and returns a bw_status below 0.
 */
typedef struct bw__netupdate_ops {
    /* Whether the backend knows the key's value without a command: 1, the state holds it and *now the estimated
     * store clock; 0 (nothing sent): the update reads first. */
    int (*cached)(bw__netupdate *u, int64_t *now);
    /* Read the key: BW_OK with the state the value there and *now the store's clock, or an error. */
    int (*read)(bw__netupdate *u, int64_t *now);
    /* The entry the state holds at `now` into *cur: 1 when it is a live entry (else 0, *cur untouched); *exists:
     * anything is stored at the key (live, expired or malformed), so that a DELETE has something to delete. */
    int (*entry)(bw__netupdate *u, int64_t now, bw_store_entry *cur, int *exists);
    /* Write `verdict` (BW_STORE_PUT of *next, or BW_STORE_DELETE) if the key still holds the state's value; *now is
     * the instant fn decided at. 1: written (the state becomes what was written); 0: a conflict (the state and *now
     * become the key's current value and the store's clock); or an error. */
    int (*write)(bw__netupdate *u, bw_store_verdict verdict, const bw_store_entry *next, int64_t *now);
    /* Whether the key still holds the value fn saw (a KEEP or a DELETE of nothing decided on the cache): 1 yes (the
     * state and *now may be refreshed); 0 no (the state and *now become the current value and clock); or an error. */
    int (*confirm)(bw__netupdate *u, int64_t *now);
} bw__netupdate_ops;

/* The clock and the sleep of the pauses and the deadline check; a test's fake (NULL: bw__mono_now, nanosleep). */
typedef struct bw__netupdate_clock {
    int64_t (*now)(void *arg);
    void (*sleep)(void *arg, int64_t ns);
    void *arg;
} bw__netupdate_clock;

/* One update call: bw__netupdate_start fills it; the backend's own state follows it. */
struct bw__netupdate {
    const bw__netupdate_ops *ops;
    const char *store;                /* the messages' prefix: "redis", "postgresql" */
    const char *name;                 /* the key, for the messages */
    int64_t deadline;                 /* the call's (its pool slot's), a bw__mono_now instant */
    int64_t timeout_ns;               /* the store's timeout, for the messages */
    const bw__netupdate_clock *clock; /* NULL: the real one */
    int broken;                       /* the operations': the connection failed (a command the deadline cut) */
    bw_error e;                       /* the operations' error, and the call's */
    int conflicts;                    /* races lost (compare-and-sets another client's write beat) */
    uint64_t rng;                     /* the pauses' SplitMix64 state; seeded at the first pause */
};

/*
 * Make u (the rest of the backend's call state is the backend's) an update of
 * `name` with the backend's ops, on slot s of pool p: its deadline is the
 * slot's, its messages start with the pool's name.
 */
void bw__netupdate_start(bw__netupdate *u, const bw__netupdate_ops *ops, const bw__netpool *p, const bw__netslot *s,
                         const char *name);

/*
 * Run the update of u's key with fn (as bw_store_update documents it: fn may
 * run more than once; the last run's verdict is the one applied). BW_OK, or
 * an error with u->e filled: an operation's, or BW_ECONFLICT (above).
 */
int bw__netupdate_run(bw__netupdate *u, bw_store_update_fn fn, void *arg);

/*
 * The pause after the c-th lost race, in ns: drawn from [0, min(4 ms, 16 us
 * << c)) by SplitMix64 on *rng, and at most `left` (the time to the
 * deadline; none when it passed).
 */
int64_t bw__netupdate_pause_ns(uint64_t *rng, int c, int64_t left);

#endif
