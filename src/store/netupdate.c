/*
 * netupdate.c — the optimistic update loop of the network store backends
 * (store/netupdate.h says what it does and what a backend supplies).
 *
 * Design notes
 * - One loop for redis: and postgresql:, each of which supplies only its
 *   protocol (what a read, a compare-and-set and a confirmation are on its
 *   wire). Where the two loops it replaces had drifted, the documented rule
 *   (docs/stores.md, "each lost race") is the one kept: a race lost on the
 *   cache's value counts as the first, and the pause with a fresh read comes
 *   from the second on; a cached KEEP found stale by its confirmation is no
 *   lost race.
 * - The pauses draw from the library's one random source (SplitMix64,
 *   base/hash.h), its state the call's own, seeded at the first pause (an
 *   update that loses fewer than two races seeds nothing).
 *
 * Locking: none; everything here is the calling thread's.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <time.h>

#include "base/hash.h"
#include "base/systime.h"
#include "store/netupdate.h"

int64_t bw__netupdate_pause_ns(uint64_t *rng, int c, int64_t left)
{
    int64_t cap = c >= 8 ? BW__NETUPDATE_PAUSE_MAX : (int64_t)16000 << (c < 0 ? 0 : c);
    int64_t ns = (int64_t)(bw__splitmix(rng) % (uint64_t)cap);
    if (ns > left)
        ns = left;
    return ns > 0 ? ns : 0;
}

static int64_t clock_now(const bw__netupdate *u)
{
    return u->clock ? u->clock->now(u->clock->arg) : bw__mono_now();
}

/* The pause after the u->conflicts-th lost race (never past the deadline). */
static void pause_after_race(bw__netupdate *u)
{
    if (u->rng == 0)
        u->rng = bw__hash_seed(u);
    int64_t ns = bw__netupdate_pause_ns(&u->rng, u->conflicts, u->deadline - clock_now(u));
    if (ns <= 0)
        return;
    if (u->clock) {
        u->clock->sleep(u->clock->arg, ns);
    } else {
        struct timespec ts = {0, (long)ns};
        nanosleep(&ts, NULL);
    }
}

void bw__netupdate_start(bw__netupdate *u, const bw__netupdate_ops *ops, const bw__netpool *p, const bw__netslot *s,
                         const char *name)
{
    bw__netupdate z = {
        .ops = ops, .store = p->name, .name = name, .deadline = s->deadline, .timeout_ns = p->timeout_ns};
    *u = z;
}

int bw__netupdate_run(bw__netupdate *u, bw_store_update_fn fn, void *arg)
{
    const bw__netupdate_ops *ops = u->ops;
    int64_t now;
    int fresh = 0; /* the state is what the server answered in this call (not the cache) */
    int rc = BW_OK;
    if (!ops->cached(u, &now)) {
        rc = ops->read(u, &now);
        fresh = 1;
    }
    bw_store_entry cur, next;
    while (rc == BW_OK) { /* each pass runs a command or ends: until the call's deadline */
        int exists;
        int found = ops->entry(u, now, &cur, &exists);
        bw_store_verdict verdict = fn(arg, now, found ? &cur : NULL, &next);
        if (verdict == BW_STORE_KEEP || (verdict == BW_STORE_DELETE && !exists)) {
            if (fresh)
                break;
            /* Decided on the cache: confirmed, or fn runs again on what the key holds now. */
            int same = ops->confirm(u, &now);
            fresh = 1;
            if (same < 0) {
                rc = same;
                break;
            }
            if (!same)
                continue;
            ops->entry(u, now, &cur, &exists);
            if (verdict == BW_STORE_KEEP || !exists)
                break;
            /* A DELETE of an entry now there (expired): delete it, as if fn had seen it */
        }
        int got = ops->write(u, verdict, &next, &now);
        if (got < 0) {
            rc = got;
            break;
        }
        if (got == 1)
            break;
        /*
         * A lost race: the answer carries the value now there and the
         * server's clock, for the next attempt at once; from the second on, a
         * random pause and a fresh read, so that writers racing for one key
         * spread out (and a value answered from a snapshot older than the
         * writer that beat us is not tried again).
         */
        fresh = 1;
        if (++u->conflicts >= 2) {
            pause_after_race(u);
            rc = ops->read(u, &now);
        }
    }
    if (rc == BW_ETIMEDOUT && !u->broken && u->conflicts && clock_now(u) >= u->deadline) /* between two: contention */
        rc = bw__fail(&u->e, BW_ECONFLICT, "",
                      "%s: an update of '%.100s' lost %d races to other clients writing it within its timeout (%" PRId64
                      " ms)",
                      u->store, u->name, u->conflicts, u->timeout_ns / 1000000);
    return rc;
}
