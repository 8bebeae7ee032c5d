/*
 * window.c — the count and time sliding windows (see window.h).
 *
 * Time window invariant: the totals equal the sum of the buckets for seconds
 * cur_sec-size+1 .. cur_sec, and every other bucket is zero. Bucket i holds
 * second s where s mod size == i. Moving to a later second zeroes (and subtracts)
 * the buckets it passes over, at most `size` of them, so each bucket is cleared
 * once per lap: amortised O(1). A clock that goes back is treated as standing
 * still, so a record then lands in the newest bucket.
 */
#include "machine/window.h"

#include <string.h>

#include "breakwater/config.h"

size_t bw__window_bytes(int kind, uint32_t size)
{
    return kind == BW_WINDOW_TIME ? (size_t)size * sizeof(bw__bucket) : (size_t)size;
}

void bw__window_bind(bw__window *w, int kind, uint32_t size, void *mem)
{
    w->kind = (uint8_t)kind;
    w->size = size;
    w->mem = mem;
    w->head = 0;
    w->total = w->failed = w->slow = 0;
    w->cur_sec = INT64_MIN;
    w->sec_lo = w->sec_hi = 0;
    w->cur_slot = 0;
}

void bw__window_init(bw__window *w, int kind, uint32_t size, void *mem)
{
    bw__window_bind(w, kind, size, mem);
    memset(mem, 0, bw__window_bytes(w->kind, w->size));
}

void bw__window_clear(bw__window *w)
{
    bw__window_init(w, w->kind, w->size, w->mem);
}

int64_t bw__second_of(int64_t ns)
{
    int64_t s = ns / 1000000000;
    if (ns % 1000000000 < 0)
        s--; /* floor, so negative instants bucket correctly */
    return s;
}

static uint32_t slot_of(const bw__window *w, int64_t sec)
{
    int64_t i = sec % (int64_t)w->size;
    return (uint32_t)(i < 0 ? i + (int64_t)w->size : i);
}

static void advance(bw__window *w, int64_t sec)
{
    if (sec <= w->cur_sec)
        return;
    bw__bucket *b = (bw__bucket *)w->mem;
    /* sec > cur_sec, so the unsigned difference is exact: no overflow, and no
       loop longer than the window, whatever cur_sec holds. */
    if (w->cur_sec == INT64_MIN || (uint64_t)sec - (uint64_t)w->cur_sec >= w->size) {
        memset(b, 0, (size_t)w->size * sizeof *b);
        w->total = w->failed = w->slow = 0;
    } else {
        for (int64_t s = w->cur_sec + 1; s <= sec; s++) {
            bw__bucket *x = &b[slot_of(w, s)];
            w->total -= x->total;
            w->failed -= x->failed;
            w->slow -= x->slow;
            x->total = x->failed = x->slow = 0;
        }
    }
    bw__window_set_sec(w, sec);
}

void bw__window_set_sec(bw__window *w, int64_t sec)
{
    w->cur_sec = sec;
    w->cur_slot = slot_of(w, sec);
    w->sec_lo = sec > INT64_MIN / 1000000000 ? sec * 1000000000 : INT64_MIN;
    w->sec_hi = sec < INT64_MAX / 1000000000 ? w->sec_lo + 1000000000 : INT64_MAX;
}

/* Move the time window to now_ns; within the current second this is two compares. */
static void move_to(bw__window *w, int64_t now_ns)
{
    if (now_ns >= w->sec_lo && now_ns < w->sec_hi)
        return;
    advance(w, bw__second_of(now_ns));
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
