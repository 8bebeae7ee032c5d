/*
 * window.h — the sliding windows of the rate policy (internal).
 *
 * Count window: a ring of the last N outcomes, one byte each, with running
 * totals. Time window: N one-second buckets with running totals; buckets are
 * expired incrementally as time moves on, so both record and read are amortised
 * O(1). Pure: no locks, no clock reads, no allocation (the caller provides the
 * memory, sized by bw__window_bytes).
 */
#ifndef BW_MACHINE_WINDOW_H
#define BW_MACHINE_WINDOW_H

#include <stdint.h>
#include <stddef.h>

typedef struct bw__bucket {
    uint32_t total, failed, slow;
} bw__bucket;

typedef struct bw__window {
    uint64_t total, failed, slow;
    void *mem;              /* count: uint8_t[size]; time: bw__bucket[size] */
    int64_t cur_sec;        /* time: newest second the totals cover */
    int64_t sec_lo, sec_hi; /* time: [lo, hi) ns of cur_sec, to skip the division */
    uint32_t size;          /* calls or seconds */
    uint32_t head;          /* count: next slot to write */
    uint32_t cur_slot;      /* time: bucket of cur_sec */
    uint8_t kind;           /* BW_WINDOW_COUNT or BW_WINDOW_TIME */
} bw__window;

/* The second an instant (ns) falls in, rounded down also for negative instants. */
int64_t bw__second_of(int64_t ns);

/* Bytes of memory a window of this kind and size needs. */
size_t bw__window_bytes(int kind, uint32_t size);
/* Set up a window over `mem` (bw__window_bytes long) as empty, leaving mem as it is (a load fills it). */
void bw__window_bind(bw__window *w, int kind, uint32_t size, void *mem);
/* Make `sec` the time window's newest second (after its buckets were filled as they should). */
void bw__window_set_sec(bw__window *w, int64_t sec);
/* Set up a window over `mem` (bw__window_bytes long) and clear it. */
void bw__window_init(bw__window *w, int kind, uint32_t size, void *mem);
/* Forget every outcome. */
void bw__window_clear(bw__window *w);
/* Add one outcome at time now_ns (ignored by the count window). */
void bw__window_record(bw__window *w, int failed, int slow, int64_t now_ns);
/* Drop what has aged out of a time window by now_ns; no-op for a count window. */
void bw__window_expire(bw__window *w, int64_t now_ns);

#endif
