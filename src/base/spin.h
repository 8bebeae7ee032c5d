/*
 * spin.h — the short lock that guards a breaker's machine (internal).
 *
 * Critical sections under it are a few dozen instructions with no user code, no
 * allocation and no system call, so a lock that spins briefly beats a mutex:
 * acquiring it uncontended is one atomic exchange and releasing it a load and
 * a plain store. A waiter spins with a pause instruction and backs off a little
 * longer after each lost race (up to 64 pauses), which cuts the cache-line
 * ping-pong when two threads hammer one lock (two threads on a count window:
 * in the two modes this VM shows, 72 -> 53 ns and 160 -> 130 ns per call).
 *
 * A bounded spin, then a park: when the holder does not let go within a few
 * microseconds it is most likely not running (more runnable threads than CPUs),
 * and spinning or yielding waiters would only keep it off the CPU (64 threads on
 * 2 CPUs once showed 1.4 s for one settle). So after SPIN_ROUNDS the waiter marks
 * the lock contended (2) and sleeps on it in the kernel (a futex on Linux;
 * elsewhere a short sleep; spin.c), and the holder that finds the mark on release wakes
 * one sleeper. Release reads the word before clearing it instead of swapping it
 * (a swap would add a locked instruction to every uncontended release); a
 * waiter that marks the lock between that read and the clearing store can miss
 * its wake-up, so every sleep is bounded (PARK_NS) and then tries again.
 *
 * Lock word: bits 0-1 are the state: 0 free, 1 held, 2 held and a waiter may
 * be asleep. The other bits are 0, except in a tally lock.
 *
 * A tally lock (the stripes of a striped time window) keeps a count in the
 * rest of the word (the tally), added to by the same compare-and-swap that
 * takes the lock (bw__spin_lock_tally). That one sequentially consistent
 * read-modify-write both takes the lock and publishes the count: a thread that
 * takes one tally lock and then reads the others (bw__spin_tally) sees every
 * count added before its own, which is what lets a striped window skip the
 * trip test without missing one (breaker.c). A tally lock must never be taken
 * with bw__spin_lock (its swap would clear the tally).
 */
#ifndef BW_SPIN_H
#define BW_SPIN_H

#include <stdatomic.h>

#include "base/compiler.h"

typedef struct bw__spin {
    atomic_uint v;
} bw__spin;

#define BW__SPIN_STATE 3u /* the state bits */
#define BW__TALLY_ONE 4u  /* one count of a tally lock's tally (the bits above the state) */

static inline void bw__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Contended: spin a bounded while, then park (spin.c). */
BW_NOINLINE void bw__spin_lock_slow(bw__spin *l);
/* The tally lock's contended path: as above, counting when it is taken (see bw__spin_lock_tally). */
BW_NOINLINE int bw__spin_lock_tally_slow(bw__spin *l, unsigned count);
/* Wake one parked waiter (spin.c). */
BW_NOINLINE void bw__spin_wake(bw__spin *l);

static BW_ALWAYS_INLINE void bw__spin_lock(bw__spin *l)
{
    /* A swap, not a compare-and-swap: on a held lock it may turn a 2 into a 1,
       which costs a sleeper at most one bounded park; the slow path marks again. */
    if (atomic_exchange_explicit(&l->v, 1u, memory_order_acquire))
        bw__spin_lock_slow(l);
}

/*
 * Release l; returns 1 when a waiter may be parked and must be woken
 * (bw__spin_wake). bw__spin_unlock does both; a hot path that must not call
 * anything in its middle does the wake in a tail call.
 */
static BW_ALWAYS_INLINE int bw__spin_release(bw__spin *l)
{
    int marked = atomic_load_explicit(&l->v, memory_order_relaxed) == 2;
    atomic_store_explicit(&l->v, 0u, memory_order_release);
    return marked;
}

static BW_ALWAYS_INLINE void bw__spin_unlock(bw__spin *l)
{
    if (BW_UNLIKELY(bw__spin_release(l)))
        bw__spin_wake(l);
}

/* Whether a tally lock's word has room for one more count. */
static BW_ALWAYS_INLINE unsigned bw__tally_room(unsigned v)
{
    return v < ~BW__SPIN_STATE ? BW__TALLY_ONE : 0u;
}

/*
 * Take the tally lock l and, in the same atomic step, add `count` (0 or 1) to
 * its tally unless the tally is full (2^30 - 1). Returns 1 when it added (or
 * count is 0), 0 when the tally was full; the lock is held either way.
 */
static BW_ALWAYS_INLINE int bw__spin_lock_tally(bw__spin *l, unsigned count)
{
    unsigned v = atomic_load_explicit(&l->v, memory_order_relaxed);
    if (BW_LIKELY(!(v & BW__SPIN_STATE))) {
        unsigned add = count ? bw__tally_room(v) : 0u;
        if (atomic_compare_exchange_strong_explicit(&l->v, &v, (v | 1u) + add, memory_order_seq_cst,
                                                    memory_order_relaxed))
            return add || !count;
    }
    return bw__spin_lock_tally_slow(l, count);
}

/* The tally of a tally lock, read (sequentially consistent) without taking it. */
static BW_ALWAYS_INLINE unsigned bw__spin_tally(const bw__spin *l)
{
    return atomic_load_explicit(&l->v, memory_order_seq_cst) >> 2;
}

/*
 * Release the tally lock l, keeping its tally (clear = 0) or zeroing it
 * (clear = 1); returns 1 when a waiter must be woken, as bw__spin_release.
 */
static BW_ALWAYS_INLINE int bw__spin_release_tally(bw__spin *l, int clear)
{
    unsigned v = atomic_load_explicit(&l->v, memory_order_relaxed);
    atomic_store_explicit(&l->v, clear ? 0u : v & ~BW__SPIN_STATE, memory_order_release);
    return (v & BW__SPIN_STATE) == 2;
}

/*
 * Take l if it is free: 1, or 0 when it is held (and then the caller must take
 * it with bw__spin_lock, which marks it again if this try cleared a mark).
 */
static BW_ALWAYS_INLINE int bw__spin_try(bw__spin *l)
{
    return atomic_exchange_explicit(&l->v, 1u, memory_order_acquire) == 0;
}

#endif
