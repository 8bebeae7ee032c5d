/*
 * example_http.c — examples/http_server.c end to end: the example service is
 * started as its own process in front of a failing dependency (the tests' HTTP
 * server answering 503), and a client using breakwater's curl integration
 * (bw_curl_set_open_on_retry_after) calls it. The service answers 502 while
 * its dependency fails, then, its circuit open, 503 with a Retry-After of the
 * circuit's 30 s wait, without calling the dependency; the client's circuit
 * for the service then opens for that long (reason retry_after) and its next
 * request is rejected before any I/O. Run as `example_http PATH_OF_http_server`.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <signal.h>
#include <sys/wait.h>

#include "harness.h"
#include "http_server.h"
#include "breakwater/breakwater.h"
#include "breakwater/curl.h"

#define S BW_NS_PER_S

static size_t discard(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    (void)user;
    return size * n;
}

static const char *example;

static void test_example(void)
{
    http_server dep;
    if (http_server_start(&dep) != 0) {
        H_FAIL("could not start the dependency's HTTP server");
        return;
    }
    char dep_url[128];
    snprintf(dep_url, sizeof dep_url, "http://127.0.0.1:%d/status/503", dep.port);
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) {
        H_FAIL("pipe");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(example, example, "0", dep_url, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    char line[64] = "";
    FILE *f = fdopen(out[0], "r");
    int port = 0;
    if (!f || !fgets(line, sizeof line, f) || sscanf(line, "listening on %d", &port) != 1 || port <= 0) {
        H_FAIL("the example did not start (said '%s')", line);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        http_server_stop(&dep);
        return;
    }
    bw_config *cfg = bw_config_new();
    CHECK_OK(bw_config_parse(cfg, "window=count:100 min_calls=100", NULL));
    bw_registry *hosts = NULL;
    CHECK_OK(bw_registry_new(cfg, &hosts, NULL));
    bw_config_free(cfg);
    bw_curl *bc = NULL;
    CHECK_OK(bw_curl_new(hosts, NULL, &bc, NULL));
    CHECK_OK(bw_curl_set_open_on_retry_after(bc, 60 * S, NULL));
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/orders", port);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    bw_curl_result res;
    /* Two failures of its dependency: 502 each (a failure for our circuit? 502 is in the default set). */
    for (int i = 0; i < 2; i++) {
        CHECK_OK(bw_curl_perform(bc, e, &res));
        CHECK_INT(res.http_status, 502);
    }
    CHECK_INT(atomic_load(&dep.requests), 2);
    /* Its circuit is open now: 503 with Retry-After 30, and the dependency is not called. */
    CHECK_OK(bw_curl_perform(bc, e, &res));
    CHECK_INT(res.http_status, 503);
    CHECK_INT(res.retry_after_ns, 30 * S);
    CHECK_INT(atomic_load(&dep.requests), 2);
    /* We honour it: our circuit for the service is open for those 30 s, and nothing goes out. */
    bw_breaker *svc = bw_registry_get_existing(hosts, "127.0.0.1");
    CHECK(svc != NULL);
    if (svc) {
        CHECK_INT(bw_breaker_state(svc), BW_STATE_OPEN);
        bw_counters k;
        bw_breaker_counters(svc, &k);
        CHECK_INT(k.reason, BW_REASON_RETRY_AFTER);
    }
    CHECK_RC(bw_curl_perform(bc, e, &res), BW_REJECTED);
    CHECK(res.rejection.retry_after_ns > 29 * S && res.rejection.retry_after_ns <= 30 * S);
    curl_easy_cleanup(e);
    bw_curl_free(bc);
    bw_registry_free(hosts);
    close(in[1]); /* the example stops when its stdin closes */
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    fclose(f);
    http_server_stop(&dep);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: example_http PATH_OF_http_server\n");
        return 2;
    }
    example = argv[1];
    alarm(60); /* every wait is bounded; this bounds the whole */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(test_example);
    curl_global_cleanup();
    return TEST_SUMMARY();
}
