/*
 * breakwater/common.h — the pieces every other public header shares: the export
 * macro, the version, the error enum with bw_strerror(), the caller-owned
 * bw_error detail struct, and the state and outcome enums.
 *
 * Thread safety: everything declared here is safe to call from any thread.
 */
#ifndef BREAKWATER_COMMON_H
#define BREAKWATER_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * BW_API marks the exported symbols; everything else is hidden (the library is
 * built with -fvisibility=hidden). It exports only while the library itself is
 * compiled: CMake defines BW_BUILDING for the library's own targets, never for
 * a consumer, so a program including these headers declares plain imports
 * (on Windows, which is not a target, that keeps a consumer from exporting
 * breakwater's symbols as its own through __declspec(dllexport)).
 */
#if defined(BW_BUILDING)
#if defined(_WIN32)
#define BW_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define BW_API __attribute__((visibility("default")))
#else
#define BW_API
#endif
#else
#define BW_API
#endif

#define BW_VERSION_MAJOR 0
#define BW_VERSION_MINOR 1
#define BW_VERSION_PATCH 0
/* One number that grows with every release: major * 10000 + minor * 100 + patch. */
#define BW_VERSION_NUM (BW_VERSION_MAJOR * 10000 + BW_VERSION_MINOR * 100 + BW_VERSION_PATCH)
#define BW_VERSION_STRING "0.1.0"

/*
 * bw_version — the run-time library version as BW_VERSION_NUM, so a program can
 * check that the library it loaded matches the headers it was compiled with.
 * Thread safety: safe from any thread.
 */
BW_API int bw_version(void);

/* bw_version_string — the run-time version as "MAJOR.MINOR.PATCH"; a static string. Thread safety: any thread. */
BW_API const char *bw_version_string(void);

/*
 * Optional components, as bits of bw_components(). The core (libbreakwater:
 * libc and pthreads only) is always present; each component that has a
 * dependency of its own is a library of its own, with its own pkg-config file
 * and CMake target (docs/packaging.md):
 *   component       library                      pkg-config / CMake component
 *   sqlite: store   libbreakwater-sqlite         breakwater-sqlite / sqlite
 *   redis: store    libbreakwater-redis          breakwater-redis / redis
 *   postgresql:     libbreakwater-postgres       breakwater-postgres / postgres
 *   curl.h          libbreakwater-curl           breakwater-curl / curl
 *   bw_metrics_serve libbreakwater-metrics-http  breakwater-metrics-http / metrics-http
 * A store component need not be linked: bw_store_open loads its library when a
 * URL names its scheme (a program linked statically must link it: store.h).
 * The integrations (curl.h, bw_metrics_serve) are linked like any library.
 */
#define BW_COMPONENT_CORE 0x1u
#define BW_COMPONENT_SQLITE 0x2u       /* the sqlite: store */
#define BW_COMPONENT_METRICS_HTTP 0x4u /* bw_metrics_serve (observe.h): libmicrohttpd */
#define BW_COMPONENT_REDIS 0x8u        /* the redis: store (store.h): hiredis */
#define BW_COMPONENT_POSTGRES 0x10u    /* the postgresql: store (store.h): libpq */
#define BW_COMPONENT_CURL 0x20u        /* the libcurl integration (curl.h) */
/*
 * bw_components — which components this process can use, as a bit set of
 * BW_COMPONENT_* values: the core; each integration (curl, the /metrics
 * server) whose library the program links; each store component whose library
 * is linked into the program or, with the shared core, can be loaded: the
 * query loads it as bw_store_open would, with its dependencies (libpq for
 * postgresql:), and it stays loaded. Opening a store of that scheme is the
 * cheaper test when only one matters. Thread safety: safe from any thread.
 */
BW_API unsigned bw_components(void);

/*
 * bw_fini — end what breakwater keeps for the whole process, optionally (for
 * leak checkers, and before unloading the library with dlclose). It stops and
 * joins the two process-wide threads, each started on first need: the system
 * clock's timer thread (it runs the auto_transition timers of every breaker on
 * the system clock) and the coarse clock's ticker (breakers on the system clock
 * whose slow-call threshold is 100 ms or more, and pipeline timeout layers of
 * 100 ms or more, read it: breaker.h, TIME), and frees the timer's scheduler. Nothing else is
 * process-wide: a custom or manual clock's timer thread ends with
 * bw_clock_free, a store's lane threads with bw_store_close, a time limiter's
 * workers with bw_limiter_free. Call it with no other breakwater call running,
 * after every breaker on the system clock is freed; breakwater may be used
 * again afterwards (each thread starts again when needed). Calling it when
 * nothing was started, or twice, is harmless.
 * Thread safety: must not race any other breakwater call.
 */
BW_API void bw_fini(void);

/*
 * Status codes. BW_OK is success; BW_REJECTED is a decision (the breaker said
 * no), not an error; every negative value is an error. The list is only ever
 * appended to: a value never changes meaning.
 */
typedef enum bw_status {
    BW_OK = 0,
    BW_REJECTED = 1, /* the breaker refused the call; see bw_rejection */
    BW_EINVAL = -1,  /* an argument is NULL, unknown or inconsistent */
    BW_ERANGE = -2,  /* a configuration value is outside its allowed range */
    BW_ENOMEM = -3,  /* an allocation failed */
    BW_EPARSE = -4,  /* configuration text could not be parsed */
    BW_EPERMIT = -5, /* a permit was settled twice, never acquired, or belongs to another breaker */
    BW_ESYS = -6,    /* the operating system refused (thread, lock) */
    BW_ESTATE = -7,  /* the operation is not allowed in the current state or mode */
    BW_ELIMIT = -8,  /* a bound was reached: no room for another keyed circuit */
    /* The call did not finish within its timeout (timeout.h); a breaker around
       it records a slow failure. */
    BW_ETIMEDOUT = -9,
    /* No slot: a bulkhead or a time limiter's pool is full (bulkhead.h,
       timeout.h). The call was never made; a breaker around it records
       BW_UNREACHABLE. */
    BW_EFULL = -10,
    /* This build lacks the component the call needs (bw_components()). */
    BW_ENOTSUP = -11,
    /* A store's update lost every race to other writers of the same entry
       within its timeout (redis:, postgresql:; store.h): the server answered
       each time, contention kept the write out. Not a failure of the store: a
       breaker drops that write (BW_EVENT_STORE_WRITE_DROPPED) and stays on it. */
    BW_ECONFLICT = -12
} bw_status;

/*
 * bw_strerror — a short English description of a status code, e.g. "value out of
 * range". Never NULL: an unknown code gives "unknown error". Static string.
 * Thread safety: safe from any thread.
 */
BW_API const char *bw_strerror(int code);

/*
 * bw_error — rich detail about a failed call, filled by functions that take a
 * `bw_error *err` argument. The caller owns it (usually on the stack); passing
 * NULL is always allowed and simply drops the detail. On success the struct is
 * left untouched. `field` names the configuration field or argument at fault
 * (empty when none applies); `message` is a complete sentence for a human.
 */
typedef struct bw_error {
    int code;          /* the bw_status that was returned */
    char field[40];    /* e.g. "failure_rate", or "" */
    char message[216]; /* e.g. "failure_rate must be in (0, 1], got 1.5" */
} bw_error;

/*
 * Circuit states. The first three are the automatic lifecycle; the last three are
 * operator overrides that only bw_breaker_reset() or another override leaves.
 */
typedef enum bw_state {
    BW_STATE_CLOSED = 0,      /* calls flow; outcomes are recorded and may trip it */
    BW_STATE_OPEN = 1,        /* calls are rejected until the open wait elapses */
    BW_STATE_HALF_OPEN = 2,   /* a bounded round of probes decides close or reopen */
    BW_STATE_FORCED_OPEN = 3, /* operator hold: every call is rejected */
    BW_STATE_DISABLED = 4,    /* operator override: every call admitted, nothing recorded */
    BW_STATE_METRICS_ONLY = 5 /* shadow mode: every call admitted and recorded, never trips */
} bw_state;

/*
 * bw_state_name — the lowercase name of a state ("closed", "open", "half_open",
 * "forced_open", "disabled", "metrics_only"), or "unknown". Static string.
 * Thread safety: any thread.
 */
BW_API const char *bw_state_name(bw_state state);

/*
 * Outcomes of a guarded call, chosen by the caller or by a classifier. The engine
 * adds "slow" on its own when the call took at least slow_call_duration.
 */
typedef enum bw_outcome {
    BW_SUCCESS = 0,    /* the dependency answered well */
    BW_FAILURE = 1,    /* the dependency failed: counts toward the failure rate */
    BW_IGNORED = 2,    /* says nothing about the dependency (caller bug, 404, cancel):
                          recorded nowhere; a half-open probe hands its slot back */
    BW_UNREACHABLE = 3 /* the call never left the process (no pool slot, no bulkhead
                          permit): a failure in CLOSED; in HALF_OPEN an inconclusive
                          probe that hands its slot back without a verdict */
} bw_outcome;

/* bw_outcome_name — "success", "failure", "ignored", "unreachable" or "unknown". Thread safety: any thread. */
BW_API const char *bw_outcome_name(bw_outcome outcome);

/* Durations and instants are signed 64-bit nanoseconds throughout the API. */
#define BW_NS_PER_MS INT64_C(1000000)
#define BW_NS_PER_S INT64_C(1000000000)
/* "No value" for an optional duration, e.g. retry_after in FORCED_OPEN. */
#define BW_NO_TIME INT64_C(-1)

#ifdef __cplusplus
}
#endif
#endif
