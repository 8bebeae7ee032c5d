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

/* Sleep while the word is 2, for at most PARK_NS. */
static void park(bw__spin *l)
{
    struct timespec ts = {0, PARK_NS};
#ifdef __linux__
    syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, &ts, NULL, 0);
#else
    (void)l;
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

void bw__spin_lock_slow(bw__spin *l)
{
    int backoff = 1;
    for (int round = 0; round < SPIN_ROUNDS; round++) {
        for (int i = 0; i < 128 && atomic_load_explicit(&l->v, memory_order_relaxed); i++)
            bw__cpu_relax();
        int free_ = 0;
        if (atomic_compare_exchange_strong_explicit(&l->v, &free_, 1, memory_order_acquire, memory_order_relaxed))
            return;
        for (int i = 0; i < backoff; i++)
            bw__cpu_relax();
        if (backoff < 64)
            backoff *= 2;
    }
    /* Taken with the mark set, so that this holder's release wakes the next sleeper. */
    while (atomic_exchange_explicit(&l->v, 2, memory_order_acquire) != 0)
        park(l);
}
