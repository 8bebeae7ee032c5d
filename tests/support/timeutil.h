/*
 * timeutil.h — real time for the few tests that need real threads or
 * processes to wait (every timing rule itself is tested on a manual clock);
 * a shared test helper of tests/support/. Include it after defining
 * _POSIX_C_SOURCE.
 */
#ifndef BW_TEST_TIMEUTIL_H
#define BW_TEST_TIMEUTIL_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t mono_ms(void)
{
    return mono_ns() / 1000000;
}

/* Sleep ns of real time, through signal interruptions. */
static inline void sleep_ns(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static inline void sleep_ms(int ms)
{
    sleep_ns((int64_t)ms * 1000000);
}

#endif
