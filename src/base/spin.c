/*
 * spin.c — the slow half of the breaker's lock: the bounded spin and the park
 * (see spin.h).
 */
#define _GNU_SOURCE /* syscall */
#include "base/spin.h"

#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define SPIN_ROUNDS 8         /* lost races before parking */
#define PARK_NS (200 * 1000L) /* the longest sleep before trying again */

/* Sleep while the word is `marked` (held, a waiter asleep), for at most PARK_NS. */
static void park(bw__spin *l, unsigned marked)
{
    struct timespec ts = {0, PARK_NS};
#ifdef __linux__
    syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, marked, &ts, NULL, 0);
#else
    (void)l;
    (void)marked;
    ts.tv_nsec = 20 * 1000L;
    nanosleep(&ts, NULL);
#endif
}

void bw__spin_wake(bw__spin *l)
{
#ifdef __linux__
    syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
    (void)l;
#endif
}

/*
 * Take l, adding `count` (0 or 1) to its tally when it has room (a tally lock;
 * a plain lock counts 0, so its tally stays 0). Returns what
 * bw__spin_lock_tally returns.
 */
static int take(bw__spin *l, unsigned count)
{
    int backoff = 1;
    for (int round = 0; round < SPIN_ROUNDS; round++) {
        for (int i = 0; i < 128 && (atomic_load_explicit(&l->v, memory_order_relaxed) & BW__SPIN_STATE); i++)
            bw__cpu_relax();
        unsigned v = atomic_load_explicit(&l->v, memory_order_relaxed);
        if (!(v & BW__SPIN_STATE)) {
            unsigned add = count ? bw__tally_room(v) : 0u;
            if (atomic_compare_exchange_strong_explicit(&l->v, &v, (v | 1u) + add, memory_order_seq_cst,
                                                        memory_order_relaxed))
                return add || !count;
        }
        for (int i = 0; i < backoff; i++)
            bw__cpu_relax();
        if (backoff < 64)
            backoff *= 2;
    }
    /* Taken with the mark set, so that this holder's release wakes the next sleeper. */
    for (;;) {
        unsigned v = atomic_load_explicit(&l->v, memory_order_relaxed);
        if (!(v & BW__SPIN_STATE)) {
            unsigned add = count ? bw__tally_room(v) : 0u;
            if (atomic_compare_exchange_strong_explicit(&l->v, &v, (v | 2u) + add, memory_order_seq_cst,
                                                        memory_order_relaxed))
                return add || !count;
            continue;
        }
        unsigned marked = (v & ~BW__SPIN_STATE) | 2u;
        if (v != marked &&
            !atomic_compare_exchange_strong_explicit(&l->v, &v, marked, memory_order_relaxed, memory_order_relaxed))
            continue;
        park(l, marked);
    }
}

void bw__spin_lock_slow(bw__spin *l)
{
    (void)take(l, 0);
}

int bw__spin_lock_tally_slow(bw__spin *l, unsigned count)
{
    return take(l, count);
}
