/*
 * registry_bench.c — micro-benchmarks of the registry's lookup and of keyed
 * circuits: hot paths, memory per circuit and a flood of new keys.
 *
 * Prints one line per figure, `BENCH <name> <value> <unit>`, each timed value the
 * median of RUNS runs after a warm-up (the flood runs once); lines starting with
 * '#' are comments.
 *
 *   keyed_flood_rss_mb               peak RSS of the process (getrusage ru_maxrss)
 *                                    after streaming FLOOD_KEYS distinct keys through
 *                                    a breaker with keyed_maxsize 1024 (limit 2048),
 *                                    acquire + settle(SUCCESS) each, system clock.
 *                                    Runs first, so nothing else has raised the peak.
 *   keyed_flood_resident             bw_keyed_count after the flood (<= 2048)
 *   keyed_flood_ns_per_key           wall time of the flood / FLOOD_KEYS
 *   registry_hit_ns                  bw_registry_get of one existing name
 *                                    ("svc-4242.payments.internal"), 100,000 resident
 *   registry_hit_rotating_ns         the same cycling through 1,024 resident names
 *   registry_hit_two_threads_ns      2 threads pinned to 2 CPUs, each getting its own
 *                                    existing name; wall time / total lookups
 *   registry_hit_two_threads_rotating_ns  the same, each thread cycling through its
 *                                    own 1,024 names
 *   keyed_acquire_settle_ns          bw_keyed_acquire(b, "tenant-4242") +
 *                                    bw_settle(SUCCESS), 100,000 keys resident
 *                                    (keyed_maxsize 0: none evicted), default
 *                                    config, system clock
 *   keyed_acquire_settle_rotating_ns the same cycling through 1,024 resident keys
 *   keyed_bytes_per_circuit          bw_keyed_bytes / bw_keyed_count after 10,000
 *                                    circuits (count window of 100, the default)
 *   registry_hit_allocations_per_call          heap allocations per registry hit
 *   keyed_acquire_settle_allocations_per_call  per keyed acquire + settle of a
 *                                    resident key
 *
 * Allocations are counted by tests/support/alloc_hook.h, which replaces malloc and
 * friends in this program. Sanitizer builds bring their own allocator, so there
 * the hook is compiled out and the allocation figures are not reported.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "breakwater/breakwater.h"

#include "bench.h"

#define NAMES 100000 /* resident registry names and resident keys */
#define ROTATE 1024  /* names or keys cycled through by the rotating figures */
#define BYTES_CIRCUITS 10000
#define FLOOD_KEYS 10000000L
#define FLOOD_MAXSIZE 1024

/* Iterations per timed run (roughly 30 s in all on a 2-core machine). */
#define ITERS_HIT 10000000L
#define ITERS_HIT_THREADS 5000000L /* per thread */
#define ITERS_KEYED 4000000L
#define ITERS_ALLOC 1000000L

/* ---- allocation counting: tests/support/alloc_hook.h ---- */

#include "alloc_hook.h"
#define BENCH_COUNT_ALLOCS ALLOC_HOOK

/* ---- helpers ---- */

static volatile uintptr_t sink;

/* Peak resident set of the process so far, in MB (ru_maxrss is in KB on Linux). */
static double peak_rss_mb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return (double)ru.ru_maxrss / 1024.0;
}

/* Current resident set in MB, from /proc/self/statm; -1 when unavailable. */
static double current_rss_mb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size, resident;
    if (!f)
        return -1;
    int n = fscanf(f, "%ld %ld", &size, &resident);
    fclose(f);
    return n == 2 ? (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0) : -1;
}

/* Writes `prefix` then v in decimal at p, NUL-terminated; returns p. Much cheaper than snprintf. */
static char *make_key(char *p, const char *prefix, size_t plen, unsigned long v)
{
    char tmp[24];
    int n = 0;
    memcpy(p, prefix, plen);
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int i = 0; i < n; i++)
        p[plen + (size_t)i] = tmp[n - 1 - i];
    p[plen + (size_t)n] = 0;
    return p;
}

static bw_breaker *make_breaker(const char *name, int64_t keyed_maxsize)
{
    bw_error err;
    bw_config *cfg = bw_config_new();
    if (!cfg)
        die("bw_config_new", BW_ENOMEM);
    int rc = bw_config_set_keyed_maxsize(cfg, keyed_maxsize, &err);
    if (rc != BW_OK)
        die("bw_config_set_keyed_maxsize", rc);
    bw_breaker *b = NULL;
    if ((rc = bw_breaker_new(name, cfg, &b, &err)) != BW_OK) {
        fprintf(stderr, "%s\n", err.message);
        die("bw_breaker_new", rc);
    }
    bw_config_free(cfg);
    return b;
}

/* ---- the flood ---- */

static void bench_flood(void)
{
    printf("# before the flood: peak RSS %.2f MB, current RSS %.2f MB\n", peak_rss_mb(), current_rss_mb());
    bw_breaker *b = make_breaker("bench-flood", FLOOD_MAXSIZE);
    char key[64];
    long bad = 0;
    int64_t t0 = mono_ns();
    for (long i = 0; i < FLOOD_KEYS; i++) {
        bw_permit p;
        make_key(key, "flood-", 6, (unsigned long)i);
        int rc = bw_keyed_acquire(b, key, &p, NULL);
        if (rc != BW_OK) {
            fprintf(stderr, "registry_bench: flood key %s: %s\n", key, bw_strerror(rc));
            bad++;
            if (bad > 10)
                die("bw_keyed_acquire in the flood", rc);
            continue;
        }
        bad += bw_settle(b, &p, BW_SUCCESS) != BW_OK;
    }
    int64_t t1 = mono_ns();
    if (bad)
        die("the flood", BW_EINVAL);
    size_t resident = bw_keyed_count(b);
    double peak = peak_rss_mb();
    printf("# after the flood: current RSS %.2f MB, bw_keyed_bytes %.2f MB, %.1f s\n", current_rss_mb(),
           (double)bw_keyed_bytes(b) / (1024.0 * 1024.0), (double)(t1 - t0) / 1e9);
    report("keyed_flood_rss_mb", peak, "MB");
    printf("BENCH keyed_flood_resident %zu circuits\n", resident);
    report("keyed_flood_ns_per_key", (double)(t1 - t0) / (double)FLOOD_KEYS, "ns");
    if (resident > 2 * FLOOD_MAXSIZE) {
        fprintf(stderr, "registry_bench: %zu circuits resident after the flood, above keyed_limit %d\n", resident,
                2 * FLOOD_MAXSIZE);
        exit(1);
    }
    bw_breaker_free(b);
}

/* ---- registry hits ---- */

/* The names or keys a loop cycles through: list[i & mask] at iteration i. */
typedef struct hits {
    bw_registry *r; /* hit_loop */
    bw_breaker *b;  /* keyed_loop */
    const char *const *list;
    unsigned mask;
} hits;

static long hit_loop(void *arg, long iters)
{
    const hits *h = arg;
    bw_registry *r = h->r;
    const char *const *names = h->list;
    unsigned mask = h->mask;
    long bad = 0;
    uintptr_t acc = 0;
    for (long i = 0; i < iters; i++) {
        bw_breaker *b = NULL;
        bad += bw_registry_get(r, names[(unsigned)i & mask], NULL, &b, NULL) != BW_OK;
        acc ^= (uintptr_t)b;
        BARRIER();
    }
    sink = acc;
    return bad;
}

/* ---- keyed acquire + settle ---- */

static long keyed_loop(void *arg, long iters)
{
    const hits *h = arg;
    bw_breaker *b = h->b;
    const char *const *keys = h->list;
    unsigned mask = h->mask;
    long bad = 0;
    for (long i = 0; i < iters; i++) {
        bw_permit p;
        bad += bw_keyed_acquire(b, keys[(unsigned)i & mask], &p, NULL);
        bad += bw_settle(b, &p, BW_SUCCESS);
        BARRIER();
    }
    return bad;
}

/* ---- main ---- */

int main(void)
{
    bench_init("registry_bench");
    bw_clock_system(); /* calibrate before anything is timed */

    /* The flood first, so that the peak RSS is its own. */
    bench_flood();

    /* The registry: 100,000 resident names. */
    unsigned long setup_allocs = allocs_now();
    bw_registry *r = NULL;
    int rc = bw_registry_new(NULL, &r, NULL);
    if (rc != BW_OK)
        die("bw_registry_new", rc);
    if (BENCH_COUNT_ALLOCS && allocs_now() == setup_allocs) {
        fprintf(stderr, "registry_bench: the malloc interposition counted nothing\n");
        return 1;
    }
    enum { NAME_LEN = 40 };
    char *names = malloc((size_t)NAMES * NAME_LEN);
    if (!names)
        die("malloc", BW_ENOMEM);
    for (int i = 0; i < NAMES; i++) {
        char *nm = names + (size_t)i * NAME_LEN;
        snprintf(nm, NAME_LEN, "svc-%d.payments.internal", i);
        bw_breaker *b;
        if ((rc = bw_registry_get(r, nm, NULL, &b, NULL)) != BW_OK)
            die("bw_registry_get (setup)", rc);
    }
    if (bw_registry_count(r) != NAMES)
        die("bw_registry_count", BW_ESTATE);
    /* One name, and two disjoint sets of 1,024 names spread over the table. */
    const char *one[1] = {names + (size_t)4242 * NAME_LEN};
    const char *one_b[1] = {names + (size_t)4243 * NAME_LEN};
    const char *rot0[ROTATE], *rot1[ROTATE];
    for (int i = 0; i < ROTATE; i++) {
        rot0[i] = names + (size_t)((i * 2 * 47) % NAMES) * NAME_LEN;
        rot1[i] = names + (size_t)((i * 2 * 47 + 1) % NAMES) * NAME_LEN;
    }
    hits hit_one = {r, NULL, one, 0}, hit_one_b = {r, NULL, one_b, 0};
    hits hit_rot0 = {r, NULL, rot0, ROTATE - 1}, hit_rot1 = {r, NULL, rot1, ROTATE - 1};
    report("registry_hit_ns", bench_median_ns(hit_loop, &hit_one, ITERS_HIT, "the hit loop"), "ns");
    report("registry_hit_rotating_ns", bench_median_ns(hit_loop, &hit_rot0, ITERS_HIT, "the hit loop"), "ns");
    report("registry_hit_two_threads_ns",
           bench_two_threads_median_ns(hit_loop, &hit_one, &hit_one_b, ITERS_HIT_THREADS, "the two-thread hit loop"),
           "ns");
    report("registry_hit_two_threads_rotating_ns",
           bench_two_threads_median_ns(hit_loop, &hit_rot0, &hit_rot1, ITERS_HIT_THREADS, "the two-thread hit loop"),
           "ns");
    if (bw_registry_count(r) != NAMES)
        die("the hits made breakers", BW_ESTATE);

    /* Keyed circuits: 100,000 resident keys, none evicted. */
    bw_breaker *kb = make_breaker("bench-keyed", 0);
    char *keys = malloc((size_t)NAMES * NAME_LEN);
    if (!keys)
        die("malloc", BW_ENOMEM);
    for (int i = 0; i < NAMES; i++) {
        char *k = make_key(keys + (size_t)i * NAME_LEN, "tenant-", 7, (unsigned long)i);
        bw_permit p;
        if ((rc = bw_keyed_acquire(kb, k, &p, NULL)) != BW_OK)
            die("bw_keyed_acquire (setup)", rc);
        if ((rc = bw_settle(kb, &p, BW_SUCCESS)) != BW_OK)
            die("bw_settle (setup)", rc);
    }
    if (bw_keyed_count(kb) != NAMES)
        die("bw_keyed_count", BW_ESTATE);
    const char *key1[1] = {keys + (size_t)4242 * NAME_LEN};
    const char *krot[ROTATE];
    for (int i = 0; i < ROTATE; i++)
        krot[i] = keys + (size_t)((i * 97) % NAMES) * NAME_LEN;
    hits keyed_one = {NULL, kb, key1, 0}, keyed_rot = {NULL, kb, krot, ROTATE - 1};
    report("keyed_acquire_settle_ns", bench_median_ns(keyed_loop, &keyed_one, ITERS_KEYED, "the keyed loop"), "ns");
    report("keyed_acquire_settle_rotating_ns", bench_median_ns(keyed_loop, &keyed_rot, ITERS_KEYED, "the keyed loop"),
           "ns");
    if (bw_keyed_count(kb) != NAMES)
        die("the keyed loop changed the resident count", BW_ESTATE);

    /* Bytes per circuit: 10,000 circuits on the default 100-call count window. */
    bw_breaker *sized = make_breaker("bench-bytes", 0);
    char key[64];
    for (int i = 0; i < BYTES_CIRCUITS; i++) {
        bw_permit p;
        make_key(key, "tenant-", 7, (unsigned long)i);
        if ((rc = bw_keyed_acquire(sized, key, &p, NULL)) != BW_OK || (rc = bw_settle(sized, &p, BW_SUCCESS)) != BW_OK)
            die("keyed acquire/settle (bytes)", rc);
    }
    size_t count = bw_keyed_count(sized);
    if (count != BYTES_CIRCUITS)
        die("bw_keyed_count (bytes)", BW_ESTATE);
    printf("# bw_keyed_bytes %zu for %zu circuits; bw_breaker_bytes of the breaker itself %zu\n", bw_keyed_bytes(sized),
           count, bw_breaker_bytes(sized));
    report("keyed_bytes_per_circuit", (double)bw_keyed_bytes(sized) / (double)count, "bytes");
    bw_breaker_free(sized);

    /* Allocations on the warm hit paths. */
#if BENCH_COUNT_ALLOCS
    hit_loop(&hit_rot0, 1000);
    unsigned long a0 = allocs_now();
    long bad = hit_loop(&hit_rot0, ITERS_ALLOC);
    unsigned long a1 = allocs_now();
    sink = (uintptr_t)bad;
    printf("BENCH registry_hit_allocations_per_call %.6f allocs\n", (double)(a1 - a0) / (double)ITERS_ALLOC);
    keyed_loop(&keyed_rot, 1000);
    a0 = allocs_now();
    bad = keyed_loop(&keyed_rot, ITERS_ALLOC);
    a1 = allocs_now();
    sink = (uintptr_t)bad;
    printf("BENCH keyed_acquire_settle_allocations_per_call %.6f allocs\n", (double)(a1 - a0) / (double)ITERS_ALLOC);
#else
    printf("# allocations_per_call not measured: sanitizer build\n");
#endif
    fflush(stdout);

    bw_breaker_free(kb);
    bw_registry_free(r);
    free(keys);
    free(names);
    return 0;
}
