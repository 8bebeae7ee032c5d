/*
 * curl.c — libcurl with a circuit per host (breakwater/curl.h), on the public
 * API only.
 *
 * Design notes
 * - One mechanism for the easy interface: a pipeline strategy, the "circuit
 *   layer", acquires the host's circuit, runs the transfer (the innermost call),
 *   classifies and settles. bw_curl_perform runs it through the user's
 *   pipeline (bw_curl_set_pipeline appends the layer as its innermost) or
 *   through an empty pipeline of c's own, so a request with and without outer
 *   layers goes through the same code. The multi interface cannot run inside a
 *   pipeline (the transfer ends later, on another call): it uses the same
 *   admit and settle helpers around curl_multi_add_handle and CURLMSG_DONE.
 * - The circuit name: CURLINFO_EFFECTIVE_URL (before a transfer it is the URL
 *   set) parsed by curl's URL API, the host lowercased, brackets stripped,
 *   then the resolver. Parsing allocates and costs about a microsecond, so a
 *   small per-thread cache maps the last URLs seen (by c, whose serial tells
 *   a freed and reallocated bw_curl apart) to their names: a request to a URL
 *   seen before (the common case, and every rejected retry) costs a hash and
 *   a compare.
 * - Multi transfers in flight: a table keyed by the easy handle (linear
 *   probing, grown at half full, deleted by backward shift) under c->mu, held
 *   only for the table's own work; settles run after it is released.
 * - Retry-After is read with curl_easy_header (libcurl 7.83; older builds use
 *   CURLINFO_RETRY_AFTER, which gives whole seconds) and parsed by
 *   bw_http_parse_retry_after, counted from the wall clock at the transfer's
 *   end.
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/hash.h"
#include "breakwater/curl.h"
#include "breakwater/http.h"
#include "breakwater/keyed.h"

#define NAME_MAX_ 255     /* a breaker name or key */
#define CACHE_WAYS 16     /* URLs remembered per thread */
#define CACHE_URL_MAX 240 /* longer URLs are parsed every time */
#define RA_CAP_DEFAULT (60 * BW_NS_PER_S)
#define STATUS_BITS 640

typedef struct held {
    bw_breaker *b; /* the breaker the permit settles on (a registry's, or the keyed parent) */
    bw_permit permit;
} held;

/* A multi transfer in flight. */
typedef struct record {
    CURL *easy; /* NULL: free */
    held h;
    int attempts;
    char name[NAME_MAX_ + 1];
} record;

struct bw_curl {
    bw_registry *reg;
    bw_breaker *keyed;
    uint64_t serial;
    bw_curl_resolver_fn resolve;
    void *resolve_user;
    bw_curl_classify_fn classify;
    void *classify_user;
    uint64_t failing[STATUS_BITS / 64];
    int64_t ra_cap;
    int64_t open_max; /* bw_curl_set_open_on_retry_after; 0: off */
    int64_t timeout;  /* bw_curl_set_timeout; 0: none */
    bw_pipeline *own; /* the empty pipeline of bw_curl_perform without one given */
    bw_pipeline *p;   /* the pipeline perform runs: own, or the user's */
    pthread_mutex_t mu;
    record *tab;
    size_t cap, used;
};

static _Atomic uint64_t serials;

/* ---- names ---- */

typedef struct url_cache {
    uint64_t serial, hash;
    char url[CACHE_URL_MAX + 1];
    char name[NAME_MAX_ + 1];
} url_cache;

static _Thread_local url_cache cache[CACHE_WAYS];

/* The host of url, lowercased and without brackets, into host (NAME_MAX_ + 1 bytes). */
static int host_of(const char *url, char *host)
{
    CURLU *u = curl_url();
    if (!u)
        return BW_ENOMEM;
    int rc = BW_EINVAL;
    char *h = NULL;
    unsigned get = 0;
#ifdef CURLU_PUNYCODE
    get |= CURLU_PUNYCODE;
#endif
    if (curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &h, get) == CURLUE_OK && h) {
        size_t n = strlen(h);
        const char *p = h;
        if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
            p++;
            n -= 2;
        }
        if (n >= 2 && p[n - 1] == '.')
            n--; /* "example.com." is "example.com" */
        if (n >= 1 && n <= NAME_MAX_) {
            for (size_t i = 0; i < n; i++)
                host[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] - 'A' + 'a' : p[i]);
            host[n] = '\0';
            rc = BW_OK;
        }
    }
    curl_free(h);
    curl_url_cleanup(u);
    return rc;
}

/* The circuit name of easy's URL into name (NAME_MAX_ + 1 bytes). */
static int circuit_of(bw_curl *c, CURL *easy, char *name)
{
    name[0] = '\0';
    char *url = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK || !url || !*url)
        return BW_EINVAL;
    size_t len = strlen(url);
    url_cache *slot = NULL;
    uint64_t h = 0;
    if (len <= CACHE_URL_MAX) {
        h = bw__hash(c->serial, url, len);
        slot = &cache[h % CACHE_WAYS];
        if (slot->serial == c->serial && slot->hash == h && strcmp(slot->url, url) == 0) {
            memcpy(name, slot->name, strlen(slot->name) + 1);
            return BW_OK;
        }
    }
    char host[NAME_MAX_ + 1];
    int rc = host_of(url, host);
    if (rc != BW_OK)
        return rc;
    if (c->resolve) {
        char out[NAME_MAX_ + 1];
        out[0] = '\0';
        if (c->resolve(host, out, sizeof out, c->resolve_user) != 0)
            return BW_EINVAL;
        out[NAME_MAX_] = '\0';
        memcpy(host, out, sizeof out);
    }
    if (!host[0])
        return BW_EINVAL;
    memcpy(name, host, strlen(host) + 1);
    if (slot) {
        slot->serial = c->serial;
        slot->hash = h;
        memcpy(slot->url, url, len + 1);
        memcpy(slot->name, name, strlen(name) + 1);
    }
    return BW_OK;
}

/* ---- admission and settlement ---- */

static int admit(bw_curl *c, const char *name, held *h, bw_rejection *why)
{
    if (c->reg) {
        int rc = bw_registry_get(c->reg, name, NULL, &h->b, NULL);
        if (rc != BW_OK)
            return rc;
        return bw_acquire(h->b, &h->permit, why);
    }
    h->b = c->keyed;
    return bw_keyed_acquire(c->keyed, name, &h->permit, why);
}

static int status_failing(const bw_curl *c, long s)
{
    return s >= 0 && s < STATUS_BITS && (c->failing[s / 64] >> (s % 64) & 1);
}

bw_outcome bw_curl_classify(const bw_curl *c, CURLcode code, long http_status, int *timed_out)
{
    int to = 0;
    bw_outcome o = BW_SUCCESS;
    int mine = -1;
    if (c && c->classify)
        mine = c->classify(code, http_status, &to, c->classify_user);
    if (mine >= BW_SUCCESS && mine <= BW_UNREACHABLE) {
        o = (bw_outcome)mine;
    } else {
        to = 0;
        switch (code) {
        case CURLE_OK:
            o = c && status_failing(c, http_status) ? BW_FAILURE : BW_SUCCESS;
            break;
        case CURLE_OPERATION_TIMEDOUT:
            o = BW_FAILURE;
            to = 1;
            break;
        case CURLE_HTTP_RETURNED_ERROR: /* CURLOPT_FAILONERROR: a status >= 400 arrived; the status set decides */
            o = c && status_failing(c, http_status) ? BW_FAILURE : BW_SUCCESS;
            break;
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_NOT_BUILT_IN:
        case CURLE_BAD_FUNCTION_ARGUMENT:
        case CURLE_UNKNOWN_OPTION:
        case CURLE_FAILED_INIT:
        case CURLE_OUT_OF_MEMORY:
        case CURLE_ABORTED_BY_CALLBACK:
        case CURLE_WRITE_ERROR:
        case CURLE_READ_ERROR:
        case CURLE_FILESIZE_EXCEEDED:
        case CURLE_TOO_MANY_REDIRECTS:
        case CURLE_LOGIN_DENIED:
            o = BW_IGNORED; /* the caller's mistake: nothing learned of the host */
            break;
        default:
            o = BW_FAILURE;
            break;
        }
    }
    if (timed_out)
        *timed_out = to;
    return o;
}

/* Wall-clock ns, for a Retry-After date. */
static int64_t unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * BW_NS_PER_S + ts.tv_nsec;
}

/* What a finished transfer says: its status, Retry-After and outcome, into res. */
static void finish(const bw_curl *c, CURL *easy, CURLcode code, bw_curl_result *res)
{
    res->code = code;
    res->http_status = 0;
    res->retry_after_ns = BW_NO_TIME;
    long st = 0;
    if (curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &st) == CURLE_OK)
        res->http_status = st;
#if LIBCURL_VERSION_NUM >= 0x075300
    struct curl_header *hd = NULL;
    long st3 = res->http_status;
    /* RFC 9110 10.2.3: Retry-After means something on a 503, a 429 and a redirect; a 200 is not looked at. */
    if ((st3 == 503 || st3 == 429 || (st3 >= 300 && st3 < 400)) &&
        curl_easy_header(easy, "Retry-After", 0, CURLH_HEADER, -1, &hd) == CURLHE_OK && hd && hd->value) {
        int64_t d;
        if (bw_http_parse_retry_after(hd->value, strlen(hd->value), unix_ns(), &d) == BW_OK)
            res->retry_after_ns = d;
    }
#else
    curl_off_t ra = -1;
    if (curl_easy_getinfo(easy, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
        res->retry_after_ns = ra > BW_HTTP_RETRY_AFTER_MAX / BW_NS_PER_S ? BW_HTTP_RETRY_AFTER_MAX : ra * BW_NS_PER_S;
#endif
    res->outcome = bw_curl_classify(c, code, res->http_status, &res->timed_out);
}

/* The failure code a settle records, and the call's rc the pipeline's layers see: see bw_curl_set_pipeline. */
static int code_of(const bw_curl_result *res)
{
    if (res->outcome != BW_FAILURE && res->outcome != BW_UNREACHABLE && !res->timed_out)
        return 0;
    return res->code == CURLE_OK && res->http_status ? (int)res->http_status : 1000 + (int)res->code;
}

/*
 * A 429 or 503 that said when to come back opens the host's circuit for that
 * long (bw_curl_set_open_on_retry_after), after its outcome was settled.
 */
static void open_after(const bw_curl *c, const held *h, const char *name, const bw_curl_result *res)
{
    if (!c->open_max || res->retry_after_ns <= 0 || (res->http_status != 429 && res->http_status != 503))
        return;
    int64_t ns = res->retry_after_ns < c->open_max ? res->retry_after_ns : c->open_max;
    if (c->reg) {
        bw_breaker_open_for(h->b, ns);
        return;
    }
    bw_breaker *circuit = bw_keyed_find(c->keyed, name);
    if (circuit) {
        bw_breaker_open_for(circuit, ns);
        bw_keyed_release(circuit);
    }
}

static void settle(held *h, const bw_curl_result *res)
{
    char msg[BW_FAILURE_MESSAGE_MAX];
    int fc = code_of(res);
    if (res->timed_out) {
        bw_settle_timeout(h->b, &h->permit, fc);
        return;
    }
    if (!fc) { /* not a failure: the breaker's quick settle, no message to format */
        bw_settle(h->b, &h->permit, res->outcome);
        return;
    }
    if (res->code != CURLE_OK)
        snprintf(msg, sizeof msg, "curl: %s", curl_easy_strerror(res->code));
    else
        snprintf(msg, sizeof msg, "HTTP %ld", res->http_status);
    bw_settle_msg(h->b, &h->permit, res->outcome, fc, msg);
}

static void result_init(bw_curl_result *res)
{
    memset(res, 0, sizeof *res);
    res->code = CURLE_OK;
    res->outcome = BW_IGNORED;
    res->retry_after_ns = BW_NO_TIME;
    res->rejection.retry_after_ns = BW_NO_TIME;
}

/* ---- the easy interface: the circuit layer and the transfer ---- */

#define JOB_MAGIC 0x6a6f6263u /* "jobc": bw_ctx_arg is one of ours */

typedef struct job {
    uint32_t magic;
    bw_curl *c;
    CURL *easy;
    bw_curl_result *res;
    held h;
} job;

/* The innermost call: the transfer, bounded by the deadline. */
static int transfer(bw_ctx *ctx, void *arg)
{
    job *j = arg;
    bw_curl_result *res = j->res;
    int64_t left = bw_ctx_remaining_ns(ctx);
    if (j->c->timeout > 0 && (left == BW_NO_TIME || left > j->c->timeout))
        left = j->c->timeout;
    CURLcode code;
    if (left == 0) {
        code = CURLE_OPERATION_TIMEDOUT; /* the deadline passed before the transfer: no I/O */
    } else {
        if (left != BW_NO_TIME) {
            int64_t ms = left / BW_NS_PER_MS + (left % BW_NS_PER_MS != 0); /* up, and so never 0 ("none") */
            curl_easy_setopt(j->easy, CURLOPT_TIMEOUT_MS, (long)(ms > LONG_MAX ? LONG_MAX : ms));
        }
        code = curl_easy_perform(j->easy);
    }
    finish(j->c, j->easy, code, res);
    if (res->retry_after_ns != BW_NO_TIME && j->c->ra_cap > 0)
        bw_ctx_set_retry_after(ctx, res->retry_after_ns < j->c->ra_cap ? res->retry_after_ns : j->c->ra_cap);
    return code_of(res);
}

/* The circuit layer: acquire the host's circuit, run the transfer, settle. */
static int layer_exec(void *state, bw_ctx *ctx)
{
    job *j = bw_ctx_arg(ctx);
    if (!j || j->magic != JOB_MAGIC || j->c != state)
        return bw_ctx_next(ctx); /* the pipeline run by something else than bw_curl_perform: not a transfer of ours */
    bw_curl_result *res = j->res;
    res->attempts++;
    res->code = CURLE_OK;
    res->http_status = 0;
    res->timed_out = 0;
    res->outcome = BW_IGNORED;
    res->retry_after_ns = BW_NO_TIME;
    int rc = admit(j->c, bw_ctx_key(ctx), &j->h, &res->rejection);
    if (rc == BW_REJECTED) {
        bw_ctx_set_rejection(ctx, &res->rejection);
        return BW_REJECTED;
    }
    if (rc != BW_OK)
        return rc;
    int status = bw_ctx_next(ctx);
    settle(&j->h, res);
    open_after(j->c, &j->h, res->circuit, res);
    return res->timed_out ? BW_ETIMEDOUT : status;
}

static const bw_strategy circuit_layer = {BW_STRATEGY_VERSION, "curl", layer_exec, NULL};

int bw_curl_perform(bw_curl *c, CURL *easy, bw_curl_result *res)
{
    bw_curl_result local;
    if (!res)
        res = &local;
    result_init(res);
    if (!c || !easy)
        return res->status = BW_EINVAL;
    int rc = circuit_of(c, easy, res->circuit);
    if (rc != BW_OK)
        return res->status = rc;
    job j = {JOB_MAGIC, c, easy, res, {NULL, {0}}};
    int call_rc = 0;
    rc = bw_pipeline_execute_key(c->p, res->circuit, transfer, &j, &call_rc, NULL);
    return res->status = rc;
}

/* ---- the multi interface ---- */

static size_t slot_of(const bw_curl *c, const CURL *easy)
{
    return (size_t)(bw__mix64((uint64_t)(uintptr_t)easy) & (c->cap - 1));
}

/* The record of easy, or NULL. mu held. */
static record *find(bw_curl *c, const CURL *easy)
{
    if (!c->tab)
        return NULL;
    for (size_t i = slot_of(c, easy);; i = (i + 1) & (c->cap - 1)) {
        if (c->tab[i].easy == easy)
            return &c->tab[i];
        if (!c->tab[i].easy)
            return NULL;
    }
}

/* Take r out of the table (backward-shift deletion keeps every probe chain whole). mu held. */
static void take(bw_curl *c, record *r)
{
    size_t i = (size_t)(r - c->tab), mask = c->cap - 1;
    c->tab[i].easy = NULL;
    c->used--;
    for (size_t j = (i + 1) & mask; c->tab[j].easy; j = (j + 1) & mask) {
        size_t home = slot_of(c, c->tab[j].easy);
        /* Move j back to the hole at i when its home is not in (i, j]. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            c->tab[i] = c->tab[j];
            c->tab[j].easy = NULL;
            i = j;
        }
    }
}

/* A free record for easy (the table grown at half full), or NULL when out of memory. mu held. */
static record *put(bw_curl *c, CURL *easy)
{
    if ((c->used + 1) * 2 > c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 64;
        record *nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return NULL;
        record *old = c->tab;
        size_t ocap = c->cap;
        c->tab = nt;
        c->cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].easy) {
                size_t k = slot_of(c, old[i].easy);
                while (c->tab[k].easy)
                    k = (k + 1) & (ncap - 1);
                c->tab[k] = old[i];
            }
        free(old);
    }
    size_t k = slot_of(c, easy);
    while (c->tab[k].easy)
        k = (k + 1) & (c->cap - 1);
    c->tab[k].easy = easy;
    c->used++;
    return &c->tab[k];
}

int bw_curl_multi_add(bw_curl *c, CURLM *multi, CURL *easy, bw_curl_result *res)
{
    bw_curl_result local;
    if (!res)
        res = &local;
    result_init(res);
    if (!c || !multi || !easy)
        return res->status = BW_EINVAL;
    int rc = circuit_of(c, easy, res->circuit);
    if (rc != BW_OK)
        return res->status = rc;
    held h;
    res->attempts = 1;
    rc = admit(c, res->circuit, &h, &res->rejection);
    if (rc == BW_OK && c->timeout > 0) {
        int64_t ms = c->timeout / BW_NS_PER_MS + (c->timeout % BW_NS_PER_MS != 0);
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)(ms > LONG_MAX ? LONG_MAX : ms));
    }
    if (rc != BW_OK)
        return res->status = rc; /* BW_REJECTED: not added, nothing sent */
    pthread_mutex_lock(&c->mu);
    int dup = find(c, easy) != NULL;
    record *r = dup ? NULL : put(c, easy);
    if (r) {
        r->h = h;
        r->attempts = 1;
        memcpy(r->name, res->circuit, sizeof r->name);
    }
    pthread_mutex_unlock(&c->mu);
    if (!r) {
        bw_settle(h.b, &h.permit, BW_IGNORED); /* nothing ran */
        return res->status = dup ? BW_EINVAL : BW_ENOMEM;
    }
    if (curl_multi_add_handle(multi, easy) != CURLM_OK) {
        pthread_mutex_lock(&c->mu);
        record *again = find(c, easy);
        if (again)
            take(c, again);
        pthread_mutex_unlock(&c->mu);
        bw_settle(h.b, &h.permit, BW_IGNORED);
        return res->status = BW_ESYS;
    }
    return res->status = BW_OK;
}

/* Take easy's record out into *out. Returns 1 when c held it. */
static int claim(bw_curl *c, CURL *easy, record *out)
{
    pthread_mutex_lock(&c->mu);
    record *r = find(c, easy);
    if (r) {
        *out = *r;
        take(c, r);
    }
    pthread_mutex_unlock(&c->mu);
    return r != NULL;
}

int bw_curl_multi_done(bw_curl *c, const CURLMsg *msg, bw_curl_result *res)
{
    bw_curl_result local;
    if (!res)
        res = &local;
    result_init(res);
    record r;
    if (!c || !msg || msg->msg != CURLMSG_DONE || !claim(c, msg->easy_handle, &r))
        return res->status = BW_EINVAL;
    memcpy(res->circuit, r.name, sizeof res->circuit);
    res->attempts = r.attempts;
    finish(c, msg->easy_handle, msg->data.result, res);
    settle(&r.h, res);
    open_after(c, &r.h, r.name, res);
    return res->status = res->timed_out ? BW_ETIMEDOUT : BW_OK;
}

int bw_curl_multi_abandon(bw_curl *c, CURL *easy)
{
    record r;
    if (!c || !easy || !claim(c, easy, &r))
        return BW_EINVAL;
    bw_settle(r.h.b, &r.h.permit, BW_IGNORED);
    return BW_OK;
}

/* ---- making and setting ---- */

int bw_curl_new(bw_registry *registry, bw_breaker *keyed, bw_curl **out, bw_error *err)
{
    if (!out)
        return bw__fail(err, BW_EINVAL, "out", "out must not be NULL");
    *out = NULL;
    if (!registry == !keyed)
        return bw__fail(err, BW_EINVAL, registry ? "keyed" : "registry",
                        "give exactly one source of circuits: a registry or a keyed breaker");
    bw_curl *c = calloc(1, sizeof *c);
    if (!c)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    c->reg = registry;
    c->keyed = keyed;
    c->serial = atomic_fetch_add(&serials, 1) + 1;
    c->ra_cap = RA_CAP_DEFAULT;
    static const int dflt[] = {429, 500, 502, 503, 504};
    for (size_t i = 0; i < sizeof dflt / sizeof dflt[0]; i++)
        c->failing[dflt[i] / 64] |= UINT64_C(1) << (dflt[i] % 64);
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return bw__fail(err, BW_ESYS, "", "could not create a mutex");
    }
    int rc = bw_pipeline_new("curl", &c->own, err);
    if (rc == BW_OK)
        rc = bw_pipeline_add(c->own, &circuit_layer, c, err);
    if (rc != BW_OK) {
        bw_pipeline_free(c->own);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return rc;
    }
    c->p = c->own;
    *out = c;
    return BW_OK;
}

void bw_curl_free(bw_curl *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++)
        if (c->tab[i].easy)
            bw_settle(c->tab[i].h.b, &c->tab[i].h.permit, BW_IGNORED);
    free(c->tab);
    bw_pipeline_free(c->own);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int bw_curl_set_resolver(bw_curl *c, bw_curl_resolver_fn fn, void *user)
{
    if (!c)
        return BW_EINVAL;
    c->resolve = fn;
    c->resolve_user = user;
    c->serial = atomic_fetch_add(&serials, 1) + 1; /* names cached under the old resolver are not this one's */
    return BW_OK;
}

int bw_curl_set_classifier(bw_curl *c, bw_curl_classify_fn fn, void *user)
{
    if (!c)
        return BW_EINVAL;
    c->classify = fn;
    c->classify_user = user;
    return BW_OK;
}

int bw_curl_set_failure_statuses(bw_curl *c, const int *statuses, size_t n, bw_error *err)
{
    if (!c || (!statuses && n > 0))
        return bw__fail(err, BW_EINVAL, c ? "statuses" : "c", "must not be NULL");
    uint64_t set[STATUS_BITS / 64] = {0};
    for (size_t i = 0; i < n; i++) {
        if (statuses[i] < 100 || statuses[i] > 599)
            return bw__fail(err, BW_ERANGE, "statuses", "statuses[%zu] must be in [100, 599], got %d", i, statuses[i]);
        set[statuses[i] / 64] |= UINT64_C(1) << (statuses[i] % 64);
    }
    memcpy(c->failing, set, sizeof set);
    return BW_OK;
}

int bw_curl_set_retry_after_cap(bw_curl *c, int64_t ns, bw_error *err)
{
    if (!c)
        return bw__fail(err, BW_EINVAL, "c", "must not be NULL");
    if (ns < 0 || ns > BW_HTTP_RETRY_AFTER_MAX)
        return bw__fail(err, BW_ERANGE, "retry_after_cap", "retry_after_cap must be in [0, 365d], got %lld ns",
                        (long long)ns);
    c->ra_cap = ns;
    return BW_OK;
}

int bw_curl_set_open_on_retry_after(bw_curl *c, int64_t max_ns, bw_error *err)
{
    if (!c)
        return bw__fail(err, BW_EINVAL, "c", "must not be NULL");
    if (max_ns < 0 || max_ns > BW_HTTP_RETRY_AFTER_MAX)
        return bw__fail(err, BW_ERANGE, "max", "max must be 0 (off) or in (0, 365d], got %lld ns", (long long)max_ns);
    c->open_max = max_ns;
    return BW_OK;
}

int bw_curl_set_timeout(bw_curl *c, int64_t ns, bw_error *err)
{
    if (!c)
        return bw__fail(err, BW_EINVAL, "c", "must not be NULL");
    if (ns < 0 || ns > BW_HTTP_RETRY_AFTER_MAX)
        return bw__fail(err, BW_ERANGE, "timeout", "timeout must be 0 (none) or in (0, 365d], got %lld ns",
                        (long long)ns);
    c->timeout = ns;
    return BW_OK;
}

int bw_curl_set_pipeline(bw_curl *c, bw_pipeline *p, bw_error *err)
{
    if (!c || !p)
        return bw__fail(err, BW_EINVAL, c ? "p" : "c", "must not be NULL");
    if (c->p != c->own)
        return bw__fail(err, BW_ESTATE, "p", "this bw_curl already runs through a pipeline");
    int n = bw_pipeline_layers(p);
    for (int i = 0; i < n; i++)
        if (bw_pipeline_layer_name(p, i) == circuit_layer.name)
            return bw__fail(err, BW_ESTATE, "p", "that pipeline already has a bw_curl's circuit layer");
    int rc = bw_pipeline_add(p, &circuit_layer, c, err);
    if (rc != BW_OK)
        return rc;
    c->p = p;
    return BW_OK;
}
