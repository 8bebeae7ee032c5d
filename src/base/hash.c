/*
 * hash.c — seeds for the string hash (hash.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <time.h>

#include "base/hash.h"

uint64_t bw__hash_seed(const void *map)
{
    static atomic_uint_fast64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t n = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
    uint64_t x = (uint64_t)(uintptr_t)map ^ ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (n << 40);
    return bw__mix64(x ^ UINT64_C(0x2545f4914f6cdd1d));
}
