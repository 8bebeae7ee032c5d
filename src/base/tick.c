/*
 * tick.c — the coarse clock's ticker thread (see tick.h).
 *
 * Locking: `mu` guards the ticker's state (running, stop, period, the thread)
 * and serialises starting and stopping it; the ticker waits on `cv` so that a
 * stop or a shorter period wakes it at once. The word itself is an atomic that
 * only the ticker writes (and a forked child's handler clears).
 */
#define _POSIX_C_SOURCE 200809L
#include "base/tick.h"

#include <pthread.h>
#include <time.h>

#include "base/systime.h"
#include "breakwater/common.h"

#define PERIOD_MIN BW_NS_PER_MS
#define PERIOD_MAX (10 * BW_NS_PER_MS)
#define RETRY_NS (100 * BW_NS_PER_MS) /* a failed start is tried again this much later */

_Atomic int64_t bw__tick_word;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static pthread_t thread;
static int running, stopping;
static int64_t period = PERIOD_MAX;
static _Atomic int64_t retry_at; /* bw__tick_slow: when a start may be tried again */

static void cv_init(void)
{
    bw__cond_init_mono(&cv);
}

/* In a forked child the ticker is gone: clear the word so that readers notice, and forget the thread. */
static void after_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    mu = fresh; /* the parent's ticker may have held it at the fork */
    running = stopping = 0;
    atomic_store_explicit(&bw__tick_word, 0, memory_order_relaxed);
    atomic_store_explicit(&retry_at, 0, memory_order_relaxed);
}

static void *ticker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!stopping) {
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

static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

int bw__tick_need(int64_t p)
{
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    pthread_once(&cv_once, cv_init);
    pthread_once(&fork_once, register_fork_handler);
    int rc = 0;
    pthread_mutex_lock(&mu);
    if (p < period) {
        period = p;
        pthread_cond_signal(&cv); /* a shorter period from now on */
    }
    if (!running) {
        atomic_store_explicit(&bw__tick_word, bw__sys_now(), memory_order_relaxed); /* valid before the first tick */
        stopping = 0;
        if (pthread_create(&thread, NULL, ticker, NULL) == 0) {
            running = 1;
        } else {
            atomic_store_explicit(&bw__tick_word, 0, memory_order_relaxed); /* readers read the system clock */
            rc = -1;
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int64_t bw__tick_slow(void)
{
    int64_t now = bw__sys_now();
    int64_t at = atomic_load_explicit(&retry_at, memory_order_relaxed);
    /* One caller at a time tries to start the ticker again, at most every RETRY_NS. */
    if (now >= at && atomic_compare_exchange_strong(&retry_at, &at, now + RETRY_NS))
        bw__tick_need(PERIOD_MAX);
    return now;
}

void bw__tick_fini(void)
{
    pthread_once(&cv_once, cv_init);
    pthread_mutex_lock(&mu);
    int was = running;
    stopping = 1;
    running = 0;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    if (was)
        pthread_join(thread, NULL);
    atomic_store_explicit(&bw__tick_word, 0, memory_order_relaxed);
    atomic_store_explicit(&retry_at, 0, memory_order_relaxed);
}
