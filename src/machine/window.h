/*
 * window.h — the sliding windows of the rate policy (internal).
 *
 * Count window: a ring of the last N outcomes, one byte each, with running
 * totals. Time window: at most BW__WINDOW_BUCKETS buckets with running totals,
 * each ceil(N / BW__WINDOW_BUCKETS) seconds wide (one second up to N = 60);
 * buckets are expired incrementally as time moves on, so both record and read
 * are amortised O(1), and a window of a day costs what one of a minute does.
 * Pure: no locks, no clock reads, no allocation (the caller provides the
 * memory, sized by bw__window_bytes).
 */
#ifndef BW_MACHINE_WINDOW_H
#define BW_MACHINE_WINDOW_H

#include <stdint.h>
#include <stddef.h>

typedef struct bw__bucket {
    uint32_t total, failed, slow;
} bw__bucket;

/*
 * The most buckets a time window keeps: time:N has buckets of
 * ceil(N / BW__WINDOW_BUCKETS) seconds, and ceil(N / width) of them, so every
 * N up to 60 s, and every whole number of minutes, is an exact number of
 * buckets (docs/states.md says what the others round to). 60 buckets of 12
 * bytes fit a store entry with the rest of the image (share/circuit.c).
 */
#define BW__WINDOW_BUCKETS 60u
/* The longest time window, in seconds: 30 days (buckets of 12 h). */
#define BW__WINDOW_SECONDS_MAX (30u * 86400u)

/* The width in seconds of the buckets of time:N (N >= 1), and their number. */
static inline uint32_t bw__window_width(uint32_t seconds)
{
    return (uint32_t)(((uint64_t)seconds + BW__WINDOW_BUCKETS - 1) / BW__WINDOW_BUCKETS);
}

static inline uint32_t bw__window_buckets(uint32_t seconds)
{
    uint32_t w = bw__window_width(seconds);
    return w ? (uint32_t)(((uint64_t)seconds + w - 1) / w) : 0;
}

/* What a count window's record touches comes first (40 bytes: one cache line with the engine's lock). */
typedef struct bw__window {
    uint64_t total, failed, slow;
    void *mem;              /* count: uint8_t[size]; time: bw__bucket[size] */
    uint32_t size;          /* count: calls; time: buckets */
    uint32_t head;          /* count: next slot to write */
    uint8_t kind;           /* BW_WINDOW_COUNT or BW_WINDOW_TIME */
    uint32_t cur_slot;      /* time: the slot of bucket cur */
    int64_t cur;            /* time: the newest bucket the totals cover, floor(t / width); INT64_MIN: none yet */
    int64_t cur_lo, cur_hi; /* time: [lo, hi) ns of bucket cur, to skip the division */
    int64_t width;          /* time: ns a bucket spans (a whole number of seconds) */
} bw__window;

/* Drop what has aged out of a time window by now_ns; no-op for a count window. */
void bw__window_expire(bw__window *w, int64_t now_ns);

#define BW__SLOT_USED 1u
#define BW__SLOT_FAILED 2u
#define BW__SLOT_SLOW 4u

/*
 * Add one outcome to a count window (bw__window_record's count case, inline for
 * the engine's fast path); `failed` and `slow` are 0 or 1. Returns 1 when the
 * window was not yet full, so its total grew; 0 when the outcome replaced an
 * older one; -1 when it replaced one just like it, so that no count changed.
 */
static inline int bw__window_count_record(bw__window *w, unsigned failed, unsigned slow)
{
    uint8_t *slot = (uint8_t *)w->mem + w->head;
    unsigned old = *slot, now = BW__SLOT_USED | failed << 1 | slow << 2;
    uint32_t h = w->head + 1;
    w->head = h == w->size ? 0 : h;
    if (old == now)
        return -1; /* the common case: a success where a success was */
    *slot = (uint8_t)now;
    /* An empty slot is 0 and subtracts nothing. */
    unsigned grew = ~old & BW__SLOT_USED;
    w->total += grew;
    w->failed += (uint64_t)failed - ((old >> 1) & 1);
    w->slow += (uint64_t)slow - (old >> 2);
    return (int)grew;
}

/* Add one outcome at now_ns to a time window (bw__window_record's time case, inline for the engine's fast path). */
static inline void bw__window_time_record(bw__window *w, unsigned failed, unsigned slow, int64_t now_ns)
{
    if (now_ns < w->cur_lo || now_ns >= w->cur_hi)
        bw__window_expire(w, now_ns); /* another bucket: move to it */
    bw__bucket *x = &((bw__bucket *)w->mem)[w->cur_slot];
    x->total++;
    x->failed += failed;
    x->slow += slow;
    w->total++;
    w->failed += failed;
    w->slow += slow;
}

/* The bucket of a time window an instant (ns) falls in: floor(ns / width), also for negative instants. */
int64_t bw__window_bucket_of(const bw__window *w, int64_t ns);

/* Bytes of memory a window of this kind and size (calls, or seconds) needs. */
size_t bw__window_bytes(int kind, uint32_t size);
/*
 * Set up a window of this kind and size (calls, or seconds) over `mem`
 * (bw__window_bytes long) as empty, leaving mem as it is (a load fills it).
 */
void bw__window_bind(bw__window *w, int kind, uint32_t size, void *mem);
/* Make `bucket` the time window's newest bucket (after its buckets were filled as they should). */
void bw__window_set_bucket(bw__window *w, int64_t bucket);
/* Set up a window over `mem` (bw__window_bytes long) and clear it. */
void bw__window_init(bw__window *w, int kind, uint32_t size, void *mem);
/* Forget every outcome. */
void bw__window_clear(bw__window *w);
/* Add one outcome at time now_ns (ignored by the count window). */
void bw__window_record(bw__window *w, int failed, int slow, int64_t now_ns);

#endif
