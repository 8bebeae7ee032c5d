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
 * Lock word: 0 free, 1 held, 2 held and a waiter may be asleep.
 */
#ifndef BW_SPIN_H
#define BW_SPIN_H

#include <stdatomic.h>

#include "base/compiler.h"

typedef struct bw__spin {
    atomic_int v;
} bw__spin;

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
/* Wake one parked waiter (spin.c). */
BW_NOINLINE void bw__spin_wake(bw__spin *l);

static BW_ALWAYS_INLINE void bw__spin_lock(bw__spin *l)
{
    /* A swap, not a compare-and-swap: on a held lock it may turn a 2 into a 1,
       which costs a sleeper at most one bounded park; the slow path marks again. */
    if (atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
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
    atomic_store_explicit(&l->v, 0, memory_order_release);
    return marked;
}

static BW_ALWAYS_INLINE void bw__spin_unlock(bw__spin *l)
{
    if (BW_UNLIKELY(bw__spin_release(l)))
        bw__spin_wake(l);
}

/*
 * Take l if it is free: 1, or 0 when it is held (and then the caller must take
 * it with bw__spin_lock, which marks it again if this try cleared a mark).
 */
static BW_ALWAYS_INLINE int bw__spin_try(bw__spin *l)
{
    return atomic_exchange_explicit(&l->v, 1, memory_order_acquire) == 0;
}

#endif
