/*
 * hash.h — the string hash of the registry and keyed circuits (internal).
 *
 * Eight bytes at a time, multiply-xorshift per word, a murmur finaliser; seeded
 * per map from the address space and the clock, so that keys an attacker
 * chooses cannot be made to collide ahead of time. Not cryptographic.
 */
#ifndef BW_HASH_H
#define BW_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t bw__mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}

static inline uint64_t bw__hash(uint64_t seed, const char *s, size_t n)
{
    const uint64_t k = UINT64_C(0x9e3779b97f4a7c15);
    uint64_t h = seed ^ ((uint64_t)n * k);
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * k;
    return bw__mix64(h);
}

/* A seed for one map: its address, the time and a counter, mixed. */
uint64_t bw__hash_seed(const void *map);

#endif
