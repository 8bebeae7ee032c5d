/*
 * hash.h — the string hash of the registry and keyed circuits, and the one
 * random source (internal).
 *
 * wyhash's construction, seeded per map from the address space and the clock,
 * so that keys an attacker chooses cannot be made to collide ahead of time. Not
 * cryptographic. Also the library's one random source (SplitMix64, below).
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

#ifdef __SIZEOF_INT128__
/* wyhash's mixing step: the 128-bit product of a and b, folded. */
static inline uint64_t bw__mum(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}
#else
static inline uint64_t bw__mum(uint64_t a, uint64_t b)
{
    return bw__mix64(a ^ bw__mix64(b));
}
#endif

static inline uint64_t bw__rd8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t bw__rd4(const char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/*
 * Whether the n bytes at a and b are equal: keys and names of up to 16 bytes
 * compared as two overlapping words each, inline; longer ones by memcmp.
 */
static inline int bw__same(const char *a, const char *b, size_t n)
{
    if (n >= 8 && n <= 16)
        return ((bw__rd8(a) ^ bw__rd8(b)) | (bw__rd8(a + n - 8) ^ bw__rd8(b + n - 8))) == 0;
    if (n >= 4 && n < 8)
        return ((bw__rd4(a) ^ bw__rd4(b)) | (bw__rd4(a + n - 4) ^ bw__rd4(b + n - 4))) == 0;
    return memcmp(a, b, n) == 0;
}

/*
 * The structure of wyhash (final version 4): 16 bytes a step through one
 * 64x64->128 multiply, short strings read as overlapping words, so a 30-byte
 * name costs three multiplies.
 */
static inline uint64_t bw__hash(uint64_t seed, const char *p, size_t n)
{
    const uint64_t k0 = UINT64_C(0xa0761d6478bd642f), k1 = UINT64_C(0xe7037ed1a0b428db);
    uint64_t a, b;
    seed ^= k0;
    if (n <= 16) {
        if (n >= 4) {
            size_t q = (n >> 3) << 2;
            a = (bw__rd4(p) << 32) | bw__rd4(p + q);
            b = (bw__rd4(p + n - 4) << 32) | bw__rd4(p + n - 4 - q);
        } else if (n > 0) {
            a = ((uint64_t)(unsigned char)p[0] << 16) | ((uint64_t)(unsigned char)p[n >> 1] << 8) |
                (unsigned char)p[n - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t i = n;
        for (; i > 16; i -= 16, p += 16)
            seed = bw__mum(bw__rd8(p) ^ k1, bw__rd8(p + 8) ^ seed);
        a = bw__rd8(p + i - 16);
        b = bw__rd8(p + i - 8);
    }
    return bw__mum(k1 ^ n, bw__mum(a ^ k1, b ^ seed));
}

/* A seed for one map: its address, the time and a counter, mixed. */
uint64_t bw__hash_seed(const void *map);

/* ---- the one random source: SplitMix64 (Steele, Lea and Flood) ---- */

/* SplitMix64's increment: the state advances by the golden ratio each step. */
#define BW__GOLDEN UINT64_C(0x9e3779b97f4a7c15)

/* SplitMix64's finalizer (Stafford's variant 13) of an advanced state. */
static inline uint64_t bw__splitmix_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/*
 * The next SplitMix64 output of *state (advanced by BW__GOLDEN). Not
 * thread-safe: a shared state advances with an atomic add of BW__GOLDEN and
 * bw__splitmix_mix of the new value instead.
 */
static inline uint64_t bw__splitmix(uint64_t *state)
{
    *state += BW__GOLDEN;
    return bw__splitmix_mix(*state);
}

/* A uniform double in [0, 1) from 64 random bits (their top 53). */
static inline double bw__unit(uint64_t x)
{
    return (double)(x >> 11) * 0x1.0p-53;
}

#endif
