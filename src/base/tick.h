/*
 * tick.h — a coarse clock: the system clock as of the last tick of a ticker
 * thread, read with one load (internal; base layer).
 *
 * Timing a call with the TSC costs two counter reads, about 11 ns each on a
 * virtual machine, which is most of what a guarded call costs. A breaker that
 * only needs to know whether a call took longer than a threshold of 100 ms or
 * more does not need nanoseconds: it reads this word instead, which a thread
 * refreshes from bw__sys_now every period (at most 10 ms, and at most a
 * hundredth of the smallest threshold that asked for it, at least 1 ms). A
 * reading is never ahead of the system clock and lags it by at most a period
 * plus however long the ticker waits for a CPU.
 *
 * The ticker thread starts with the first breaker that asks for it and ticks on
 * a lease (tick.c's design notes): for 2 s after an ask, and after that only if
 * a thread keeps reading the clock a thousand times in 10 ms or faster. While
 * it does not tick the word reads 0, and a reader that finds 0 reads the system
 * clock (bw__tick_slow), and asks again when it reads that often. A forked
 * child has no ticker: its word reads 0 until it asks. Between leases the
 * thread sleeps; bw__tick_fini (bw_fini) ends it, and the next ask makes a new one.
 */
#ifndef BW_BASE_TICK_H
#define BW_BASE_TICK_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/compiler.h"

extern _Atomic int64_t bw__tick_word;

/* The ticker's period for a threshold: a hundredth of it, in [1 ms, 10 ms]. */
int64_t bw__tick_period_for(int64_t threshold_ns);

/* Make the ticker tick, with a period of at most `period_ns`, for a lease. Returns 0, or -1 when its thread cannot
 * start. */
int bw__tick_need(int64_t period_ns);

/* The word read 0 (no lease, no ticker yet, a forked child): the system clock; a busy reader asks for a lease. */
int64_t bw__tick_slow(void);

/* The coarse time, in the system clock's nanoseconds. */
static BW_ALWAYS_INLINE int64_t bw__tick_now(void)
{
    int64_t t = atomic_load_explicit(&bw__tick_word, memory_order_relaxed);
    return BW_LIKELY(t != 0) ? t : bw__tick_slow();
}

/* Stop and join the ticker, if it runs (bw_fini); it starts again when needed. */
void bw__tick_fini(void);

#ifdef BW_TESTING
/* End the lease now, as if it had run out (the tests' build only). */
void bw__tick_lapse(void);
#endif

#endif
