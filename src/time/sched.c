/*
 * sched.c — the scheduler: a min-heap of entries, and its two runners, a thread
 * or a manual clock's advance (see sched.h).
 *
 * Locking: `mu` guards the heap, `firing` and the flags. A runner takes the
 * earliest due entry off the heap, marks it in `firing`, releases `mu` for the
 * fire, and afterwards re-reads its deadline and queues it again. cancel waits
 * on `idle` while its entry is `firing`. Lock order: a manual clock's mutex,
 * then `mu`, then whatever an entry's deadline() takes; a fire takes its owner's
 * locks with `mu` released.
 */
#define _POSIX_C_SOURCE 200809L
#include "time/sched.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "base/systime.h"
#include "time/clock.h"

struct bw__sched {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* CLOCK_MONOTONIC: a new earliest entry, or stop */
    pthread_cond_t idle; /* a fire finished */
    bw__heap heap;
    size_t cap, added; /* the heap has room for `cap` >= the entries added: queuing never allocates */
    bw__sched_entry *firing;
    bw_clock *clock;
    bw__watch watch;  /* manual clocks: the advance runs us */
    pthread_t thread; /* threaded schedulers */
    int manual, stop;
};

static bw__sched_entry *entry_of(bw__heap_node *n)
{
    return (bw__sched_entry *)((char *)n - offsetof(bw__sched_entry, node));
}

/* Queue e at its deadline, or dequeue it when it has none. mu held. */
static void requeue(bw__sched *t, bw__sched_entry *e)
{
    int64_t due = e->deadline(e);
    if (due == INT64_MAX || t->stop)
        bw__heap_remove(&t->heap, &e->node);
    else
        bw__heap_set(&t->heap, &e->node, due);
}

/*
 * Fire the earliest entry if it is due at `now`: returns 1 when it fired (mu
 * released around the fire), 0 when nothing is due.
 */
static int fire_one(bw__sched *t, int64_t now)
{
    bw__heap_node *top = bw__heap_top(&t->heap);
    if (!top || top->due > now)
        return 0;
    bw__sched_entry *e = entry_of(top);
    bw__heap_remove(&t->heap, top);
    t->firing = e;
    pthread_mutex_unlock(&t->mu);
    e->fire(e, now);
    pthread_mutex_lock(&t->mu);
    requeue(t, e); /* its next deadline: e.g. the half-open round's end */
    t->firing = NULL;
    pthread_cond_broadcast(&t->idle);
    return 1;
}

/* ---- the runners ---- */

static void *thread_main(void *arg)
{
    bw__sched *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        if (!bw__heap_top(&t->heap)) { /* nothing queued: the clock is not read (it may be gone) */
            pthread_cond_wait(&t->wake, &t->mu);
            continue;
        }
        int64_t now = bw_clock_now(t->clock);
        if (fire_one(t, now))
            continue;
        /* Sleep in CLOCK_MONOTONIC time, at most an hour at once, then re-check the clock. */
        int64_t wait = bw__heap_top(&t->heap)->due - now;
        if (wait > 3600 * BW_NS_PER_S)
            wait = 3600 * BW_NS_PER_S;
        struct timespec ts = bw__timespec_of(bw__mono_now() + wait);
        pthread_cond_timedwait(&t->wake, &t->mu, &ts);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* A manual clock moved to `now`: run everything due, in deadline order (the clock's mutex is held). */
static void manual_run(void *ctx, int64_t now)
{
    bw__sched *t = ctx;
    pthread_mutex_lock(&t->mu);
    while (!t->stop && fire_one(t, now))
        ;
    pthread_mutex_unlock(&t->mu);
}

/* ---- the interface ---- */

int bw__sched_new(bw_clock *clock, bw__sched **out)
{
    bw__sched *t = calloc(1, sizeof *t);
    if (!t)
        return BW_ENOMEM;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t);
        return BW_ESYS;
    }
    if (bw__cond_init_mono(&t->wake) != 0) {
        pthread_mutex_destroy(&t->mu);
        free(t);
        return BW_ESYS;
    }
    if (pthread_cond_init(&t->idle, NULL) != 0) {
        pthread_cond_destroy(&t->wake);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return BW_ESYS;
    }
    t->clock = clock;
    t->manual = bw__clock_kind(clock) == BW__CLOCK_MANUAL;
    if (t->manual) {
        t->watch.fire = manual_run;
        t->watch.ctx = t;
        bw__clock_watch(clock, &t->watch);
    } else if (pthread_create(&t->thread, NULL, thread_main, t) != 0) {
        pthread_cond_destroy(&t->idle);
        pthread_cond_destroy(&t->wake);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return BW_ESYS;
    }
    *out = t;
    return BW_OK;
}

void bw__sched_free(bw__sched *t)
{
    if (!t)
        return;
    if (t->manual)
        bw__clock_unwatch(t->clock, &t->watch); /* waits out a run in progress */
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->mu);
    if (!t->manual)
        pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->idle);
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->mu);
    free(t->heap.a);
    free(t);
}

int bw__sched_add(bw__sched *t, bw__sched_entry *e)
{
    int rc = BW_OK;
    pthread_mutex_lock(&t->mu);
    if (t->added == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        bw__heap_node **a = realloc(t->heap.a, cap * sizeof *a);
        if (a) {
            t->heap.a = a;
            t->cap = cap;
        } else {
            rc = BW_ENOMEM;
        }
    }
    if (rc == BW_OK) {
        t->added++;
        e->node.slot = 0;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void bw__sched_kick(bw__sched *t, bw__sched_entry *e)
{
    pthread_mutex_lock(&t->mu);
    if (t->firing != e) /* a firing entry is requeued when its fire returns */
        requeue(t, e);
    if (e->node.slot == 1)
        pthread_cond_signal(&t->wake); /* a new earliest entry */
    pthread_mutex_unlock(&t->mu);
}

void bw__sched_remove(bw__sched *t, bw__sched_entry *e)
{
    pthread_mutex_lock(&t->mu);
    bw__heap_remove(&t->heap, &e->node);
    while (t->firing == e) {
        pthread_cond_wait(&t->idle, &t->mu);
        bw__heap_remove(&t->heap, &e->node); /* the requeue after the fire may have queued it again */
    }
    t->added--;
    pthread_mutex_unlock(&t->mu);
}

/* ---- the scheduler a clock's timers share ---- */

static void *make_shared(bw_clock *c)
{
    bw__sched *t = NULL;
    return bw__sched_new(c, &t) == BW_OK ? t : NULL;
}

static void drop_shared(void *att)
{
    bw__sched_free(att);
}

bw__sched *bw__sched_of(bw_clock *clock)
{
    return bw__clock_attachment(clock, make_shared, drop_shared);
}

void bw__sched_fini(void)
{
    bw__clock_system_fini();
}
