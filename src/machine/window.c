/*
 * window.c — the count and time sliding windows (see window.h).
 *
 * Time window invariant: the totals equal the sum of the buckets cur-size+1 ..
 * cur, and every other bucket is zero. Bucket b spans [b * width, (b + 1) *
 * width) ns, aligned on the clock's zero, and lives in slot b mod size. Moving
 * to a later bucket zeroes (and subtracts) the buckets it passes over, at most
 * `size` of them, so each bucket is cleared once per lap: amortised O(1). A
 * clock that goes back is treated as standing still, so a record then lands
 * in the newest bucket.
 *
 * Resolution: a call leaves the window when the size-th bucket after its own
 * begins, between (size - 1) * width and size * width after it settled, and
 * size * width is N rounded up to whole buckets (N itself whenever width
 * divides N: every N up to 60 s, every whole number of minutes). With 1 s
 * buckets that is resilience4j's time window (N buckets of one epoch second:
 * the current partial second and the N-1 before it).
 */
#include "machine/window.h"

#include <string.h>

#include "breakwater/config.h"

size_t bw__window_bytes(int kind, uint32_t size)
{
    return kind == BW_WINDOW_TIME ? (size_t)bw__window_buckets(size) * sizeof(bw__bucket) : (size_t)size;
}

/* The bytes of w's memory. */
static size_t mem_bytes(const bw__window *w)
{
    return (size_t)w->size * (w->kind == BW_WINDOW_TIME ? sizeof(bw__bucket) : 1);
}

/* Empty w's totals and position, leaving its memory as it is. */
static void empty(bw__window *w)
{
    w->head = 0;
    w->total = w->failed = w->slow = 0;
    w->cur = INT64_MIN;
    w->cur_lo = w->cur_hi = 0;
    w->cur_slot = 0;
}

void bw__window_bind(bw__window *w, int kind, uint32_t size, void *mem)
{
    w->kind = (uint8_t)kind;
    w->mem = mem;
    if (kind == BW_WINDOW_TIME) {
        w->size = bw__window_buckets(size);
        w->width = (int64_t)bw__window_width(size) * 1000000000;
    } else {
        w->size = size;
        w->width = 0;
    }
    empty(w);
}

void bw__window_init(bw__window *w, int kind, uint32_t size, void *mem)
{
    bw__window_bind(w, kind, size, mem);
    memset(mem, 0, mem_bytes(w));
}

void bw__window_clear(bw__window *w)
{
    empty(w);
    memset(w->mem, 0, mem_bytes(w));
}

int64_t bw__window_bucket_of(const bw__window *w, int64_t ns)
{
    int64_t b = ns / w->width;
    if (ns % w->width < 0)
        b--; /* floor, so negative instants bucket correctly */
    return b;
}

static uint32_t slot_of(const bw__window *w, int64_t bucket)
{
    int64_t i = bucket % (int64_t)w->size;
    return (uint32_t)(i < 0 ? i + (int64_t)w->size : i);
}

static void advance(bw__window *w, int64_t bucket)
{
    if (bucket <= w->cur)
        return;
    bw__bucket *b = (bw__bucket *)w->mem;
    /* bucket > cur, so the unsigned difference is exact: no overflow, and no
       loop longer than the window, whatever cur holds. */
    if (w->cur == INT64_MIN || (uint64_t)bucket - (uint64_t)w->cur >= w->size) {
        memset(b, 0, (size_t)w->size * sizeof *b);
        w->total = w->failed = w->slow = 0;
    } else {
        for (int64_t s = w->cur + 1; s <= bucket; s++) {
            bw__bucket *x = &b[slot_of(w, s)];
            w->total -= x->total;
            w->failed -= x->failed;
            w->slow -= x->slow;
            x->total = x->failed = x->slow = 0;
        }
    }
    bw__window_set_bucket(w, bucket);
}

void bw__window_set_bucket(bw__window *w, int64_t bucket)
{
    w->cur = bucket;
    w->cur_slot = slot_of(w, bucket);
    w->cur_lo = bucket > INT64_MIN / w->width ? bucket * w->width : INT64_MIN;
    w->cur_hi = bucket < INT64_MAX / w->width ? w->cur_lo + w->width : INT64_MAX;
}

/* Move the time window to now_ns; within the current bucket this is two compares. */
static void move_to(bw__window *w, int64_t now_ns)
{
    if (now_ns >= w->cur_lo && now_ns < w->cur_hi)
        return;
    advance(w, bw__window_bucket_of(w, now_ns));
}

void bw__window_expire(bw__window *w, int64_t now_ns)
{
    if (w->kind == BW_WINDOW_TIME)
        move_to(w, now_ns);
}

void bw__window_record(bw__window *w, int failed, int slow, int64_t now_ns)
{
    if (w->kind == BW_WINDOW_COUNT) {
        bw__window_count_record(w, failed != 0, slow != 0);
        return;
    }
    bw__window_time_record(w, failed != 0, slow != 0, now_ns);
}
