/*
 * name.h — the rules for breaker names and keys (internal; base layer).
 *
 * A name or a key is 1 to 255 printable ASCII bytes with no space. Both end up
 * in store keys (store.h): a breaker's circuit under its name, a keyed circuit
 * under "NAME KEY". The one space a store key may hold separates the two, and
 * since neither part may contain one, two different (name, key) pairs never
 * make the same store key, and no keyed circuit's key equals a breaker's name.
 */
#ifndef BW_BASE_NAME_H
#define BW_BASE_NAME_H

#include <stddef.h>

#include "breakwater/common.h"

/* The longest name or key, in bytes. */
#define BW__NAME_MAX 255
/* The longest store key: a name, a space and a key. */
#define BW__STORE_KEY_MAX (2 * BW__NAME_MAX + 1)

/*
 * Check a breaker name or a key. Returns BW_OK, or BW_EINVAL with *err naming
 * `field` and saying what is wrong.
 */
int bw__check_name(const char *name, const char *field, bw_error *err);

/*
 * Check a store key: a name, or a name, one space and a key. Returns BW_OK, or
 * BW_EINVAL with *err naming `field`.
 */
int bw__check_store_key(const char *key, const char *field, bw_error *err);

/*
 * Write the store key of a breaker's circuit (key NULL) or of its keyed circuit
 * `key` into buf (at least BW__STORE_KEY_MAX + 1 bytes); returns its length.
 * Both parts must have passed bw__check_name.
 */
size_t bw__store_key(char *buf, const char *name, const char *key);

#endif
