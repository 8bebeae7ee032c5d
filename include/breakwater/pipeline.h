/*
 * breakwater/pipeline.h — the resilience pipeline: fallback, retry, breaker,
 * bulkhead, timeout and your own strategies composed around one call.
 *
 * A pipeline is a list of layers; the first added is the outermost:
 *
 *     bw_pipeline *p;
 *     bw_pipeline_new("orders", &p, &err);
 *     bw_pipeline_add_fallback(p, BW_FALLBACK_ON_REJECTED, serve_cached, cache, &err);
 *     bw_pipeline_add_retry(p, retry, &err);          // retry.h
 *     bw_pipeline_add_breaker(p, breaker, &err);      // breaker.h
 *     bw_pipeline_add_bulkhead(p, bulkhead, &err);    // bulkhead.h
 *     bw_pipeline_add_timeout(p, 2 * BW_NS_PER_S, NULL, &err);
 *     ...
 *     int rc;
 *     int status = bw_pipeline_execute(p, fetch_orders, &req, &rc, NULL);
 *
 * The recommended order, outer to inner, is the one above: fallback (stands in
 * for whatever the inner layers gave up on, their rejections included), retry
 * (each attempt below is a complete guarded call, so the breaker sees honest
 * per-attempt outcomes and the loop stops the moment the circuit opens),
 * breaker (counts timeouts and failures of every attempt; an open circuit
 * rejects before a bulkhead slot is touched), bulkhead (inside the retry, so
 * waiting between attempts holds no slot), timeout (innermost: bounds one
 * attempt). Nothing enforces it: a breaker outside the retry counts one outcome
 * per operation instead of one per attempt, which is sometimes what you want.
 *
 * Results. bw_pipeline_execute returns a status and fills *rc:
 *   BW_OK         the call ran (or a fallback stood in): *rc is its return code,
 *                 which may itself say the call failed
 *   BW_REJECTED   a breaker refused the last attempt (report.rejection says why)
 *   BW_EFULL      a bulkhead or a time limiter had no slot
 *   BW_ETIMEDOUT  the last attempt timed out
 *   other errors  bad arguments (BW_EINVAL), or what a custom strategy returned
 * How each layer reads the statuses of the layers inside it:
 *   - breaker: BW_OK is classified with the breaker's classifier (rc is the
 *     failure code); BW_ETIMEDOUT is a failure and slow (bw_settle_timeout);
 *     BW_EFULL (a bulkhead or limiter further in had no slot) and BW_REJECTED
 *     (a breaker further in refused) are local saturation, not an outcome of
 *     the dependency: BW_IGNORED (nothing recorded; a probe hands its slot
 *     back), and the pipeline emits BW_EVENT_SHED; any other status means the
 *     call never left the process: BW_UNREACHABLE.
 *   - retry: asks its policy (retry.h); rejections are never retried unless the
 *     policy is patient; the callee may ask for a delay (bw_ctx_set_retry_after).
 *   - fallback: substitutes a value for the outcomes named in its mask.
 *   - timeout: sets the deadline the callee reads (bw_ctx_remaining_ns) and turns
 *     a call that returns at or after it into BW_ETIMEDOUT (timeout.h).
 *
 * Lifetime and cost. A pipeline is built once: the add functions allocate, and
 * bw_pipeline_execute never does. The objects a layer uses (breaker, retry
 * policy, bulkhead, limiter) are borrowed and may be shared by many pipelines;
 * they must outlive the pipeline. The success path takes no lock (for the
 * exceptions see bw_pipeline_execute).
 *
 * Thread safety: build a pipeline on one thread (the add and set functions are
 * not thread-safe, and are refused with BW_ESTATE once the pipeline has
 * executed); then any number of threads may execute it at once.
 * bw_pipeline_free must not race an execution. Callbacks (the call, fallbacks,
 * predicates, listeners, custom strategies) run on the executing thread, or on
 * a limiter's worker for the layers inside a timeout with a limiter, with no
 * breakwater lock held.
 */
#ifndef BREAKWATER_PIPELINE_H
#define BREAKWATER_PIPELINE_H

#include "breaker.h"
#include "bulkhead.h"
#include "clock.h"
#include "common.h"
#include "config.h"
#include "listener.h"
#include "registry.h"
#include "retry.h"
#include "timeout.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_pipeline bw_pipeline;

/*
 * One execution's context, handed to the call and to every layer. It lives on
 * the executing thread's stack (or a limiter worker's job slot) for one
 * execution; never keep the pointer. Thread safety of every bw_ctx_ function:
 * only the thread running the call or layer that received the context may use
 * it. A NULL ctx gives the documented neutral value or BW_EINVAL.
 */
typedef struct bw_ctx bw_ctx;

/* The guarded call: returns a code (0 = success for the default classifiers). */
typedef int (*bw_task_fn)(bw_ctx *ctx, void *arg);

/*
 * bw_ctx_remaining_ns — the time left before the call's deadline (0 once it
 * passed), or BW_NO_TIME when no layer set one. Give it to your own I/O.
 * Thread safety: the thread running the call.
 */
BW_API int64_t bw_ctx_remaining_ns(const bw_ctx *ctx);

/* bw_ctx_deadline — the deadline as an instant on the pipeline's clock, or BW_NO_TIME (also for a NULL ctx). */
BW_API int64_t bw_ctx_deadline(const bw_ctx *ctx);

/* bw_ctx_attempt — the attempt number of this call (1 = the first; 1 without a retry layer); BW_EINVAL for NULL. */
BW_API int bw_ctx_attempt(const bw_ctx *ctx);

/*
 * bw_ctx_set_retry_after — the call asks an outer retry layer to wait exactly
 * ns (>= 0) before the next attempt, e.g. from an HTTP Retry-After header.
 * Counts only if the retry policy decides to retry. Returns BW_OK, BW_EINVAL.
 */
BW_API int bw_ctx_set_retry_after(bw_ctx *ctx, int64_t ns);

/*
 * bw_ctx_set_timed_out — the call declares that it timed out by itself (its own
 * I/O deadline fired: curl's CURLE_OPERATION_TIMEDOUT, a socket's SO_RCVTIMEO),
 * so the layers outside see BW_ETIMEDOUT for it, exactly as if a timeout layer
 * had ended it: a breaker records a timeout (a slow failure, bw_settle_timeout),
 * a retry treats it as a timeout, a fallback with BW_FALLBACK_ON_TIMEOUT stands
 * in, and bw_pipeline_execute returns BW_ETIMEDOUT with *rc the call's code.
 * It holds for the current attempt only. Returns BW_OK, or BW_EINVAL for NULL.
 * Thread safety: the thread running the call.
 */
BW_API int bw_ctx_set_timed_out(bw_ctx *ctx);

/* ---- custom strategies ---- */

/*
 * bw_ctx_next — for strategies: run the layers inside this one and the call.
 * Returns their status; bw_ctx_rc then holds the call's return code. A strategy
 * may call it any number of times (a retry) or not at all (a cache hit: set the
 * code with bw_ctx_set_rc and return BW_OK). BW_EINVAL for a NULL ctx.
 * Call it only from inside the strategy's execute, on the thread that received
 * ctx, before execute returns.
 */
BW_API int bw_ctx_next(bw_ctx *ctx);

/* bw_ctx_rc — the return code of the last call made through this context (0 before any, and for a NULL ctx). */
BW_API int bw_ctx_rc(const bw_ctx *ctx);

/* bw_ctx_set_rc — replace the return code the outer layers will see. Returns BW_OK, BW_EINVAL. */
BW_API int bw_ctx_set_rc(bw_ctx *ctx, int rc);

/*
 * bw_ctx_set_rejection — for a strategy that refuses a call itself (returning
 * BW_REJECTED without calling bw_ctx_next), or passes on a rejection it got
 * elsewhere: the state, retry_after and last failure the outer layers (retry,
 * fallback) and the report then see. A strategy that returns BW_REJECTED without
 * it gives them a zeroed rejection with retry_after_ns BW_NO_TIME. Returns
 * BW_OK, or BW_EINVAL for NULL arguments.
 */
BW_API int bw_ctx_set_rejection(bw_ctx *ctx, const bw_rejection *why);

/* bw_ctx_key — the call's circuit name or key (bw_pipeline_execute_key), or NULL. */
BW_API const char *bw_ctx_key(const bw_ctx *ctx);

/*
 * bw_ctx_set_key — for a strategy: the name or key the layers inside it use
 * (e.g. the host of a request it parsed), borrowed as bw_pipeline_execute_key's.
 * It stays set for the layers outside too once the strategy returns: restore
 * the previous bw_ctx_key if they must not see it. Returns BW_OK, or BW_EINVAL
 * for a NULL ctx.
 */
BW_API int bw_ctx_set_key(bw_ctx *ctx, const char *key);

/* bw_ctx_arg — the argument the call will receive; NULL for a NULL ctx. */
BW_API void *bw_ctx_arg(const bw_ctx *ctx);

/*
 * bw_ctx_set_deadline — for strategies: tighten the deadline the inner layers
 * see to `instant` (on the pipeline's clock) if it is earlier, and return the
 * previous deadline, which the strategy restores with bw_ctx_restore_deadline
 * before it returns. BW_NO_TIME for a NULL ctx.
 */
BW_API int64_t bw_ctx_set_deadline(bw_ctx *ctx, int64_t instant);

/*
 * bw_ctx_restore_deadline — set the deadline the inner layers see back to
 * `previous` (what bw_ctx_set_deadline returned), unconditionally: unlike
 * bw_ctx_set_deadline it may loosen the deadline, or remove it (BW_NO_TIME).
 * Returns BW_OK; BW_EINVAL for a NULL ctx.
 */
BW_API int bw_ctx_restore_deadline(bw_ctx *ctx, int64_t previous);

/* bw_ctx_now — the time on the pipeline's clock; 0 for NULL. */
BW_API int64_t bw_ctx_now(const bw_ctx *ctx);

#define BW_STRATEGY_VERSION 1

/*
 * A strategy: a small versioned table of functions (like SQLite's VFS). Set
 * `version` to BW_STRATEGY_VERSION; later versions only append members, and a
 * pipeline reads only the members the table's version has. The built-in layers
 * are strategies of this same shape.
 */
typedef struct bw_strategy {
    int version;      /* BW_STRATEGY_VERSION */
    const char *name; /* for humans, e.g. "cache"; must not be NULL */
    /* Run one execution: usually something around bw_ctx_next(ctx). Returns a
     * status (see the top of this file). Runs on the executing thread, possibly
     * on many threads at once. */
    int (*execute)(void *state, bw_ctx *ctx);
    /* Optional: release `state` when the pipeline is freed. */
    void (*destroy)(void *state);
} bw_strategy;

/* ---- building ---- */

/*
 * bw_pipeline_new — an empty pipeline named `name` (1 to 255 printable ASCII
 * bytes without spaces; events carry it). With no layers, execute just makes
 * the call. Returns BW_OK and *out (free with bw_pipeline_free); BW_EINVAL for
 * a NULL out or a bad name; BW_ENOMEM. Thread safety: any thread.
 */
BW_API int bw_pipeline_new(const char *name, bw_pipeline **out, bw_error *err);

/*
 * bw_pipeline_free — release the pipeline and what it owns: the state of its
 * timeout and fallback layers, and each custom strategy's state (through its
 * destroy, if set). The borrowed objects (breakers, retry policies, bulkheads,
 * limiters, the clock) are not freed. NULL is ignored. Thread safety: must not
 * race an execution or any other call on the pipeline.
 */
BW_API void bw_pipeline_free(bw_pipeline *p);

/*
 * Each add appends a layer inside the ones already added. Each returns BW_OK;
 * BW_EINVAL for a NULL pipeline or a NULL required argument; BW_ERANGE for a
 * value out of range; BW_ESTATE once the pipeline has executed or already has
 * 32 layers; BW_ENOMEM. *err (may be NULL) names the argument at fault.
 * Thread safety: one thread at a time, before the first execution.
 */

/* bw_pipeline_add_breaker — guard the inner layers with a breaker (borrowed). */
BW_API int bw_pipeline_add_breaker(bw_pipeline *p, bw_breaker *breaker, bw_error *err);

/*
 * Per-call breakers: one pipeline for every host or tenant. Each call names its
 * circuit (bw_pipeline_execute_key, or a strategy further out with
 * bw_ctx_set_key), and the layer picks the breaker for that call:
 * - bw_pipeline_add_registry: the registry's breaker of that name, made with
 *   the registry's defaults on first use (registry.h; a lookup takes no lock);
 * - bw_pipeline_add_keyed: the keyed circuit of that key of `breaker`
 *   (keyed.h), pinned from the admission until the settle.
 * Everything else is as bw_pipeline_add_breaker. A call with no key, or a key
 * the registry or the breaker refuses, ends with that status before the inner
 * layers run (BW_EINVAL, BW_ENOMEM, BW_ELIMIT; from a registry also what
 * bw_breaker_new returns for its defaults), and an outer breaker records
 * nothing for it. A registry never removes a breaker: for keys that come from
 * untrusted input (tenants, hosts of user URLs) use the keyed layer, whose
 * circuits are bounded by keyed_maxsize. A call for a new name or key makes its
 * breaker (an allocation; the registry's mutex, or the family's lock). The
 * registry or breaker is borrowed: it must outlive the pipeline.
 */
BW_API int bw_pipeline_add_registry(bw_pipeline *p, bw_registry *registry, bw_error *err);
BW_API int bw_pipeline_add_keyed(bw_pipeline *p, bw_breaker *breaker, bw_error *err);

/*
 * bw_pipeline_add_retry — run the inner layers again as the policy (borrowed)
 * decides, sleeping with its sleeper; attempts are numbered for the call
 * (bw_ctx_attempt), the policy's max_duration becomes the inner deadline, and
 * an outer deadline also ends the loop. Emits BW_EVENT_RETRY before each wait.
 */
BW_API int bw_pipeline_add_retry(bw_pipeline *p, const bw_retry *retry, bw_error *err);

/* bw_pipeline_add_bulkhead — hold a slot of the bulkhead (borrowed, waiting up to its max_wait) around the inner
 * layers; BW_EFULL (and BW_EVENT_BULKHEAD_REJECTED) when there is none. */
BW_API int bw_pipeline_add_bulkhead(bw_pipeline *p, bw_bulkhead *bulkhead, bw_error *err);

/*
 * bw_pipeline_add_timeout — bound the inner layers by timeout_ns (in (0, 365d])
 * from the moment the layer starts; the deadline is the earlier of this and any
 * outer one. limiter NULL: a deadline the callee honours (no thread). A limiter
 * (borrowed): the inner layers run on its workers and the caller gets
 * BW_ETIMEDOUT on time, abandoned work running on (timeout.h); the call's arg
 * must then stay valid until the work returns, and the limiter must be freed
 * (it waits for that work) before the objects that work uses. Without a
 * limiter, on the system clock, a timeout of 100 ms or more is timed on the
 * library's coarse clock while it ticks (two loads instead of two clock reads):
 * the deadline and the check that the call overran it are then exact to within
 * the coarse clock's lag, a hundredth of the timeout and at most 10 ms, plus
 * however long its ticker waits for a CPU (breaker.h, TIME, says the same of
 * slow-call detection).
 */
BW_API int bw_pipeline_add_timeout(bw_pipeline *p, int64_t timeout_ns, bw_limiter *limiter, bw_error *err);

/* Which outcomes a fallback stands in for (bits of `on`). */
#define BW_FALLBACK_ON_REJECTED 0x1u /* a breaker refused (BW_REJECTED) */
#define BW_FALLBACK_ON_TIMEOUT 0x2u  /* BW_ETIMEDOUT */
#define BW_FALLBACK_ON_FULL 0x4u     /* a bulkhead or limiter had no slot (BW_EFULL) */
#define BW_FALLBACK_ON_FAILURE                                                                                         \
    0x8u /* the call ran and failed: as bw_pipeline_add_fallback_ex's classifier, else the                             \
            pipeline's (bw_pipeline_set_classifier), else rc != 0, says */
#define BW_FALLBACK_ON_ALL 0xfu

/* Why a fallback is standing in. */
typedef struct bw_fallback_info {
    unsigned reason;        /* exactly one BW_FALLBACK_ON_* bit */
    int status;             /* the inner layers' status (BW_OK for a failure) */
    int rc;                 /* the call's return code (for BW_FALLBACK_ON_FAILURE) */
    int attempts;           /* attempts made by an inner retry layer (1 without one) */
    bw_rejection rejection; /* for BW_FALLBACK_ON_REJECTED: the breaker's reasons */
} bw_fallback_info;

/*
 * A fallback: returns the code that replaces the call's (write a substitute
 * value through `arg`, where the call would have written its result). Runs on
 * the executing thread with no breakwater lock held.
 */
typedef int (*bw_fallback_fn)(const bw_fallback_info *why, void *arg, void *user);

/*
 * bw_pipeline_add_fallback — when the inner layers end with an outcome in `on`
 * (a nonzero set of BW_FALLBACK_ON_* bits), emit BW_EVENT_FALLBACK and return
 * BW_OK with fn's code instead. Other outcomes pass unchanged. `user` is
 * borrowed.
 */
BW_API int bw_pipeline_add_fallback(bw_pipeline *p, unsigned on, bw_fallback_fn fn, void *user, bw_error *err);

/*
 * bw_pipeline_add_fallback_ex — the same, with a classifier deciding which
 * return codes are failures for BW_FALLBACK_ON_FAILURE: BW_FAILURE and
 * BW_UNREACHABLE are, BW_SUCCESS and BW_IGNORED are not (so a 404 the breaker
 * ignores need not be replaced). The classifier receives the call's code, its
 * arg and classify_user (borrowed); NULL means the pipeline's classifier
 * (bw_pipeline_set_classifier), or rc != 0 without one. Same errors as
 * bw_pipeline_add_fallback. Thread safety: as the other add functions; the
 * classifier runs on the executing thread.
 */
BW_API int bw_pipeline_add_fallback_ex(bw_pipeline *p, unsigned on, bw_classifier_cb classify, void *classify_user,
                                       bw_fallback_fn fn, void *user, bw_error *err);

/*
 * bw_pipeline_add — a custom strategy: `s` (borrowed, must outlive the
 * pipeline; version 1 or later) run with `state`. On BW_OK the pipeline owns
 * state and calls s->destroy(state) when freed (if set); on error it does not.
 */
BW_API int bw_pipeline_add(bw_pipeline *p, const bw_strategy *s, void *state, bw_error *err);

/*
 * bw_pipeline_set_classifier — what counts as success for the whole pipeline:
 * fn(rc, arg, user) classifies the call's return code (as a breaker's
 * classifier, config.h) for every layer that has no classifier of its own: a
 * breaker layer whose breaker has none records its verdict; a retry layer whose
 * policy has no predicate retries FAILURE and UNREACHABLE (and a timeout); a
 * fallback added without a classifier stands in for them. A layer's own
 * classifier or predicate still wins. NULL restores the default (rc == 0 is a
 * success, anything else a failure). `user` is borrowed; fn runs on every
 * thread that executes the pipeline. Returns BW_OK, BW_EINVAL for a NULL p, or
 * BW_ESTATE after an execution.
 */
BW_API int bw_pipeline_set_classifier(bw_pipeline *p, bw_classifier_cb fn, void *user);

/*
 * bw_pipeline_set_clock — the clock of deadlines and retry loops (NULL = the
 * system clock; borrowed). Use the same clock as the breakers and retry
 * policies inside. Returns BW_OK, BW_EINVAL, or BW_ESTATE after an execution.
 */
BW_API int bw_pipeline_set_clock(bw_pipeline *p, bw_clock *clock);

/*
 * bw_pipeline_set_listener — receive the pipeline's events (BW_EVENT_RETRY,
 * BW_EVENT_BULKHEAD_REJECTED, BW_EVENT_FALLBACK, BW_EVENT_SHED) whose bits are in mask; fn
 * NULL removes it. A breaker inside reports its own events to its own listener.
 * Runs on the executing thread (a limiter's worker for layers inside one), with
 * no breakwater lock held. Returns BW_OK, BW_EINVAL, or BW_ESTATE after an
 * execution.
 */
BW_API int bw_pipeline_set_listener(bw_pipeline *p, unsigned mask, bw_listener_cb fn, void *user);

/* ---- running ---- */

/* What an execution went through (optional output of bw_pipeline_execute). */
typedef struct bw_report {
    int attempts;           /* attempts made by the outermost retry layer (1 without one) */
    int retry_verdict;      /* how that retry loop ended: a bw_retry_verdict; -1 without one */
    unsigned fallback;      /* the BW_FALLBACK_ON_* bit a fallback stood in for, or 0 */
    int has_rejection;      /* 1 when a breaker rejected an attempt */
    bw_rejection rejection; /* the last rejection, when has_rejection */
} bw_report;

/*
 * bw_pipeline_execute — run fn(ctx, arg) through every layer. Returns a status
 * (see the top of this file) with *rc (may be NULL) set to the call's or the
 * fallback's code (0 when the call never ran); *report (may be NULL) says what
 * happened. BW_EINVAL for NULL p or fn. No allocation; no lock on the success
 * path (a breaker's own lock aside, see threading.md), with these exceptions: a
 * timeout layer with a limiter takes the limiter's mutex and runs the inner
 * layers on a worker thread; a bulkhead with max_wait > 0 that is full waits
 * (under its mutex) for a slot; a keyed layer takes its family's lock for the
 * lookup, and a registry or keyed layer allocates the breaker of a name or key
 * seen for the first time.
 * Thread safety: any number of threads at once on one pipeline.
 */
BW_API int bw_pipeline_execute(bw_pipeline *p, bw_task_fn fn, void *arg, int *rc, bw_report *report);

/*
 * bw_pipeline_execute_key — bw_pipeline_execute for the circuit `key` (a host,
 * a tenant; borrowed: it must stay valid as long as `arg`, which with a time
 * limiter means until an abandoned call returns): the name or key the per-call breaker layers
 * use (bw_pipeline_add_registry, bw_pipeline_add_keyed), also readable by
 * strategies (bw_ctx_key). NULL is as bw_pipeline_execute. Thread safety: as
 * bw_pipeline_execute.
 */
BW_API int bw_pipeline_execute_key(bw_pipeline *p, const char *key, bw_task_fn fn, void *arg, int *rc,
                                   bw_report *report);

/* bw_pipeline_layers — the number of layers; BW_EINVAL for NULL. Thread safety: any thread once built. */
BW_API int bw_pipeline_layers(const bw_pipeline *p);

/* bw_pipeline_layer_name — the name of layer i (0 = outermost): "fallback", "retry", "breaker", "bulkhead",
 * "timeout" or a custom strategy's name (owned by the strategy); NULL when out of range. Thread safety: any thread
 * once built. */
BW_API const char *bw_pipeline_layer_name(const bw_pipeline *p, int i);

#ifdef __cplusplus
}
#endif
#endif
