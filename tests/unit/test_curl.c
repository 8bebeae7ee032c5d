/*
 * test_curl.c — breakwater/curl.h against a real HTTP server on loopback
 * (tests/support/http_server.h) with real libcurl easy and multi handles:
 * circuit names from URLs (lowercased, port dropped, IPv6 without brackets, a
 * resolver, no host refused before any I/O), each classification rule, a
 * rejection that opens no connection (the server counts accepts), Retry-After
 * in both forms, a pipeline whose retry waits the (capped) Retry-After and
 * whose deadline becomes the transfer's timeout, the multi interface with a
 * rejected handle, keyed circuits, and several threads at once.
 * `test_curl STORE_URL` (ctest: test_curl_<scheme>, once per store) runs the
 * circuits on a store instead, on a manual clock: a Retry-After opens the
 * fleet's circuit (stored, coordinated, keyed), so a second member on the
 * same store rejects too.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <pthread.h>

#include "harness.h"
#include "clockfix.h"
#include "http_server.h"
#include "recorder.h"
#include "store_url.h"
#include "timeutil.h"
#include "breakwater/breakwater.h"
#include "breakwater/curl.h"

#define S BW_NS_PER_S
#define MS BW_NS_PER_MS

static http_server srv;

static const char *at(const char *path)
{
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "http://127.0.0.1:%d%s", srv.port, path);
    return buf;
}

static size_t discard(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    (void)user;
    return size * n;
}

static CURL *easy_for(const char *url)
{
    CURL *e = curl_easy_init();
    CHECK(e != NULL);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L); /* no test waits on the network longer */
    return e;
}

/* A registry whose breakers trip on 2 failures of the last 2 calls and wait 30 s. */
static bw_registry *hosts_registry(const char *extra)
{
    bw_config *c = bw_config_new();
    bw_error e;
    char text[256];
    snprintf(text, sizeof text, "window=count:2 min_calls=2 failure_rate=0.5 wait=30s slow_call_duration=1s %s",
             extra ? extra : "");
    if (bw_config_parse(c, text, &e) != BW_OK)
        H_FAIL("config: %s", e.message);
    bw_registry *r = NULL;
    CHECK_OK(bw_registry_new(c, &r, &e));
    bw_config_free(c);
    return r;
}

static bw_counters counters_of(bw_registry *r, const char *name)
{
    bw_counters k;
    memset(&k, 0, sizeof k);
    bw_breaker *b = bw_registry_get_existing(r, name);
    if (!b)
        H_FAIL("no circuit named '%s'", name);
    else
        bw_breaker_counters(b, &k);
    return k;
}

/* ---- names ---- */

static char seen_host[256];

static int remember(const char *host, char *name, size_t size, void *user)
{
    (void)user;
    snprintf(seen_host, sizeof seen_host, "%s", host);
    if (strcmp(host, "refuse.example") == 0)
        return 1;
    snprintf(name, size, "%s", strncmp(host, "shard", 5) == 0 ? "shards" : host);
    return 0;
}

static void test_names(void)
{
    bw_registry *r = hosts_registry(NULL);
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    bw_curl_result res;
    CURL *e = easy_for(at("/ok"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_STR(res.circuit, "127.0.0.1");
    CHECK_INT(res.http_status, 200);
    CHECK_INT(res.outcome, BW_SUCCESS);
    CHECK(bw_registry_get_existing(r, "127.0.0.1") != NULL);
    /* The resolver sees the host lowercased, without port or brackets; it may map several onto one name. */
    CHECK_OK(bw_curl_set_resolver(bc, remember, NULL));
    static const struct {
        const char *url, *host, *name;
    } cases[] = {{"http://API.Example.COM:8080/v1", "api.example.com", "api.example.com"},
                 {"https://[::1]:8443/x", "::1", "::1"},
                 {"http://[FE80::1]/", "fe80::1", "fe80::1"},
                 {"shard-7.internal/orders", "shard-7.internal", "shards"},
                 {"http://user:pw@Host.Test/", "host.test", "host.test"},
                 {"http://Host.Test./x", "host.test", "host.test"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Rejected on purpose: force each name's circuit open first, so that nothing goes out. */
        bw_breaker *b = NULL;
        CHECK_OK(bw_registry_get(r, cases[i].name, NULL, &b, NULL));
        CHECK_OK(bw_breaker_force_open(b));
        curl_easy_setopt(e, CURLOPT_URL, cases[i].url);
        seen_host[0] = '\0';
        CHECK_RC(bw_curl_perform(bc, e, &res), BW_REJECTED);
        CHECK_STR(seen_host, cases[i].host);
        CHECK_STR(res.circuit, cases[i].name);
        CHECK_INT(res.rejection.state, BW_STATE_FORCED_OPEN);
    }
    /* Refused before any I/O: no host, a resolver's no. */
    long a0 = atomic_load(&srv.accepts);
    static const char *const nohost[] = {"file:///etc/hosts", "http://:80/x", ""};
    for (size_t i = 0; i < sizeof nohost / sizeof nohost[0]; i++) {
        curl_easy_setopt(e, CURLOPT_URL, nohost[i]);
        CHECK_RC(bw_curl_perform(bc, e, &res), BW_EINVAL);
        CHECK_STR(res.circuit, "");
    }
    curl_easy_setopt(e, CURLOPT_URL, "http://refuse.example/");
    CHECK_RC(bw_curl_perform(bc, e, &res), BW_EINVAL);
    CHECK_INT(atomic_load(&srv.accepts), a0);
    CHECK_RC(bw_curl_perform(bc, NULL, &res), BW_EINVAL);
    CHECK_RC(bw_curl_perform(NULL, e, &res), BW_EINVAL);
    curl_easy_cleanup(e);
    bw_curl_free(bc);
    bw_registry_free(r);
}

/* ---- classification ---- */

typedef struct rule {
    const char *path;
    long timeout_ms;
    int status; /* bw_curl_perform's */
    bw_outcome outcome;
    int timed_out;
    bw_call_kind kind; /* what the circuit counted */
} rule;

static void test_classification(void)
{
    bw_registry *r = hosts_registry("window=count:100 min_calls=100");
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    const rule rules[] = {
        {"/status/404", 0, BW_OK, BW_SUCCESS, 0, BW_CALL_SUCCESS},
        {"/status/429", 0, BW_OK, BW_FAILURE, 0, BW_CALL_FAILURE},
        {"/status/500", 0, BW_OK, BW_FAILURE, 0, BW_CALL_FAILURE},
        {"/status/501", 0, BW_OK, BW_SUCCESS, 0, BW_CALL_SUCCESS}, /* not in the default set */
        {"/status/502", 0, BW_OK, BW_FAILURE, 0, BW_CALL_FAILURE},
        {"/status/503", 0, BW_OK, BW_FAILURE, 0, BW_CALL_FAILURE},
        {"/status/504", 0, BW_OK, BW_FAILURE, 0, BW_CALL_FAILURE},
        {"/reset", 0, BW_OK, BW_FAILURE, 0, BW_CALL_FAILURE},                   /* nothing received: a failure */
        {"/slow/3000", 200, BW_ETIMEDOUT, BW_FAILURE, 1, BW_CALL_SLOW_FAILURE}, /* curl's timeout: a timeout */
    };
    CURL *first = easy_for(at("/ok"));
    CHECK_OK(bw_curl_perform(bc, first, NULL)); /* makes the circuit */
    CHECK_INT(counters_of(r, "127.0.0.1").calls[BW_CALL_SUCCESS], 1);
    curl_easy_cleanup(first);
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        CURL *e = easy_for(at(rules[i].path));
        if (rules[i].timeout_ms)
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, rules[i].timeout_ms);
        bw_counters k0 = counters_of(r, "127.0.0.1"), k1;
        bw_curl_result res;
        int rc = bw_curl_perform(bc, e, &res);
        k1 = counters_of(r, "127.0.0.1");
        if (rc != rules[i].status || res.outcome != rules[i].outcome || res.timed_out != rules[i].timed_out ||
            k1.calls[rules[i].kind] != k0.calls[rules[i].kind] + 1)
            H_FAIL("%s: status %d outcome %d timed_out %d code %d http %ld (kind %d counted %llu -> %llu)",
                   rules[i].path, rc, res.outcome, res.timed_out, res.code, res.http_status, rules[i].kind,
                   (unsigned long long)k0.calls[rules[i].kind], (unsigned long long)k1.calls[rules[i].kind]);
        curl_easy_cleanup(e);
    }
    /* Connection refused (a port nothing listens on) and an unsupported protocol (the caller's mistake). */
    http_server closed;
    CHECK(http_server_start(&closed) == 0);
    int dead = closed.port;
    http_server_stop(&closed);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok", dead);
    CURL *e = easy_for(url);
    bw_curl_result res;
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.code, CURLE_COULDNT_CONNECT);
    CHECK_INT(res.outcome, BW_FAILURE);
    curl_easy_setopt(e, CURLOPT_URL, "nosuchproto://127.0.0.1/x");
    bw_counters k0 = counters_of(r, "127.0.0.1");
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.code, CURLE_UNSUPPORTED_PROTOCOL);
    CHECK_INT(res.outcome, BW_IGNORED);
    CHECK_INT(counters_of(r, "127.0.0.1").calls[BW_CALL_IGNORED], k0.calls[BW_CALL_IGNORED] + 1);
    /* A status set replaces the default one. */
    const int mine[] = {404};
    CHECK_OK(bw_curl_set_failure_statuses(bc, mine, 1, NULL));
    CHECK_INT(bw_curl_classify(bc, CURLE_OK, 404, NULL), BW_FAILURE);
    CHECK_INT(bw_curl_classify(bc, CURLE_OK, 503, NULL), BW_SUCCESS);
    const int bad[] = {99};
    bw_error err;
    CHECK_RC(bw_curl_set_failure_statuses(bc, bad, 1, &err), BW_ERANGE);
    CHECK_STR(err.field, "statuses");
    CHECK_RC(bw_curl_set_failure_statuses(bc, NULL, 1, NULL), BW_EINVAL);
    CHECK_OK(bw_curl_set_failure_statuses(bc, NULL, 0, NULL)); /* none */
    CHECK_INT(bw_curl_classify(bc, CURLE_OK, 404, NULL), BW_SUCCESS);
    int to = 0;
    CHECK_INT(bw_curl_classify(bc, CURLE_OPERATION_TIMEDOUT, 0, &to), BW_FAILURE);
    CHECK_INT(to, 1);
    CHECK_INT(bw_curl_classify(bc, CURLE_COULDNT_RESOLVE_HOST, 0, &to), BW_FAILURE);
    CHECK_INT(to, 0);
    CHECK_INT(bw_curl_classify(bc, CURLE_SSL_CONNECT_ERROR, 0, NULL), BW_FAILURE);
    CHECK_INT(bw_curl_classify(bc, CURLE_URL_MALFORMAT, 0, NULL), BW_IGNORED);
    curl_easy_cleanup(e);
    bw_curl_free(bc);
    bw_registry_free(r);
}

/* ---- a rejection sends nothing ---- */

static void test_rejection_opens_no_connection(void)
{
    bw_registry *r = hosts_registry(NULL);
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    CURL *e = easy_for(at("/status/503"));
    bw_curl_result res;
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_OK(bw_curl_perform(bc, e, &res)); /* 2 of 2 failed: OPEN */
    CHECK_INT(bw_breaker_state(bw_registry_get_existing(r, "127.0.0.1")), BW_STATE_OPEN);
    curl_easy_cleanup(e); /* its connection is closed: a new handle would have to open one */
    long a0 = atomic_load(&srv.accepts), q0 = atomic_load(&srv.requests);
    for (int i = 0; i < 50; i++) {
        e = easy_for(at("/ok"));
        CHECK_RC(bw_curl_perform(bc, e, &res), BW_REJECTED);
        curl_easy_cleanup(e);
    }
    CHECK_INT(atomic_load(&srv.accepts), a0);
    CHECK_INT(atomic_load(&srv.requests), q0);
    CHECK_INT(res.status, BW_REJECTED);
    CHECK_INT(res.rejection.state, BW_STATE_OPEN);
    CHECK(res.rejection.retry_after_ns > 0 && res.rejection.retry_after_ns <= 30 * S);
    CHECK_INT(res.code, CURLE_OK);
    CHECK_INT(res.attempts, 1);
    bw_counters k = counters_of(r, "127.0.0.1");
    CHECK_INT(k.rejected[BW_STATE_OPEN], 50);
    CHECK_INT(k.last_failure_code, 503);
    CHECK_STR(k.last_failure_message, "HTTP 503");
    bw_curl_free(bc);
    bw_registry_free(r);
}

/* ---- Retry-After, pipelines, deadlines ---- */

static int64_t slept[8];
static int nslept;

static void fake_sleep(int64_t ns, void *user)
{
    (void)user;
    if (nslept < 8)
        slept[nslept] = ns;
    nslept++;
}

static void test_retry_after_and_pipeline(void)
{
    bw_registry *r = hosts_registry("window=count:100 min_calls=100");
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    bw_curl_result res;
    /* Both forms, reported uncapped. */
    CURL *e = easy_for(at("/status/503?ra=7"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.retry_after_ns, 7 * S);
    curl_easy_setopt(e, CURLOPT_URL, at("/status/429?ra=date+5"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK(res.retry_after_ns > 3 * S && res.retry_after_ns <= 5 * S);
    curl_easy_setopt(e, CURLOPT_URL, at("/status/503?ra=soon"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.retry_after_ns, BW_NO_TIME); /* unparseable: none */
    /* Under a pipeline: the retry waits the Retry-After, capped. */
    bw_retry *rt = NULL;
    CHECK_OK(bw_retry_new(&rt));
    CHECK_OK(bw_retry_set_attempts(rt, 3, NULL));
    CHECK_OK(bw_retry_set_backoff(rt, BW_BACKOFF_CONSTANT, 10 * MS, 1, 10 * MS, NULL));
    CHECK_OK(bw_retry_set_jitter(rt, BW_JITTER_NONE, NULL));
    CHECK_OK(bw_retry_set_sleeper(rt, fake_sleep, NULL));
    bw_pipeline *p = NULL;
    CHECK_OK(bw_pipeline_new("api", &p, NULL));
    CHECK_OK(bw_pipeline_add_retry(p, rt, NULL));
    CHECK_OK(bw_pipeline_add_timeout(p, 10 * S, NULL, NULL));
    CHECK_OK(bw_curl_set_retry_after_cap(bc, 2 * S, NULL));
    CHECK_OK(bw_curl_set_pipeline(bc, p, NULL));
    CHECK_RC(bw_curl_set_pipeline(bc, p, NULL), BW_ESTATE);
    nslept = 0;
    curl_easy_setopt(e, CURLOPT_URL, at("/status/503?ra=7"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.attempts, 3);
    CHECK_INT(nslept, 2);
    CHECK_INT(slept[0], 2 * S); /* 7 s asked, capped at 2 s */
    CHECK_INT(slept[1], 2 * S);
    CHECK_INT(res.http_status, 503);
    /* No Retry-After: the policy's own backoff. */
    nslept = 0;
    curl_easy_setopt(e, CURLOPT_URL, at("/status/502"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(nslept, 2);
    CHECK_INT(slept[0], 10 * MS);
    /* A success ends it. */
    nslept = 0;
    curl_easy_setopt(e, CURLOPT_URL, at("/ok"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.attempts, 1);
    CHECK_INT(nslept, 0);
    curl_easy_cleanup(e);
    bw_curl_free(bc);
    bw_pipeline_free(p);
    bw_retry_free(rt);
    bw_registry_free(r);
}

static void test_deadline_is_the_timeout(void)
{
    bw_registry *r = hosts_registry("window=count:100 min_calls=100");
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    bw_pipeline *p = NULL;
    CHECK_OK(bw_pipeline_new("api", &p, NULL));
    CHECK_OK(bw_pipeline_add_timeout(p, 150 * MS, NULL, NULL));
    CHECK_OK(bw_curl_set_pipeline(bc, p, NULL));
    CURL *e = easy_for(at("/slow/3000")); /* its own timeout is 5 s: the deadline's 150 ms wins */
    bw_curl_result res;
    int64_t t0 = mono_ns();
    CHECK_RC(bw_curl_perform(bc, e, &res), BW_ETIMEDOUT);
    int64_t took = mono_ns() - t0;
    CHECK(took >= 140 * MS && took < 2 * S);
    CHECK_INT(res.timed_out, 1);
    CHECK_INT(res.code, CURLE_OPERATION_TIMEDOUT);
    bw_counters k = counters_of(r, "127.0.0.1");
    CHECK_INT(k.calls[BW_CALL_SLOW_FAILURE], 1); /* a timeout, not a plain failure */
    CHECK_INT(k.calls[BW_CALL_FAILURE], 0);
    curl_easy_setopt(e, CURLOPT_URL, at("/slow/20"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.http_status, 200);
    curl_easy_cleanup(e);
    bw_curl_free(bc);
    bw_pipeline_free(p);
    bw_registry_free(r);
}

/* A 429/503 with Retry-After opens the host's circuit for that long (capped); other statuses do not. */
static void test_open_on_retry_after(void)
{
    bw_registry *r = hosts_registry("window=count:100 min_calls=100");
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    bw_curl_result res;
    CURL *e = easy_for(at("/status/503?ra=5"));
    CHECK_OK(bw_curl_perform(bc, e, &res)); /* off by default */
    CHECK_INT(bw_breaker_state(bw_registry_get_existing(r, "127.0.0.1")), BW_STATE_CLOSED);
    CHECK_OK(bw_curl_set_open_on_retry_after(bc, 10 * S, NULL));
    curl_easy_setopt(e, CURLOPT_URL, at("/status/500?ra=5")); /* not a 429 or 503 */
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(bw_breaker_state(bw_registry_get_existing(r, "127.0.0.1")), BW_STATE_CLOSED);
    curl_easy_setopt(e, CURLOPT_URL, at("/status/503?ra=5"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    bw_breaker *b = bw_registry_get_existing(r, "127.0.0.1");
    CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
    bw_counters k;
    CHECK_OK(bw_breaker_counters(b, &k));
    CHECK_INT(k.reason, BW_REASON_RETRY_AFTER);
    long a0 = atomic_load(&srv.accepts), q0 = atomic_load(&srv.requests);
    curl_easy_setopt(e, CURLOPT_URL, at("/ok"));
    CHECK_RC(bw_curl_perform(bc, e, &res), BW_REJECTED);
    CHECK(res.rejection.retry_after_ns > 4 * S && res.rejection.retry_after_ns <= 5 * S);
    CHECK_INT(atomic_load(&srv.requests), q0);
    CHECK_INT(atomic_load(&srv.accepts), a0);
    /* Capped: 100 s asked, 10 s at most (another host's circuit: localhost). */
    char url[128];
    snprintf(url, sizeof url, "http://localhost:%d/status/429?ra=100", srv.port);
    curl_easy_setopt(e, CURLOPT_URL, url);
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.retry_after_ns, 100 * S);
    snprintf(url, sizeof url, "http://localhost:%d/ok", srv.port);
    curl_easy_setopt(e, CURLOPT_URL, url);
    CHECK_RC(bw_curl_perform(bc, e, &res), BW_REJECTED);
    CHECK(res.rejection.retry_after_ns > 9 * S && res.rejection.retry_after_ns <= 10 * S);
    CHECK_RC(bw_curl_set_open_on_retry_after(bc, -1, NULL), BW_ERANGE);
    curl_easy_cleanup(e);
    bw_curl_free(bc);
    bw_registry_free(r);
}

/* ---- the multi interface ---- */

static void run_multi(CURLM *m, bw_curl *bc, int *done, bw_curl_result *results, CURL **handles, int n)
{
    int running = 1;
    int64_t t0 = mono_ns();
    while (*done < n && mono_ns() - t0 < 10 * S) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            for (int i = 0; i < n; i++)
                if (handles[i] == msg->easy_handle) {
                    int rc = bw_curl_multi_done(bc, msg, &results[i]);
                    CHECK(rc == BW_OK || rc == BW_ETIMEDOUT);
                    curl_multi_remove_handle(m, msg->easy_handle);
                    (*done)++;
                }
        }
        if (*done < n)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
}

static void test_multi(void)
{
    bw_registry *r = hosts_registry(NULL);
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    CURLM *m = curl_multi_init();
    enum { N = 6 };
    CURL *h[N];
    bw_curl_result res[N];
    /* 127.0.0.1 answers 503 twice (its circuit opens), localhost answers ok. */
    char url[128];
    for (int i = 0; i < N; i++) {
        snprintf(url, sizeof url, "http://%s:%d%s", i < 2 ? "127.0.0.1" : "localhost", srv.port,
                 i < 2 ? "/status/503" : "/ok");
        h[i] = easy_for(url);
        CHECK_OK(bw_curl_multi_add(bc, m, h[i], &res[i]));
    }
    CHECK_RC(bw_curl_multi_add(bc, m, h[0], NULL), BW_EINVAL); /* already held */
    int done = 0;
    run_multi(m, bc, &done, res, h, N);
    CHECK_INT(done, N);
    for (int i = 0; i < N; i++) {
        CHECK_STR(res[i].circuit, i < 2 ? "127.0.0.1" : "localhost");
        CHECK_INT(res[i].outcome, i < 2 ? BW_FAILURE : BW_SUCCESS);
    }
    CHECK_INT(counters_of(r, "localhost").calls[BW_CALL_SUCCESS], 4);
    CHECK_INT(bw_breaker_state(bw_registry_get_existing(r, "127.0.0.1")), BW_STATE_OPEN);
    /* A rejected handle is not added and sends nothing; the other host goes on. */
    long a0 = atomic_load(&srv.accepts), q0 = atomic_load(&srv.requests);
    CURL *x = easy_for(at("/ok"));
    bw_curl_result rx;
    CHECK_RC(bw_curl_multi_add(bc, m, x, &rx), BW_REJECTED);
    CHECK_INT(rx.rejection.state, BW_STATE_OPEN);
    CHECK_INT(atomic_load(&srv.accepts), a0);
    CHECK_INT(atomic_load(&srv.requests), q0);
    curl_easy_cleanup(x);
    /* Abandoned: settled IGNORED, nothing recorded. */
    snprintf(url, sizeof url, "http://localhost:%d/slow/2000", srv.port);
    x = easy_for(url);
    CHECK_OK(bw_curl_multi_add(bc, m, x, &rx));
    int running;
    curl_multi_perform(m, &running);
    curl_multi_remove_handle(m, x);
    CHECK_OK(bw_curl_multi_abandon(bc, x));
    CHECK_RC(bw_curl_multi_abandon(bc, x), BW_EINVAL);
    CHECK_INT(counters_of(r, "localhost").calls[BW_CALL_IGNORED], 1);
    curl_easy_cleanup(x);
    CURLMsg fake;
    memset(&fake, 0, sizeof fake);
    fake.msg = CURLMSG_DONE;
    fake.easy_handle = h[0];
    CHECK_RC(bw_curl_multi_done(bc, &fake, NULL), BW_EINVAL); /* settled already */
    for (int i = 0; i < N; i++)
        curl_easy_cleanup(h[i]);
    curl_multi_cleanup(m);
    bw_curl_free(bc);
    bw_registry_free(r);
}

/* Review findings: FAILONERROR, a timeout of the bw_curl's own, the pipeline run by other means, two bw_curls. */
static int other_resolver(const char *host, char *name, size_t size, void *user)
{
    (void)host;
    snprintf(name, size, "%s", (const char *)user);
    return 0;
}

static int plain_call(bw_ctx *ctx, void *arg)
{
    (void)ctx;
    ++*(int *)arg;
    return 0;
}

static void test_options_and_misuse(void)
{
    bw_registry *r = hosts_registry("window=count:100 min_calls=100");
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    bw_curl_result res;
    CURL *e = easy_for(at("/status/404"));
    curl_easy_setopt(e, CURLOPT_FAILONERROR, 1L);
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.code, CURLE_HTTP_RETURNED_ERROR);
    CHECK_INT(res.outcome, BW_SUCCESS); /* 404 is not in the failure set, FAILONERROR or not */
    curl_easy_setopt(e, CURLOPT_URL, at("/status/503"));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.outcome, BW_FAILURE);
    curl_easy_setopt(e, CURLOPT_FAILONERROR, 0L);
    /* A timeout of the bw_curl's own wins over a longer pipeline deadline and over the handle's 5 s. */
    bw_pipeline *p = NULL;
    CHECK_OK(bw_pipeline_new("api", &p, NULL));
    CHECK_OK(bw_pipeline_add_timeout(p, 10 * S, NULL, NULL));
    CHECK_OK(bw_curl_set_pipeline(bc, p, NULL));
    CHECK_OK(bw_curl_set_timeout(bc, 150 * MS, NULL));
    CHECK_RC(bw_curl_set_timeout(bc, -1, NULL), BW_ERANGE);
    curl_easy_setopt(e, CURLOPT_URL, at("/slow/3000"));
    int64_t t0 = mono_ns();
    CHECK_RC(bw_curl_perform(bc, e, &res), BW_ETIMEDOUT);
    int64_t took = mono_ns() - t0;
    CHECK(took >= 140 * MS && took < 2 * S);
    /* The pipeline executed by other means runs the call without a circuit, and does not crash. */
    int ran = 0, rc = -1;
    CHECK_OK(bw_pipeline_execute(p, plain_call, &ran, &rc, NULL));
    CHECK_INT(ran, 1);
    /* A pipeline with a circuit layer already is refused to a second bw_curl. */
    bw_curl *two = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &two, NULL));
    bw_pipeline *p2 = NULL;
    CHECK_OK(bw_pipeline_new("api2", &p2, NULL));
    CHECK_OK(bw_curl_set_pipeline(two, p2, NULL));
    bw_curl *three = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &three, NULL));
    CHECK_RC(bw_curl_set_pipeline(three, p2, NULL), BW_ESTATE);
    /* Two bw_curls, two resolvers, one URL: each its own name (the per-thread cache keeps them apart). */
    CHECK_OK(bw_curl_set_resolver(two, other_resolver, (void *)"name-two"));
    CHECK_OK(bw_curl_set_resolver(three, other_resolver, (void *)"name-three"));
    curl_easy_setopt(e, CURLOPT_URL, at("/ok"));
    CHECK_OK(bw_curl_perform(two, e, &res));
    CHECK_STR(res.circuit, "name-two");
    CHECK_OK(bw_curl_perform(three, e, &res));
    CHECK_STR(res.circuit, "name-three");
    CHECK_OK(bw_curl_set_resolver(two, other_resolver, (void *)"name-two-b"));
    CHECK_OK(bw_curl_perform(two, e, &res));
    CHECK_STR(res.circuit, "name-two-b"); /* a new resolver: names cached under the old one are not used */
    curl_easy_cleanup(e);
    bw_curl_free(three);
    bw_curl_free(two);
    bw_curl_free(bc);
    bw_pipeline_free(p2);
    bw_pipeline_free(p);
    bw_registry_free(r);
}

/* The multi table under many transfers: 3,000 handles added, then given up in a shuffled order. */
static void test_multi_table(void)
{
    bw_registry *r = hosts_registry("window=count:100000 min_calls=100000");
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    CURLM *m = curl_multi_init();
    enum { N = 3000 };
    static CURL *h[N];
    static int order[N];
    for (int i = 0; i < N; i++) {
        h[i] = easy_for(at("/ok"));
        order[i] = i;
        CHECK_OK(bw_curl_multi_add(bc, m, h[i], NULL));
    }
    uint64_t x = 88172645463325252u;
    for (int i = N - 1; i > 0; i--) { /* Fisher-Yates with xorshift */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    int bad = 0;
    for (int k = 0; k < N; k++) {
        CURL *one = h[order[k]];
        curl_multi_remove_handle(m, one);
        bad += bw_curl_multi_abandon(bc, one) != BW_OK;
        if (k % 500 == 0) /* a handle given up is gone; the others are all still there */
            bad += bw_curl_multi_abandon(bc, one) != BW_EINVAL;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(counters_of(r, "127.0.0.1").calls[BW_CALL_IGNORED], N);
    for (int i = 0; i < N; i++)
        curl_easy_cleanup(h[i]);
    curl_multi_cleanup(m);
    bw_curl_free(bc);
    bw_registry_free(r);
}

/* ---- keyed circuits, threads, arguments ---- */

static void test_keyed_source(void)
{
    bw_config *c = bw_config_new();
    CHECK_OK(bw_config_parse(c, "window=count:2 min_calls=2 wait=30s keyed_maxsize=8", NULL));
    bw_breaker *hosts = NULL;
    CHECK_OK(bw_breaker_new("hosts", c, &hosts, NULL));
    bw_config_free(c);
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(NULL, hosts, &bc, NULL));
    CURL *e = easy_for(at("/status/500"));
    bw_curl_result res;
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_OK(bw_curl_perform(bc, e, &res));
    bw_breaker *circuit = bw_keyed_find(hosts, "127.0.0.1");
    CHECK(circuit != NULL);
    if (circuit) {
        CHECK_INT(bw_breaker_state(circuit), BW_STATE_OPEN);
        bw_keyed_release(circuit);
    }
    CHECK_INT(bw_breaker_state(hosts), BW_STATE_CLOSED); /* the breaker's own circuit is another */
    CHECK_RC(bw_curl_perform(bc, e, &res), BW_REJECTED);
    curl_easy_cleanup(e);
    bw_curl_free(bc);
    bw_breaker_free(hosts);
}

typedef struct worker {
    bw_curl *bc;
    int ok;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    CURL *e = easy_for(at("/ok"));
    for (int i = 0; i < 50; i++) {
        bw_curl_result res;
        if (bw_curl_perform(w->bc, e, &res) == BW_OK && res.http_status == 200)
            w->ok++;
    }
    curl_easy_cleanup(e);
    return NULL;
}

static void test_threads(void)
{
    bw_registry *r = hosts_registry(NULL);
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(r, NULL, &bc, NULL));
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i].bc = bc;
        w[i].ok = 0;
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_INT(w[i].ok, 50);
    }
    CHECK_INT(counters_of(r, "127.0.0.1").calls[BW_CALL_SUCCESS], 200);
    bw_curl_free(bc);
    bw_registry_free(r);
}

static void test_arguments(void)
{
    bw_registry *r = hosts_registry(NULL);
    bw_breaker *b = NULL;
    CHECK_OK(bw_breaker_new("x", NULL, &b, NULL));
    bw_curl *bc = (bw_curl *)1;
    bw_error e;
    CHECK_RC(bw_curl_new(NULL, NULL, &bc, &e), BW_EINVAL);
    CHECK(bc == NULL);
    CHECK_RC(bw_curl_new(r, b, &bc, &e), BW_EINVAL);
    CHECK_RC(bw_curl_new(r, NULL, NULL, &e), BW_EINVAL);
    CHECK_OK(bw_curl_new(r, NULL, &bc, &e));
    CHECK_RC(bw_curl_set_retry_after_cap(bc, -1, &e), BW_ERANGE);
    CHECK_RC(bw_curl_set_retry_after_cap(bc, BW_HTTP_RETRY_AFTER_MAX + 1, &e), BW_ERANGE);
    CHECK_RC(bw_curl_set_pipeline(bc, NULL, &e), BW_EINVAL);
    CHECK_RC(bw_curl_multi_add(bc, NULL, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_curl_multi_done(bc, NULL, NULL), BW_EINVAL);
    CHECK_RC(bw_curl_multi_abandon(bc, NULL), BW_EINVAL);
    CHECK((bw_components() & BW_COMPONENT_CURL) != 0);
    bw_curl_free(bc);
    bw_curl_free(NULL);
    bw_breaker_free(b);
    bw_registry_free(r);
}

/* ---- Retry-After with a store: the fleet honours it (test_curl STORE_URL, once per store) ---- */

/* One "process" of the fleet: a registry of hosts on store s (in `mode`) on the manual clock, and its bw_curl. */
typedef struct member {
    bw_registry *r;           /* the hosts' circuits: a registry's breakers, */
    bw_breaker *keyed_parent; /* or this breaker's keyed circuits */
    bw_curl *bc;
    recorder *log;
} member;

static member join(bw_store *s, bw_store_mode mode, int keyed)
{
    member m;
    m.log = rec_new();
    bw_config *c = bw_config_new();
    bw_error e;
    if (bw_config_parse(c, "window=count:100 min_calls=100 wait=30s permitted_probes=1 store_poll=1s keyed_maxsize=8",
                        &e) != BW_OK)
        H_FAIL("config: %s", e.message);
    CHECK_OK(bw_config_set_clock(c, clk));
    CHECK_OK(bw_config_set_listener(c, BW_EVENTS_ALL, rec_listen, m.log));
    CHECK_OK(bw_config_set_store(c, s, mode, &e));
    m.r = NULL;
    m.bc = NULL;
    bw_breaker *parent = NULL;
    if (keyed) {
        CHECK_OK(bw_breaker_new("hosts", c, &parent, &e));
        CHECK_OK(bw_curl_new(NULL, parent, &m.bc, &e));
    } else {
        CHECK_OK(bw_registry_new(c, &m.r, &e));
        CHECK_OK(bw_curl_new(m.r, NULL, &m.bc, &e));
    }
    bw_config_free(c);
    CHECK_OK(bw_curl_set_open_on_retry_after(m.bc, 10 * S, NULL));
    m.keyed_parent = parent;
    return m;
}

static void leave(member *m)
{
    bw_curl_free(m->bc);
    bw_registry_free(m->r);
    bw_breaker_free(m->keyed_parent);
    rec_free(m->log);
}

/* The one request `url` through m: its status, and the result in *res. */
static int request(member *m, const char *url, bw_curl_result *res)
{
    CURL *e = easy_for(url);
    int rc = bw_curl_perform(m->bc, e, res);
    curl_easy_cleanup(e);
    return rc;
}

/* State changes into OPEN that m saw with reason `why`. */
static int opened_by(member *m, bw_reason why)
{
    int n = rec_count(m->log), k = 0;
    for (int i = 0; i < n; i++) {
        const bw_event *ev = rec_nth(m->log, i);
        k += ev->type == BW_EVENT_STATE_CHANGE && ev->to == BW_STATE_OPEN && ev->reason == why;
    }
    return k;
}

/*
 * Three 503s with Retry-After: 5 from one member: only the first reaches the
 * server, its circuit opens (reason retry_after) for 5 s, and another member
 * on the same store rejects too (stored: at once; coordinated: from its next
 * poll), without I/O; after the 5 s a probe goes through and the circuit
 * closes for everyone.
 */
static void fleet_honours_retry_after(bw_store_mode mode, int keyed)
{
    clock_fresh(CLOCKFIX_START);
    bw_store *s = store_open_fresh(clk);
    member a = join(s, mode, keyed), b = join(s, mode, keyed);
    bw_curl_result res;
    CHECK_OK(request(&a, at("/ok"), &res)); /* each has the host's circuit, as a running process would */
    CHECK_OK(request(&b, at("/ok"), &res));
    pump(0); /* coordinated: their first polls */
    long q0 = atomic_load(&srv.requests);
    CHECK_OK(request(&a, at("/status/503?ra=5"), &res));
    CHECK_INT(res.http_status, 503);
    CHECK_RC(request(&a, at("/status/503?ra=5"), &res), BW_REJECTED);
    CHECK_INT(res.rejection.state, BW_STATE_OPEN);
    CHECK_INT(res.rejection.retry_after_ns, 5 * S);
    CHECK_RC(request(&a, at("/status/503?ra=5"), &res), BW_REJECTED);
    CHECK_INT(atomic_load(&srv.requests), q0 + 1); /* only the first reached the server */
    CHECK_INT(opened_by(&a, BW_REASON_RETRY_AFTER), 1);
    if (mode == BW_STORE_COORDINATED) {
        pump(0);     /* the lane writes the fleet's OPEN (on a manual clock, when it moves) */
        pump(1 * S); /* b's next poll reads it */
    }
    int64_t left = mode == BW_STORE_COORDINATED ? 4 * S : 5 * S;
    CHECK_RC(request(&b, at("/ok"), &res), BW_REJECTED);
    CHECK_INT(res.rejection.state, BW_STATE_OPEN);
    CHECK_INT(res.rejection.retry_after_ns, left);
    CHECK_INT(atomic_load(&srv.requests), q0 + 1);
    if (mode == BW_STORE_COORDINATED)
        CHECK_INT(opened_by(&b, BW_REASON_SHARED), 1);
    pump(left); /* the wait is over: a probe reaches the server, and its success closes the circuit */
    CHECK_OK(request(&b, at("/ok"), &res));
    CHECK_INT(res.http_status, 200);
    CHECK_INT(atomic_load(&srv.requests), q0 + 2);
    pump(1 * S);
    CHECK_OK(request(&a, at("/ok"), &res));
    CHECK_OK(request(&b, at("/ok"), &res));
    CHECK_INT(atomic_load(&srv.requests), q0 + 4);
    leave(&a);
    leave(&b);
    bw_store_close(s);
}

static void test_store_stored(void)
{
    fleet_honours_retry_after(BW_STORE_STORED, 0);
}

static void test_store_coordinated(void)
{
    fleet_honours_retry_after(BW_STORE_COORDINATED, 0);
}

static void test_store_keyed(void)
{
    fleet_honours_retry_after(BW_STORE_STORED, 1);
    fleet_honours_retry_after(BW_STORE_COORDINATED, 1);
}

int main(int argc, char **argv)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (http_server_start(&srv) != 0) {
        fprintf(stderr, "test_curl: could not start the HTTP server on loopback\n");
        return 1;
    }
    if (argc > 1) { /* test_curl STORE_URL: the circuits on a store (ctest: test_curl_<scheme>) */
        store_url_init(argc, argv);
        RUN(test_store_stored);
        RUN(test_store_coordinated);
        RUN(test_store_keyed);
        clock_done();
        store_url_cleanup();
        http_server_stop(&srv);
        curl_global_cleanup();
        return TEST_SUMMARY();
    }
    RUN(test_names);
    RUN(test_classification);
    RUN(test_rejection_opens_no_connection);
    RUN(test_retry_after_and_pipeline);
    RUN(test_deadline_is_the_timeout);
    RUN(test_open_on_retry_after);
    RUN(test_multi);
    RUN(test_options_and_misuse);
    RUN(test_multi_table);
    RUN(test_keyed_source);
    RUN(test_threads);
    RUN(test_arguments);
    http_server_stop(&srv);
    curl_global_cleanup();
    return TEST_SUMMARY();
}
