/*
 * recorder.h — THE recording listener of the tests (tests/support/): set
 * rec_listen with a recorder as the listener of a breaker, a registry's
 * defaults or a pipeline, and read back what it heard.
 *
 * Each event is copied whole when it arrives, its strings too (name, key,
 * message: the pointers inside a bw_event are valid only during the callback),
 * together with a one-line description ("state closed->open", "call failure
 * slow", "rejected open", "degraded", ...). Listeners run on other threads (a
 * timer, a store's lane), so the recorder holds a mutex and a condition
 * variable (rec_wait). Its storage is allocated once by rec_new: recording
 * never allocates, so a test may count allocations around calls that emit.
 * An event past its capacity is not kept but counted, and any reading helper
 * fails the test then. A test that needs to act inside the callback sets
 * r->hook (called first, with the event and r->hook_arg). Include it after
 * defining _POSIX_C_SOURCE (rec_wait's clock_gettime).
 */
#ifndef BW_TEST_RECORDER_H
#define BW_TEST_RECORDER_H

#include <pthread.h>
#include <time.h>

#include "harness.h"

#define REC_CAP 1024
#define REC_LINE 48

typedef struct rec_entry {
    bw_event ev; /* name, key and message point into this entry (key / message NULL when the event's were) */
    char name[260];
    char key[260];
    char message[260];
    char line[REC_LINE];
} rec_entry;

typedef struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;    /* events kept */
    int lost; /* events heard past REC_CAP */
    void (*hook)(const bw_event *e, void *hook_arg);
    void *hook_arg;
    rec_entry ev[REC_CAP];
} recorder;

/* A new, empty recorder (exits the test program when out of memory). */
static inline recorder *rec_new(void)
{
    recorder *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "recorder: out of memory\n");
        exit(2);
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    return r;
}

static inline void rec_free(recorder *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* The one-line description of an event. */
static inline void rec_describe(const bw_event *e, char *out, size_t n)
{
    switch (e->type) {
    case BW_EVENT_STATE_CHANGE:
        snprintf(out, n, "state %s->%s", bw_state_name(e->from), bw_state_name(e->to));
        break;
    case BW_EVENT_CALL:
        snprintf(out, n, "call %s%s%s", bw_outcome_name(e->outcome), e->slow ? " slow" : "", e->stale ? " stale" : "");
        break;
    case BW_EVENT_REJECTED:
        snprintf(out, n, "rejected %s", bw_state_name(e->to));
        break;
    case BW_EVENT_RESET:
        snprintf(out, n, "reset");
        break;
    case BW_EVENT_RETRY:
        snprintf(out, n, "retry");
        break;
    case BW_EVENT_BULKHEAD_REJECTED:
        snprintf(out, n, "bulkhead_rejected");
        break;
    case BW_EVENT_FALLBACK:
        snprintf(out, n, "fallback");
        break;
    case BW_EVENT_STORE_DEGRADED:
        snprintf(out, n, "degraded");
        break;
    case BW_EVENT_STORE_RECOVERED:
        snprintf(out, n, "recovered");
        break;
    case BW_EVENT_STORE_WRITE_DROPPED:
        snprintf(out, n, "dropped");
        break;
    case BW_EVENT_STORE_CORRUPT:
        snprintf(out, n, "corrupt");
        break;
    case BW_EVENT_SHED:
        snprintf(out, n, "shed");
        break;
    default:
        snprintf(out, n, "other %d", (int)e->type);
        break;
    }
}

/* The listener: bw_config_set_listener(c, mask, rec_listen, r). */
static inline void rec_listen(const bw_event *e, void *user)
{
    recorder *r = user;
    if (r->hook)
        r->hook(e, r->hook_arg);
    pthread_mutex_lock(&r->mu);
    if (r->n < REC_CAP) {
        rec_entry *x = &r->ev[r->n];
        x->ev = *e;
        snprintf(x->name, sizeof x->name, "%s", e->name ? e->name : "");
        snprintf(x->key, sizeof x->key, "%s", e->key ? e->key : "");
        snprintf(x->message, sizeof x->message, "%s", e->message ? e->message : "");
        x->ev.name = e->name ? x->name : NULL;
        x->ev.key = e->key ? x->key : NULL;
        x->ev.message = e->message ? x->message : NULL;
        rec_describe(e, x->line, sizeof x->line);
        r->n++;
    } else {
        r->lost++;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* How many events were kept; a lost one fails the test. */
static inline int rec_count(recorder *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n, lost = r->lost;
    pthread_mutex_unlock(&r->mu);
    if (lost)
        H_FAIL("the recorder lost %d events past its %d", lost, REC_CAP);
    return n;
}

/* Forget every event (the storage stays). */
static inline void rec_clear(recorder *r)
{
    pthread_mutex_lock(&r->mu);
    r->n = 0;
    r->lost = 0;
    pthread_mutex_unlock(&r->mu);
}

/*
 * The i-th event kept (0 = the first); when there is none, a failed check and
 * an event of zeros. Its strings stay valid until rec_clear or rec_free.
 */
static inline const bw_event *rec_nth(recorder *r, int i)
{
    static const bw_event none;
    int n = rec_count(r);
    if (i < 0 || i >= n) {
        H_FAIL("the recorder has no event %d (it kept %d)", i, n);
        return &none;
    }
    return &r->ev[i].ev;
}

/* The description of the i-th event ("" and a failed check when there is none). */
static inline const char *rec_line(recorder *r, int i)
{
    int n = rec_count(r);
    if (i < 0 || i >= n) {
        H_FAIL("the recorder has no event %d (it kept %d)", i, n);
        return "";
    }
    return r->ev[i].line;
}

/* Events from index `from` on whose description is `line` ("state closed->open", "degraded", ...). */
static inline int rec_count_line(recorder *r, int from, const char *line)
{
    int n = rec_count(r), c = 0;
    for (int i = from; i < n; i++)
        c += strcmp(r->ev[i].line, line) == 0;
    return c;
}

/* The index of the first event from index `from` on whose description is `line`, or -1. */
static inline int rec_find(recorder *r, int from, const char *line)
{
    int n = rec_count(r);
    for (int i = from; i < n; i++)
        if (strcmp(r->ev[i].line, line) == 0)
            return i;
    return -1;
}

/* Events from index `from` on of one type. */
static inline int rec_count_type(recorder *r, int from, bw_event_type type)
{
    int n = rec_count(r), c = 0;
    for (int i = from; i < n; i++)
        c += r->ev[i].ev.type == type;
    return c;
}

/* State changes "FROM->TO" (bw_state_name's names, e.g. "closed->open"), from the first event on. */
static inline int rec_changes(recorder *r, const char *from_to)
{
    char line[REC_LINE];
    snprintf(line, sizeof line, "state %s", from_to);
    return rec_count_line(r, 0, line);
}

/* State changes into `to`, from index `from` on. */
static inline int rec_changes_to(recorder *r, int from, bw_state to)
{
    int n = rec_count(r), c = 0;
    for (int i = from; i < n; i++)
        c += r->ev[i].ev.type == BW_EVENT_STATE_CHANGE && r->ev[i].ev.to == to;
    return c;
}

/* The descriptions of the events from index `from` on, joined with ", " (a buffer per call site is not needed:
   the result lives until the next call). */
static inline const char *rec_since(recorder *r, int from)
{
    static char buf[REC_CAP * REC_LINE];
    int n = rec_count(r);
    size_t at = 0;
    buf[0] = 0;
    for (int i = from; i < n && at < sizeof buf; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", i > from ? ", " : "", r->ev[i].line);
    return buf;
}

/* Wait (10 s at most) until n events were kept; how many there are then. */
static inline int rec_wait(recorder *r, int n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&r->mu);
    while (r->n < n && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0) {
    }
    int got = r->n;
    pthread_mutex_unlock(&r->mu);
    return got;
}

#endif
