/*
 * core.h — the engine's downward API, for the layers above it that own
 * breakers or call through them (registry/, resilience/) (internal; core
 * layer).
 *
 * An owner makes breakers with bw__breaker_make and frees them with
 * bw__breaker_destroy; bw_breaker_free ignores them. A registry owns its
 * breakers; a breaker's keyed-circuit family owns its circuits.
 *
 * Pins: an owner that may free a breaker while calls run on it (keyed.c's
 * eviction) counts the pins it hands out itself, and the engine counts their
 * releases: a pinned permit's settle (bw__permit_pin) and bw__breaker_unpin
 * each add one release, with its stamp, under the breaker's lock, as the
 * engine's last touch of the breaker in that call (a lock release may still
 * wake a waiter on the lock's address afterwards, as a mutex's unlock may).
 * bw__breaker_class reads the count under the same lock, so an owner that
 * finds every pin it handed out released (and hands out no new one meanwhile)
 * may free the breaker.
 */
#ifndef BW_CORE_CORE_H
#define BW_CORE_CORE_H

#include <string.h>

#include "core/config.h"

/* Who owns a breaker, given to bw__breaker_make. */
struct bw__fanout;
typedef struct bw__owner {
    void *node;             /* the owner's data for this breaker (NULL: the tail, below) */
    bw_breaker *parent;     /* a keyed circuit: its breaker (whose bw_settle also settles the circuit's permits) */
    const char *key;        /* a keyed circuit: its key (copied; events carry it, its store key is "NAME KEY") */
    struct bw__fanout *fan; /* the owner's listeners (a registry's), after the breaker's own; may be NULL */
} bw__owner;

/*
 * Make a breaker that `owner` owns (as bw_breaker_new builds one; the name is
 * the caller's to check). cfg is borrowed for the breaker's whole life when
 * `borrow` (the owner keeps it alive, and validated it: a registry's defaults,
 * a parent's configuration), else validated and copied. A
 * breaker with a parent is never striped: many circuits spread the load
 * already. `tail` more bytes come in the same block for the owner, 8-aligned,
 * at *tail_out (may be NULL when tail is 0). Returns as bw_breaker_new.
 */
int bw__breaker_make(const char *name, const bw_config *cfg, int borrow, const bw__owner *owner, size_t tail,
                     bw_breaker **out, void **tail_out, bw_error *err);
/* Free a breaker of any owner, with whatever hangs on it (its attachment). Nothing may still use it. */
void bw__breaker_destroy(bw_breaker *b);
/* The configuration the breaker was made with. */
const bw_config *bw__breaker_config(const bw_breaker *b);
/* The breaker's owner, or NULL for a breaker of bw_breaker_new. */
const bw__owner *bw__breaker_owner(const bw_breaker *b);

/*
 * One object a layer above hangs on a breaker it does not own (keyed.c: the
 * breaker's family of circuits), freed by its `free` with the breaker.
 */
typedef struct bw__ext {
    void (*free)(struct bw__ext *e);
    /* The breaker's listeners changed: bw__breaker_refresh every breaker made from it (may be NULL). */
    void (*listeners_changed)(struct bw__ext *e);
} bw__ext;
/* The breaker's attachment, or NULL (acquire order). */
bw__ext *bw__breaker_ext(const bw_breaker *b);
/* Attach e unless one is attached already: returns the breaker's attachment (e, or the one that won). */
bw__ext *bw__breaker_ext_install(bw_breaker *b, bw__ext *e);

/*
 * Read again what b's listeners want (its fanout chain: its own, its owner's;
 * a keyed circuit's breaker's): call after a listener was added or removed up
 * the chain, and for a breaker that became reachable (a new circuit, under the
 * lock that a refreshing walk takes too), so that no breaker misses a listener.
 */
void bw__breaker_refresh(bw_breaker *b);

/* Put a breaker that nobody else can reach yet in `state` (as the verb would), with no event. */
void bw__breaker_preset(bw_breaker *b, int state);
/* The state a verb puts a breaker in, or -1 for an unknown verb. */
int bw__verb_state(bw_verb v);
/* Mark an admitted permit as pinning its breaker: its settle releases the pin (see Pins, above). */
void bw__permit_pin(bw_permit *p);
/* Release one pin of b at `stamp` (bw__breaker_stamp) other than a permit's (see Pins, above). */
void bw__breaker_unpin(bw_breaker *b, int64_t stamp);
/* The breaker's clock, as a stamp (base/systime.h); and a span of ns as stamp units. */
int64_t bw__breaker_stamp(const bw_breaker *b);
int64_t bw__breaker_span_stamp(const bw_breaker *b, int64_t ns);

/* What eviction may do with a circuit (read under its lock at stamp `now`), and its pins' releases. */
enum {
    BW__HELD = 0,   /* an operator state: never evicted */
    BW__QUIET = 1,  /* CLOSED with a clean window: nothing to lose */
    BW__HISTORY = 2 /* OPEN, HALF_OPEN, or failures or slow calls in the window */
};
typedef struct bw__class {
    int cls;             /* BW__HELD, BW__QUIET or BW__HISTORY */
    int64_t wait_end;    /* OPEN: the stamp its wait ends; else INT64_MIN */
    uint32_t releases;   /* pins released so far (wraps) */
    int64_t released_at; /* the stamp of the last release, or INT64_MIN */
} bw__class;
bw__class bw__breaker_class(bw_breaker *b, int64_t now);

/* ---- for the pipeline (resilience/) ---- */

/* An event of `type` from `name`, every other field as listener.h says when it does not apply. */
static inline bw_event bw__event(bw_event_type type, const char *name)
{
    bw_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    e.name = name;
    e.retry_after_ns = BW_NO_TIME;
    return e;
}

/* The breaker's classifier applied to a call's return code. */
bw_outcome bw__breaker_classify(const bw_breaker *b, int rc, void *arg);
/* The same, with fn (may be NULL) standing in for a breaker that has no classifier of its own. */
bw_outcome bw__breaker_classify_or(const bw_breaker *b, bw_classifier_cb fn, void *user, int rc, void *arg);
/* A classifier's verdict on rc: fn NULL means rc == 0 is a success, anything else a failure; an
 * out-of-range answer is a failure. */
bw_outcome bw__classify(bw_classifier_cb fn, void *user, int rc, void *arg);

#endif
