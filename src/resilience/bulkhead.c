/*
 * bulkhead.c — a counting semaphore with a lock-free fast path.
 *
 * Locking: `used` (slots taken) is only ever changed with atomics; a slot is
 * taken by a compare-and-swap that keeps used <= max. `mu` and `cv` serve only
 * callers that wait: a waiter registers in `waiters` (under mu), then retries
 * the CAS and sleeps on cv; a release subtracts from `used` and then, if
 * `waiters` is nonzero, takes mu and broadcasts. Both sides use sequentially
 * consistent operations on `used` and `waiters`, so either the waiter's retry
 * sees the freed slot or the releaser sees the waiter; and the releaser's
 * broadcast under mu cannot fall between the waiter's retry and its sleep. No
 * user code runs under mu.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <time.h>

#include "resilience/resilience.h"

#define MAX_SLOTS 1000000

struct bw_bulkhead {
    alignas(64) _Atomic int used;
    _Atomic int waiters;
    int max;
    int64_t max_wait;
    alignas(64) pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
};

int bw_bulkhead_new(int max_concurrent, int64_t max_wait_ns, bw_bulkhead **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    if (max_concurrent < 1 || max_concurrent > MAX_SLOTS)
        return bw__fail(err, BW_ERANGE, "max_concurrent", "max_concurrent must be in [1, %d], got %d", MAX_SLOTS,
                        max_concurrent);
    int rc = bw__check_duration("max_wait", max_wait_ns, 1, err);
    if (rc != BW_OK)
        return rc;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, sizeof(bw_bulkhead)) != 0)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    bw_bulkhead *bh = mem;
    atomic_init(&bh->used, 0);
    atomic_init(&bh->waiters, 0);
    bh->max = max_concurrent;
    bh->max_wait = max_wait_ns;
    int ok = bw__cond_init_mono(&bh->cv) == 0;
    if (ok && pthread_mutex_init(&bh->mu, NULL) != 0) {
        pthread_cond_destroy(&bh->cv);
        ok = 0;
    }
    if (!ok) {
        free(bh);
        return bw__fail(err, BW_ESYS, "", "could not create the bulkhead's mutex or condition variable");
    }
    *out = bh;
    return BW_OK;
}

void bw_bulkhead_free(bw_bulkhead *bh)
{
    if (!bh)
        return;
    pthread_cond_destroy(&bh->cv);
    pthread_mutex_destroy(&bh->mu);
    free(bh);
}

/* Take a slot if one is free. `order` is the first load's: a waiter's retry
 * needs seq_cst (see Locking). */
static inline int take(bw_bulkhead *bh, memory_order order)
{
    int n = atomic_load_explicit(&bh->used, order);
    while (n < bh->max)
        if (atomic_compare_exchange_weak_explicit(&bh->used, &n, n + 1, memory_order_seq_cst, memory_order_relaxed))
            return 1;
    return 0;
}

int bw_bulkhead_try_acquire(bw_bulkhead *bh)
{
    if (BW_UNLIKELY(!bh))
        return BW_EINVAL;
    return take(bh, memory_order_relaxed) ? BW_OK : BW_EFULL;
}

static BW_NOINLINE int wait_for_slot(bw_bulkhead *bh)
{
    struct timespec ts = bw__timespec_of(bw__mono_now() + bh->max_wait);
    int got = 0;
    pthread_mutex_lock(&bh->mu);
    atomic_fetch_add_explicit(&bh->waiters, 1, memory_order_seq_cst);
    for (;;) {
        if (take(bh, memory_order_seq_cst)) {
            got = 1;
            break;
        }
        int e = pthread_cond_timedwait(&bh->cv, &bh->mu, &ts);
        if (e == ETIMEDOUT) {
            got = take(bh, memory_order_seq_cst);
            break;
        }
    }
    atomic_fetch_sub_explicit(&bh->waiters, 1, memory_order_relaxed);
    pthread_mutex_unlock(&bh->mu);
    return got ? BW_OK : BW_EFULL;
}

int bw_bulkhead_acquire(bw_bulkhead *bh)
{
    if (BW_UNLIKELY(!bh))
        return BW_EINVAL;
    if (BW_LIKELY(take(bh, memory_order_relaxed)))
        return BW_OK;
    return bh->max_wait > 0 ? wait_for_slot(bh) : BW_EFULL;
}

int bw_bulkhead_release(bw_bulkhead *bh)
{
    if (BW_UNLIKELY(!bh))
        return BW_EINVAL;
    int n = atomic_load_explicit(&bh->used, memory_order_relaxed);
    do {
        if (BW_UNLIKELY(n <= 0))
            return BW_ESTATE;
    } while (!atomic_compare_exchange_weak_explicit(&bh->used, &n, n - 1, memory_order_seq_cst, memory_order_relaxed));
    if (BW_UNLIKELY(atomic_load_explicit(&bh->waiters, memory_order_seq_cst) > 0)) {
        pthread_mutex_lock(&bh->mu);
        pthread_cond_broadcast(&bh->cv);
        pthread_mutex_unlock(&bh->mu);
    }
    return BW_OK;
}

int bw_bulkhead_in_flight(const bw_bulkhead *bh)
{
    if (!bh)
        return BW_EINVAL;
    return atomic_load_explicit(&((bw_bulkhead *)bh)->used, memory_order_relaxed);
}

int bw_bulkhead_max_concurrent(const bw_bulkhead *bh)
{
    return bh ? bh->max : BW_EINVAL;
}
