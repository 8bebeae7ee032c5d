/*
 * sat.h — arithmetic that saturates instead of overflowing (internal; base
 * layer): instants plus waits, time left until an instant, and the one
 * exponential growth (open-wait backoff, retry backoff, a failing store's retry
 * delay).
 */
#ifndef BW_BASE_SAT_H
#define BW_BASE_SAT_H

#include <stdint.h>

/*
 * base * multiplier^k, capped at cap (the growth stops once it reaches cap, so a
 * huge k costs nothing). In doubles and without libm: the core needs only libc.
 */
static inline double bw__grow(double base, double multiplier, uint64_t k, double cap)
{
    double d = base;
    for (uint64_t i = 0; i < k && d < cap; i++)
        d *= multiplier;
    return d > cap ? cap : d;
}

/* a + b, or INT64_MAX when it would overflow (b >= 0). */
static inline int64_t bw__sat_add(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* until - now when positive, else 0; saturates instead of overflowing. */
static inline int64_t bw__time_left(int64_t until, int64_t now)
{
    if (until <= now)
        return 0;
    uint64_t d = (uint64_t)until - (uint64_t)now;
    return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
}

#endif
