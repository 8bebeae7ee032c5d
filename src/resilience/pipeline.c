/*
 * pipeline.c — the pipeline: an array of layers run outermost first through one
 * context per execution, the context's accessors, and the built-in layers
 * (breaker, retry, bulkhead, timeout, fallback).
 *
 * Design notes: every layer, built-in or custom, is a bw_strategy table and a
 * state pointer, and runs the layers inside it with next(): one mechanism, no
 * special cases. The context lives on the executing thread's stack, so an
 * execution allocates nothing and shares nothing but the borrowed objects,
 * which are thread-safe themselves. A layer that changes the deadline or the
 * attempt number for the layers inside restores it before returning, so outer
 * layers always see their own view. A timeout layer with a limiter copies the
 * context into the worker's job slot and back (limiter.c), so abandoned work
 * never touches the caller's stack.
 *
 * Locking: none here. A pipeline is immutable once it has executed (`sealed`).
 */
#include <stdlib.h>
#include <string.h>

#include "breakwater/keyed.h"
#include "base/tick.h"
#include "resilience/resilience.h"

#define MAX_LAYERS 32

typedef struct layer {
    const bw_strategy *s;
    void *state;
} layer;

struct bw_pipeline {
    int n;
    _Atomic int sealed;
    bw_clock *clock; /* NULL = system clock (inlined) */
    bw_listener_cb listener;
    void *listener_user;
    unsigned listener_mask;
    bw_classifier_cb classifier; /* what counts as success, for layers with no classifier of their own */
    void *classifier_user;
    layer layers[MAX_LAYERS];
    char name[256]; /* bw__check_name: at most 255 bytes */
};

struct bw_ctx {
    const bw_pipeline *p;
    bw_task_fn fn;
    void *arg;
    int64_t deadline;    /* BW_NO_TIME = none */
    int64_t retry_after; /* asked for by the call, BW_NO_TIME = none */
    int layer;           /* the layer next() runs */
    int rc;
    int attempt;
    int job_status; /* a limiter job's status */
    int timed_out;  /* the call declared a timeout (bw_ctx_set_timed_out) */
    /* The report. */
    int attempts, verdict;
    unsigned fallback;
    int has_rejection; /* the report's: some attempt was rejected */
    int rejected;      /* this attempt was rejected with a reason (c->rejection); retry clears it */
    bw_rejection rejection;
    const char *key; /* the call's circuit name or key (per-call breaker layers), or NULL */
};

_Static_assert(sizeof(struct bw_ctx) <= BW__JOB_BYTES, "a context must fit a limiter job slot");

static inline int64_t ctx_now(const bw_ctx *c)
{
    return bw__now_on(c->p->clock);
}

static inline int next(bw_ctx *c)
{
    const bw_pipeline *p = c->p;
    if (c->layer == p->n) {
        c->timed_out = 0;
        c->rc = c->fn(c, c->arg);
        return BW_UNLIKELY(c->timed_out) ? BW_ETIMEDOUT : BW_OK;
    }
    const layer *l = &p->layers[c->layer++];
    int status = l->s->execute(l->state, c);
    c->layer--;
    return status;
}

static void emit(const bw_ctx *c, bw_event_type type, int status, int attempt, int64_t delay, unsigned reason)
{
    const bw_pipeline *p = c->p;
    if (!p->listener || !(p->listener_mask & BW_EVENT_MASK(type)))
        return;
    bw_event e = bw__event(type, p->name);
    e.status = status;
    e.rc = status == BW_OK ? c->rc : 0;
    e.attempt = attempt;
    e.delay_ns = delay;
    e.fallback_reason = (int)reason;
    p->listener(&e, p->listener_user);
}

/* Whether the call's rc is a failure by classifier fn (NULL: rc != 0). */
static int failing(bw_classifier_cb fn, void *user, const bw_ctx *c)
{
    bw_outcome o = bw__classify(fn, user, c->rc, c->arg);
    return o == BW_FAILURE || o == BW_UNREACHABLE;
}

/* ---- the context ---- */

int bw_ctx_next(bw_ctx *ctx)
{
    return ctx ? next(ctx) : BW_EINVAL;
}

int64_t bw_ctx_remaining_ns(const bw_ctx *ctx)
{
    if (!ctx || ctx->deadline == BW_NO_TIME)
        return BW_NO_TIME;
    int64_t left = ctx->deadline - ctx_now(ctx);
    return left > 0 ? left : 0;
}

int64_t bw_ctx_deadline(const bw_ctx *ctx)
{
    return ctx ? ctx->deadline : BW_NO_TIME;
}

int bw_ctx_attempt(const bw_ctx *ctx)
{
    return ctx ? ctx->attempt : BW_EINVAL;
}

int bw_ctx_set_retry_after(bw_ctx *ctx, int64_t ns)
{
    if (!ctx || ns < 0)
        return BW_EINVAL;
    ctx->retry_after = ns;
    return BW_OK;
}

int bw_ctx_set_timed_out(bw_ctx *ctx)
{
    if (!ctx)
        return BW_EINVAL;
    ctx->timed_out = 1;
    return BW_OK;
}

int bw_ctx_rc(const bw_ctx *ctx)
{
    return ctx ? ctx->rc : 0;
}

int bw_ctx_set_rc(bw_ctx *ctx, int rc)
{
    if (!ctx)
        return BW_EINVAL;
    ctx->rc = rc;
    return BW_OK;
}

void *bw_ctx_arg(const bw_ctx *ctx)
{
    return ctx ? ctx->arg : NULL;
}

int64_t bw_ctx_set_deadline(bw_ctx *ctx, int64_t instant)
{
    if (!ctx)
        return BW_NO_TIME;
    int64_t prev = ctx->deadline;
    if (instant != BW_NO_TIME && (prev == BW_NO_TIME || instant < prev))
        ctx->deadline = instant;
    return prev;
}

int bw_ctx_restore_deadline(bw_ctx *ctx, int64_t previous)
{
    if (!ctx)
        return BW_EINVAL;
    ctx->deadline = previous;
    return BW_OK;
}

const char *bw_ctx_key(const bw_ctx *ctx)
{
    return ctx ? ctx->key : NULL;
}

int bw_ctx_set_key(bw_ctx *ctx, const char *key)
{
    if (!ctx)
        return BW_EINVAL;
    ctx->key = key;
    return BW_OK;
}

int bw_ctx_set_rejection(bw_ctx *ctx, const bw_rejection *why)
{
    if (!ctx || !why)
        return BW_EINVAL;
    ctx->rejection = *why;
    ctx->has_rejection = ctx->rejected = 1;
    return BW_OK;
}

int64_t bw_ctx_now(const bw_ctx *ctx)
{
    return ctx ? ctx_now(ctx) : 0;
}

/* ---- the built-in layers ---- */

/*
 * The inner layers under a permit admitted on b (settled through `owner`: b
 * itself, or the parent of a keyed circuit), and what b records of them.
 */
static BW_NOINLINE void settle_not_ok(bw_ctx *c, bw_breaker *owner, bw_permit *permit, int status);

static inline int guarded(bw_ctx *c, bw_breaker *owner, bw_breaker *b, bw_permit *permit)
{
    int status = next(c);
    if (BW_LIKELY(status == BW_OK))
        bw_settle_ex(owner, permit, bw__breaker_classify_or(b, c->p->classifier, c->p->classifier_user, c->rc, c->arg),
                     c->rc);
    else
        settle_not_ok(c, owner, permit, status);
    return status;
}

/* What a breaker records when the inner layers did not end with a call's result. */
static BW_NOINLINE void settle_not_ok(bw_ctx *c, bw_breaker *owner, bw_permit *permit, int status)
{
    if (status == BW_ETIMEDOUT) {
        bw_settle_timeout(owner, permit, BW_ETIMEDOUT);
    } else if (status == BW_EFULL || status == BW_REJECTED || status == BW_ELIMIT) {
        /* Local saturation (a full bulkhead or limiter pool, a breaker further in
           refusing, a keyed table full): this process shed the call; the
           dependency said nothing. */
        bw_settle(owner, permit, BW_IGNORED);
        emit(c, BW_EVENT_SHED, status, 0, 0, 0);
    } else if (status == BW_EINVAL || status == BW_ENOMEM) {
        bw_settle(owner, permit, BW_IGNORED); /* this process's own error (a bad key, no memory) */
    } else {
        bw_settle(owner, permit, BW_UNREACHABLE);
    }
}

static int admitted(bw_ctx *c, int status)
{
    if (status == BW_REJECTED)
        c->has_rejection = c->rejected = 1;
    return status;
}

static int breaker_exec(void *state, bw_ctx *c)
{
    bw_breaker *b = state;
    bw_permit permit;
    int status = bw_acquire(b, &permit, &c->rejection);
    if (BW_UNLIKELY(status != BW_OK))
        return admitted(c, status);
    return guarded(c, b, b, &permit);
}

/* The breaker of the call's name, made with the registry's defaults on first use. */
static int registry_exec(void *state, bw_ctx *c)
{
    bw_breaker *b;
    if (BW_UNLIKELY(!c->key))
        return BW_EINVAL; /* a per-call layer needs the call's name: bw_pipeline_execute_key */
    int status = bw_registry_get(state, c->key, NULL, &b, NULL);
    if (BW_UNLIKELY(status != BW_OK))
        return status;
    bw_permit permit;
    status = bw_acquire(b, &permit, &c->rejection);
    if (BW_UNLIKELY(status != BW_OK))
        return admitted(c, status);
    return guarded(c, b, b, &permit);
}

/* The keyed circuit of the call's key: the permit pins it until the settle. */
static int keyed_exec(void *state, bw_ctx *c)
{
    bw_breaker *parent = state;
    if (BW_UNLIKELY(!c->key))
        return BW_EINVAL;
    bw_permit permit;
    int status = bw_keyed_acquire(parent, c->key, &permit, &c->rejection);
    if (BW_UNLIKELY(status != BW_OK))
        return admitted(c, status);
    return guarded(c, parent, parent, &permit);
}

static int retry_exec(void *state, bw_ctx *c)
{
    const bw_retry *r = state;
    bw_retry_state st;
    int64_t outer = c->deadline;
    int outer_attempt = c->attempt;
    bw__retry_begin(r, &st, c->p->clock, outer);
    c->deadline = st.deadline_;
    int status, verdict;
    for (;;) {
        c->attempt = st.attempt_ + 1;
        c->retry_after = BW_NO_TIME;
        c->rc = 0;
        c->rejected = 0;
        status = next(c);
        bw_attempt a = {status, c->rc,
                        status == BW_REJECTED ? (c->rejected ? c->rejection.retry_after_ns : BW_NO_TIME)
                                              : c->retry_after};
        int64_t delay;
        int retry = -1; /* the policy's own predicate, or the default */
        if (c->p->classifier && !r->pred)
            retry = status == BW_OK ? failing(c->p->classifier, c->p->classifier_user, c) : status == BW_ETIMEDOUT;
        verdict = bw__retry_next(&st, &a, &delay, retry);
        if (BW_LIKELY(verdict != BW_RETRY_AGAIN))
            break;
        emit(c, BW_EVENT_RETRY, status, st.attempt_, delay, 0);
        r->sleep(delay, r->sleep_user);
    }
    c->attempts = st.attempt_;
    c->verdict = verdict;
    c->deadline = outer;
    c->attempt = outer_attempt;
    return status;
}

static int bulkhead_exec(void *state, bw_ctx *c)
{
    bw_bulkhead *bh = state;
    if (BW_UNLIKELY(bw_bulkhead_acquire(bh) != BW_OK)) {
        emit(c, BW_EVENT_BULKHEAD_REJECTED, BW_EFULL, 0, 0, 0);
        return BW_EFULL;
    }
    int status = next(c);
    bw_bulkhead_release(bh);
    return status;
}

typedef struct timeout_layer {
    int64_t ns;
    bw_limiter *limiter;
    int coarse; /* no limiter and ns >= 100 ms: on the system clock it reads the coarse clock (base/tick.h) */
} timeout_layer;

/* The time a timeout layer reads: the coarse clock when it may, else the pipeline's clock. */
static inline int64_t timeout_now(const timeout_layer *t, const bw_ctx *c)
{
    return t->coarse && !c->p->clock ? bw__tick_now() : ctx_now(c);
}

/* A limiter job: the inner layers on a copy of the context. */
static int run_inner(void *payload)
{
    bw_ctx *c = payload;
    c->job_status = next(c);
    return c->rc;
}

static int timeout_exec(void *state, bw_ctx *c)
{
    const timeout_layer *t = state;
    int64_t start = timeout_now(t, c);
    int64_t outer = c->deadline;
    int64_t d = start + t->ns;
    if (outer != BW_NO_TIME && outer < d)
        d = outer;
    c->deadline = d;
    int status;
    if (!t->limiter) {
        status = next(c);
    } else if (d <= start) {
        status = BW_ETIMEDOUT;
    } else {
        status = bw__limiter_submit(t->limiter, d - start, run_inner, c, sizeof *c, c->arg, NULL);
        if (status == BW_OK)
            status = c->job_status;
    }
    c->deadline = outer;
    if (status == BW_OK && timeout_now(t, c) >= d)
        status = BW_ETIMEDOUT;
    return status;
}

typedef struct fallback_layer {
    unsigned on;
    bw_fallback_fn fn;
    void *user;
    bw_classifier_cb classify; /* NULL: rc != 0 is a failure */
    void *classify_user;
} fallback_layer;

static int failed(const fallback_layer *f, const bw_ctx *c)
{
    if (f->classify)
        return failing(f->classify, f->classify_user, c);
    return failing(c->p->classifier, c->p->classifier_user, c);
}

static int fallback_exec(void *state, bw_ctx *c)
{
    const fallback_layer *f = state;
    int status = next(c);
    unsigned reason = 0;
    switch (status) {
    case BW_OK:
        reason = (f->on & BW_FALLBACK_ON_FAILURE) && failed(f, c) ? BW_FALLBACK_ON_FAILURE : 0;
        break;
    case BW_REJECTED:
        reason = BW_FALLBACK_ON_REJECTED;
        break;
    case BW_ETIMEDOUT:
        reason = BW_FALLBACK_ON_TIMEOUT;
        break;
    case BW_EFULL:
        reason = BW_FALLBACK_ON_FULL;
        break;
    default:
        break;
    }
    if (BW_LIKELY(!(reason & f->on)))
        return status;
    bw_fallback_info why;
    memset(&why, 0, sizeof why);
    why.reason = reason;
    why.status = status;
    why.rc = c->rc;
    why.attempts = c->attempts;
    if (status == BW_REJECTED && c->rejected)
        why.rejection = c->rejection;
    else
        why.rejection.retry_after_ns = BW_NO_TIME; /* the rest zero: a strategy refused without saying why */
    emit(c, BW_EVENT_FALLBACK, status, 0, 0, reason);
    c->rc = f->fn(&why, c->arg, f->user);
    c->fallback = reason;
    return BW_OK;
}

static const bw_strategy breaker_strategy = {BW_STRATEGY_VERSION, "breaker", breaker_exec, NULL};
static const bw_strategy registry_strategy = {BW_STRATEGY_VERSION, "registry", registry_exec, NULL};
static const bw_strategy keyed_strategy = {BW_STRATEGY_VERSION, "keyed", keyed_exec, NULL};
static const bw_strategy retry_strategy = {BW_STRATEGY_VERSION, "retry", retry_exec, NULL};
static const bw_strategy bulkhead_strategy = {BW_STRATEGY_VERSION, "bulkhead", bulkhead_exec, NULL};
static const bw_strategy timeout_strategy = {BW_STRATEGY_VERSION, "timeout", timeout_exec, free};
static const bw_strategy fallback_strategy = {BW_STRATEGY_VERSION, "fallback", fallback_exec, free};

/* ---- building ---- */

int bw_pipeline_new(const char *name, bw_pipeline **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    int rc = bw__check_name(name, "name", err);
    if (rc != BW_OK)
        return rc;
    size_t n = strlen(name);
    bw_pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    memcpy(p->name, name, n + 1);
    atomic_init(&p->sealed, 0);
    (void)bw_clock_system(); /* calibrate the inlined system clock before its first use */
    *out = p;
    return BW_OK;
}

void bw_pipeline_free(bw_pipeline *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++)
        if (p->layers[i].s->destroy)
            p->layers[i].s->destroy(p->layers[i].state);
    free(p);
}

static int check_open(const bw_pipeline *p, bw_error *err)
{
    if (!p)
        return bw__fail(err, BW_EINVAL, "pipeline", "pipeline must not be NULL");
    if (atomic_load_explicit(&((bw_pipeline *)p)->sealed, memory_order_relaxed))
        return bw__fail(err, BW_ESTATE, "pipeline", "a pipeline cannot change once it has executed");
    if (p->n >= MAX_LAYERS)
        return bw__fail(err, BW_ESTATE, "pipeline", "a pipeline has at most %d layers", MAX_LAYERS);
    return BW_OK;
}

static void push(bw_pipeline *p, const bw_strategy *s, void *state)
{
    p->layers[p->n].s = s;
    p->layers[p->n].state = state;
    p->n++;
}

/* A layer over a borrowed object (a breaker, a registry): checked, then pushed. */
static int add_borrowed(bw_pipeline *p, const bw_strategy *s, void *obj, const char *field, bw_error *err)
{
    int rc = check_open(p, err);
    if (rc != BW_OK)
        return rc;
    if (!obj)
        return bw__fail(err, BW_EINVAL, field, "%s must not be NULL", field);
    push(p, s, obj);
    return BW_OK;
}

int bw_pipeline_add_breaker(bw_pipeline *p, bw_breaker *breaker, bw_error *err)
{
    return add_borrowed(p, &breaker_strategy, breaker, "breaker", err);
}

int bw_pipeline_add_registry(bw_pipeline *p, bw_registry *registry, bw_error *err)
{
    return add_borrowed(p, &registry_strategy, registry, "registry", err);
}

int bw_pipeline_add_keyed(bw_pipeline *p, bw_breaker *breaker, bw_error *err)
{
    if (breaker && bw_breaker_key(breaker))
        return bw__fail(err, BW_EINVAL, "breaker", "a keyed circuit has no keyed circuits of its own");
    return add_borrowed(p, &keyed_strategy, breaker, "breaker", err);
}

int bw_pipeline_add_retry(bw_pipeline *p, const bw_retry *retry, bw_error *err)
{
    int rc = check_open(p, err);
    if (rc != BW_OK)
        return rc;
    if (!retry)
        return bw__fail(err, BW_EINVAL, "retry", "retry must not be NULL");
    push(p, &retry_strategy, (void *)retry);
    return BW_OK;
}

int bw_pipeline_add_bulkhead(bw_pipeline *p, bw_bulkhead *bulkhead, bw_error *err)
{
    int rc = check_open(p, err);
    if (rc != BW_OK)
        return rc;
    if (!bulkhead)
        return bw__fail(err, BW_EINVAL, "bulkhead", "bulkhead must not be NULL");
    push(p, &bulkhead_strategy, bulkhead);
    return BW_OK;
}

int bw_pipeline_add_timeout(bw_pipeline *p, int64_t timeout_ns, bw_limiter *limiter, bw_error *err)
{
    int rc = check_open(p, err);
    if (rc != BW_OK)
        return rc;
    if ((rc = bw__check_duration("timeout", timeout_ns, 0, err)) != BW_OK)
        return rc;
    timeout_layer *t = malloc(sizeof *t);
    if (!t)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    t->ns = timeout_ns;
    t->limiter = limiter;
    t->coarse = !limiter && timeout_ns >= 100 * BW_NS_PER_MS && bw__tick_need(bw__tick_period_for(timeout_ns)) == 0;
    push(p, &timeout_strategy, t);
    return BW_OK;
}

int bw_pipeline_add_fallback(bw_pipeline *p, unsigned on, bw_fallback_fn fn, void *user, bw_error *err)
{
    return bw_pipeline_add_fallback_ex(p, on, NULL, NULL, fn, user, err);
}

int bw_pipeline_add_fallback_ex(bw_pipeline *p, unsigned on, bw_classifier_cb classify, void *classify_user,
                                bw_fallback_fn fn, void *user, bw_error *err)
{
    int rc = check_open(p, err);
    if (rc != BW_OK)
        return rc;
    if (!fn)
        return bw__fail(err, BW_EINVAL, "fallback", "fallback function must not be NULL");
    if (on == 0 || (on & ~BW_FALLBACK_ON_ALL))
        return bw__fail(err, BW_ERANGE, "on",
                        "on must be a nonzero set of BW_FALLBACK_ON_* bits (within 0x%x), got 0x%x", BW_FALLBACK_ON_ALL,
                        on);
    fallback_layer *f = malloc(sizeof *f);
    if (!f)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    f->on = on;
    f->fn = fn;
    f->user = user;
    f->classify = classify;
    f->classify_user = classify ? classify_user : NULL;
    push(p, &fallback_strategy, f);
    return BW_OK;
}

int bw_pipeline_add(bw_pipeline *p, const bw_strategy *s, void *state, bw_error *err)
{
    int rc = check_open(p, err);
    if (rc != BW_OK)
        return rc;
    if (!s)
        return bw__fail(err, BW_EINVAL, "strategy", "strategy must not be NULL");
    if (s->version < 1)
        return bw__fail(err, BW_EINVAL, "version", "strategy version must be >= 1 (BW_STRATEGY_VERSION), got %d",
                        s->version);
    if (!s->name || !s->execute)
        return bw__fail(err, BW_EINVAL, s->name ? "execute" : "name",
                        "a strategy needs a name and an execute function");
    push(p, s, state);
    return BW_OK;
}

int bw_pipeline_set_classifier(bw_pipeline *p, bw_classifier_cb fn, void *user)
{
    if (!p || atomic_load_explicit(&p->sealed, memory_order_relaxed))
        return p ? BW_ESTATE : BW_EINVAL;
    p->classifier = fn;
    p->classifier_user = fn ? user : NULL;
    return BW_OK;
}

int bw_pipeline_set_clock(bw_pipeline *p, bw_clock *clock)
{
    if (!p)
        return BW_EINVAL;
    if (atomic_load_explicit(&p->sealed, memory_order_relaxed))
        return BW_ESTATE;
    p->clock = clock && bw__clock_kind(clock) != BW__CLOCK_SYSTEM ? clock : NULL;
    return BW_OK;
}

int bw_pipeline_set_listener(bw_pipeline *p, unsigned mask, bw_listener_cb fn, void *user)
{
    if (!p)
        return BW_EINVAL;
    if (atomic_load_explicit(&p->sealed, memory_order_relaxed))
        return BW_ESTATE;
    p->listener = fn;
    p->listener_mask = fn ? mask : 0;
    p->listener_user = fn ? user : NULL;
    return BW_OK;
}

int bw_pipeline_layers(const bw_pipeline *p)
{
    return p ? p->n : BW_EINVAL;
}

const char *bw_pipeline_layer_name(const bw_pipeline *p, int i)
{
    return p && i >= 0 && i < p->n ? p->layers[i].s->name : NULL;
}

/* ---- running ---- */

static inline int execute(bw_pipeline *p, const char *key, bw_task_fn fn, void *arg, int *rc, bw_report *report)
{
    if (BW_UNLIKELY(!p || !fn))
        return BW_EINVAL;
    if (BW_UNLIKELY(!atomic_load_explicit(&p->sealed, memory_order_relaxed)))
        atomic_store_explicit(&p->sealed, 1, memory_order_relaxed);
    bw_ctx c;
    c.p = p;
    c.fn = fn;
    c.arg = arg;
    c.deadline = BW_NO_TIME;
    c.retry_after = BW_NO_TIME;
    c.layer = 0;
    c.rc = 0;
    c.attempt = 1;
    c.attempts = 1;
    c.verdict = -1;
    c.fallback = 0;
    c.has_rejection = c.rejected = 0; /* c.rejection is read only once one of them is set */
    c.key = key;
    int status = next(&c);
    if (rc)
        *rc = c.rc;
    if (report) {
        report->attempts = c.attempts;
        report->retry_verdict = c.verdict;
        report->fallback = c.fallback;
        report->has_rejection = c.has_rejection;
        if (c.has_rejection) {
            report->rejection = c.rejection;
        } else {
            memset(&report->rejection, 0, sizeof report->rejection);
            report->rejection.retry_after_ns = BW_NO_TIME;
        }
    }
    return status;
}

int bw_pipeline_execute(bw_pipeline *p, bw_task_fn fn, void *arg, int *rc, bw_report *report)
{
    return execute(p, NULL, fn, arg, rc, report);
}

int bw_pipeline_execute_key(bw_pipeline *p, const char *key, bw_task_fn fn, void *arg, int *rc, bw_report *report)
{
    return execute(p, key, fn, arg, rc, report);
}
