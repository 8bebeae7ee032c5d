/*
 * breakwater/bulkhead.h — a bulkhead: at most N calls in flight through it.
 *
 * A bulkhead caps how many calls run at once into one dependency, so a slow
 * dependency cannot take every thread of the process with it. A caller with no
 * free slot waits up to max_wait for one, or fails at once when max_wait is 0,
 * with BW_EFULL: a distinct result that says "this process is saturated", not
 * "the dependency is failing". A breaker around a bulkhead in a pipeline
 * records nothing for it (BW_IGNORED, and BW_EVENT_SHED), never a dependency failure.
 *
 *     if (bw_bulkhead_acquire(bh) == BW_EFULL)
 *         return shed_load();
 *     call_dependency();
 *     bw_bulkhead_release(bh);
 *
 * Event loops use bw_bulkhead_try_acquire, which never blocks.
 *
 * Cost: acquiring a free slot and releasing it are one compare-and-swap and one
 * atomic subtraction; no lock, no allocation. Only a caller that must wait
 * (max_wait > 0 and no free slot) takes the bulkhead's mutex, and a release
 * takes it only when someone is waiting.
 *
 * Thread safety: every function may run on any number of threads at once on one
 * bulkhead, except bw_bulkhead_free.
 */
#ifndef BREAKWATER_BULKHEAD_H
#define BREAKWATER_BULKHEAD_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_bulkhead bw_bulkhead;

/*
 * bw_bulkhead_new — a bulkhead of max_concurrent slots (in [1, 1000000]) whose
 * acquire waits up to max_wait_ns (in [0, 365d]; 0 = never wait) for a slot.
 * Returns BW_OK and *out (free with bw_bulkhead_free); BW_EINVAL for a NULL out;
 * BW_ERANGE with *err naming the field and range; BW_ENOMEM; BW_ESYS when the
 * mutex or condition variable cannot be made. Thread safety: any thread.
 */
BW_API int bw_bulkhead_new(int max_concurrent, int64_t max_wait_ns, bw_bulkhead **out, bw_error *err);

/* bw_bulkhead_free — NULL is ignored. Thread safety: no call may hold a slot, wait for one, or run at once. */
BW_API void bw_bulkhead_free(bw_bulkhead *bh);

/*
 * bw_bulkhead_try_acquire — take a slot if one is free, without waiting.
 * Returns BW_OK (release it later), BW_EFULL, or BW_EINVAL for NULL.
 * Thread safety: any thread; lock-free.
 */
BW_API int bw_bulkhead_try_acquire(bw_bulkhead *bh);

/*
 * bw_bulkhead_acquire — take a slot, waiting up to the bulkhead's max_wait (real
 * time) for one. Returns BW_OK, BW_EFULL when none was freed in time, or
 * BW_EINVAL for NULL. Thread safety: any thread; blocks only when full.
 */
BW_API int bw_bulkhead_acquire(bw_bulkhead *bh);

/*
 * bw_bulkhead_release — give back a slot taken by an acquire (from any thread).
 * Returns BW_OK; BW_EINVAL for NULL; BW_ESTATE when no slot is taken (a release
 * without an acquire), and nothing changes.
 * Thread safety: any thread; lock-free unless a caller is waiting.
 */
BW_API int bw_bulkhead_release(bw_bulkhead *bh);

/* bw_bulkhead_in_flight — slots taken now; BW_EINVAL for NULL. Thread safety: any thread. */
BW_API int bw_bulkhead_in_flight(const bw_bulkhead *bh);

/* bw_bulkhead_max_concurrent — the bulkhead's size; BW_EINVAL for NULL. Thread safety: any thread. */
BW_API int bw_bulkhead_max_concurrent(const bw_bulkhead *bh);

#ifdef __cplusplus
}
#endif
#endif
