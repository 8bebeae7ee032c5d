/*
 * metrics_bench.c — the cost of the Prometheus / OpenMetrics exposition
 * (observe.h) of a large registry.
 *
 * Prints one line per figure, `BENCH <name> <value> <unit>`, each timed value
 * the median of RUNS writes after a warm-up write; lines starting with '#' are
 * comments.
 *
 *   exposition_registry_10k_us              bw_metrics_write of a registry of BREAKERS
 *                                           breakers (default config, system clock, each
 *                                           with some successes, failures and, for one in
 *                                           ten, a trip and rejections) in the Prometheus
 *                                           text format, into a buffer large enough (sized
 *                                           once with the length query); wall time of one
 *                                           whole write: listing, reading every breaker's
 *                                           counters and snapshot, formatting
 *   exposition_registry_10k_openmetrics_us  the same in OpenMetrics
 *   exposition_registry_10k_bytes           the Prometheus text's size
 *   exposition_registry_10k_samples         its sample lines
 *   exposition_ns_per_sample                exposition_registry_10k_us / samples
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakwater/breakwater.h"

#include "bench.h"

#define BREAKERS 10000

static double write_us(bw_metrics *m, bw_metrics_format format, char *buf, size_t size, size_t *len)
{
    int64_t t0 = mono_ns();
    int rc = bw_metrics_write(m, format, buf, size, len);
    int64_t t1 = mono_ns();
    if (rc != BW_OK)
        die("bw_metrics_write", rc);
    return (double)(t1 - t0) / 1000.0;
}

static double median_write_us(bw_metrics *m, bw_metrics_format format, char *buf, size_t size, size_t *len)
{
    double v[RUNS];
    write_us(m, format, buf, size, len); /* warm-up */
    for (int r = 0; r < RUNS; r++)
        v[r] = write_us(m, format, buf, size, len);
    return median(v, RUNS);
}

int main(void)
{
    bench_init("metrics_bench");
    bw_error err;
    bw_registry *reg = NULL;
    int rc = bw_registry_new(NULL, &reg, &err);
    if (rc != BW_OK)
        die_err("bw_registry_new", rc, &err);
    char name[64];
    for (int i = 0; i < BREAKERS; i++) {
        snprintf(name, sizeof name, "svc-%05d.payments.internal", i);
        bw_breaker *b = NULL;
        if ((rc = bw_registry_get(reg, name, NULL, &b, &err)) != BW_OK)
            die_err("bw_registry_get", rc, &err);
        /* some counts: i % 13 successes and i % 3 failures; one breaker in ten trips (10 failures of 10) */
        int trip = i % 10 == 0;
        int ok = trip ? 0 : i % 13, bad = trip ? 10 : i % 3;
        for (int k = 0; k < ok + bad; k++) {
            bw_permit p;
            if (bw_acquire(b, &p, NULL) != BW_OK)
                break;
            bw_settle(b, &p, k < ok ? BW_SUCCESS : BW_FAILURE);
        }
        if (trip)
            for (int k = 0; k < 3; k++) {
                bw_permit p;
                bw_acquire(b, &p, NULL);
            }
    }

    bw_metrics *m = NULL;
    if ((rc = bw_metrics_new(NULL, &m, &err)) != BW_OK)
        die_err("bw_metrics_new", rc, &err);
    if ((rc = bw_metrics_add_registry(m, reg)) != BW_OK)
        die("bw_metrics_add_registry", rc);
    size_t need = 0;
    if ((rc = bw_metrics_write(m, BW_METRICS_OPENMETRICS, NULL, 0, &need)) != BW_ELIMIT)
        die("bw_metrics_write (length query)", rc);
    size_t size = need + need / 4 + 1; /* the OpenMetrics text is the longer one */
    char *buf = malloc(size);
    if (!buf)
        die("malloc", BW_ENOMEM);
    memset(buf, 0, size); /* fault its pages in before timing */

    size_t len = 0;
    double prom = median_write_us(m, BW_METRICS_PROMETHEUS, buf, size, &len);
    size_t samples = 0;
    for (const char *p = buf; *p;) {
        if (*p != '#')
            samples++;
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
    printf("# %d breakers, %zu samples, %zu bytes of Prometheus text\n", BREAKERS, samples, len);
    report("exposition_registry_10k_us", prom, "us");
    size_t om_len = 0;
    report("exposition_registry_10k_openmetrics_us", median_write_us(m, BW_METRICS_OPENMETRICS, buf, size, &om_len),
           "us");
    printf("BENCH exposition_registry_10k_bytes %zu bytes\n", len);
    printf("BENCH exposition_registry_10k_samples %zu samples\n", samples);
    report("exposition_ns_per_sample", prom * 1000.0 / (double)(samples ? samples : 1), "ns");
    fflush(stdout);

    free(buf);
    bw_metrics_free(m);
    bw_registry_free(reg);
    bw_fini();
    return 0;
}
