/*
 * metrics_exporter.c (tests/integration/) — the exporter a real Prometheus
 * scrapes in integration_prometheus (prometheus_scrape.sh): one breaker,
 * "checkout", on the system clock, served with bw_metrics_serve on
 * 127.0.0.1:0, driven phase by phase from stdin so that the test can let
 * Prometheus scrape each phase before the next:
 *
 *   closed   20 successful calls: CLOSED
 *   open     failed calls until it trips (the 5th: 5 of the last 10 calls), then 7 rejected acquires: OPEN
 *   recover  wait for the 1 s open wait to end (at most 10 s), then 2 successful probes: CLOSED
 *   quit     stop serving and exit (so does the end of stdin)
 *
 * After each phase it writes the breaker's own counters (bw_breaker_counters,
 * bw_breaker_snapshot) to DIR/<phase>.counters as the series they should be
 * ("SELECTOR VALUE" a line) and prints "done <phase>", so the test compares
 * what Prometheus stored with what the breaker counted rather than with
 * numbers of its own.
 *
 * Usage: metrics_exporter DIR     (writes DIR/port once it listens)
 *        metrics_exporter --free-port   (prints a TCP port free on 127.0.0.1 now, for Prometheus itself)
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "breakwater/breakwater.h"

static void die(const char *what, int rc, const bw_error *err)
{
    fprintf(stderr, "metrics_exporter: %s: %s%s%s\n", what, bw_strerror(rc), err ? ": " : "", err ? err->message : "");
    exit(1);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sin;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
        perror("metrics_exporter: --free-port");
        return 1;
    }
    printf("%d\n", ntohs(sin.sin_port));
    close(fd);
    return 0;
}

/* One call settled with o; returns the acquire's status. */
static int call(bw_breaker *b, bw_outcome o)
{
    bw_permit p;
    int rc = bw_acquire(b, &p, NULL);
    if (rc == BW_OK && (rc = bw_settle(b, &p, o)) != BW_OK)
        die("bw_settle", rc, NULL);
    return rc;
}

/*
 * The breaker's counters as the series they should be in Prometheus, one
 * "SELECTOR VALUE" a line (PromQL selectors; spelled out here, independently
 * of the exposition code).
 */
static void write_counters(const char *dir, const char *phase, bw_breaker *b)
{
    bw_counters c;
    bw_snapshot s;
    int rc;
    if ((rc = bw_breaker_counters(b, &c)) != BW_OK)
        die("bw_breaker_counters", rc, NULL);
    if ((rc = bw_breaker_snapshot(b, &s)) != BW_OK)
        die("bw_breaker_snapshot", rc, NULL);
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s.counters", dir, phase);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        perror(tmp);
        exit(1);
    }
#define SEL "{name=\"checkout\""
    for (int st = 0; st < 6; st++)
        fprintf(f, "breakwater_state" SEL ",state=\"%s\"} %d\n", bw_state_name((bw_state)st), st == (int)s.state);
    for (int k = 0; k < BW_CALL_KINDS; k++)
        fprintf(f, "breakwater_calls_total" SEL ",kind=\"%s\"} %llu\n", bw_call_kind_name((bw_call_kind)k),
                (unsigned long long)c.calls[k]);
    for (int st = BW_STATE_OPEN; st <= BW_STATE_FORCED_OPEN; st++)
        fprintf(f, "breakwater_rejected_total" SEL ",state=\"%s\"} %llu\n", bw_state_name((bw_state)st),
                (unsigned long long)c.rejected[st]);
    for (int from = 0; from < 6; from++)
        for (int to = 0; to < 6; to++)
            if (c.transitions[from][to])
                fprintf(f, "breakwater_transitions_total" SEL ",from=\"%s\",to=\"%s\"} %llu\n",
                        bw_state_name((bw_state)from), bw_state_name((bw_state)to),
                        (unsigned long long)c.transitions[from][to]);
    fprintf(f, "breakwater_probe_rounds_total" SEL ",result=\"passed\"} %llu\n", (unsigned long long)c.rounds_passed);
    fprintf(f, "breakwater_probe_rounds_total" SEL ",result=\"failed\"} %llu\n", (unsigned long long)c.rounds_failed);
    fprintf(f, "breakwater_resets_total" SEL "} %llu\n", (unsigned long long)c.resets);
    fprintf(f, "breakwater_call_duration_seconds_count" SEL "} %llu\n", (unsigned long long)c.duration_count);
    fprintf(f, "breakwater_call_duration_seconds_bucket" SEL ",le=\"+Inf\"} %llu\n",
            (unsigned long long)c.duration_count);
    fprintf(f, "breakwater_window_calls" SEL ",kind=\"total\"} %llu\n", (unsigned long long)s.total_calls);
    fprintf(f, "breakwater_window_calls" SEL ",kind=\"failed\"} %llu\n", (unsigned long long)s.failed_calls);
#undef SEL
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        perror(path);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--free-port") == 0)
        return free_port();
    if (argc != 2) {
        fprintf(stderr, "usage: metrics_exporter DIR | --free-port\n");
        return 2;
    }
    const char *dir = argv[1];
    bw_error err;
    int rc;
    bw_config *cfg = bw_config_new();
    if (!cfg)
        die("bw_config_new", BW_ENOMEM, NULL);
    if ((rc = bw_config_parse(cfg,
                              "window=count:10 min_calls=10 failure_rate=0.5 wait=1s permitted_probes=2 "
                              "max_concurrent_probes=1",
                              &err)) != BW_OK)
        die("bw_config_parse", rc, &err);
    bw_breaker *b = NULL;
    if ((rc = bw_breaker_new("checkout", cfg, &b, &err)) != BW_OK)
        die("bw_breaker_new", rc, &err);
    bw_config_free(cfg);

    bw_metrics *m = NULL;
    if ((rc = bw_metrics_new(NULL, &m, &err)) != BW_OK)
        die("bw_metrics_new", rc, &err);
    if ((rc = bw_metrics_add_breaker(m, b)) != BW_OK)
        die("bw_metrics_add_breaker", rc, NULL);
    bw_metrics_server *srv = NULL;
    if ((rc = bw_metrics_serve(m, "127.0.0.1:0", &srv, &err)) != BW_OK)
        die("bw_metrics_serve", rc, &err);
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/port", dir);
    snprintf(tmp, sizeof tmp, "%s/port.tmp", dir);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", bw_metrics_server_port(srv)) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        perror(path);
        return 1;
    }
    printf("listening on 127.0.0.1:%d\n", bw_metrics_server_port(srv));
    fflush(stdout);

    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (strcmp(line, "closed") == 0) {
            for (int i = 0; i < 20; i++)
                if (call(b, BW_SUCCESS) != BW_OK)
                    die("a call in CLOSED", BW_REJECTED, NULL);
        } else if (strcmp(line, "open") == 0) {
            int failures = 0;
            while (bw_breaker_state(b) == BW_STATE_CLOSED && failures < 100) {
                if (call(b, BW_FAILURE) != BW_OK)
                    die("a failing call in CLOSED", BW_REJECTED, NULL);
                failures++;
            }
            if (bw_breaker_state(b) != BW_STATE_OPEN)
                die("tripping", BW_ESTATE, NULL);
            for (int i = 0; i < 7; i++)
                if (call(b, BW_SUCCESS) != BW_REJECTED)
                    die("a call in OPEN was admitted", BW_ESTATE, NULL);
        } else if (strcmp(line, "recover") == 0) {
            int64_t deadline = mono_ms() + 10000;
            while (bw_breaker_state(b) != BW_STATE_CLOSED) {
                if (mono_ms() > deadline)
                    die("recovering within 10 s", BW_ESTATE, NULL);
                /* a rejection here (the wait not over yet) is counted too, and reported by both sides */
                if (call(b, BW_SUCCESS) == BW_REJECTED)
                    sleep_ms(50);
            }
        } else if (strcmp(line, "quit") == 0) {
            break;
        } else {
            fprintf(stderr, "metrics_exporter: unknown command '%s'\n", line);
            continue;
        }
        write_counters(dir, line, b);
        printf("done %s (state %s)\n", line, bw_state_name((bw_state)bw_breaker_state(b)));
        fflush(stdout);
    }
    bw_metrics_server_stop(srv);
    bw_metrics_free(m);
    bw_breaker_free(b);
    bw_fini();
    return 0;
}
