/*
 * url.c — store URLs: scheme ":" path ["?" key "=" value {"&" key "=" value}],
 * and their options in the configuration text's syntax (backend.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/duration.h"
#include "store/backend.h"

int bw__url_parse(const char *url, bw__url *u, bw_error *err)
{
    memset(u, 0, sizeof *u);
    const char *colon = strchr(url, ':');
    if (!colon || colon == url)
        return bw__fail(err, BW_EINVAL, "url", "store URL must look like scheme:path, got '%.100s'", url);
    size_t n = (size_t)(colon - url);
    if (n >= sizeof u->scheme)
        return bw__fail(err, BW_EINVAL, "scheme", "unknown store scheme '%.*s'", (int)(n < 40 ? n : 40), url);
    memcpy(u->scheme, url, n);
    const char *p = colon + 1;
    const char *q = strchr(p, '?');
    size_t plen = q ? (size_t)(q - p) : strlen(p);
    if (plen >= sizeof u->path)
        return bw__fail(err, BW_EINVAL, "path", "store path is too long (%zu bytes, at most %zu)", plen,
                        sizeof u->path - 1);
    memcpy(u->path, p, plen);
    while (q) {
        const char *k = q + 1;
        q = strchr(k, '&');
        size_t len = q ? (size_t)(q - k) : strlen(k);
        const char *eq = memchr(k, '=', len);
        if (!eq || eq == k)
            return bw__fail(err, BW_EINVAL, "url", "store option must be key=value, got '%.*s'",
                            (int)(len < 60 ? len : 60), k);
        size_t kl = (size_t)(eq - k), vl = len - kl - 1;
        if (u->nopts == BW__URL_MAX_OPTS)
            return bw__fail(err, BW_EINVAL, "url", "at most %d store options", BW__URL_MAX_OPTS);
        if (kl >= sizeof u->opt[0].key || vl >= sizeof u->opt[0].value)
            return bw__fail(err, BW_EINVAL, "url", "store option '%.*s' is too long", (int)(kl < 32 ? kl : 32), k);
        for (int i = 0; i < u->nopts; i++)
            if (strlen(u->opt[i].key) == kl && memcmp(u->opt[i].key, k, kl) == 0)
                return bw__fail(err, BW_EINVAL, u->opt[i].key, "store option '%s' is given twice", u->opt[i].key);
        memcpy(u->opt[u->nopts].key, k, kl);
        memcpy(u->opt[u->nopts].value, eq + 1, vl);
        u->nopts++;
    }
    return BW_OK;
}

const char *bw__url_opt(const bw__url *u, const char *key)
{
    for (int i = 0; i < u->nopts; i++)
        if (strcmp(u->opt[i].key, key) == 0)
            return u->opt[i].value;
    return NULL;
}

int bw__url_int(const bw__url *u, const char *key, int64_t lo, int64_t hi, int64_t dflt, int duration, int64_t *out,
                bw_error *err)
{
    const char *v = bw__url_opt(u, key);
    if (!v) {
        *out = dflt;
        return BW_OK;
    }
    int64_t x = 0;
    /* The configuration text's rules: no spaces, exact durations, overflow reported as such. */
    int bad = duration ? bw__parse_duration(v, &x) : bw__parse_int(v, &x);
    if (bad == 1)
        return bw__fail(err, BW_EINVAL, key,
                        "%s must be a whole number in [%" PRId64 ", %" PRId64 "], got '%.60s' (too large)", key, lo, hi,
                        v);
    if (bad || x < lo || x > hi) {
        if (!duration)
            return bw__fail(err, BW_EINVAL, key, "%s must be a whole number in [%" PRId64 ", %" PRId64 "], got '%.60s'",
                            key, lo, hi, v);
        char a[32], b[32];
        bw__fmt_duration(a, sizeof a, lo, "off");
        bw__fmt_duration(b, sizeof b, hi, "off");
        return bw__fail(err, BW_EINVAL, key, "%s must be a duration in [%s, %s], got '%.60s'", key, a, b, v);
    }
    *out = x;
    return BW_OK;
}
