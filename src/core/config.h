/*
 * config.h — the configuration object's layout (internal; core layer): the
 * engine reads it when making a breaker, and a breaker keeps it (its own copy,
 * or its owner's) for what is made from it later (keyed circuits).
 */
#ifndef BW_CORE_CONFIG_H
#define BW_CORE_CONFIG_H

#include "breakwater/breakwater.h"
#include "machine/machine.h"

struct bw_config {
    bw__mcfg m;      /* m.wait and m.min_calls 0: their defaults (bw__config_mcfg) */
    int64_t slow_ns; /* 0 = slow-call detection off */
    int auto_transition;
    int counters;
    bw_clock *clock; /* NULL = system clock */
    unsigned listener_mask;
    bw_listener_cb listener;
    void *listener_user;
    bw_classifier_cb classifier;
    void *classifier_user;
    /* Keyed circuits (registry/keyed.c). */
    uint32_t keyed_max;   /* 0 = unbounded */
    uint32_t keyed_limit; /* 0 = twice keyed_max */
    int64_t keyed_idle;   /* ns */
    int64_t keyed_hidle;  /* ns */
    /* Shared state (share/). */
    struct bw_store *store;                                                           /* NULL = none */
    int store_mode;                                                                   /* bw_store_mode */
    int64_t store_ttl, store_poll, store_retry, store_retry_max, store_close_timeout; /* ns */
    double store_retry_multiplier, store_retry_jitter;
    uint32_t store_queue;
    uint32_t store_quorum; /* coordinated: instances that must trip before the fleet's circuit opens */
};

/*
 * The machine's thresholds as a breaker made from cfg uses them: the defaults
 * that depend on other knobs resolved (wait: 60 s for the rate policy, 30 s
 * for the consecutive one; min_calls: 10, or a smaller count window's size).
 */
bw__mcfg bw__config_mcfg(const bw_config *cfg);

/* The text name of knob i (config.c's table), or NULL past the last. */
const char *bw__config_knob_name(size_t i);
/* The knob an unknown key most likely means (another library's name, or the nearest in spelling), or NULL; *hint
 * says how its value differs, or NULL (config_keys.c). */
const char *bw__config_suggest(const char *key, const char **hint);
/* Fail err with BW_EPARSE for the unknown key found at offset `at`, with a suggestion when there is one. */
int bw__config_unknown_key(bw_error *err, size_t at, const char *key);

#endif
