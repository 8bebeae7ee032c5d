/*
 * tick.c — the coarse clock's ticker thread (see tick.h).
 *
 * Design notes: a thread that wakes every few milliseconds is not free. On the
 * virtual machines this project runs on, each wake-up costs tens of
 * microseconds of CPU (the timer is programmed through the hypervisor), so a
 * ticker that never stops would cost an idle process 0.3 % of a CPU at a 10 ms
 * period and 2 to 4 % at 1 ms, while the TSC reads it saves are worth that only
 * above some 100,000 reads a second. So the ticker ticks on a lease: asked to,
 * it ticks for LEASE_NS and then stops, clearing the word; readers that find
 * the word clear read the system clock instead (bw__tick_slow), and a thread
 * that does so BUSY_READS times within BUSY_NS asks again. An idle process, or
 * one making a few calls a second, has a sleeping ticker and reads the precise
 * clock; a busy one reads the word, and spends a few slow reads a lease on
 * asking again.
 *
 * Between leases the thread sleeps on `cv` (it costs nothing then); it ends
 * only with bw__tick_fini, which joins it (bw_fini, before a dlclose).
 *
 * Locking: `mu` guards the ticker's state (running, stopping, ticking, the
 * lease, the period, the thread) and serialises starting and
 * stopping it; the ticker waits on `cv`, so that a stop or a shorter period
 * wakes it at once. `asked` lets one reader of many ask while no lease runs.
 * The word itself is an atomic written under `mu` (and by a forked child's
 * handler). fork holds `mu` (pthread_atfork), so a child never inherits it
 * held, and starts with a fresh mutex and condition variable.
 */
#define _POSIX_C_SOURCE 200809L
#include "base/tick.h"

#include <pthread.h>
#include <time.h>

#include "base/systime.h"
#include "breakwater/common.h"

#define PERIOD_MIN BW_NS_PER_MS
#define PERIOD_MAX (10 * BW_NS_PER_MS)
#define LEASE_NS (2 * BW_NS_PER_S) /* a lease: ticks for this long after an ask */
#define BUSY_READS 1000u           /* slow reads by one thread within BUSY_NS that ask for a lease */
#define BUSY_NS (10 * BW_NS_PER_MS)

_Atomic int64_t bw__tick_word;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_t thread;
static int running; /* the thread was made (it ticks, or sleeps between leases) */
static int stopping, ticking;
static int64_t period = PERIOD_MAX;
static int64_t lease_end; /* bw__mono_now() */
static atomic_int asked;  /* an ask is under way or granted: the others need not */

/* fork: no thread of this file's runs in the child, and its mutex and condition variable start afresh there. */
static void before_fork(void)
{
    pthread_mutex_lock(&mu);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&mu);
}

static void after_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    mu = fresh;
    bw__cond_init_mono(&cv);
    running = stopping = ticking = 0;
    atomic_store_explicit(&bw__tick_word, 0, memory_order_relaxed);
    atomic_store_explicit(&asked, 0, memory_order_relaxed);
}

static void init(void)
{
    bw__cond_init_mono(&cv);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* The ticker: ticks while its lease runs, then clears the word and sleeps until the next lease. */
static void *ticker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        if (ticking && bw__mono_now() >= lease_end) { /* the lease ran out */
            ticking = 0;
            atomic_store_explicit(&bw__tick_word, 0, memory_order_relaxed);
            atomic_store_explicit(&asked, 0, memory_order_relaxed);
        }
        if (!ticking) {
            pthread_cond_wait(&cv, &mu); /* a lease or a stop signals */
            continue;
        }
        atomic_store_explicit(&bw__tick_word, bw__sys_now(), memory_order_relaxed);
        struct timespec at = bw__timespec_of(bw__mono_now() + period);
        pthread_cond_timedwait(&cv, &mu, &at);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int64_t bw__tick_period_for(int64_t threshold_ns)
{
    int64_t p = threshold_ns / 100;
    return p < PERIOD_MIN ? PERIOD_MIN : p > PERIOD_MAX ? PERIOD_MAX : p;
}

/* A lease from now; the ticker made when there is none. Call with mu held. Returns 0, or -1. */
static int lease_locked(void)
{
    lease_end = bw__mono_now() + LEASE_NS;
    atomic_store_explicit(&bw__tick_word, bw__sys_now(), memory_order_relaxed); /* valid at once */
    ticking = 1;
    if (running) {
        pthread_cond_signal(&cv); /* it may sleep between leases, or keep a longer period */
        return 0;
    }
    stopping = 0;
    if (pthread_create(&thread, NULL, ticker, NULL) == 0) {
        running = 1;
        return 0;
    }
    ticking = 0;
    atomic_store_explicit(&bw__tick_word, 0, memory_order_relaxed); /* readers read the system clock */
    atomic_store_explicit(&asked, 0, memory_order_relaxed);         /* a later ask tries again */
    return -1;
}

int bw__tick_need(int64_t p)
{
    pthread_once(&init_once, init);
    pthread_mutex_lock(&mu);
    if (p < period)
        period = p; /* the ticker picks it up at its next wake-up, which the lease below brings forward */
    atomic_store_explicit(&asked, 1, memory_order_relaxed);
    int rc = lease_locked();
    pthread_mutex_unlock(&mu);
    return rc;
}

int64_t bw__tick_slow(void)
{
    static _Thread_local int64_t since;
    static _Thread_local unsigned reads;
    int64_t now = bw__sys_now();
    if (now - since > BUSY_NS) {
        since = now;
        reads = 0;
    }
    if (++reads >= BUSY_READS && !atomic_exchange_explicit(&asked, 1, memory_order_relaxed)) {
        reads = 0;
        pthread_once(&init_once, init);
        pthread_mutex_lock(&mu);
        lease_locked();
        pthread_mutex_unlock(&mu);
    }
    return now;
}

void bw__tick_fini(void)
{
    pthread_once(&init_once, init);
    pthread_mutex_lock(&mu);
    int was = running;
    stopping = 1;
    running = ticking = 0;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    if (was)
        pthread_join(thread, NULL);
    atomic_store_explicit(&bw__tick_word, 0, memory_order_relaxed);
    atomic_store_explicit(&asked, 0, memory_order_relaxed);
}

#ifdef BW_TESTING
void bw__tick_lapse(void)
{
    pthread_once(&init_once, init);
    pthread_mutex_lock(&mu);
    lease_end = bw__mono_now();
    ticking = 0;
    atomic_store_explicit(&bw__tick_word, 0, memory_order_relaxed);
    atomic_store_explicit(&asked, 0, memory_order_relaxed);
    pthread_mutex_unlock(&mu);
}
#endif
