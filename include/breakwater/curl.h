/*
 * breakwater/curl.h — libcurl with a circuit per host: one line around
 * curl_easy_perform, or around the multi interface, and every host a request
 * goes to gets its own breaker (interlock's per-host rule), with rejections
 * before any I/O, curl's errors and HTTP statuses classified, Retry-After
 * honoured, and the pipeline's deadline as the transfer's timeout.
 *
 *     bw_registry *hosts;                       // registry.h: one breaker per host
 *     bw_registry_new(defaults, &hosts, &err);
 *     bw_curl *bc;
 *     bw_curl_new(hosts, NULL, &bc, &err);
 *     ...
 *     curl_easy_setopt(easy, CURLOPT_URL, "https://api.example.com/v1/orders");
 *     bw_curl_result res;
 *     if (bw_curl_perform(bc, easy, &res) == BW_REJECTED)
 *         ...;                                  // nothing was sent; res.rejection.retry_after_ns
 *
 * An optional component, built when libcurl is found (Debian:
 * libcurl4-openssl-dev): the library libbreakwater-curl, which a program
 * links besides the core (pkg-config breakwater-curl, or the CMake target
 * breakwater::curl; Debian: libbreakwater-curl0). docs/http.md has the set-up for easy and multi, the
 * classification table and the server side (breakwater/http.h).
 *
 * THE CIRCUIT OF A REQUEST. Its name is the host of the handle's URL (read
 * back with CURLINFO_EFFECTIVE_URL and parsed by curl's own URL parser, with a
 * scheme guessed as curl does when there is none; international names in
 * punycode, which curl can make only under a UTF-8 locale: elsewhere such a
 * host is BW_EINVAL): lowercased, the port dropped, an IPv6 address without
 * its brackets, a trailing dot dropped ("api.example.com", "10.0.0.7",
 * "::1"). libcurl cannot say which URL was set, only the effective one: after
 * a transfer that followed a redirect (CURLOPT_FOLLOWLOCATION) that is the
 * last URL followed, so set CURLOPT_URL again before reusing a handle; a
 * handle whose URL was given as a CURLU (CURLOPT_CURLU) has no effective URL
 * before its first transfer (BW_EINVAL). A request that follows redirects is
 * one call of the first host's circuit, whatever host answered last. A resolver callback may
 * map hosts onto other names (several hosts onto one circuit, say). A URL
 * with no host, or one the parser refuses, ends with BW_EINVAL before any I/O.
 * The circuits come from a registry (each name's breaker made with the
 * registry's defaults on first use; for hosts you know) or from one breaker's
 * keyed circuits (keyed.h: bounded memory; for hosts from untrusted input).
 *
 * CLASSIFICATION (interlock's rules, each replaceable):
 *   HTTP status in the failure set ({429, 500, 502, 503, 504} by default;
 *   bw_curl_set_failure_statuses replaces it)           -> BW_FAILURE
 *   any other status                                    -> BW_SUCCESS
 *   CURLE_OPERATION_TIMEDOUT                            -> a timeout (a slow
 *                                                          failure: bw_settle_timeout)
 *   CURLE_HTTP_RETURNED_ERROR (CURLOPT_FAILONERROR)     -> by its status, as above
 *   the caller's own mistakes, which say nothing of the host: CURLE_URL_MALFORMAT,
 *   CURLE_UNSUPPORTED_PROTOCOL, CURLE_NOT_BUILT_IN, CURLE_BAD_FUNCTION_ARGUMENT,
 *   CURLE_UNKNOWN_OPTION, CURLE_FAILED_INIT, CURLE_OUT_OF_MEMORY,
 *   CURLE_ABORTED_BY_CALLBACK, CURLE_WRITE_ERROR, CURLE_READ_ERROR,
 *   CURLE_FILESIZE_EXCEEDED, CURLE_TOO_MANY_REDIRECTS, CURLE_LOGIN_DENIED
 *                                                       -> BW_IGNORED
 *   every other error (connection refused or reset, name not resolved, TLS
 *   handshake or certificate failures, nothing received, a partial body, ...)
 *                                                       -> BW_FAILURE
 * A classifier callback may decide instead (bw_curl_set_classifier).
 *
 * RETRY-AFTER. A response's Retry-After (breakwater/http.h parses both forms)
 * is reported in the result and, under a pipeline, offered to its retry layer
 * (bw_ctx_set_retry_after), capped at bw_curl_set_retry_after_cap (60 s by
 * default; the retry layer also stops when the wait passes the deadline).
 *
 * DEADLINES. Under a pipeline with a deadline (a timeout layer, a retry's
 * max_duration), or with bw_curl_set_timeout, the transfer's
 * CURLOPT_TIMEOUT_MS is set to the earlier of the two (replacing the
 * handle's own, which libcurl cannot read back, and staying set on the handle
 * afterwards), rounded up to a millisecond and never 0 (which curl reads as
 * "no timeout"); without either, the handle's own timeout stands;
 * a deadline already past ends the attempt as a timeout before any I/O. A
 * transfer curl times out on is recorded as a timeout, and under a pipeline
 * the layers outside see BW_ETIMEDOUT (bw_ctx_set_timed_out).
 *
 * THREAD SAFETY. A bw_curl is safe from any number of threads at once (each
 * with its own easy handles, as libcurl requires); its setters are not, and
 * must all run before the first transfer. libcurl must be initialized
 * (curl_global_init) by the program, as libcurl asks.
 */
#ifndef BREAKWATER_CURL_H
#define BREAKWATER_CURL_H

#include <curl/curl.h>

#include "breaker.h"
#include "common.h"
#include "pipeline.h"
#include "registry.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_curl bw_curl;

/* What one request went through. */
typedef struct bw_curl_result {
    int status;             /* as bw_curl_perform returns */
    CURLcode code;          /* curl's result (CURLE_OK when no transfer ran) */
    long http_status;       /* the response's status, 0 when there was none */
    bw_outcome outcome;     /* what the circuit recorded (BW_IGNORED when nothing ran) */
    int timed_out;          /* the transfer (or the deadline before it) timed out */
    int64_t retry_after_ns; /* the response's Retry-After (uncapped), or BW_NO_TIME */
    bw_rejection rejection; /* for BW_REJECTED: why, with retry_after_ns */
    int attempts;           /* transfers and rejections of this request (> 1 under a retry layer) */
    char circuit[256];      /* the circuit's name ("" when the URL had no usable host) */
} bw_curl_result;

/*
 * bw_curl_new — per-host circuits from `registry` (each host's breaker, made
 * with the registry's defaults on first use) or from the keyed circuits of
 * `keyed` (keyed.h); exactly one of them, borrowed: it must outlive the
 * bw_curl. Returns BW_OK with *out (free with bw_curl_free); BW_EINVAL for a
 * NULL out or not exactly one source (err names it); BW_ENOMEM. Thread
 * safety: any thread.
 */
BW_API int bw_curl_new(bw_registry *registry, bw_breaker *keyed, bw_curl **out, bw_error *err);

/* bw_curl_free — release c (and the pipeline it made for itself; not one given to it). NULL is ignored. Must not
 * race a transfer through c; a multi transfer still added is abandoned (bw_curl_multi_abandon) first. */
BW_API void bw_curl_free(bw_curl *c);

/*
 * A resolver: write the circuit name for `host` (already lowercased, without
 * port or brackets) into name (size bytes, NUL-terminated) and return 0; or
 * return nonzero to refuse the request (BW_EINVAL, before any I/O). The name
 * must be a valid breaker name or key (1 to 255 printable ASCII bytes, no
 * space). Runs on the thread of the request, with no breakwater lock held.
 */
typedef int (*bw_curl_resolver_fn)(const char *host, char *name, size_t size, void *user);

/*
 * bw_curl_set_resolver — map hosts onto circuit names (NULL: the host itself).
 * A name is remembered per thread for the URL it came from (a small cache),
 * so a resolver whose answer for a URL changes over time may be asked again
 * only when the URL leaves that cache: give a resolver that answers the same
 * for the same host. Returns BW_OK, BW_EINVAL.
 */
BW_API int bw_curl_set_resolver(bw_curl *c, bw_curl_resolver_fn fn, void *user);

/*
 * bw_curl_set_failure_statuses — the HTTP statuses that are failures,
 * replacing the default {429, 500, 502, 503, 504}: n statuses (n may be 0:
 * none), each in [100, 599]. Returns BW_OK; BW_EINVAL for NULL c (or NULL
 * statuses with n > 0); BW_ERANGE naming the status out of range.
 */
BW_API int bw_curl_set_failure_statuses(bw_curl *c, const int *statuses, size_t n, bw_error *err);

/*
 * A classifier: the outcome of a transfer that ended with `code` and HTTP
 * status `http_status` (0 when none), or -1 to apply the rules above. Set
 * *timed_out to 1 to record a timeout (a slow failure). Runs on the thread
 * that settles (the one calling bw_curl_perform or bw_curl_multi_done).
 */
typedef int (*bw_curl_classify_fn)(CURLcode code, long http_status, int *timed_out, void *user);

/* bw_curl_set_classifier — decide outcomes before the rules (NULL: the rules alone). Returns BW_OK, BW_EINVAL. */
BW_API int bw_curl_set_classifier(bw_curl *c, bw_curl_classify_fn fn, void *user);

/*
 * bw_curl_classify — the outcome c gives a transfer that ended with `code` and
 * `http_status` (its classifier, then the rules above); *timed_out (may be
 * NULL) says whether it is a timeout. Thread safety: any thread.
 */
BW_API bw_outcome bw_curl_classify(const bw_curl *c, CURLcode code, long http_status, int *timed_out);

/*
 * bw_curl_set_retry_after_cap — the longest Retry-After offered to a pipeline's
 * retry layer (ns in [0, 365d]; 0: never offered; default 60 s). Returns
 * BW_OK, BW_EINVAL, BW_ERANGE.
 */
BW_API int bw_curl_set_retry_after_cap(bw_curl *c, int64_t ns, bw_error *err);

/*
 * bw_curl_set_open_on_retry_after — let a host say when to come back: a 429
 * or 503 response with a Retry-After of R opens the host's circuit for
 * min(R, max_ns) at once (bw_breaker_open_for: reason BW_REASON_RETRY_AFTER;
 * an OPEN that lasts longer already is left alone), after its failure was
 * recorded, so every request to that host is rejected, without I/O, until the
 * host said it would be back; then recovery goes as usual (HALF_OPEN,
 * probes). max_ns in [0, 365d]; 0 (the default) turns it off. Circuits with
 * a store (store.h, set in the registry's or keyed breaker's configuration)
 * open the fleet's shared circuit: every process on the store rejects
 * requests to that host until then (stored mode at once, coordinated mode
 * from each one's next poll; bw_breaker_open_for). Returns BW_OK, BW_EINVAL,
 * BW_ERANGE.
 */
BW_API int bw_curl_set_open_on_retry_after(bw_curl *c, int64_t max_ns, bw_error *err);

/*
 * bw_curl_set_timeout — a timeout for every transfer through c (ns in [0,
 * 365d]; 0, the default: none): CURLOPT_TIMEOUT_MS is set to it (or to a
 * pipeline's deadline when that comes first) on each bw_curl_perform and
 * bw_curl_multi_add, so a timeout set this way is not lost to a pipeline's
 * longer deadline. Returns BW_OK, BW_EINVAL, BW_ERANGE.
 */
BW_API int bw_curl_set_timeout(bw_curl *c, int64_t ns, bw_error *err);

/*
 * bw_curl_set_pipeline — run bw_curl_perform through `p` (borrowed; it must
 * outlive c): its layers (fallback, retry, bulkhead, timeout, your own) wrap
 * each request, and c appends the host's circuit as p's innermost layer, so
 * every attempt is acquired and settled on the host's circuit, a rejected
 * attempt never reaches the network, and a retry stops when the circuit opens.
 * p must not have executed yet, must not hold a breaker layer for the same
 * circuits (they would count every outcome twice), and must not have a
 * bw_curl's circuit layer already (BW_ESTATE); layers added to p afterwards
 * run inside the circuit, around the transfer alone. Executing p by other
 * means (bw_pipeline_execute) runs the call without any circuit: the layer
 * passes anything but bw_curl_perform's transfers through. p must not be
 * executed after c is freed. The call's return code that
 * the layers see (bw_pipeline_execute's rc, a fallback's info.rc) is 0 for an
 * outcome that is not a failure, else the HTTP status, or 1000 + the CURLcode
 * when there was none. Returns BW_OK; BW_EINVAL for NULL; BW_ESTATE when p has
 * executed or c already has a pipeline; BW_ENOMEM.
 */
BW_API int bw_curl_set_pipeline(bw_curl *c, bw_pipeline *p, bw_error *err);

/*
 * bw_curl_perform — curl_easy_perform(easy) guarded by the circuit of its
 * URL's host (and through c's pipeline when it has one). res (may be NULL)
 * says what happened. Returns:
 *   BW_OK         the transfer ran: res->code and res->http_status say how it
 *                 went, res->outcome how it was recorded (a 503 is BW_OK here)
 *   BW_REJECTED   the circuit refused: nothing was sent, no connection opened,
 *                 no name resolved; res->rejection says why and for how long
 *   BW_ETIMEDOUT  the transfer timed out (curl's timeout, or the deadline)
 *   BW_EINVAL     NULL c or easy, a URL with no usable host, a refused name
 *   BW_ELIMIT, BW_ENOMEM   the circuit could not be made (keyed.h, registry.h)
 *   and what the pipeline's layers return (BW_EFULL, a fallback's BW_OK).
 * Thread safety: any thread, each with its own easy handle.
 */
BW_API int bw_curl_perform(bw_curl *c, CURL *easy, bw_curl_result *res);

/*
 * bw_curl_multi_add — curl_multi_add_handle(multi, easy) guarded by the
 * circuit of its host: the permit is taken now and held until
 * bw_curl_multi_done. Returns BW_OK (the handle is added); BW_REJECTED when
 * the circuit refuses: the handle is NOT added, nothing is sent, and res says
 * why (treat the request as completed at once); BW_EINVAL (as bw_curl_perform,
 * or an easy handle c already holds); BW_ELIMIT, BW_ENOMEM; BW_ESYS when
 * curl_multi_add_handle failed (nothing is held then). No pipeline runs here:
 * retry in your event loop, with res->rejection.retry_after_ns. Thread safety:
 * as libcurl's multi handle (one thread per multi), any number of multis.
 */
BW_API int bw_curl_multi_add(bw_curl *c, CURLM *multi, CURL *easy, bw_curl_result *res);

/*
 * bw_curl_multi_done — settle the transfer a CURLMSG_DONE message (from
 * curl_multi_info_read) reports: classify its result and status, and fill res
 * (may be NULL) as bw_curl_perform would. The handle stays in the multi:
 * remove it yourself (curl_multi_remove_handle), as without breakwater.
 * Returns BW_OK or BW_ETIMEDOUT (as bw_curl_perform); BW_EINVAL for NULL, a
 * message other than CURLMSG_DONE, or a handle c did not add.
 */
BW_API int bw_curl_multi_done(bw_curl *c, const CURLMsg *msg, bw_curl_result *res);

/*
 * bw_curl_multi_abandon — give up on a transfer added with bw_curl_multi_add
 * without a CURLMSG_DONE (you removed it early): its permit is settled
 * BW_IGNORED (nothing recorded; a probe's slot is handed back). Returns BW_OK,
 * or BW_EINVAL for a handle c does not hold.
 */
BW_API int bw_curl_multi_abandon(bw_curl *c, CURL *easy);

#ifdef __cplusplus
}
#endif
#endif
