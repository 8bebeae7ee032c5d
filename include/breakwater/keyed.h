/*
 * breakwater/keyed.h — many independent circuits inside one breaker, one per key
 * (a host, a tenant, a model endpoint), with bounded memory.
 *
 *     bw_permit p;
 *     bw_rejection why;
 *     if (bw_keyed_acquire(b, tenant, &p, &why) == BW_REJECTED)
 *         return busy(why.retry_after_ns);     // only this tenant's circuit is open
 *     int rc = call_backend(tenant);
 *     bw_settle(b, &p, rc == 0 ? BW_SUCCESS : BW_FAILURE);
 *
 * Each key gets its own circuit: its own state, window, cool-down, probes and
 * last failure, made on first use from the breaker's configuration (same
 * thresholds, clock, listener and classifier; a time window is not striped).
 * The breaker's own circuit (bw_acquire(b, ...)) is independent of all of them.
 * A circuit is a bw_breaker: with a handle from bw_keyed_get every function of
 * breaker.h works on it (acquire, settle, state, snapshot, the operator verbs).
 * Listener events of a circuit carry the breaker's name in `name` and the key in
 * `key` (NULL for the breaker's own circuit).
 *
 * Keys are 1 to 255 printable ASCII bytes without spaces.
 *
 * WITH A STORE. The circuits of a breaker with a store (bw_config_set_store)
 * are shared through it too, in the breaker's mode, each under the store key
 * "NAME KEY" (the breaker's name, one space, the key; docs/stores.md): the
 * circuit of one key is one circuit for every process using that breaker name,
 * and distinct from every other key's and from every breaker's own circuit
 * (names and keys hold no space, so no two of them make the same store key).
 * In coordinated mode each circuit is polled by the store's lane like a breaker
 * (in one batch per poll tick); evicting a circuit forgets only its local
 * counters, and never waits for its store.
 * What a key leaves in the store is bounded as its memory is: in stored mode a
 * quiet circuit's entry (defined below: nothing but successes) expires
 * keyed_idle after its last write (and no later than a time window's length);
 * keyed_idle 0 keeps no quiet entry at all. In memory a quiet circuit unused
 * for keyed_idle is only evictable: it goes when a new key arrives while
 * keyed_maxsize circuits are resident (below), and is kept, successes and
 * all, while there is room. The store's entry expires whatever the room, and
 * with it the successes in its window: for a key called less often than
 * keyed_idle (or than a time window's length), the rate policy judges a
 * failure on the calls since its entry expired alone, where a resident
 * circuit would count the earlier successes too. With min_calls=1 and
 * failure_rate=0.5, 9 successes then, keyed_idle later, a failure: 1 of 1
 * failed, the stored circuit trips; 1 of 10 in memory, it stays CLOSED. Keep
 * min_calls above what one quiet spell of a sparse key can bring (the
 * default 10), or keyed_idle above its calls' interval, where that matters.
 * (The consecutive policy loses nothing there: a failure clears the
 * consecutive successes anyway.) An entry with history (a failure, a slow call, OPEN,
 * HALF_OPEN), an operator hold or a reset's fence keeps store_ttl as the
 * breaker's own circuit does (config.h). So a flood of new keys that only
 * succeed leaves at most the keys written within the last keyed_idle live in
 * the store (its rate x keyed_idle), and none keyed_idle after it stops (each
 * store then removes them: docs/many-breakers.md). A call in flight when its
 * key's quiet entry expires settles as stale (not counted).
 * Coordinated mode writes nothing for a CLOSED key (only trips, votes and
 * probe rounds).
 *
 * BOUNDED MEMORY. The breaker keeps at most keyed_maxsize circuits resident
 * (config.h; default 1024, 0 = unbounded) and never more than keyed_limit
 * (default twice keyed_maxsize). Eviction runs only when a new key arrives:
 * 1. While keyed_maxsize or more circuits are resident, evict the least recently
 *    used circuit that is *idle*: not pinned (no permit in flight, no handle
 *    held) and either
 *    - quiet — CLOSED with no failure, slow call or consecutive failure in its
 *      window and no failed half-open round behind it — and unused for at least
 *      keyed_idle (default 300 s); or
 *    - carrying history — OPEN, HALF_OPEN, or CLOSED with failures in its window
 *      — and unused for at least keyed_history_idle (default 1 h) and, if OPEN,
 *      past the end of its open wait.
 *    A circuit in an operator state (FORCED_OPEN, DISABLED, METRICS_ONLY) is
 *    never evicted: eviction would silently undo the operator.
 *    If no circuit is idle, more than keyed_maxsize stay resident: a busy or
 *    recently used circuit is not evicted to make room.
 * 2. When keyed_limit circuits are resident and step 1 found nothing, evict the
 *    least recently used quiet circuit that is not pinned, however recently it
 *    was used: it holds nothing but successes, so nothing is lost. If there is
 *    none either (every circuit is pinned, carries history or is in an operator
 *    state), the new key is refused with BW_ELIMIT; resident keys keep working.
 * So a flood of new keys cannot reset a failing key's history: a failing or open
 * circuit is evicted only after keyed_history_idle without use. The flood
 * recycles quiet circuits, and memory stays within keyed_limit circuits.
 * "Least recently used" is kept as a second-chance list: a lookup marks its
 * circuit and moves nothing; eviction scans from the least recently placed end,
 * and a marked circuit it meets is moved to the front with its mark cleared
 * instead of being considered. So the order is that of lookups to within one
 * pass of the scan. Step 1 looks past at most 32 circuits that are marked or
 * unpinned but recently used, so it may evict a slightly more recent idle
 * circuit than the very oldest. "Used" means looked up, or unpinned (a settle
 * of a bw_keyed_acquire permit, or a handle's release), and the idle times are
 * exact.
 * An evicted key that comes back starts afresh in its initial state.
 *
 * MEMORY SAFETY. A circuit is freed only when nothing can reach it: eviction and
 * lookup take the breaker's map lock, and eviction skips a pinned circuit. Each
 * permit from bw_keyed_acquire and each handle from bw_keyed_get or
 * bw_keyed_find holds a pin from the lookup until bw_settle or bw_keyed_release.
 * A permit that is never settled pins its circuit forever (settle BW_IGNORED to
 * abandon a call). A circuit pointer in a listener event is valid during the
 * callback only, and a listener must not make new keys of that circuit's
 * breaker (a new key may evict the very circuit whose event is running).
 *
 * Cost: a lookup hashes the key (a per-breaker random seed, so crafted keys
 * cannot collide on purpose) and holds the breaker's map lock (a spin lock) for
 * a table probe and a mark; the call itself is then as for any breaker, and its
 * settle releases the pin in the same critical section as its record (one lock
 * for the lookup, one for the settle). Lookups of different keys of one breaker share that lock; keep a
 * handle (bw_keyed_get) for a key you call very often from many threads.
 *
 * Thread safety: every function here is safe from any number of threads at once,
 * together with calls on the breaker and its circuits; only bw_breaker_free of
 * the breaker must not race them.
 */
#ifndef BREAKWATER_KEYED_H
#define BREAKWATER_KEYED_H

#include "breaker.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * bw_keyed_acquire — bw_acquire on the circuit of `key`, made if it is not
 * resident. On BW_OK the permit pins the circuit: settle it with bw_settle(b, ...)
 * (or bw_settle_ex) passing this same breaker b, which also unpins. Returns
 * BW_OK; BW_REJECTED with *why (may be NULL) when the key's circuit refuses;
 * BW_EINVAL for NULL arguments, a bad key, or b being itself a keyed circuit;
 * BW_ENOMEM; BW_ELIMIT when the key is new and there is no room (see above).
 */
BW_API int bw_keyed_acquire(bw_breaker *b, const char *key, bw_permit *permit, bw_rejection *why);

/*
 * bw_keyed_acquire_ex — bw_keyed_acquire, with *err (may be NULL) saying why a
 * BW_EINVAL, BW_ENOMEM or BW_ELIMIT happened (e.g. which byte of the key is not
 * allowed). A rejection (BW_REJECTED) is not an error and leaves *err alone.
 * Thread safety: as bw_keyed_acquire.
 */
BW_API int bw_keyed_acquire_ex(bw_breaker *b, const char *key, bw_permit *permit, bw_rejection *why, bw_error *err);

/*
 * bw_keyed_get — a handle on the circuit of `key`, made if not resident, in *out.
 * The handle pins the circuit until bw_keyed_release; use it with any function
 * of breaker.h, except bw_breaker_free. Returns BW_OK, BW_EINVAL (NULL
 * arguments, bad key — *err says why — or b a keyed circuit), BW_ENOMEM or
 * BW_ELIMIT. *err may be NULL.
 */
BW_API int bw_keyed_get(bw_breaker *b, const char *key, bw_breaker **out, bw_error *err);

/*
 * bw_keyed_find — a handle on the circuit of `key` if it is resident (pinned, as
 * bw_keyed_get), or NULL if it is not, for NULL arguments, a malformed key, or
 * b being itself a keyed circuit. Never makes one.
 */
BW_API bw_breaker *bw_keyed_find(bw_breaker *b, const char *key);

/*
 * bw_keyed_release — drop a handle from bw_keyed_get or bw_keyed_find, once per
 * handle. NULL and breakers that are not keyed circuits are ignored. The handle
 * must not be used afterwards. A bare pointer cannot tell a second release from
 * the release of another handle to the same circuit, so a double release may
 * unpin a circuit that is still in use: bw_keyed_hold / bw_keyed_drop detect it.
 */
BW_API void bw_keyed_release(bw_breaker *circuit);

/*
 * A checked handle on a keyed circuit: caller-owned, like a permit. While held
 * it pins the circuit (eviction skips it), and `circuit` works with every
 * function of breaker.h except bw_breaker_free. Dropping it twice, or dropping
 * one never held, is detected (BW_EPERMIT) and changes nothing, so a misuse
 * cannot unpin a circuit that another handle or a permit still pins. (As with
 * permits, a copy of the struct is a second handle to the same pin: drop only
 * the one you held.) Prefer it to bw_keyed_get / bw_keyed_release, whose bare
 * pointer cannot tell a second release from a first.
 */
typedef struct bw_keyed_handle {
    bw_breaker *circuit; /* the key's circuit, while held; NULL after bw_keyed_drop */
    uint32_t magic_;     /* private */
} bw_keyed_handle;

/*
 * bw_keyed_hold — hold the circuit of `key` (made if not resident, as
 * bw_keyed_get) in *h. Returns BW_OK; BW_EINVAL for NULL arguments, a bad key
 * (*err says why) or b a keyed circuit; BW_ENOMEM; BW_ELIMIT (keyed.h's limit).
 * On an error *h holds nothing. *err may be NULL. Thread safety: any thread;
 * one handle is used by one thread at a time.
 */
BW_API int bw_keyed_hold(bw_breaker *b, const char *key, bw_keyed_handle *h, bw_error *err);

/*
 * bw_keyed_drop — release a handle from bw_keyed_hold. Returns BW_OK, or
 * BW_EPERMIT for a handle that holds nothing (dropped already, or never held;
 * nothing changes), BW_EINVAL for NULL. Thread safety: as bw_keyed_hold.
 */
BW_API int bw_keyed_drop(bw_keyed_handle *h);

/*
 * bw_keyed_apply — run an operator verb (breaker.h) on every resident circuit of
 * b, and make circuits created from now on start in the verb's state, until
 * BW_VERB_RESET, which resets every resident circuit and lets new ones start in
 * the configured initial state again. The breaker's own circuit is untouched.
 * Events are emitted as the verb's, on this thread. Applies are serialised
 * (a process-wide mutex), so two at once never leave a mix of their verbs; a
 * listener must therefore not call bw_keyed_apply or bw_registry_apply.
 * Returns BW_OK, BW_EINVAL (b NULL, a keyed circuit, or an unknown verb) or
 * BW_ENOMEM (the verb then reached no resident circuit; new ones still start in
 * its state).
 */
BW_API int bw_keyed_apply(bw_breaker *b, bw_verb v);

/* bw_keyed_count — the number of resident circuits of b (0 for NULL). */
BW_API size_t bw_keyed_count(bw_breaker *b);

/*
 * bw_keyed_bytes — the memory b's keyed circuits hold: every resident circuit
 * (bw_breaker_bytes), the map and its table. 0 for NULL or when none was made.
 */
BW_API size_t bw_keyed_bytes(bw_breaker *b);

/*
 * bw_keyed_counters — the counters (breaker.h) of b's keyed circuits, summed:
 * every resident circuit's, plus what evicted circuits had counted. b's own
 * circuit is not included (bw_breaker_counters). The state, reason and last
 * failure fields are b's own. Returns BW_OK or BW_EINVAL (NULL argument, or b a
 * keyed circuit). Holds b's map lock while it sums (no circuit's lock).
 */
BW_API int bw_keyed_counters(bw_breaker *b, bw_counters *out);

/*
 * bw_keyed_each — call fn(circuit, user) for at most `max` resident circuits of b
 * (0: all), in no particular order, holding b's map lock. fn may read the
 * circuit (bw_breaker_counters, bw_breaker_snapshot, bw_breaker_key, ...) but
 * must not call a keyed function of b nor keep the pointer. Returns how many it
 * visited; 0 for NULL arguments or b a keyed circuit.
 */
BW_API size_t bw_keyed_each(bw_breaker *b, size_t max, void (*fn)(bw_breaker *circuit, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
