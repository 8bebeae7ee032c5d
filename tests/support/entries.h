/*
 * entries.h — self-checking store entries for the store tests
 * (tests/support/): an entry of 16 to BW_STORE_DATA_MAX bytes that carries a
 * value and a checksum of its bytes in its last 8, so that a torn or foreign
 * entry reads as -1 instead of as a value; and the updates the store tests
 * make of them (read, write, delete, increment).
 */
#ifndef BW_TEST_ENTRIES_H
#define BW_TEST_ENTRIES_H

#include "harness.h"

static inline uint64_t entry_fnv(const unsigned char *p, size_t n)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * UINT64_C(1099511628211);
    return h;
}

/* An entry of len bytes (>= 16) carrying value, with a checksum in its last 8 bytes. */
static inline void entry_fill(bw_store_entry *e, int64_t value, uint32_t len, int64_t expires_at)
{
    e->expires_at = expires_at;
    e->len = len;
    memcpy(e->data, &value, 8);
    for (uint32_t i = 8; i < len - 8; i++)
        e->data[i] = (unsigned char)(value * 31 + i);
    uint64_t h = entry_fnv(e->data, len - 8);
    memcpy(e->data + len - 8, &h, 8);
}

/* The value an entry carries, or -1 when it is torn (or not one of these). */
static inline int64_t entry_value(const bw_store_entry *e)
{
    if (e->len < 16 || e->len > BW_STORE_DATA_MAX)
        return -1;
    uint64_t h;
    memcpy(&h, e->data + e->len - 8, 8);
    if (h != entry_fnv(e->data, e->len - 8))
        return -1;
    int64_t v;
    memcpy(&v, e->data, 8);
    return v;
}

/* One update: what it does (verdict; for a PUT the value, length and expiry) and what it saw. */
typedef struct entry_op {
    int verdict;
    int64_t value;
    uint32_t len;
    int64_t expires_at;
    int present;  /* observed: an entry was there */
    int64_t seen; /* its value (-1 torn) */
} entry_op;

static inline bw_store_verdict entry_op_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now;
    entry_op *o = arg;
    o->present = cur != NULL;
    o->seen = cur ? entry_value(cur) : 0;
    if (o->verdict == BW_STORE_PUT)
        entry_fill(next, o->value, o->len, o->expires_at);
    return (bw_store_verdict)o->verdict;
}

/* key's value: -2 when absent, -1 when torn, -3 (and a failed check) when the update failed. */
static inline int64_t entry_get(bw_store *s, const char *key)
{
    entry_op o = {BW_STORE_KEEP, 0, 0, 0, 0, 0};
    bw_error e;
    int rc = bw_store_update(s, key, entry_op_fn, &o, &e);
    if (rc != BW_OK) {
        H_FAIL("get %s: %s (%s)", key, bw_strerror(rc), e.message);
        return -3;
    }
    return o.present ? o.seen : -2;
}

/* Write value into key's entry of len bytes (>= 16): bw_store_update's status. */
static inline int entry_put(bw_store *s, const char *key, int64_t value, uint32_t len, int64_t expires_at, bw_error *e)
{
    entry_op o = {BW_STORE_PUT, value, len, expires_at, 0, 0};
    return bw_store_update(s, key, entry_op_fn, &o, e);
}

static inline int entry_del(bw_store *s, const char *key)
{
    entry_op o = {BW_STORE_DELETE, 0, 0, 0, 0, 0};
    return bw_store_update(s, key, entry_op_fn, &o, NULL);
}

/* Add one to the entry's value (absent: 0), as a 64-byte entry that never expires; a torn one is left as it is. */
static inline bw_store_verdict entry_incr(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)arg;
    (void)now;
    int64_t v = cur ? entry_value(cur) : 0;
    if (v < 0)
        return BW_STORE_KEEP; /* torn: the check of the total catches it */
    entry_fill(next, v + 1, 64, BW_STORE_NEVER);
    return BW_STORE_PUT;
}

#endif
