/*
 * inspect.c — bw_store_read_circuit (breaker.h): a circuit read from a store by
 * name, without a breaker, for tools (share layer).
 *
 * It reads through the store's lock-free read when it has one and that read
 * answers at once, else through one update whose function copies the entry
 * and keeps it (writes nothing). The entry is decoded on its own terms
 * (share/circuit.c, bw__shared_inspect): it records its policy and window, so
 * no configuration is needed.
 */
#include <string.h>

#include "base/error.h"
#include "base/name.h"
#include "share/circuit.h"
#include "store/front.h"

typedef struct copy_arg {
    int64_t now;
    int found;
    bw_store_entry *out;
} copy_arg;

static bw_store_verdict copy_entry(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)next;
    copy_arg *a = arg;
    a->now = now;
    a->found = cur != NULL;
    if (cur) {
        a->out->expires_at = cur->expires_at;
        a->out->len = cur->len <= BW_STORE_DATA_MAX ? cur->len : BW_STORE_DATA_MAX;
        memcpy(a->out->data, cur->data, a->out->len);
    }
    return BW_STORE_KEEP;
}

int bw_store_read_circuit(bw_store *s, const char *name, bw_store_circuit *out, bw_error *err)
{
    if (!s || !out)
        return bw__fail(err, BW_EINVAL, "", "store and out must not be NULL");
    int rc = bw__check_store_key(name, "name", err);
    if (rc != BW_OK)
        return rc;
    bw_store_entry e;
    int64_t now = 0;
    int found = 0;
    rc = bw__store_try_read(s, name, &now, &e, &found);
    if (rc != BW_OK) { /* no read, a busy one, or one that failed: an update that writes nothing says it */
        copy_arg a = {0, 0, &e};
        rc = bw__store_update(s, name, copy_entry, &a, err);
        if (rc != BW_OK)
            return rc;
        now = a.now;
        found = a.found;
    }
    memset(out, 0, sizeof *out);
    out->snap.retry_after_ns = BW_NO_TIME;
    out->expires_in_ns = BW_NO_TIME;
    if (!found)
        return BW_OK;
    out->found = 1;
    if (e.expires_at != BW_STORE_NEVER)
        out->expires_in_ns = e.expires_at > now ? e.expires_at - now : 0;
    if (bw__shared_inspect(&e, now, out) == 0) {
        bw_state st = out->snap.state;
        out->hold = st == BW_STATE_FORCED_OPEN || st == BW_STATE_DISABLED || st == BW_STATE_METRICS_ONLY;
    }
    return BW_OK;
}
