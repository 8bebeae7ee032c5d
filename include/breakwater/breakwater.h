/*
 * breakwater/breakwater.h — the umbrella header: include this one.
 *
 * breakwater is a resilience library: circuit breakers with rate and consecutive
 * trip policies, six states, probe rounds and operator overrides. Start with
 * breaker.h; config.h lists every knob; clock.h and listener.h cover time and
 * events; registry.h keeps many breakers by name and keyed.h many circuits by
 * key inside one breaker; pipeline.h composes the breaker with retry.h,
 * bulkhead.h and timeout.h (and fallbacks). docs/ has the guides.
 *
 * Thread safety in one sentence: breakers, registries and clocks are safe to
 * share between threads; a bw_config is used by one thread at a time.
 */
#ifndef BREAKWATER_H
#define BREAKWATER_H

#include "breaker.h"
#include "bulkhead.h"
#include "clock.h"
#include "common.h"
#include "config.h"
#include "http.h"
#include "keyed.h"
#include "listener.h"
#include "pipeline.h"
#include "registry.h"
#include "retry.h"
#include "store.h"
#include "timeout.h"
#include "observe.h"

#endif
