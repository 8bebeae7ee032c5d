/*
 * lane.c — the coordinator of coordinated circuits (see lane.h): a bounded
 * write queue per circuit, and one lane per store and clock that runs the
 * queued writes and the polls.
 *
 * Design notes
 * - A lane is a min-heap of its coordinators by due instant (now, when writes
 *   are queued; else the next poll) and one entry in a scheduler of its own
 *   (time/sched.h: a thread, or a manual clock's advance), due when the heap's
 *   earliest is. So an idle lane costs nothing, and a store call that hangs in
 *   one lane delays no other store and no timer.
 * - Polls fall on a grid: every multiple of store_poll plus a per-lane random
 *   offset (none on a manual clock, so tests are exact). Circuits with the same
 *   store_poll come due together and are polled in one batch per tick: one
 *   wake-up, and for a store with read_many one store call per batch, instead
 *   of one per circuit; the offset spreads the processes of a fleet apart.
 * - A poll reads: through read_many, else the store's lock-free read, else an
 *   update. Only when the read shows a timed transition due (an OPEN whose wait
 *   ended, a HALF_OPEN round that outlived its deadline) or a malformed entry
 *   does the poll run an update (BW__OP_ADVANCE), so an idle fleet polls
 *   without writing. The owner hears of a poll only when its circuit moved or
 *   its link is degraded (the result callback).
 *
 * Locking: a lane's `mu` guards its heap, its batch, and every coordinator's
 * queue, flags and reference count. No store call and no owner callback runs
 * with it held. The lane's scheduler calls deadline() with the scheduler's
 * mutex held, which takes `mu`: so `mu` is never held while kicking. Lock
 * order: (a manual clock's mutex,) the scheduler's mutex, `mu`; an owner's
 * engine lock is never held when calling in here. `lanes_mu` guards the list
 * of lanes and their user counts, and is taken before a lane's `mu`.
 *
 * Stopping (bw__coord_stop) is bounded: it may wait for queued writes for at
 * most the close timeout (on a manual clock it runs them itself: there is no
 * thread to wait for), and for an owner callback (`touching`) that is
 * running, which is short; a store call still running is abandoned. One
 * thread at a time works on a coordinator: the lane's fire while it is in a
 * batch (`busy`), or a manual clock's stopping owner, which takes it out of
 * the heap first. A coordinator is freed by whoever drops its last reference
 * (the owner's, at bw__coord_release, or the batch's while the lane works on
 * it), and after stopping the lane never calls the owner back or touches its
 * link: everything a store call needs is copied into the coordinator. A fire
 * allocates nothing: the heap has room for every coordinator (reserved when
 * one is made), and a batch works on as many as its array holds, leaving the
 * rest due for the next fire.
 */
#define _POSIX_C_SOURCE 200809L
#include "share/lane.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/heap.h"
#include "base/systime.h"
#include "share/instance.h"
#include "store/front.h"
#include "time/clock.h"
#include "time/sched.h"

/*
 * Entries a batched poll reads per store call: the lane's read buffers start
 * at READ_CHUNK and grow with its batches up to READ_CHUNK_MAX (a network
 * store then refreshes 1,000 circuits in one round trip; each entry is ~1 KiB).
 */
#define READ_CHUNK 64
#define READ_CHUNK_MAX 1024

typedef struct qop {
    int op;
    uint64_t gen;
    int outcome, slow;
    int64_t wait;
} qop;

typedef struct lane lane;

/* What the owner last heard of its circuit from a poll: a poll that finds the same tells it nothing. */
typedef struct seen {
    int valid, found, after;
    uint64_t gen;
    int64_t open_until, open_wait;
    uint32_t failed;
} seen;

struct bw__coord {
    lane *ln;
    /* The owner's side: used only while `gone` is 0, and by callbacks only while `touching`. */
    bw__link *link;
    bw__coord_result_fn result;
    void *owner;
    /* Copies of what a store call reads, so that an abandoned call never touches the owner. */
    bw_store *store;
    bw__mcfg scfg;
    int64_t ttl;
    uint32_t quorum;
    char *key;
    /* Under ln->mu. */
    qop *q; /* made on the first write */
    uint32_t cap, head, count;
    int64_t poll, next_poll, close_timeout;
    bw__heap_node node; /* in the lane's heap */
    int refs;           /* the owner's, and the batch's while in it */
    int gone;           /* the owner detached */
    int touching;       /* an owner callback (gate, result) is running */
    int busy;           /* in the lane's current batch */
    seen last;
};

struct lane {
    bw_store *store;
    bw_clock *clock;
    uint64_t clock_serial; /* what the lane is found by, with the store (a clock's address may be reused) */
    int64_t offset;        /* the poll grid's phase */
    pthread_mutex_t mu;
    pthread_cond_t idle; /* a coordinator's callback or batch ended */
    bw__heap heap;
    size_t live, cap;  /* coordinators not yet freed; the heap has room for `cap` of them */
    bw__coord **batch; /* what a fire works on, then its polls: 2 x batch_cap (one fire runs at a time) */
    size_t batch_cap;
    /* Batched reads: read_cap entries, keys and found flags (READ_CHUNK .. READ_CHUNK_MAX). */
    bw_store_entry *ents;
    const char **keys;
    int *found;
    size_t read_cap;
    bw__sched *sched;
    bw__sched_entry entry;
    bw__store_hook hook; /* bw_store_close stops the lane */
    size_t users;        /* coordinators attached (under lanes_mu) */
    struct lane *next;   /* in `lanes` */
};

static pthread_mutex_t lanes_mu = PTHREAD_MUTEX_INITIALIZER;
static lane *lanes;

/* ---- the heap, under ln->mu ---- */

static bw__coord *coord_of(bw__heap_node *n)
{
    return (bw__coord *)((char *)n - offsetof(bw__coord, node));
}

/* Queue c at its due instant: now when writes wait, else its next poll (room was reserved: bw__coord_new). */
static void hqueue(lane *ln, bw__coord *c)
{
    bw__heap_set(&ln->heap, &c->node, c->count > 0 ? INT64_MIN : c->next_poll);
}

static void hremove(lane *ln, bw__coord *c)
{
    bw__heap_remove(&ln->heap, &c->node);
}

/* The first grid instant after `now` for a poll interval (lane.c's design notes). */
static int64_t next_tick(const lane *ln, int64_t now, int64_t poll)
{
    int64_t r = (now - ln->offset) % poll;
    if (r < 0)
        r += poll;
    int64_t t = now - r + poll;
    return t < now ? INT64_MAX : t; /* overflow near the end of time: never again */
}

static void coord_destroy(bw__coord *c)
{
    free(c->q);
    free(c->key);
    free(c);
}

/* Drop one reference of c (mu held); the last frees it. */
static void unref(lane *ln, bw__coord *c)
{
    if (--c->refs == 0) {
        coord_destroy(c);
        ln->live--;
    }
}

/* ---- the owner's callbacks, bracketed by `touching` ---- */

/* Begin an owner callback of c: 0 when the owner is gone. mu held. */
static int touch_begin(bw__coord *c)
{
    if (c->gone)
        return 0;
    c->touching = 1;
    return 1;
}

static void touch_end(lane *ln, bw__coord *c)
{
    c->touching = 0;
    pthread_cond_broadcast(&ln->idle);
}

/* May the store be tried for c (its link's health gate)? mu held on entry and return. */
static int gate(lane *ln, bw__coord *c)
{
    if (!touch_begin(c))
        return 0;
    pthread_mutex_unlock(&ln->mu);
    int open = bw__link_gate(c->link);
    pthread_mutex_lock(&ln->mu);
    touch_end(ln, c);
    return open;
}

/* Hand the owner the result of op (unless it is gone). mu held on entry and return. */
static void deliver(lane *ln, bw__coord *c, int rc, const bw__shared_op *op, const bw_error *err)
{
    if (!touch_begin(c))
        return;
    pthread_mutex_unlock(&ln->mu);
    c->result(c->owner, rc, op, err);
    pthread_mutex_lock(&ln->mu);
    touch_end(ln, c);
}

/* ---- writes and polls ---- */

static bw__shared_op op_of(const bw__coord *c, int kind)
{
    bw__shared_op op;
    memset(&op, 0, sizeof op);
    op.op = kind;
    op.cfg = &c->scfg;
    op.ttl = c->ttl;
    op.quorum = c->quorum;
    op.instance = kind == BW__OP_TRIP && c->quorum > 1 ? bw__instance_id() : 0; /* getpid: only a vote needs it */
    return op;
}

/* One update of c's circuit and its result (mu held on entry and return, released for the call). */
static void update(lane *ln, bw__coord *c, bw__shared_op *op)
{
    bw_error err;
    err.message[0] = '\0';
    pthread_mutex_unlock(&ln->mu);
    int rc = bw__store_update(c->store, c->key, bw__shared_apply, op, &err);
    pthread_mutex_lock(&ln->mu);
    c->last.valid = 0; /* what the owner knows is whatever this result says */
    deliver(ln, c, rc, op, &err);
}

/* Run c's queued writes in FIFO order (the caller made c busy: nobody else runs them). mu held. */
static void run_writes(lane *ln, bw__coord *c)
{
    while (c->count > 0 && !c->gone) {
        qop o = c->q[c->head];
        c->head = (c->head + 1) % c->cap;
        c->count--;
        if (!gate(ln, c))
            continue; /* degraded, and not yet time to retry: the write is dropped */
        bw__shared_op op = op_of(c, o.op);
        op.gen = o.gen;
        op.outcome = o.outcome;
        op.slow = o.slow;
        op.wait = o.wait;
        update(ln, c, &op);
    }
}

/* Whether a poll that read this tells the owner nothing new. */
static int same(const bw__coord *c, const bw__shared_op *op)
{
    const seen *s = &c->last;
    return s->valid && s->found == op->found && s->after == op->after &&
           (!op->found || (s->gen == op->out_gen && s->open_until == op->open_until && s->open_wait == op->open_wait &&
                           s->failed == op->failed_rounds));
}

/* The result of a poll answered by a read: to the owner only when it says something new. mu held. */
static void poll_answered(lane *ln, bw__coord *c, bw__shared_op *op)
{
    if (same(c, op) && !bw__link_degraded(c->link))
        return;
    deliver(ln, c, BW_OK, op, NULL);
    seen s = {1, op->found, op->after, op->out_gen, op->open_until, op->open_wait, op->failed_rounds};
    c->last = s;
}

/* Poll c from a read entry (found or not), or by an update when the read cannot decide. mu held. */
static void poll_one(lane *ln, bw__coord *c, int64_t now, const bw_store_entry *e)
{
    bw__shared_op op = op_of(c, BW__OP_ADVANCE);
    if (bw__shared_poll_read(&op, now, e))
        poll_answered(ln, c, &op);
    else
        update(ln, c, &op);
}

/* Poll c alone: its store's lock-free read, else an update. mu held. */
static void poll_alone(lane *ln, bw__coord *c)
{
    bw_store_entry e;
    int found = 0;
    int64_t now;
    pthread_mutex_unlock(&ln->mu);
    int rc = bw__store_try_read(c->store, c->key, &now, &e, &found);
    pthread_mutex_lock(&ln->mu);
    if (c->gone)
        return;
    if (rc == BW_OK) {
        poll_one(ln, c, now, found ? &e : NULL);
        return;
    }
    bw__shared_op op = op_of(c, BW__OP_ADVANCE);
    update(ln, c, &op);
}

/*
 * Grow the read buffers towards n entries (at most READ_CHUNK_MAX); on a
 * failed allocation they keep their size, and a poll reads in more chunks.
 * Only the lane's fire uses them (one at a time). mu held.
 */
static void grow_reads(lane *ln, size_t n)
{
    if (n > READ_CHUNK_MAX)
        n = READ_CHUNK_MAX;
    if (n <= ln->read_cap)
        return;
    bw_store_entry *e = malloc(n * sizeof *e);
    const char **k = malloc(n * sizeof *k);
    int *f = malloc(n * sizeof *f);
    if (e && k && f) {
        free(ln->ents);
        free(ln->keys);
        free(ln->found);
        ln->ents = e, ln->keys = k, ln->found = f, ln->read_cap = n;
        return;
    }
    free(e);
    free(k);
    free(f);
}

/*
 * Poll cs[0..n) (each already through its gate): by read_many in chunks where
 * the store has it, else one by one. mu held on entry and return.
 */
static void poll_batch(lane *ln, bw__coord **cs, size_t n)
{
    grow_reads(ln, n);
    size_t chunk = ln->read_cap;
    bw_store_entry *ents = ln->ents;
    const char **keys = ln->keys;
    int *found = ln->found;
    for (size_t at = 0; at < n; at += chunk) {
        size_t k = n - at < chunk ? n - at : chunk;
        for (size_t i = 0; i < k; i++)
            keys[i] = cs[at + i]->key; /* copies: valid while the batch holds its references */
        int64_t now;
        pthread_mutex_unlock(&ln->mu);
        int rc = bw__store_read_many(ln->store, k, keys, &now, ents, found);
        pthread_mutex_lock(&ln->mu);
        for (size_t i = 0; i < k; i++) {
            bw__coord *c = cs[at + i];
            if (c->gone)
                continue;
            if (rc == BW_OK)
                poll_one(ln, c, now, found[i] ? &ents[i] : NULL);
            else
                poll_alone(ln, c);
        }
    }
}

/* ---- the lane's scheduler entry ---- */

static lane *lane_of_entry(bw__sched_entry *e)
{
    return (lane *)((char *)e - offsetof(lane, entry));
}

/* The earliest due coordinator's instant (the scheduler's mutex is held). */
static int64_t lane_deadline(bw__sched_entry *e)
{
    lane *ln = lane_of_entry(e);
    pthread_mutex_lock(&ln->mu);
    bw__heap_node *top = bw__heap_top(&ln->heap);
    int64_t d = top ? top->due : INT64_MAX;
    pthread_mutex_unlock(&ln->mu);
    return d;
}

/* Run everything due at `now`: each due coordinator's writes, then one batch of polls. */
static void lane_fire(bw__sched_entry *e, int64_t now)
{
    lane *ln = lane_of_entry(e);
    pthread_mutex_lock(&ln->mu);
    size_t n = 0, npoll = 0;
    if (ln->batch_cap < ln->heap.n) { /* room for everything queued, or else a part of it now and the rest next */
        bw__coord **b = realloc(ln->batch, 2 * ln->heap.n * sizeof *b);
        if (b) {
            ln->batch = b;
            ln->batch_cap = ln->heap.n;
        }
    }
    bw__coord **batch = ln->batch, **polls = ln->batch + ln->batch_cap;
    for (bw__heap_node *top; (top = bw__heap_top(&ln->heap)) && top->due <= now && n < ln->batch_cap;) {
        bw__coord *c = coord_of(top);
        hremove(ln, c);
        c->refs++;
        c->busy = 1;
        batch[n++] = c;
    }
    /* Writes first, in each circuit's order; then the due polls, through their gates. */
    for (size_t i = 0; i < n; i++) {
        bw__coord *c = batch[i];
        run_writes(ln, c);
        if (!c->gone && now >= c->next_poll) {
            c->next_poll = next_tick(ln, now, c->poll);
            if (gate(ln, c))
                polls[npoll++] = c;
        }
    }
    poll_batch(ln, polls, npoll);
    for (size_t i = 0; i < n; i++) {
        bw__coord *c = batch[i];
        c->busy = 0;
        if (!c->gone)
            hqueue(ln, c);
        unref(ln, c);
    }
    pthread_cond_broadcast(&ln->idle);
    pthread_mutex_unlock(&ln->mu);
}

/* ---- lanes: one per store and clock ---- */

static void lane_free(lane *ln)
{
    bw__sched_remove(ln->sched, &ln->entry);
    bw__sched_free(ln->sched); /* joins its thread: waits out a store call that hangs */
    pthread_mutex_destroy(&ln->mu);
    pthread_cond_destroy(&ln->idle);
    free(ln->heap.a);
    free(ln->batch);
    free(ln->ents);
    free(ln->keys);
    free(ln->found);
    free(ln);
}

/* Take ln off the list (lanes_mu held). */
static void unlist(lane *ln)
{
    for (lane **p = &lanes; *p; p = &(*p)->next)
        if (*p == ln) {
            *p = ln->next;
            return;
        }
}

/* The store is closing: stop its lanes' work (every coordinator detached already). */
static void lane_stop(bw__store_hook *h)
{
    lane *ln = (lane *)((char *)h - offsetof(lane, hook));
    pthread_mutex_lock(&lanes_mu);
    unlist(ln);
    pthread_mutex_unlock(&lanes_mu);
    lane_free(ln);
}

static lane *lane_new(bw_store *s, bw_clock *clock)
{
    lane *ln = calloc(1, sizeof *ln);
    if (!ln)
        return NULL;
    ln->ents = malloc(READ_CHUNK * sizeof *ln->ents);
    ln->keys = malloc(READ_CHUNK * sizeof *ln->keys);
    ln->found = malloc(READ_CHUNK * sizeof *ln->found);
    ln->read_cap = READ_CHUNK;
    ln->batch = malloc(2 * READ_CHUNK * sizeof *ln->batch); /* grown by fires; this much always works */
    ln->batch_cap = READ_CHUNK;
    ln->entry.deadline = lane_deadline;
    ln->entry.fire = lane_fire;
    /* Each step only if the ones before it worked; on failure, undo those that did. */
    int mu = ln->ents && ln->keys && ln->found && ln->batch && pthread_mutex_init(&ln->mu, NULL) == 0;
    int cv = mu && bw__cond_init_mono(&ln->idle) == 0; /* timed waits on it take CLOCK_MONOTONIC deadlines */
    int sched = cv && bw__sched_new(clock, &ln->sched) == BW_OK;
    if (!sched || bw__sched_add(ln->sched, &ln->entry) != BW_OK) {
        bw__sched_free(ln->sched);
        if (cv)
            pthread_cond_destroy(&ln->idle);
        if (mu)
            pthread_mutex_destroy(&ln->mu);
        free(ln->batch);
        free(ln->ents);
        free(ln->keys);
        free(ln->found);
        free(ln);
        return NULL;
    }
    ln->store = s;
    ln->clock = clock;
    ln->clock_serial = bw__clock_serial(clock);
    if (bw__clock_kind(clock) != BW__CLOCK_MANUAL) {
        uint64_t seed = bw__hash_seed(ln);
        ln->offset = (int64_t)(bw__splitmix(&seed) % (uint64_t)(3600 * BW_NS_PER_S));
    }
    ln->hook.fn = lane_stop;
    return ln;
}

/* The lane of (s, clock), made on first use; one more user. NULL when it cannot be made. */
static lane *lane_get(bw_store *s, bw_clock *clock)
{
    uint64_t serial = bw__clock_serial(clock);
    pthread_mutex_lock(&lanes_mu);
    lane *ln = lanes;
    while (ln && !(ln->store == s && ln->clock_serial == serial))
        ln = ln->next;
    if (!ln && (ln = lane_new(s, clock)) != NULL) {
        bw__store_on_close(s, &ln->hook);
        ln->next = lanes;
        lanes = ln;
    }
    if (ln)
        ln->users++;
    pthread_mutex_unlock(&lanes_mu);
    return ln;
}

/*
 * One user fewer. A lane on a manual clock goes with its last user (it must not
 * outlive its clock, and it has no thread that could be inside a store call).
 * A threaded lane stays until its store closes, idle: with no coordinator
 * queued its scheduler waits without reading its clock, which may be freed.
 */
static void lane_put(lane *ln)
{
    pthread_mutex_lock(&lanes_mu);
    int last = --ln->users == 0 && bw__clock_kind(ln->clock) == BW__CLOCK_MANUAL;
    if (last) {
        unlist(ln);
        bw__store_off_close(ln->store, &ln->hook);
    }
    pthread_mutex_unlock(&lanes_mu);
    if (last)
        lane_free(ln);
}

/* Room in the heap and the batch for one more coordinator. mu held. */
static int reserve(lane *ln)
{
    if (ln->live < ln->cap)
        return BW_OK;
    size_t cap = ln->cap ? 2 * ln->cap : 64;
    bw__heap_node **a = realloc(ln->heap.a, cap * sizeof *a);
    if (!a)
        return BW_ENOMEM;
    ln->heap.a = a;
    ln->cap = cap;
    return BW_OK;
}

/* ---- the owner's side ---- */

int bw__coord_new(bw__link *l, const bw__coord_cfg *cfg, bw__coord_result_fn result, void *owner, bw__coord **out)
{
    bw__coord *c = calloc(1, sizeof *c);
    char *key = c ? strdup(l->key) : NULL;
    if (!key) {
        free(c);
        return BW_ENOMEM;
    }
    c->link = l;
    c->result = result;
    c->owner = owner;
    c->store = l->c.store;
    c->scfg = l->c.scfg;
    c->ttl = l->c.ttl;
    c->quorum = l->c.quorum;
    c->key = key;
    c->cap = cfg->queue;
    c->poll = cfg->poll;
    c->close_timeout = cfg->close_timeout;
    c->refs = 1;
    c->next_poll = bw_clock_now(cfg->clock); /* poll at once: learn the shared state */
    lane *ln = lane_get(c->store, cfg->clock);
    if (!ln) {
        coord_destroy(c);
        return BW_ESYS;
    }
    c->ln = ln;
    pthread_mutex_lock(&ln->mu);
    int rc = reserve(ln);
    if (rc == BW_OK) {
        ln->live++;
        hqueue(ln, c);
    }
    pthread_mutex_unlock(&ln->mu);
    if (rc != BW_OK) {
        lane_put(ln);
        coord_destroy(c);
        return rc;
    }
    bw__sched_kick(ln->sched, &ln->entry);
    *out = c;
    return BW_OK;
}

int bw__coord_enqueue(bw__coord *c, int op, uint64_t gen, int outcome, int slow, int64_t wait)
{
    lane *ln = c->ln;
    pthread_mutex_lock(&ln->mu);
    if (!c->q && !c->gone)
        c->q = calloc(c->cap, sizeof *c->q); /* most circuits never write: their queue is made on demand */
    int rc = c->gone ? 1 : -1; /* stopping: dropped quietly; full, or no memory: dropped, FIFO order kept */
    if (!c->gone && c->q && c->count < c->cap) {
        qop *o = &c->q[(c->head + c->count) % c->cap];
        o->op = op;
        o->gen = gen;
        o->outcome = outcome;
        o->slow = slow;
        o->wait = wait;
        c->count++;
        if (!c->busy)
            hqueue(ln, c); /* due now; a busy coordinator is requeued by whoever holds it */
        rc = 0;
    }
    pthread_mutex_unlock(&ln->mu);
    if (rc == 0)
        bw__sched_kick(ln->sched, &ln->entry);
    return rc < 0 ? -1 : 0;
}

/*
 * Run c's queued writes on this thread (a manual clock's lane has no thread of
 * its own). It takes c out of the heap and marks it busy first, so that an
 * advance on another thread cannot run them too. mu held.
 */
static void drain_here(lane *ln, bw__coord *c)
{
    while (c->busy) /* the advancing thread is working on it: let it finish */
        pthread_cond_wait(&ln->idle, &ln->mu);
    hremove(ln, c);
    c->busy = 1;
    run_writes(ln, c);
    c->busy = 0;
    pthread_cond_broadcast(&ln->idle);
}

void bw__coord_stop(bw__coord *c, int wait)
{
    lane *ln = c->ln;
    int manual = bw__clock_kind(ln->clock) == BW__CLOCK_MANUAL;
    pthread_mutex_lock(&ln->mu);
    if (wait && manual) {
        drain_here(ln, c);
    } else if (wait && c->count > 0) {
        int64_t at = bw__mono_now() + c->close_timeout;
        struct timespec ts = bw__timespec_of(at);
        pthread_mutex_unlock(&ln->mu);
        bw__sched_kick(ln->sched, &ln->entry);
        pthread_mutex_lock(&ln->mu);
        while ((c->count > 0 || c->busy) && bw__mono_now() < at)
            pthread_cond_timedwait(&ln->idle, &ln->mu, &ts);
    }
    while (c->touching) /* an owner callback is running: short, and it must end before the owner goes */
        pthread_cond_wait(&ln->idle, &ln->mu);
    c->gone = 1; /* from here on nothing of the owner is touched; a store call running is abandoned */
    c->count = 0;
    hremove(ln, c);
    pthread_mutex_unlock(&ln->mu);
    bw__sched_kick(ln->sched, &ln->entry); /* an empty lane dequeues: it reads its clock no more */
}

void bw__coord_release(bw__coord *c)
{
    lane *ln = c->ln;
    pthread_mutex_lock(&ln->mu);
    unref(ln, c);
    pthread_mutex_unlock(&ln->mu);
    lane_put(ln);
}
