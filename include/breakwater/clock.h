/*
 * breakwater/clock.h — where a breaker gets its time from.
 *
 * Every breaker reads time through a bw_clock: the system clock by default, a
 * manual clock in tests (time moves only when the test says so), or a custom
 * function. Time is signed 64-bit nanoseconds on an arbitrary monotonic scale;
 * only differences mean anything.
 *
 * The system clock reads the CPU's invariant time-stamp counter, calibrated once
 * against CLOCK_MONOTONIC, where the kernel itself trusts that counter (its
 * clocksource is "tsc"); otherwise, and when the environment variable
 * BW_CLOCK=monotonic is set, it reads CLOCK_MONOTONIC directly.
 *
 * Lifetime: a clock must outlive every breaker that uses it.
 */
#ifndef BREAKWATER_CLOCK_H
#define BREAKWATER_CLOCK_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_clock bw_clock;

/*
 * bw_clock_system — the process-wide system clock. Never NULL, never freed
 * (bw_clock_free ignores it). The first call calibrates the counter (about 2 ms).
 * Thread safety: safe from any thread.
 */
BW_API bw_clock *bw_clock_system(void);

/*
 * bw_clock_manual_new — a clock that stands still until bw_clock_manual_advance or
 * bw_clock_manual_set moves it; the tool for deterministic tests and demos.
 * Advancing a manual clock also runs, on the advancing thread and before the call
 * returns, the timed transitions of every breaker with auto_transition that uses
 * it, so a test sees their events deterministically.
 * Returns BW_OK and stores a new clock in *out (free with bw_clock_free);
 * BW_EINVAL if out is NULL; BW_ENOMEM; BW_ESYS if its mutex cannot be made.
 * Thread safety: the clock may be read and advanced from any thread.
 */
BW_API int bw_clock_manual_new(int64_t start_ns, bw_clock **out);

/*
 * bw_clock_manual_advance — move a manual clock forward by delta_ns (>= 0), then
 * run due auto-transitions of the breakers that use it (their listeners run on
 * this thread; a listener must not advance the same clock).
 * Returns BW_OK; BW_EINVAL if clock is NULL or not manual, or delta_ns < 0.
 * Thread safety: safe from any thread.
 */
BW_API int bw_clock_manual_advance(bw_clock *clock, int64_t delta_ns);

/*
 * bw_clock_manual_set — move a manual clock to now_ns, which must not be earlier
 * than its current time (time never goes back). Same effects as advance.
 * Returns BW_OK; BW_EINVAL if clock is NULL or not manual, or now_ns is earlier.
 * Thread safety: safe from any thread.
 */
BW_API int bw_clock_manual_set(bw_clock *clock, int64_t now_ns);

/* A custom time source: returns monotonic nanoseconds; must never go back. */
typedef int64_t (*bw_clock_now_cb)(void *user);

/*
 * bw_clock_custom_new — a clock that calls fn(user) for the time. fn runs on
 * whichever thread needs the time, possibly under a breaker's internal lock, so
 * it must be fast, thread-safe, and must not call into breakwater.
 * Auto-transitions on a custom clock run on one timer thread per clock (started
 * on first need, joined by bw_clock_free), which waits in real time and then
 * re-checks fn. Returns BW_OK; BW_EINVAL if fn or out is NULL; BW_ENOMEM;
 * BW_ESYS if its mutex cannot be made.
 * Thread safety: any thread.
 */
BW_API int bw_clock_custom_new(bw_clock_now_cb fn, void *user, bw_clock **out);

/*
 * bw_clock_now — the clock's current time in nanoseconds; 0 for a NULL clock.
 * Thread safety: safe from any thread.
 */
BW_API int64_t bw_clock_now(const bw_clock *clock);

/*
 * bw_clock_free — release a manual or custom clock. NULL and the system clock are
 * ignored. No breaker may still use it. Thread safety: must not race any other
 * use of the clock.
 */
BW_API void bw_clock_free(bw_clock *clock);

#ifdef __cplusplus
}
#endif
#endif
