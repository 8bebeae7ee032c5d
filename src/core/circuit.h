/*
 * circuit.h — what breaker.c, keyed.c and registry.c share about breakers that
 * are owned by something else: keyed circuits and registry breakers (internal).
 *
 * A keyed circuit is an ordinary bw_breaker (every public breaker function works
 * on it) whose kind is BW__CIRCUIT and whose `ext` points at its node: the
 * bookkeeping of its family's map (hash chain, LRU links, pins, last use). The
 * node lives in the circuit's own allocation, so a circuit is one block.
 */
#ifndef BW_CIRCUIT_H
#define BW_CIRCUIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "breakwater/breaker.h"

/* Who owns a breaker, and so who may free it. */
enum {
    BW__PLAIN = 0,  /* made by bw_breaker_new: the caller frees it */
    BW__OWNED = 1,  /* made by a registry: bw_registry_free frees it */
    BW__CIRCUIT = 2 /* a keyed circuit: its family frees it */
};

/* The keyed_* knobs, kept by every breaker for the family it may grow. */
typedef struct bw__keyed_params {
    uint32_t max;   /* 0 = unbounded */
    uint32_t limit; /* resolved: 0 only when max is 0 */
    int64_t idle;   /* stamp units */
    int64_t hidle;  /* stamp units */
} bw__keyed_params;

typedef struct bw__keyed bw__keyed;

/* A keyed circuit's node. */
typedef struct bw__circuit {
    struct bw__circuit *hnext;       /* hash chain */
    struct bw__circuit *prev, *next; /* LRU list: head is the most recently looked up */
    bw_breaker *b;                   /* the circuit itself */
    bw__keyed *fam;
    uint64_t hash;
    _Atomic int64_t touched; /* stamp of the last lookup or unpin */
    _Atomic uint32_t pins;   /* permits in flight and handles held */
    uint32_t klen;
    char key[];
} bw__circuit;

/* ---- breaker.c, for keyed.c and registry.c ---- */

/* The breaker's kind (BW__*). */
int bw__breaker_kind(const bw_breaker *b);
void bw__breaker_set_kind(bw_breaker *b, int kind);
/* A circuit's node (NULL for a breaker that is not a circuit). */
bw__circuit *bw__circuit_node(const bw_breaker *b);
/* A breaker's family slot (NULL until made) and its keyed_* knobs. */
_Atomic(void *) *bw__breaker_ext(bw_breaker *b);
const bw__keyed_params *bw__breaker_keyed_params(const bw_breaker *b);
/*
 * The state a breaker's new keyed circuits start in (bw_keyed_apply), or -1 for
 * their configured initial state. Sequentially consistent, as is the family
 * slot, so an apply that finds no family is seen by the family made after it.
 */
int bw__breaker_keyed_preset(const bw_breaker *b);
void bw__breaker_set_keyed_preset(bw_breaker *b, int state);
/* The breaker's clock, as a stamp (see internal.h). */
int64_t bw__breaker_stamp(const bw_breaker *b);
/* Free a breaker of any kind, with its keyed circuits. */
void bw__breaker_destroy(bw_breaker *b);
/* Put a breaker that nobody else can reach yet in `state` (as the verb would), with no event. */
void bw__breaker_preset(bw_breaker *b, int state);
/* The state a verb puts a breaker in, or -1 for an unknown verb. */
int bw__verb_state(bw_verb v);
/* Mark an admitted permit as pinning its circuit (bw_settle unpins it). */
void bw__permit_pin(bw_permit *p);

/*
 * A new circuit cloned from `parent`'s configuration (same clock, thresholds,
 * listener, classifier; never striped), in its initial state, with `node_bytes`
 * more bytes in the same block for its node, whose address goes in *node.
 */
int bw__circuit_new(bw_breaker *parent, size_t node_bytes, bw_breaker **out, bw__circuit **node);

/* What eviction may do with a circuit (read under its lock at stamp `now`). */
enum {
    BW__HELD = 0,   /* an operator state: never evicted */
    BW__QUIET = 1,  /* CLOSED with a clean window: nothing to lose */
    BW__HISTORY = 2 /* OPEN, HALF_OPEN, or failures or slow calls in the window */
};
/* The class; for an OPEN circuit *wait_end is the stamp its wait ends, else INT64_MIN. */
int bw__circuit_class(bw_breaker *c, int64_t now, int64_t *wait_end);

/* ---- keyed.c, for breaker.c ---- */

/* Free a family and every circuit in it (nothing may still use them). */
void bw__keyed_free(bw__keyed *k);
/* Release one pin on circuit c, noting `stamp` as its last use. */
void bw__circuit_unpin(bw_breaker *c, int64_t stamp);
/* The breaker whose keyed circuit c is. */
bw_breaker *bw__keyed_parent(const bw_breaker *c);

#endif
