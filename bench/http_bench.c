/*
 * http_bench.c — what the libcurl integration (breakwater/curl.h) costs, on
 * loopback against the tests' HTTP server (tests/support/http_server.h), which
 * the bench starts itself. Figures (issue 15):
 *
 *   curl_overhead_pct          keep-alive GETs of /ok, one easy handle:
 *                              bw_curl_perform against bare curl_easy_perform,
 *                              41 pairs of 200-request runs alternated, the
 *                              median of the per-pair ratios (target <= 2 %)
 *   curl_rejected_request_ns   a request refused by its host's open circuit:
 *                              no I/O at all (target <= 200 ns)
 *   curl_multi_1000_handles_overhead_pct
 *                              1,000 GETs through one multi handle (at most
 *                              16 connections to the host, reused), guarded by
 *                              bw_curl_multi_add / bw_curl_multi_done against
 *                              bare curl_multi_add_handle, 21 pairs alternated,
 *                              the median of the ratios (target <= 3 %)
 *
 * Wall figures only as ratios to a reference measured in the same run (the VM
 * is noisy); the rejection is an absolute figure (no I/O, no reference).
 * `http_bench ir-bare` and `http_bench ir-guarded` make 2,000 requests each in
 * one mode (`ir-multi-bare`, `ir-multi-guarded`: 2,000 through a multi handle), for valgrind --tool=callgrind to count
 * the instructions (the client's and the in-process server's) that noise does not move.
 */
#define _GNU_SOURCE
#include <curl/curl.h>

#include "bench.h"
#include "breakwater/curl.h"
#include "http_server.h"

#define REQS 200   /* per easy run */
#define PAIRS 41   /* alternated bare/guarded pairs of runs: short, so that both see the same machine */
#define MULTI 1000 /* handles per multi run */
#define REJECTS 200000
#define PAIRS_MULTI 21

static http_server srv;
static char url_ok[128];

static size_t discard(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    (void)user;
    return size * n;
}

static CURL *easy_ok(void)
{
    CURL *e = curl_easy_init();
    if (!e)
        die("curl_easy_init", BW_ENOMEM);
    curl_easy_setopt(e, CURLOPT_URL, url_ok);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    return e;
}

static bw_registry *hosts(void)
{
    bw_config *c = bw_config_new();
    bw_error err;
    int rc = bw_config_parse(c, "window=count:100 min_calls=100 wait=60s", &err);
    if (rc != BW_OK)
        die_err("config", rc, &err);
    bw_registry *r = NULL;
    rc = bw_registry_new(c, &r, &err);
    if (rc != BW_OK)
        die_err("bw_registry_new", rc, &err);
    bw_config_free(c);
    return r;
}

/* ---- easy ---- */

static int64_t run_easy(CURL *e, bw_curl *bc)
{
    int64_t t0 = mono_ns();
    for (int i = 0; i < REQS; i++) {
        if (bc) {
            bw_curl_result res;
            if (bw_curl_perform(bc, e, &res) != BW_OK || res.http_status != 200)
                die("bw_curl_perform", res.status);
        } else if (curl_easy_perform(e) != CURLE_OK) {
            die("curl_easy_perform", BW_ESYS);
        }
    }
    return mono_ns() - t0;
}

static void bench_overhead(void)
{
    bw_registry *r = hosts();
    bw_curl *bc = NULL;
    int rc = bw_curl_new(r, NULL, &bc, NULL);
    if (rc != BW_OK)
        die("bw_curl_new", rc);
    CURL *bare = easy_ok(), *guarded = easy_ok();
    run_easy(bare, NULL); /* warm: connections made, caches filled */
    run_easy(guarded, bc);
    double ratio[PAIRS];
    for (int i = 0; i < PAIRS; i++) {
        int64_t a = i % 2 ? run_easy(bare, NULL) : 0;
        int64_t g = run_easy(guarded, bc);
        if (!(i % 2))
            a = run_easy(bare, NULL);
        ratio[i] = (double)g / (double)a;
    }
    report("curl_overhead_pct", (median(ratio, PAIRS) - 1) * 100, "pct");
    curl_easy_cleanup(bare);
    curl_easy_cleanup(guarded);
    bw_curl_free(bc);
    bw_registry_free(r);
}

/* ---- rejected ---- */

typedef struct rej {
    bw_curl *bc;
    CURL *e;
} rej;

static long reject_loop(void *ctx, long iters)
{
    rej *x = ctx;
    long bad = 0;
    for (long i = 0; i < iters; i++) {
        bw_curl_result res;
        bad += bw_curl_perform(x->bc, x->e, &res) != BW_REJECTED;
        BARRIER();
    }
    return bad;
}

static void bench_rejected(void)
{
    bw_registry *r = hosts();
    bw_curl *bc = NULL;
    int rc = bw_curl_new(r, NULL, &bc, NULL);
    if (rc != BW_OK)
        die("bw_curl_new", rc);
    bw_breaker *b = NULL;
    if ((rc = bw_registry_get(r, "127.0.0.1", NULL, &b, NULL)) != BW_OK || (rc = bw_breaker_force_open(b)) != BW_OK)
        die("opening the circuit", rc);
    rej x = {bc, easy_ok()};
    long a0 = atomic_load(&srv.accepts);
    report("curl_rejected_request_ns", bench_median_ns(reject_loop, &x, REJECTS, "rejections"), "ns");
    if (atomic_load(&srv.accepts) != a0)
        die("a rejected request reached the server", BW_ESTATE);
    curl_easy_cleanup(x.e);
    bw_curl_free(bc);
    bw_registry_free(r);
}

/* ---- multi ---- */

static int64_t run_multi(CURLM *m, CURL **h, bw_curl *bc)
{
    int64_t t0 = mono_ns();
    for (int i = 0; i < MULTI; i++) {
        if (bc) {
            int rc = bw_curl_multi_add(bc, m, h[i], NULL);
            if (rc != BW_OK)
                die("bw_curl_multi_add", rc);
        } else if (curl_multi_add_handle(m, h[i]) != CURLM_OK) {
            die("curl_multi_add_handle", BW_ESYS);
        }
    }
    int done = 0, running = 1;
    while (done < MULTI) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            if (bc) {
                bw_curl_result res;
                if (bw_curl_multi_done(bc, msg, &res) != BW_OK || res.http_status != 200)
                    die("a guarded multi transfer", res.status);
            } else if (msg->data.result != CURLE_OK) {
                die("a bare multi transfer", BW_ESYS);
            }
            curl_multi_remove_handle(m, msg->easy_handle);
            done++;
        }
        if (done < MULTI)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    return mono_ns() - t0;
}

static void bench_multi(void)
{
    bw_registry *r = hosts();
    bw_curl *bc = NULL;
    int rc = bw_curl_new(r, NULL, &bc, NULL);
    if (rc != BW_OK)
        die("bw_curl_new", rc);
    CURLM *m = curl_multi_init();
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, 16L);
    static CURL *h[MULTI];
    for (int i = 0; i < MULTI; i++)
        h[i] = easy_ok();
    run_multi(m, h, NULL); /* warm */
    run_multi(m, h, bc);
    double ratio[PAIRS_MULTI];
    for (int i = 0; i < PAIRS_MULTI; i++) {
        int64_t a = i % 2 ? run_multi(m, h, NULL) : 0;
        int64_t g = run_multi(m, h, bc);
        if (!(i % 2))
            a = run_multi(m, h, NULL);
        ratio[i] = (double)g / (double)a;
    }
    report("curl_multi_1000_handles_overhead_pct", (median(ratio, PAIRS_MULTI) - 1) * 100, "pct");
    for (int i = 0; i < MULTI; i++)
        curl_easy_cleanup(h[i]);
    curl_multi_cleanup(m);
    bw_curl_free(bc);
    bw_registry_free(r);
}

int main(int argc, char **argv)
{
    bench_init("http_bench");
    const char *only = argc > 1 ? argv[1] : "";
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (http_server_start(&srv) != 0)
        die("starting the HTTP server on loopback", BW_ESYS);
    snprintf(url_ok, sizeof url_ok, "http://127.0.0.1:%d/ok", srv.port);
    printf("# HTTP server on 127.0.0.1:%d (tests/support/http_server.h), libcurl %s\n", srv.port,
           curl_version_info(CURLVERSION_NOW)->version);
    if (!strcmp(only, "ir-bare") || !strcmp(only, "ir-guarded")) { /* for callgrind: REQS x 10 requests, one mode */
        bw_registry *r = hosts();
        bw_curl *bc = NULL;
        if (only[3] == 'g' && bw_curl_new(r, NULL, &bc, NULL) != BW_OK)
            die("bw_curl_new", BW_ENOMEM);
        CURL *e = easy_ok();
        for (int i = 0; i < 10; i++)
            run_easy(e, bc);
        curl_easy_cleanup(e);
        bw_curl_free(bc);
        bw_registry_free(r);
        only = "-";
    }
    if (!strcmp(only, "ir-multi-bare") || !strcmp(only, "ir-multi-guarded")) { /* for callgrind: 2 x 1,000 */
        bw_registry *r = hosts();
        bw_curl *bc = NULL;
        if (only[9] == 'g' && bw_curl_new(r, NULL, &bc, NULL) != BW_OK)
            die("bw_curl_new", BW_ENOMEM);
        CURLM *m = curl_multi_init();
        curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, 16L);
        static CURL *h[MULTI];
        for (int i = 0; i < MULTI; i++)
            h[i] = easy_ok();
        for (int i = 0; i < 2; i++)
            run_multi(m, h, bc);
        for (int i = 0; i < MULTI; i++)
            curl_easy_cleanup(h[i]);
        curl_multi_cleanup(m);
        bw_curl_free(bc);
        bw_registry_free(r);
        only = "-";
    }
    if (!strncmp("curl_overhead_pct", only, strlen(only)))
        bench_overhead();
    if (!strncmp("curl_rejected_request_ns", only, strlen(only)))
        bench_rejected();
    if (!strncmp("curl_multi_1000_handles_overhead_pct", only, strlen(only)))
        bench_multi();
    http_server_stop(&srv);
    curl_global_cleanup();
    return 0;
}
