/*
 * http_server.c — a small HTTP service (libmicrohttpd) that calls a dependency
 * through breakwater's libcurl integration, and tells its own callers when to
 * come back while the dependency's circuit is open: 503 Service Unavailable
 * with a Retry-After (breakwater/http.h).
 *
 *     http_server PORT DEPENDENCY_URL
 *
 * PORT 0 picks a free port; the server prints "listening on PORT" and serves
 * until stdin closes (or it is killed). Every request to it makes one GET of
 * DEPENDENCY_URL through the dependency host's circuit (2 failures of the last
 * 2 calls open it for 30 s):
 *   the dependency answered 2xx-4xx     -> 200 with its status in the body
 *   it failed (5xx, no connection, ...) -> 502 Bad Gateway
 *   its circuit is open                 -> 503 with Retry-After (no call made)
 * A client using breakwater's curl integration with
 * bw_curl_set_open_on_retry_after honours that Retry-After: its circuit for
 * this server opens for exactly that long (tests/integration/example_http.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <breakwater/breakwater.h>
#include <breakwater/curl.h>

static bw_curl *dependency;
static const char *dependency_url;

static size_t discard(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    (void)user;
    return size * n;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *body, const char *retry_after)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    if (retry_after && *retry_after)
        MHD_add_response_header(r, "Retry-After", retry_after);
    enum MHD_Result ok = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                             const char *version, const char *data, size_t *size, void **state)
{
    (void)cls, (void)url, (void)method, (void)version, (void)data, (void)size;
    static int first;
    if (!*state) { /* the headers: answer when the whole request is in */
        *state = &first;
        return MHD_YES;
    }
    CURL *easy = curl_easy_init();
    if (!easy)
        return reply(conn, 500, "out of memory\n", NULL);
    curl_easy_setopt(easy, CURLOPT_URL, dependency_url);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 2000L);
    bw_curl_result res;
    int status = bw_curl_perform(dependency, easy, &res);
    curl_easy_cleanup(easy);
    char body[128];
    if (status == BW_REJECTED) {
        bw_http_reply r;
        bw_http_rejection_reply(&res.rejection, 503, &r);
        snprintf(body, sizeof body, "the dependency's circuit is %s\n", bw_state_name(res.rejection.state));
        return reply(conn, (unsigned)r.status, body, r.retry_after);
    }
    if (status == BW_OK && res.outcome != BW_FAILURE) {
        snprintf(body, sizeof body, "dependency said %ld\n", res.http_status);
        return reply(conn, 200, body, NULL);
    }
    snprintf(body, sizeof body, "dependency failed: %s (HTTP %ld)\n", curl_easy_strerror(res.code), res.http_status);
    return reply(conn, 502, body, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PORT DEPENDENCY_URL\n", argv[0]);
        return 64;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    bw_config *cfg = bw_config_new();
    bw_error err;
    bw_registry *hosts = NULL;
    if (!cfg || bw_config_parse(cfg, "window=count:2 min_calls=2 failure_rate=0.5 wait=30s", &err) != BW_OK ||
        bw_registry_new(cfg, &hosts, &err) != BW_OK || bw_curl_new(hosts, NULL, &dependency, &err) != BW_OK) {
        fprintf(stderr, "http_server: %s\n", err.message);
        return 1;
    }
    bw_config_free(cfg);
    dependency_url = argv[2];
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, (uint16_t)atoi(argv[1]), NULL,
                         NULL, serve, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 5u, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "http_server: could not listen on port %s\n", argv[1]);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on %u\n", info ? (unsigned)info->port : 0u);
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) { /* until stdin closes */
    }
    MHD_stop_daemon(d);
    bw_curl_free(dependency);
    bw_registry_free(hosts);
    curl_global_cleanup();
    return 0;
}
