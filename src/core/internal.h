/*
 * internal.h — helpers shared by the core's source files (not installed).
 */
#ifndef BW_INTERNAL_H
#define BW_INTERNAL_H

#include <string.h>

#include "base/compiler.h"
#include "base/duration.h"
#include "base/error.h"
#include "base/name.h"
#include "base/systime.h"
#include "time/clock.h"
#include "breakwater/breakwater.h"
#include "machine/machine.h"

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

/* The policy default wait when none was set: 60 s (rate) or 30 s (consecutive). */
int64_t bw__config_wait(const bw_config *cfg);

#endif
