/*
 * breakwater/registry.h — breakers made on demand by name: one per dependency,
 * host, tenant or endpoint, all with the registry's defaults.
 *
 *     bw_registry *reg;
 *     bw_registry_new(defaults, &reg, &err);
 *     ...
 *     bw_breaker *b;
 *     if (bw_registry_get(reg, "payments", NULL, &b, &err) == BW_OK)
 *         ... bw_acquire(b, ...) ...
 *
 * The same name always gives the same breaker: the registry makes it on first
 * use and keeps it until bw_registry_free (breakers are never removed, so a
 * pointer from the registry stays valid until then; for unbounded sets of keys
 * use keyed circuits, keyed.h). A lookup of an existing name takes no lock, does
 * not allocate and writes no shared memory, so many threads may look names up at
 * once without slowing each other; threads making the same new name at once get
 * one breaker between them.
 *
 * Names are validated as bw_breaker_new's (1 to 255 printable ASCII bytes, no
 * spaces): a name later becomes a store key.
 *
 * Thread safety: every function is safe from any number of threads at once,
 * except bw_registry_free, which must not race any other use of the registry or
 * of its breakers.
 */
#ifndef BREAKWATER_REGISTRY_H
#define BREAKWATER_REGISTRY_H

#include "breaker.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_registry bw_registry;

/*
 * bw_registry_new — a registry whose breakers are made from a copy of
 * `defaults` (NULL: every default), which includes the clock, listener,
 * classifier and initial state. Returns BW_OK with *out (free with
 * bw_registry_free); BW_EINVAL (out NULL); BW_ERANGE when defaults fail
 * bw_config_validate (*err names the field); BW_ENOMEM or BW_ESYS. *err may be NULL.
 */
BW_API int bw_registry_new(const bw_config *defaults, bw_registry **out, bw_error *err);

/*
 * bw_registry_free — free the registry and every breaker in it (with their
 * keyed circuits). NULL is ignored. Nothing may use the registry or its breakers
 * concurrently or afterwards.
 */
BW_API void bw_registry_free(bw_registry *r);

/*
 * bw_registry_get — the breaker named `name`, made if it does not exist yet, in
 * *out. `override` (may be NULL) replaces the defaults for this name, and only
 * when the breaker is made: once the name exists it is ignored. The override's
 * clock, listener and classifier, when it has none set, are the registry's.
 * A breaker is made in its initial state (or in the state of the last
 * bw_registry_apply) before any other thread can see it. The registry owns it:
 * bw_breaker_free ignores it.
 * Returns BW_OK; BW_EINVAL for NULL r, name or out, or a bad name; BW_ERANGE
 * when the override fails bw_config_validate; BW_ENOMEM. *err (may be NULL) says
 * which field is wrong.
 * Cost: a hit hashes the name and probes a table, with no lock and no write.
 */
BW_API int bw_registry_get(bw_registry *r, const char *name, const bw_config *override, bw_breaker **out,
                           bw_error *err);

/*
 * bw_registry_get_existing — the breaker named `name`, or NULL when there is
 * none (or for NULL arguments or a bad name). Never makes one. No lock.
 */
BW_API bw_breaker *bw_registry_get_existing(bw_registry *r, const char *name);

/* bw_registry_count — how many breakers the registry holds (0 for NULL). */
BW_API size_t bw_registry_count(bw_registry *r);

/*
 * bw_registry_list — a point-in-time list of the registry's breakers, in the
 * order they were made: the first min(cap, count) names into names[] and
 * breakers into breakers[] (either array may be NULL to skip it). The names are
 * owned by their breakers, so they live as long as the registry. Breakers made
 * after the call are not in the list. Returns the count at that instant, which
 * may exceed cap (call again with more room); 0 for NULL r.
 */
BW_API size_t bw_registry_list(bw_registry *r, const char **names, bw_breaker **breakers, size_t cap);

/*
 * bw_registry_apply — run an operator verb on every breaker of the registry and
 * on all their keyed circuits (bw_breaker_apply and bw_keyed_apply), and make
 * breakers made from now on, and every keyed circuit made from now on, start in
 * the verb's state; BW_VERB_RESET resets them all and lets new ones start in
 * their configured initial state again. For example BW_VERB_METRICS_ONLY puts
 * everything in shadow mode. Events are those of the verbs, delivered on this
 * thread. Applies are serialised, so two at once never leave a mix of their
 * verbs; a listener must therefore not call bw_registry_apply or bw_keyed_apply.
 * Returns BW_OK, BW_EINVAL (NULL r or an unknown verb) or BW_ENOMEM (the verb
 * then reached only some breakers).
 */
BW_API int bw_registry_apply(bw_registry *r, bw_verb v);

/*
 * bw_registry_add_listener — add a listener (listener.h) that receives the
 * events of every breaker of r, those made later included, and of their keyed
 * circuits, after each breaker's own listeners. *id (may be NULL) receives its
 * number for bw_registry_remove_listener. Returns BW_OK; BW_EINVAL for NULL r
 * or l, NULL l->fn or an empty mask; BW_ENOMEM. Thread safety: any thread,
 * concurrently with calls; not from a listener (it walks the registry's
 * breakers under its lock).
 */
BW_API int bw_registry_add_listener(bw_registry *r, const bw_listener *l, uint64_t *id);

/*
 * bw_registry_remove_listener — remove the registry's listener `id` (as
 * bw_breaker_remove_listener). Returns BW_OK, BW_EINVAL (NULL r), BW_ESTATE
 * (no such listener) or BW_ENOMEM (it stays). Thread safety: as bw_registry_add_listener.
 */
BW_API int bw_registry_remove_listener(bw_registry *r, uint64_t id);

#ifdef __cplusplus
}
#endif
#endif
