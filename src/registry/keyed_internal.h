/*
 * keyed_internal.h — what the registry uses of keyed circuits (internal;
 * registry layer).
 */
#ifndef BW_REGISTRY_KEYED_INTERNAL_H
#define BW_REGISTRY_KEYED_INTERNAL_H

#include "breakwater/keyed.h"

/*
 * Apply verb v (whose state is `state`) to b's keyed circuits: to the resident
 * ones now, and to every one made from now on (a reset ends that). Serialised
 * per breaker. Returns BW_OK or BW_ENOMEM.
 */
int bw__keyed_apply(bw_breaker *b, bw_verb v, int state);

#endif
