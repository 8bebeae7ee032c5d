/*
 * circuit.h — a circuit kept in a store: the operations breakers run inside a
 * store's atomic update (internal; share layer).
 *
 * The entry is a small header and the image of a machine (machine/image.h), so a
 * stored circuit follows exactly the rules of docs/states.md, on the store's
 * clock. Both modes use it:
 * - stored: the whole machine lives in the store; each acquire and each settle
 *   is one update (BW__OP_ACQUIRE, BW__OP_RECORD);
 * - coordinated: the entry holds the shared OPEN / HALF_OPEN state, its
 *   generation (the fence), the failed-round count (the fleet's backoff) and the
 *   probe round; local windows trip (BW__OP_TRIP), pollers move OPEN to
 *   HALF_OPEN (BW__OP_ADVANCE), probes are leased (BW__OP_ACQUIRE in
 *   HALF_OPEN) and tallied (BW__OP_RECORD) by generation, so an outcome of an
 *   earlier round is dropped as stale. With a quorum K > 1, a local trip is
 *   a vote: the entry keeps the instances (share/instance.h) that tripped
 *   within the last open wait, and the shared circuit opens only at the K-th
 *   distinct one.
 * In both, BW__OP_OPEN_FOR opens the circuit until a given end (a dependency's
 * Retry-After: bw_breaker_open_for), as a trip whose open wait is that long.
 * Lifetimes: a CLOSED circuit with nothing to remember is deleted, except that a
 * reset keeps its entry (a fence, below); an operator state never expires;
 * anything else expires `ttl` after its last write, and an OPEN circuit `ttl`
 * after its open wait ends, except a quiet one (nothing but successes) given a
 * shorter `quiet_ttl` (a keyed circuit's). Only an operation that records an outcome or moves
 * the circuit writes; a no-op (an admission in CLOSED, a stale or ignored
 * outcome, a read) writes nothing and so renews nothing.
 * Untrusted entries: an entry that does not decode as exactly what the encoder
 * writes is corrupt; an update treats it as absent, replaces it with a fresh
 * circuit (or deletes it) and sets `corrupt`. So is an OPEN entry whose wait
 * would end later from now than any breaker of its configuration could have
 * opened it for (bw__machine_longest_wait: its backoff's longest, or 365 days
 * for a Retry-After): a store cannot hold the fleet open for longer.
 */
#ifndef BW_SHARE_CIRCUIT_H
#define BW_SHARE_CIRCUIT_H

#include "machine/machine.h"
#include "breakwater/store.h"

/* The generation of a permit admitted by a circuit that had no entry (circuit.c). */
#define BW__GEN_NO_ENTRY UINT64_MAX

enum {
    BW__OP_READ = 0,    /* nothing changes */
    BW__OP_ACQUIRE = 1, /* admit a call or a probe (bw__machine_acquire) */
    BW__OP_RECORD = 2,  /* settle a permit of generation `gen` */
    BW__OP_TRIP = 3,    /* CLOSED -> OPEN (coordinated: a local trip) */
    BW__OP_ADVANCE = 4, /* timed transitions (coordinated poll) */
    BW__OP_VERB = 5,    /* operator verb: `state` CLOSED (reset) or an override */
    BW__OP_OPEN_FOR = 6 /* OPEN for `wait` from now (bw__machine_open_for: a Retry-After); no quorum */
};

typedef struct bw__shared_op {
    /* In. */
    int op;
    const bw__mcfg *cfg; /* the circuit's configuration */
    int64_t ttl;         /* lifetime after the last write, ns (> 0) */
    int64_t quiet_ttl;   /* a quiet entry's lifetime (circuit.c: Lifetimes), ns: 0 = ttl, < 0 = none (not kept) */
    uint64_t gen;        /* RECORD: the permit's generation */
    int outcome, slow;   /* RECORD */
    int state;           /* VERB */
    int64_t wait;        /* OPEN_FOR: the wait, in (0, BW__OPEN_FOR_MAX] */
    int must_write;      /* write even when nothing changed (a degraded breaker's retry: only a write
                            shows the store works); an unchanged entry is rewritten with its lifetime */
    uint32_t quorum;     /* TRIP: distinct instances that must trip within one open wait (0 or 1: the first) */
    uint64_t instance;   /* TRIP: this process's identity (share/instance.h) */
    /* Out. */
    int64_t now;            /* the store's clock during the update */
    int before, after;      /* state before and after */
    int why;                /* bw_reason of the last transition when before != after, else 0 */
    int ok;                 /* ACQUIRE: admitted; RECORD: 1 applied, 0 nothing, -1 stale; TRIP: tripped;
                               OPEN_FOR: opened (0: open longer already, or an operator state) */
    uint64_t out_gen;       /* the generation after (ACQUIRE: the permit's) */
    int64_t open_until;     /* OPEN: when the wait ends on the store's clock; else INT64_MAX */
    int64_t open_wait;      /* the shared circuit's current (or next) open wait */
    uint32_t failed_rounds; /* the shared circuit's consecutive failed rounds (the fleet's backoff) */
    int found;              /* the entry existed (live and well-formed) before */
    int corrupt;            /* the entry was malformed and this update replaced it (never for READ) */
    int wrote;              /* the verdict was PUT or DELETE: a store that applies it takes writes */
    int votes;              /* instances whose trips the entry holds toward the quorum after this */
    bw_snapshot *snap;      /* when not NULL: filled with the circuit's snapshot */
} bw__shared_op;

/* The update function for bw_store_update; arg is a bw__shared_op. */
bw_store_verdict bw__shared_apply(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next);

/*
 * An admission answered from a read entry (`cur`, NULL when absent) without an
 * update: a CLOSED, DISABLED or METRICS_ONLY circuit not due for renewal, or no
 * entry and a configuration starting CLOSED (admitted); a FORCED_OPEN circuit,
 * or an OPEN one before its wait ends (rejected, ok 0). Fills op as
 * bw__shared_apply would and returns 1, or returns 0 when only an update can
 * decide.
 */
int bw__shared_admit_read(bw__shared_op *op, int64_t now, const bw_store_entry *cur);

/*
 * A coordinated poll (BW__OP_ADVANCE) answered from a read entry (`cur`, NULL
 * when absent) without an update: when no timed transition of the circuit is
 * due and the entry is well-formed, fills op as the update would have (ok 0,
 * nothing written) and returns 1; returns 0 when only an update can decide.
 */
int bw__shared_poll_read(bw__shared_op *op, int64_t now, const bw_store_entry *cur);

/*
 * Decode an entry for a reader without a configuration (bw_store_read_circuit):
 * the policy and window come from the entry itself. Fills out's readable,
 * snap, policy, window, window_size, fence, votes and bytes; returns 0, or -1
 * (readable 0) for an entry that is not a circuit.
 */
int bw__shared_inspect(const bw_store_entry *cur, int64_t now, bw_store_circuit *out);

/*
 * Whether a machine with this configuration fits in a store entry: every time
 * window does (at most 60 buckets, machine/window.h), a count window up to
 * bw__shared_count_max() calls.
 */
int bw__shared_fits(const bw__mcfg *cfg);
/* The longest count window a stored circuit can hold. */
uint32_t bw__shared_count_max(void);

#endif
