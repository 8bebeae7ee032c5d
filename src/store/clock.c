/*
 * clock.c — the store's clock (backend.h): the one the user injected
 * (bw_store_set_clock), else the backend's default. Its own file because every
 * store component's library has it too (base/component.h).
 */
#define _GNU_SOURCE /* CLOCK_MONOTONIC_COARSE */
#include <time.h>

#include "store/backend.h"

/*
 * The default store clocks are the kernel's coarse clocks: about 5 ns a read
 * instead of about 22 on a VM, at a resolution of a few milliseconds (one
 * tick), which is finer than any time a store decides on (open waits, probe
 * rounds, one-second window buckets, lifetimes). Call durations are measured by
 * the breaker's own clock, never the store's.
 */
int64_t bw__store_clock_now(const bw__store_clock *c)
{
    bw_clock *clock = atomic_load(&((bw__store_clock *)c)->clock);
    if (clock)
        return bw_clock_now(clock);
    struct timespec ts;
    clock_gettime(c->fallback == BW__STORE_REALTIME ? CLOCK_REALTIME_COARSE : CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * BW_NS_PER_S + ts.tv_nsec;
}
