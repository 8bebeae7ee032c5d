/*
 * systime.h — the system's time as the hot paths read it, and the helpers for
 * waits on CLOCK_MONOTONIC (internal; base layer).
 *
 * The system clock is inlined into the hot paths: the TSC scaled by a factor
 * calibrated once (bw__systime_init), or CLOCK_MONOTONIC where the TSC is not
 * trusted. Hot paths keep raw "stamps" (TSC ticks when the TSC is used, else
 * nanoseconds) and convert only what they report, so timing a call costs two
 * counter reads and a subtraction.
 */
#ifndef BW_BASE_SYSTIME_H
#define BW_BASE_SYSTIME_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "base/compiler.h"

/* CLOCK_MONOTONIC in nanoseconds, for converting deadlines to condvar waits. */
int64_t bw__mono_now(void);

/* Initialize *cv to time its waits on CLOCK_MONOTONIC. Returns 0, or -1. */
int bw__cond_init_mono(pthread_cond_t *cv);

/* An absolute CLOCK_MONOTONIC instant in nanoseconds (as bw__mono_now gives) as
 * the timespec pthread_cond_timedwait takes on such a condvar. */
struct timespec bw__timespec_of(int64_t mono_ns);

/*
 * Lock mu, waiting at most until `deadline` (a bw__mono_now instant): 0, or
 * pthread's error (ETIMEDOUT at the deadline; a robust mutex's EOWNERDEAD...).
 * On glibc it waits on CLOCK_MONOTONIC (pthread_mutex_clocklock); elsewhere,
 * and under ThreadSanitizer (which does not know clocklock), on the wall clock
 * (pthread_mutex_timedlock), the deadline converted once.
 */
int bw__mutex_lock_until(pthread_mutex_t *mu, int64_t deadline);

/*
 * Calibrate the TSC once per process (thread-safe, idempotent); the stamps
 * below are valid only after it ran. The TSC is trusted only where the kernel's
 * clocksource is "tsc" and BW_CLOCK is not "monotonic".
 */
void bw__systime_init(void);

typedef struct bw__tsc {
    int use_tsc;
    double ns_per_tick;
    uint64_t base_tick;
    int64_t base_ns;
} bw__tsc;
extern bw__tsc bw__tsc_state;

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <x86intrin.h>
#define BW__HAVE_TSC 1
#endif

/* A raw system stamp: TSC ticks when the TSC is used, else nanoseconds. */
static inline int64_t bw__sys_stamp(void)
{
#ifdef BW__HAVE_TSC
    if (BW_LIKELY(bw__tsc_state.use_tsc))
        return (int64_t)__rdtsc();
#endif
    return bw__mono_now();
}

/*
 * The TSC alone, for a caller that knows it is in use (bw__tsc_state.use_tsc;
 * a stamp then), with no fallback and so no call; 0 where there is no TSC.
 */
static BW_ALWAYS_INLINE int64_t bw__sys_tsc(void)
{
#ifdef BW__HAVE_TSC
    return (int64_t)__rdtsc();
#else
    return 0;
#endif
}

/* A difference of stamps, in nanoseconds. */
static inline int64_t bw__sys_span_ns(int64_t span)
{
    return bw__tsc_state.use_tsc ? (int64_t)((double)span * bw__tsc_state.ns_per_tick) : span;
}

/* A stamp as an instant in nanoseconds. */
static inline int64_t bw__sys_stamp_ns(int64_t stamp)
{
    if (bw__tsc_state.use_tsc)
        return bw__tsc_state.base_ns + bw__sys_span_ns(stamp - (int64_t)bw__tsc_state.base_tick);
    return stamp;
}

/* Nanoseconds (a span, or an instant when `instant`) as stamp units; saturates. */
int64_t bw__sys_ns_to_stamp(int64_t ns, int instant);

/* The system clock's instant in nanoseconds. */
static inline int64_t bw__sys_now(void)
{
    return bw__sys_stamp_ns(bw__sys_stamp());
}

#endif
