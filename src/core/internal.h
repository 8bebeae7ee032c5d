/*
 * internal.h — helpers shared by the core's source files (not installed).
 */
#ifndef BW_INTERNAL_H
#define BW_INTERNAL_H

#include <string.h>

#include "breakwater/breakwater.h"
#include "machine.h"

#if defined(__GNUC__) || defined(__clang__)
#define BW_LIKELY(x) __builtin_expect(!!(x), 1)
#define BW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define BW_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define BW_NOINLINE __attribute__((noinline))
/* Inline every call of this function's body (the machine and window of a settle, across files under LTO). */
#define BW_FLATTEN __attribute__((flatten))
#else
#define BW_FLATTEN
#define BW_NOINLINE
#define BW_LIKELY(x) (x)
#define BW_UNLIKELY(x) (x)
#define BW_PRINTF(a, b)
#endif

/* An event of `type` from `name`, every other field as listener.h says when it does not apply. */
static inline bw_event bw__event(bw_event_type type, const char *name)
{
    bw_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    e.name = name;
    e.retry_after_ns = BW_NO_TIME;
    return e;
}

/* Fill *err (if not NULL) and return code. */
int bw__fail(bw_error *err, int code, const char *field, const char *fmt, ...) BW_PRINTF(4, 5);

/*
 * Check a breaker name or a key: 1 to 255 printable ASCII bytes, no spaces
 * (breaker.c). `field` names it in the message.
 */
int bw__check_name(const char *name, const char *field, bw_error *err);

/* The configuration object (config.c); breaker.c reads it when making a breaker. */
struct bw_config {
    bw__mcfg m;      /* m.wait == 0 means "the policy's default wait" */
    int64_t slow_ns; /* 0 = slow-call detection off */
    int auto_transition;
    bw_clock *clock; /* NULL = system clock */
    unsigned listener_mask;
    bw_listener_cb listener;
    void *listener_user;
    bw_classifier_cb classifier;
    void *classifier_user;
    /* Keyed circuits (keyed.c). */
    uint32_t keyed_max;   /* 0 = unbounded */
    uint32_t keyed_limit; /* 0 = twice keyed_max */
    int64_t keyed_idle;   /* ns */
    int64_t keyed_hidle;  /* ns */
    /* Shared state (src/store). */
    struct bw_store *store;                                                           /* NULL = none */
    int store_mode;                                                                   /* bw_store_mode */
    int64_t store_ttl, store_poll, store_retry, store_retry_max, store_close_timeout; /* ns */
    double store_retry_multiplier, store_retry_jitter;
    uint32_t store_queue;
};

/* The breaker's classifier applied to a call's return code (breaker.c). */
bw_outcome bw__breaker_classify(const bw_breaker *b, int rc, void *arg);
/* The same, with fn (may be NULL) standing in for a breaker that has no classifier of its own. */
bw_outcome bw__breaker_classify_or(const bw_breaker *b, bw_classifier_cb fn, void *user, int rc, void *arg);
/* A classifier's verdict on rc: fn NULL means rc == 0 is a success, anything else a failure; an
 * out-of-range answer is a failure (breaker.c). */
bw_outcome bw__classify(bw_classifier_cb fn, void *user, int rc, void *arg);

/*
 * Parse a duration as configuration text does ("1.5s", "250ms", "30", "off" =
 * 0). Returns 0, or -1 when malformed (config.c).
 */
int bw__parse_duration(const char *v, int64_t *out);
/*
 * Parse a whole number in decimal, with no space anywhere: 0, -1 when it
 * is not one, 1 when it does not fit in int64 (*out then saturates) (config.c).
 */
int bw__parse_int(const char *v, int64_t *out);
/* Format a duration exactly, in the largest unit that divides it; `zero` for 0 (config.c). */
void bw__fmt_duration(char *buf, size_t n, int64_t ns, const char *zero);

/* The policy default wait when none was set: 60 s (rate) or 30 s (consecutive). */
int64_t bw__config_wait(const bw_config *cfg);

/* Clock internals (clock.c). */
typedef struct bw__watch {
    struct bw__watch *next;
    void (*fire)(void *ctx, int64_t now);
    void *ctx;
} bw__watch;

enum { BW__CLOCK_SYSTEM = 0, BW__CLOCK_MANUAL = 1, BW__CLOCK_CUSTOM = 2 };
int bw__clock_kind(const bw_clock *c);
/* The timer service of a system or custom clock (made on first use; NULL when
 * out of memory, or for a manual clock). */
struct bw__timers *bw__clock_timers(bw_clock *c);
/* Manual clocks: run w->fire(ctx, now) on every advance until unwatched. */
void bw__clock_watch(bw_clock *c, bw__watch *w);
void bw__clock_unwatch(bw_clock *c, bw__watch *w);
/* CLOCK_MONOTONIC in nanoseconds, for converting deadlines to condvar waits. */
int64_t bw__mono_now(void);

/*
 * The system clock, inlined into the hot paths: the TSC scaled by a factor
 * calibrated once in bw_clock_system(), or CLOCK_MONOTONIC where the TSC is not
 * trusted. bw_clock_system() must have run before the first call.
 */
typedef struct bw__tsc {
    int use_tsc;
    double ns_per_tick;
    uint64_t base_tick;
    int64_t base_ns;
} bw__tsc;
extern bw__tsc bw__tsc_state;

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <x86intrin.h>
#define BW__HAVE_TSC 1
#endif

/*
 * A raw system "stamp": TSC ticks when the TSC is used, else nanoseconds. Hot
 * paths keep stamps and convert only what they report, so timing a call costs
 * two counter reads and a subtraction.
 */
static inline int64_t bw__sys_stamp(void)
{
#ifdef BW__HAVE_TSC
    if (BW_LIKELY(bw__tsc_state.use_tsc))
        return (int64_t)__rdtsc();
#endif
    return bw__mono_now();
}

/* A difference of stamps, in nanoseconds. */
static inline int64_t bw__sys_span_ns(int64_t span)
{
    return bw__tsc_state.use_tsc ? (int64_t)((double)span * bw__tsc_state.ns_per_tick) : span;
}

/* A stamp as an instant in nanoseconds. */
static inline int64_t bw__sys_stamp_ns(int64_t stamp)
{
    if (bw__tsc_state.use_tsc)
        return bw__tsc_state.base_ns + bw__sys_span_ns(stamp - (int64_t)bw__tsc_state.base_tick);
    return stamp;
}

/* Nanoseconds (a span, or an instant when `instant`) as stamp units; saturates. */
int64_t bw__sys_ns_to_stamp(int64_t ns, int instant);

static inline int64_t bw__sys_now(void)
{
    return bw__sys_stamp_ns(bw__sys_stamp());
}

/* ---- shared by the resilience layers, the timer and the store lane ---- */

#include <pthread.h>
#include <time.h>

/* The longest duration any setter accepts: 365 days, in nanoseconds. */
#define BW__MAX_DURATION (365 * 86400 * BW_NS_PER_S)

/*
 * Check a duration setting: in (0, 365d], or 0 where `zero_ok` (off / none).
 * Returns BW_OK, or BW_ERANGE with *err naming `field` (config.c).
 */
int bw__check_duration(const char *field, int64_t ns, int zero_ok, bw_error *err);

/* Initialize *cv to time its waits on CLOCK_MONOTONIC. Returns 0, or -1 (clock.c). */
int bw__cond_init_mono(pthread_cond_t *cv);

/* An absolute CLOCK_MONOTONIC instant in nanoseconds (as bw__mono_now gives) as
 * the timespec pthread_cond_timedwait takes on such a condvar (clock.c). */
struct timespec bw__timespec_of(int64_t mono_ns);

#endif
