/*
 * abi_prototypes.c — the signatures of the exported functions that libabigail
 * cannot tie to their declarations (scripts/abi_check.sh lists them, and so
 * cannot check them), pinned as they were released: a change to one of them
 * fails to compile (incompatible pointer types are errors here). Change a line
 * only with a new SONAME (docs/packaging.md).
 */
#include <breakwater/breakwater.h>

int64_t (*const bw_pin_clock_now)(const bw_clock *) = bw_clock_now;
bw_clock *(*const bw_pin_clock_system)(void) = bw_clock_system;
void (*const bw_pin_config_free)(bw_config *) = bw_config_free;
bw_config *(*const bw_pin_config_new)(void) = bw_config_new;
int (*const bw_pin_config_validate)(const bw_config *, bw_error *) = bw_config_validate;
size_t (*const bw_pin_keyed_count)(bw_breaker *) = bw_keyed_count;
int (*const bw_pin_keyed_counters)(bw_breaker *, bw_counters *) = bw_keyed_counters;
size_t (*const bw_pin_keyed_each)(bw_breaker *, size_t, void (*)(bw_breaker *, void *), void *) = bw_keyed_each;
size_t (*const bw_pin_registry_count)(bw_registry *) = bw_registry_count;
size_t (*const bw_pin_registry_list)(bw_registry *, const char **, bw_breaker **, size_t) = bw_registry_list;
