/*
 * breakwater/timeout.h — timeouts: a deadline that travels with the call, and a
 * time limiter that stops waiting on time.
 *
 * C cannot stop a thread that is blocked in someone else's code. So there are
 * two kinds of timeout, and the first is the real fix:
 *
 * 1. A deadline (a pipeline's timeout layer, pipeline.h). The layer sets a
 *    deadline that travels with the call: the callee reads the time it has left
 *    with bw_ctx_remaining_ns and gives it to its own I/O (a socket timeout, a
 *    poll timeout, curl's CURLOPT_TIMEOUT_MS, a gRPC deadline), so the work
 *    itself stops. When the call returns at or after the deadline the layer
 *    reports BW_ETIMEDOUT, whatever the call returned. Nothing runs on another
 *    thread, nothing is allocated; it costs two clock reads.
 *
 * 2. A time limiter (bw_limiter, below; or a timeout layer given one). The call
 *    runs on one of the limiter's worker threads while the caller waits up to
 *    the timeout, and gets BW_ETIMEDOUT on time if the call has not finished.
 *    THE ABANDONED CALL KEEPS RUNNING: nothing can interrupt it. Its worker
 *    stays busy until it returns, its result is thrown away, and everything it
 *    uses (its argument, the objects it calls) must stay valid until then; the
 *    abandoned callback (bw_limiter_set_abandoned) is where to free them. The
 *    pool size bounds how many abandoned calls can pile up: with every worker
 *    busy, a new call is refused at once with BW_EFULL instead of queueing.
 *    Use it only for code that cannot honour a deadline.
 *
 * A breaker around either records a timed-out call as a failure and as slow
 * (bw_settle_timeout).
 *
 * Thread safety: every limiter function may run on any number of threads at
 * once, except bw_limiter_free and bw_limiter_set_abandoned.
 */
#ifndef BREAKWATER_TIMEOUT_H
#define BREAKWATER_TIMEOUT_H

#include "breaker.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_limiter bw_limiter;

/*
 * bw_limiter_new — a time limiter with `workers` worker threads (in [1, 1024]),
 * all started now. Returns BW_OK and *out (free with bw_limiter_free); BW_EINVAL
 * for a NULL out; BW_ERANGE with *err naming the field; BW_ENOMEM; BW_ESYS when
 * a thread, mutex or condition variable cannot be made.
 * Thread safety: any thread.
 */
BW_API int bw_limiter_new(int workers, bw_limiter **out, bw_error *err);

/*
 * bw_limiter_free — stop the workers and release the limiter. Blocks until
 * every running call, abandoned ones included, has returned (and its abandoned
 * callback has run). NULL is ignored.
 * Thread safety: must not race any other use of the limiter.
 */
BW_API void bw_limiter_free(bw_limiter *lim);

/*
 * A callback for abandoned calls: runs on the worker thread once an abandoned
 * call returns, with the call's argument and return code and the user pointer;
 * the place to free what the call was using. No breakwater lock is held.
 */
typedef void (*bw_abandoned_cb)(void *arg, int rc, void *user);

/*
 * bw_limiter_set_abandoned — set (or with NULL, remove) the abandoned callback.
 * Returns BW_OK or BW_EINVAL. Thread safety: not while calls run on the limiter.
 */
BW_API int bw_limiter_set_abandoned(bw_limiter *lim, bw_abandoned_cb fn, void *user);

/*
 * bw_limiter_run — run fn(arg) on an idle worker and wait up to timeout_ns (in
 * (0, 365d], real time) for it. Returns BW_OK with *rc (may be NULL) set to fn's
 * return code; BW_ETIMEDOUT when it did not return in time (it keeps running:
 * see above; arg must stay valid until it returns); BW_EFULL when every worker
 * is busy (fn not run); BW_EINVAL for NULL lim or fn; BW_ERANGE for a timeout
 * out of range. Allocates nothing.
 * Thread safety: any number of threads at once; fn runs on a worker thread.
 */
BW_API int bw_limiter_run(bw_limiter *lim, int64_t timeout_ns, bw_call_fn fn, void *arg, int *rc);

/* bw_limiter_busy — workers running a call now (abandoned ones included); BW_EINVAL for NULL.
 * Thread safety: any thread (it briefly takes the limiter's mutex). */
BW_API int bw_limiter_busy(bw_limiter *lim);

#ifdef __cplusplus
}
#endif
#endif
