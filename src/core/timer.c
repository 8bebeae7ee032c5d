/*
 * timer.c — one timer thread per clock for auto-transitions (see timer.h).
 *
 * Locking: `mu` guards the heap, `firing`, and the thread's flags. The thread
 * releases `mu` to fire an entry, and marks it in `firing` meanwhile, so that
 * bw__timers_cancel can wait until the fire is over; after the fire it re-reads
 * the entry's deadline and queues it again if it has one. A fire may kick
 * entries itself, which takes `mu` on the service thread: fine, since `mu` is
 * not held during a fire. Lock order: `mu`, then
 * whatever the entry's deadline callback takes (a breaker's lock); a fire takes a
 * breaker's lock and then `mu` only after releasing it.
 */
#define _POSIX_C_SOURCE 200809L
#include "core/timer.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "core/internal.h"

struct bw__timers {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* CLOCK_MONOTONIC: a new earliest entry, or stop */
    pthread_cond_t idle; /* a fire finished */
    bw__timer_entry **heap;
    size_t n, cap;
    bw__timer_entry *firing;
    bw_clock *clock;
    pthread_t thread;
    int started, stop;
};

/* ---- a binary min-heap on `due`, each entry knowing its slot ---- */

static void put(bw__timers *t, size_t i, bw__timer_entry *e)
{
    t->heap[i] = e;
    e->slot = i + 1;
}

static void sift_up(bw__timers *t, size_t i)
{
    bw__timer_entry *e = t->heap[i];
    while (i > 0 && t->heap[(i - 1) / 2]->due > e->due) {
        put(t, i, t->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    put(t, i, e);
}

static void sift_down(bw__timers *t, size_t i)
{
    bw__timer_entry *e = t->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= t->n)
            break;
        if (c + 1 < t->n && t->heap[c + 1]->due < t->heap[c]->due)
            c++;
        if (t->heap[c]->due >= e->due)
            break;
        put(t, i, t->heap[c]);
        i = c;
    }
    put(t, i, e);
}

static void dequeue(bw__timers *t, bw__timer_entry *e)
{
    if (!e->slot)
        return;
    size_t i = e->slot - 1;
    e->slot = 0;
    bw__timer_entry *last = t->heap[--t->n];
    if (i == t->n)
        return;
    put(t, i, last);
    sift_down(t, i);
    sift_up(t, last->slot - 1);
}

/* Queue e at `due` (or move it there). Returns 0 when out of memory. */
static int enqueue(bw__timers *t, bw__timer_entry *e, int64_t due)
{
    if (e->slot) {
        e->due = due;
        sift_down(t, e->slot - 1);
        sift_up(t, e->slot - 1);
        return 1;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        bw__timer_entry **h = realloc(t->heap, cap * sizeof *h);
        if (!h)
            return 0;
        t->heap = h;
        t->cap = cap;
    }
    e->due = due;
    put(t, t->n++, e);
    sift_up(t, t->n - 1);
    return 1;
}

/* ---- the thread ---- */

static void *serve(void *arg)
{
    bw__timers *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        if (t->n == 0) {
            pthread_cond_wait(&t->wake, &t->mu);
            continue;
        }
        bw__timer_entry *e = t->heap[0];
        int64_t now = bw_clock_now(t->clock);
        if (now >= e->due) {
            dequeue(t, e);
            t->firing = e;
            pthread_mutex_unlock(&t->mu);
            e->fire(e->ctx, now);
            pthread_mutex_lock(&t->mu);
            int64_t next = e->deadline(e->ctx); /* re-arm: e.g. the half-open round's end */
            if (next != INT64_MAX)
                enqueue(t, e, next);
            t->firing = NULL;
            pthread_cond_broadcast(&t->idle);
            continue;
        }
        /* Sleep in CLOCK_MONOTONIC time, at most an hour at once, then re-check the clock. */
        int64_t wait = e->due - now;
        if (wait > 3600 * BW_NS_PER_S)
            wait = 3600 * BW_NS_PER_S;
        struct timespec ts = bw__timespec_of(bw__mono_now() + wait);
        pthread_cond_timedwait(&t->wake, &t->mu, &ts);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

bw__timers *bw__timers_new(bw_clock *clock)
{
    bw__timers *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    int ok = pthread_mutex_init(&t->mu, NULL) == 0;
    if (ok && bw__cond_init_mono(&t->wake) != 0) {
        pthread_mutex_destroy(&t->mu);
        ok = 0;
    }
    if (ok && pthread_cond_init(&t->idle, NULL) != 0) {
        pthread_cond_destroy(&t->wake);
        pthread_mutex_destroy(&t->mu);
        ok = 0;
    }
    if (!ok) {
        free(t);
        return NULL;
    }
    t->clock = clock;
    return t;
}

void bw__timers_free(bw__timers *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->wake);
    int started = t->started;
    pthread_mutex_unlock(&t->mu);
    if (started)
        pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->idle);
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->mu);
    free(t->heap);
    free(t);
}

void bw__timers_kick(bw__timers *t, bw__timer_entry *e)
{
    pthread_mutex_lock(&t->mu);
    int64_t due = e->deadline(e->ctx);
    if (due == INT64_MAX) {
        dequeue(t, e);
    } else if (!t->stop && enqueue(t, e, due)) {
        if (!t->started && pthread_create(&t->thread, NULL, serve, t) == 0)
            t->started = 1;
        if (e->slot == 1)
            pthread_cond_signal(&t->wake); /* a new earliest entry */
    }
    pthread_mutex_unlock(&t->mu);
}

void bw__timers_cancel(bw__timers *t, bw__timer_entry *e)
{
    pthread_mutex_lock(&t->mu);
    dequeue(t, e);
    while (t->firing == e) {
        pthread_cond_wait(&t->idle, &t->mu);
        dequeue(t, e); /* the fire, or the re-arm after it, may have queued it again */
    }
    pthread_mutex_unlock(&t->mu);
}
