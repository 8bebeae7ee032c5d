/*
 * systime.c — CLOCK_MONOTONIC helpers and the TSC calibration (systime.h).
 */
#define _GNU_SOURCE /* pthread_mutex_clocklock */
#include "base/systime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakwater/common.h"

bw__tsc bw__tsc_state;
static pthread_once_t calibrate_once = PTHREAD_ONCE_INIT;

int64_t bw__mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * BW_NS_PER_S + ts.tv_nsec;
}

int bw__cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(cv, &ca) == 0 ? 0 : -1;
    pthread_condattr_destroy(&ca);
    return rc;
}

struct timespec bw__timespec_of(int64_t mono_ns)
{
    struct timespec ts = {(time_t)(mono_ns / BW_NS_PER_S), (long)(mono_ns % BW_NS_PER_S)};
    return ts;
}

int bw__mutex_lock_until(pthread_mutex_t *mu, int64_t deadline)
{
#if defined(__GLIBC__) && !BW__TSAN
    struct timespec at = bw__timespec_of(deadline > 0 ? deadline : 0);
    return pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, &at);
#else
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    int64_t left = deadline - bw__mono_now();
    int64_t t = (int64_t)at.tv_sec * BW_NS_PER_S + at.tv_nsec + (left > 0 ? left : 0);
    at.tv_sec = (time_t)(t / BW_NS_PER_S);
    at.tv_nsec = (long)(t % BW_NS_PER_S);
    return pthread_mutex_timedlock(mu, &at);
#endif
}

#ifdef BW__HAVE_TSC
/* Trust the TSC only where the kernel does: its clocksource is "tsc". */
static int kernel_trusts_tsc(void)
{
    const char *force = getenv("BW_CLOCK");
    if (force && strcmp(force, "monotonic") == 0)
        return 0;
    char buf[32] = {0};
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || buf[3] == 0);
}
#endif

/* Measure the TSC rate against CLOCK_MONOTONIC over about 2 ms. */
static void calibrate(void)
{
#ifdef BW__HAVE_TSC
    if (!kernel_trusts_tsc())
        return;
    int64_t t0 = bw__mono_now();
    uint64_t c0 = __rdtsc();
    int64_t t1;
    do
        t1 = bw__mono_now();
    while (t1 - t0 < 2 * BW_NS_PER_MS);
    uint64_t c1 = __rdtsc();
    if (c1 <= c0)
        return;
    bw__tsc_state.ns_per_tick = (double)(t1 - t0) / (double)(c1 - c0);
    bw__tsc_state.base_tick = c1;
    bw__tsc_state.base_ns = t1;
    bw__tsc_state.use_tsc = 1;
#endif
}

void bw__systime_init(void)
{
    pthread_once(&calibrate_once, calibrate);
}

int64_t bw__sys_ns_to_stamp(int64_t ns, int instant)
{
    if (!bw__tsc_state.use_tsc)
        return ns;
    double t = (double)(instant ? ns - bw__tsc_state.base_ns : ns) / bw__tsc_state.ns_per_tick;
    if (instant)
        t += (double)bw__tsc_state.base_tick;
    return t >= 9.2e18 ? INT64_MAX : t <= -9.2e18 ? INT64_MIN : (int64_t)t;
}
