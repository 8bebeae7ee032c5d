/*
 * breakwater/observe.h — what a breaker's events and counters become for
 * operators: a logging listener, and Prometheus / OpenMetrics exposition with
 * an optional /metrics HTTP server.
 *
 * Everything here is built on the public API (listener.h, breaker.h's
 * bw_breaker_counters, registry.h, keyed.h): nothing here can do what a user's
 * own code could not. docs/observability.md lists every metric and log field,
 * with their resilience4j (Micrometer) and interlock (OpenTelemetry) names.
 */
#ifndef BREAKWATER_OBSERVE_H
#define BREAKWATER_OBSERVE_H

#include <stdio.h>

#include "breaker.h"
#include "registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the logging listener ---- */

typedef enum bw_log_format {
    BW_LOG_LOGFMT = 0, /* ts=... level=error event=state_change name=payments from=closed to=open reason=... */
    BW_LOG_JSON = 1    /* one JSON object a line, the same fields in the same order */
} bw_log_format;

typedef enum bw_log_level { BW_LOG_DEBUG = 0, BW_LOG_INFO = 1, BW_LOG_WARN = 2, BW_LOG_ERROR = 3 } bw_log_level;

/* A sink of your own: one complete line (no trailing newline), `len` bytes, NUL-terminated; valid during the call. */
typedef void (*bw_log_sink_fn)(bw_log_level level, const char *line, size_t len, void *user);

/*
 * Where and what the logging listener writes. Fill it with bw_log_options_init
 * first, then set what you need. Exactly one destination: `file`, `fd` (>= 0),
 * `syslog` (1) or `sink`. Every destination is borrowed: the log never closes
 * or frees it, and it must outlive the log.
 */
typedef struct bw_log_options {
    bw_log_format format;           /* default BW_LOG_LOGFMT */
    bw_log_level min_level;         /* lines below it are not written; default BW_LOG_INFO */
    FILE *file;                     /* each line (with its newline) is one fwrite, then fflush, under the
                                       FILE's lock */
    int fd;                         /* each line (with its newline) is one write(2), retried after EINTR or a
                                       partial write; default -1 (none). A line the fd does not take (EAGAIN
                                       on a non-blocking fd that is full, an error) is dropped, not waited
                                       for, and counted: the next line written carries dropped=N. A line cut
                                       short (a partial write, then EAGAIN) is given up too, and the next
                                       line written starts with a newline, so the fragment never prefixes it.
                                       Lines of up to 2 KiB are whole on a pipe (PIPE_BUF); on a socket that
                                       several threads log to, lines may interleave */
    int syslog;                     /* 1: syslog(3) with the level's priority (LOG_DEBUG, LOG_INFO, LOG_WARNING,
                                       LOG_ERR; the caller's openlog applies); default 0 */
    bw_log_sink_fn sink;            /* called with each line */
    void *sink_user;                /* passed to sink */
    uint32_t rejections_per_second; /* rejection lines written a second per breaker (and key), the rest counted
                                       and reported as suppressed=N on the next one written; default 1;
                                       0 = no limit. The counts live in a fixed table of 64 slots (no
                                       allocation): two breakers whose slots collide share one budget */
} bw_log_options;

/* bw_log_options_init — the defaults above, into *o (NULL ignored). Thread safety: any thread. */
BW_API void bw_log_options_init(bw_log_options *o);

typedef struct bw_log bw_log;

/*
 * bw_log_new — a logging listener writing as *o says (copied). Each event is
 * one line with the fields ts (RFC 3339 UTC with milliseconds, CLOCK_REALTIME),
 * level, event (state_change, call, rejected, reset, retry,
 * bulkhead_rejected, fallback, store_degraded, store_recovered,
 * store_write_dropped, store_corrupt, shed), name, key (keyed circuits only: a
 * keyed circuit's events carry `name` and `key` as separate fields), the
 * event's own fields (state_change: from, to, reason, and rate and total or
 * count when the reason has them; call: outcome, slow, stale, duration_ms, rc
 * when not 0, message; rejected: state, retry_after_ms (not for FORCED_OPEN or
 * HALF_OPEN), suppressed (when some were); retry:
 * attempt, delay_ms, status, rc; bulkhead_rejected, shed: status; fallback:
 * fallback_reason, status, rc; store_degraded: status, message; store_corrupt:
 * message; status is bw_strerror's text), dropped (the fd destination only,
 * when lines were dropped since the last one written: how many), and msg, a
 * sentence for a human
 * ("circuit payments: closed -> open (failure rate 0.62 of 50 calls)").
 * Values are escaped for their format (JSON: \" \\ \n \r \t, other control
 * characters as \u00XX, bytes that are not UTF-8 as \ufffd; logfmt quotes a
 * value holding a space, '"', '=', '\\', a control character or such a byte,
 * with the same escapes). A line is at most 2 KiB: a longer message is cut,
 * ending in "...". Levels: state changes WARN (ERROR for a trip to OPEN);
 * store degradation, dropped writes and corruption WARN; recoveries and resets
 * INFO; rejections and calls DEBUG; pipeline events: retry INFO, bulkhead
 * rejection and fallback WARN, shed DEBUG. A line is built on the delivering
 * thread's stack: nothing is allocated, and no lock is held while it is
 * written but a FILE's own (a rejection takes the log's mutex a moment before,
 * to count it). The write itself (write(2), fwrite + fflush, syslog(3), your
 * sink) also runs on the delivering thread, which is the thread of the breaker
 * call that caused the event: a destination that blocks (a full pipe or socket
 * in blocking mode, a stalled syslog daemon or journald, a FILE on a stalled
 * disk or terminal) holds that call up for as long. For a destination that can
 * be slow, use a sink that hands the line (copy it: it is valid only during
 * the call) to a bounded queue of your own, written by a thread of yours, or a
 * non-blocking fd (lines it cannot take at once are dropped and counted, as
 * above). A failed write is dropped (an fd's counted); the caller's errno is
 * kept.
 * Returns BW_OK with *out (free with bw_log_free once no breaker delivers to
 * it); BW_EINVAL with *err naming the field: "o" or "out" (NULL), "format",
 * "min_level" or "syslog" (not one of their values), "destination" (none
 * set) or the second destination set (more than one: file, fd, syslog, sink
 * in that order); BW_ENOMEM; BW_ESYS (the log's mutex could not be made).
 * *err may be NULL. Thread safety: any thread.
 */
BW_API int bw_log_new(const bw_log_options *o, bw_log **out, bw_error *err);

/*
 * bw_log_listener — the listener to add to a breaker, registry or pipeline
 * (mask: the event types that can reach the log's min_level; the listener
 * filters by level too, so a wider mask only costs calls). The log is its
 * user; its release is NULL: free the log after removing the listener and
 * freeing what it was added to. For a NULL log, a listener with mask 0 and fn
 * NULL, which nothing accepts. Thread safety: any thread; the listener may run
 * on many threads at once.
 */
BW_API bw_listener bw_log_listener(bw_log *log);

/*
 * bw_log_free — free the log (NULL ignored); not its destination. Nothing may
 * deliver to it any more. Thread safety: must not race a delivery to it.
 */
BW_API void bw_log_free(bw_log *log);

/*
 * ---- Prometheus / OpenMetrics exposition ----
 *
 * Each breaker's counters (bw_breaker_counters) become families named
 * <prefix>_<what> (docs/observability.md lists them). Its call durations are
 * the histogram <prefix>_call_duration_seconds, with the buckets of
 * BW_DURATION_BOUNDS_NS (breaker.h): le="0.01" "0.025" "0.05" "0.1" "0.25"
 * "0.5" "1.0" "2.5" "5.0" "10.0" "30.0" "60.0" "+Inf". They start at 10 ms,
 * the longest period of the coarse clock that times calls by default
 * (breaker.h, TIME): a call counts in its own bucket, or, within that period
 * of a bound, in the one next to it; on the precise clock durations are exact.
 */

typedef enum bw_metrics_format {
    BW_METRICS_PROMETHEUS = 0, /* the Prometheus text format 0.0.4 */
    BW_METRICS_OPENMETRICS = 1 /* OpenMetrics 1.0.0 text (ends with "# EOF") */
} bw_metrics_format;

typedef struct bw_metrics_options {
    const char *prefix; /* metric name prefix ([a-zA-Z_][a-zA-Z0-9_]*); NULL: "breakwater" */
    size_t keys_max;    /* keyed breakers: 0 (default) exports their circuits summed under the breaker's name;
                           N > 0 also exports per-key series (label `key`) for at most N circuits a breaker */
} bw_metrics_options;

/* A set of breakers and registries exported together. */
typedef struct bw_metrics bw_metrics;

/*
 * bw_metrics_new — an empty set with options *o (NULL: defaults; copied).
 * Returns BW_OK with *out (free with bw_metrics_free), BW_EINVAL (out NULL, a
 * bad prefix: *err says why), BW_ENOMEM, BW_ESYS (the set's mutex could not
 * be made). Thread safety: any thread.
 */
BW_API int bw_metrics_new(const bw_metrics_options *o, bw_metrics **out, bw_error *err);

/*
 * bw_metrics_free — free the set (NULL ignored); not what it exports. No
 * write or add may be running, and no server may serve it any more (stop it
 * first).
 */
BW_API void bw_metrics_free(bw_metrics *m);

/*
 * bw_metrics_add_breaker / bw_metrics_add_registry — export b (with its keyed
 * circuits), or every breaker of r (those made later too). Borrowed: they must
 * outlive the set. Returns BW_OK, BW_EINVAL (NULL argument, or b a keyed
 * circuit), BW_ENOMEM. Thread safety: any thread, at any time, also while the
 * set is written or served (the set's mutex, held only while the add appends
 * and while a write copies the set's lists): a write exports the set as it
 * was when that write began.
 */
BW_API int bw_metrics_add_breaker(bw_metrics *m, bw_breaker *b);
BW_API int bw_metrics_add_registry(bw_metrics *m, bw_registry *r);

/*
 * bw_metrics_write — the exposition text of everything in m, in `format`, into
 * buf (size bytes, NUL-terminated). Returns BW_OK with *len (may be NULL) the
 * text's length; BW_ELIMIT when it does not fit, with *len the length it needs
 * (then size must be at least *len + 1); BW_ENOMEM (the write's own working
 * memory, a row of numbers and the escaped name of each breaker, could not be
 * had); BW_EINVAL for NULL m, NULL buf with size > 0, or an unknown format. On
 * BW_ELIMIT and BW_ENOMEM too, buf (when size > 0) is NUL-terminated: it holds
 * the text up to where it was cut, which is not a valid exposition. Whole
 * counts are written as integers, other values (rates, sums) with at most 15
 * significant digits. It reads each breaker's counters without a lock and
 * takes each breaker's lock only as long as bw_breaker_snapshot does; no lock
 * is held across breakers, so calls are never held up for the whole write.
 * A registry is listed at most twice in a write: one that is still growing
 * then gives the breakers there is room for, and the rest are in the next
 * write. Thread safety: any thread, concurrently with calls and adds; writes
 * on one set may run at once.
 */
BW_API int bw_metrics_write(bw_metrics *m, bw_metrics_format format, char *buf, size_t size, size_t *len);

/*
 * bw_metrics_fwrite — the same text to a stream, in pieces of up to 64 KiB
 * (each one fwrite), then fflush. Returns BW_OK, BW_EINVAL, BW_ENOMEM or
 * BW_ESYS (a write failed; part of the text may have been written). Thread
 * safety: as bw_metrics_write; but the stream is not locked across the
 * pieces, so two fwrites (or other output) to one FILE at once interleave
 * their pieces: serialise them yourself, or give each its own FILE.
 */
BW_API int bw_metrics_fwrite(bw_metrics *m, bw_metrics_format format, FILE *f);

/* bw_metrics_content_type — the HTTP Content-Type of a format, or NULL for an unknown one. Static string. */
BW_API const char *bw_metrics_content_type(bw_metrics_format format);

/*
 * ---- the /metrics HTTP server (component BW_COMPONENT_METRICS_HTTP: libmicrohttpd) ----
 * These three functions are in the library libbreakwater-metrics-http, which
 * a program links besides the core (pkg-config breakwater-metrics-http, or
 * the CMake target breakwater::metrics-http; Debian:
 * libbreakwater-metrics-http0).
 */

typedef struct bw_metrics_server bw_metrics_server;

/*
 * bw_metrics_serve — serve GET /metrics with m's text on `address`
 * ("HOST:PORT", HOST a numeric IPv4 address; PORT 0 picks a free one, see
 * bw_metrics_server_port), on a thread of its own. The format follows the
 * request's Accept header: OpenMetrics when it asks for
 * application/openmetrics-text, else the Prometheus text format. Any other
 * path answers 404, any other method 405; every request is answered as soon
 * as its headers are in, and a request body is never read. The text is
 * rendered at most about once a second per format and shared by every scrape
 * of that second: a scrape sees the breakers as they were up to 1 s before it,
 * and concurrent scrapes hold one copy of the text, not one each.
 *
 * Limits: at most 16 connections at once, at most 8 from one client address;
 * a request head of more than about 14 KiB is refused (431); a connection with
 * no byte read or written for 5 s is closed. That timeout is per idle period,
 * not per request, so a client that sends a byte every few seconds keeps its
 * connection, and a few such clients can keep everyone else out. Serve on a
 * trusted network only: loopback, or a network only your scrapers reach; not
 * the internet. There is no TLS and no authentication.
 *
 * m must outlive the server. Returns BW_OK with *out (stop with
 * bw_metrics_server_stop); BW_EINVAL (NULL argument, a bad address: *err says
 * why); BW_ESYS (cannot listen there: *err has the system's reason).
 * Thread safety: any thread.
 */
BW_API int bw_metrics_serve(bw_metrics *m, const char *address, bw_metrics_server **out, bw_error *err);

/* bw_metrics_server_port — the port the server listens on, or 0 for NULL. */
BW_API int bw_metrics_server_port(const bw_metrics_server *s);

/*
 * bw_metrics_server_stop — stop listening, give the metrics answers being sent
 * at most 2 s to finish, close every connection left (a client that has not
 * read its whole answer by then gets it cut short) and free the server. It
 * returns within about 2 s (plus the moment libmicrohttpd takes to stop its
 * thread); clients that never finished their request, or announced a body,
 * are not waited for. NULL is ignored. Thread safety: any thread but the
 * server's own (not from a listener that a scrape may run), once per server,
 * not concurrently with bw_metrics_server_port on it.
 */
BW_API void bw_metrics_server_stop(bw_metrics_server *s);

#ifdef __cplusplus
}
#endif
#endif
