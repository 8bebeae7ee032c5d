/*
 * bench.h — what the benchmark programs in bench/ share. Header-only: every
 * function is static (inline, so that a program need not use all of them), and
 * each program includes this file once, after defining _GNU_SOURCE.
 *
 * Output conventions: `BENCH <name> <value> <unit>` per figure, '#' comments.
 *
 *   RUNS, BARRIER()        timed runs per figure; a compiler barrier for the end of
 *                          each loop iteration, so that iterations are not merged
 *   bench_init(prog)       names the program for die(), reads BENCH_VERBOSE (print
 *                          every run as a comment) and prints the '#' header line
 *   mono_ns()              CLOCK_MONOTONIC in ns
 *   bench_sleep_ns(ns)     sleep ns nanoseconds (nothing when ns <= 0), resuming
 *                          after signals
 *   die(what, rc)          "<prog>: <what> failed: <bw_strerror(rc)> (rc)", exit 1;
 *   die_err(what, rc, err) the same followed by err->message when err is not NULL
 *   median(v, n)           median of v[0..n) (sorts v); with BENCH_VERBOSE first
 *                          prints the runs as a "#  runs:" line
 *   report(name, v, unit)  prints `BENCH name v unit` (%.2f) and flushes
 *
 * Timed runs. A load is a loop function `long loop(void *ctx, long iters)`
 * defined by the program: it runs `iters` iterations (each ending in BARRIER())
 * and returns its "bad" count, 0 when every iteration did what it should. The
 * runners below call it once per run, never per iteration, and take the time
 * around that call, so what is timed is the program's own loop.
 *
 *   bench_median_ns(loop, ctx, iters, what)
 *                          a warm-up run of iters/4, then RUNS timed runs of
 *                          iters; the median ns per iteration. Dies (naming
 *                          `what`) if any run, the warm-up included, is bad.
 *   bench_median_ns_warm(loop, ctx, warm, iters, what)
 *                          the same with a warm-up of `warm` iterations
 *
 * Two threads. For loads on two threads, pinned to two different CPUs when the
 * process may run on two: left alone, the scheduler often runs both on one CPU
 * for a whole run, which measures time-slicing rather than contention.
 *
 *   bench_two_cpus(cpu)    the first two CPUs this process may run on, or -1, -1
 *   bench_start_pinned(th, cpu, fn, arg)
 *                          pthread_create pinned to cpu (unpinned when cpu < 0 or
 *                          pinning is refused); dies if no thread can be made
 *   bench_two_threads_ns(loop, ctx0, ctx1, iters, what)
 *                          one run: two pinned threads released together run
 *                          loop(ctx0, iters) and loop(ctx1, iters); the wall time
 *                          from their release to both joins / (2 * iters). Dies
 *                          if either is bad.
 *   bench_two_threads_median_ns(loop, ctx0, ctx1, iters, what)
 *                          a warm-up run of iters/4, then the median of RUNS runs
 */
#ifndef BW_BENCH_H
#define BW_BENCH_H

#ifndef _GNU_SOURCE
#error "define _GNU_SOURCE before any #include (bench.h pins threads with the GNU affinity calls)"
#endif

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "breakwater/breakwater.h"

#define RUNS 7

#define BARRIER() __asm__ __volatile__("" ::: "memory")

/* A load: runs `iters` iterations on ctx, returns the bad count (0: all fine). */
typedef long (*bench_loop)(void *ctx, long iters);

static const char *bench_prog = "bench"; /* set by bench_init, used by die() */
static int bench_verbose;                /* BENCH_VERBOSE set: print every run as a comment */

/* ---- output and errors ---- */

static inline void bench_init(const char *prog)
{
    bench_prog = prog;
    bench_verbose = getenv("BENCH_VERBOSE") != NULL;
    printf("# breakwater %s %s: nproc=%ld, %d runs per figure (median), clock=%s\n", bw_version_string(), prog,
           sysconf(_SC_NPROCESSORS_ONLN), RUNS, getenv("BW_CLOCK") ? getenv("BW_CLOCK") : "system");
    fflush(stdout);
}

static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void bench_sleep_ns(int64_t ns)
{
    if (ns <= 0)
        return;
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static inline void die_err(const char *what, int rc, const bw_error *err)
{
    fprintf(stderr, "%s: %s failed: %s (%d)%s%s\n", bench_prog, what, bw_strerror(rc), rc, err ? ": " : "",
            err ? err->message : "");
    exit(1);
}

static inline void die(const char *what, int rc)
{
    die_err(what, rc, NULL);
}

/* A loop's bad count must be 0. */
static inline void bench_check(const char *what, long bad)
{
    if (bad) {
        fprintf(stderr, "%s: %s failed (bad count %ld)\n", bench_prog, what, bad);
        exit(1);
    }
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double median(double *v, int n)
{
    if (bench_verbose) {
        printf("#  runs:");
        for (int i = 0; i < n; i++)
            printf(" %.2f", v[i]);
        printf("\n");
    }
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline void report(const char *name, double value, const char *unit)
{
    printf("BENCH %s %.2f %s\n", name, value, unit);
    fflush(stdout);
}

/* ---- timed runs ---- */

static inline double bench_median_ns_warm(bench_loop loop, void *ctx, long warm, long iters, const char *what)
{
    double v[RUNS];
    bench_check(what, loop(ctx, warm));
    for (int r = 0; r < RUNS; r++) {
        int64_t t0 = mono_ns();
        long bad = loop(ctx, iters);
        int64_t t1 = mono_ns();
        bench_check(what, bad);
        v[r] = (double)(t1 - t0) / (double)iters;
    }
    return median(v, RUNS);
}

static inline double bench_median_ns(bench_loop loop, void *ctx, long iters, const char *what)
{
    return bench_median_ns_warm(loop, ctx, iters / 4, iters, what);
}

/* ---- two threads ---- */

static inline void bench_two_cpus(int cpu[2])
{
    cpu[0] = cpu[1] = -1;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        int k = 0;
        for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &allowed))
                cpu[k++] = c;
        if (k < 2)
            cpu[0] = cpu[1] = -1;
    }
}

static inline void bench_start_pinned(pthread_t *th, int cpu, void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    }
    int rc = pthread_create(th, &attr, fn, arg);
    if (rc != 0 && cpu >= 0) /* pinning refused: run unpinned */
        rc = pthread_create(th, NULL, fn, arg);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        die("pthread_create", BW_ESYS);
}

typedef struct bench_thread {
    bench_loop loop;
    void *ctx;
    long iters;
    long bad;
    pthread_barrier_t *start;
} bench_thread;

static inline void *bench_thread_main(void *arg)
{
    bench_thread *t = arg;
    pthread_barrier_wait(t->start);
    t->bad = t->loop(t->ctx, t->iters);
    return NULL;
}

static inline double bench_two_threads_ns(bench_loop loop, void *ctx0, void *ctx1, long iters, const char *what)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 3);
    int cpu[2];
    bench_two_cpus(cpu);
    bench_thread t[2] = {{loop, ctx0, iters, 0, &start}, {loop, ctx1, iters, 0, &start}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        bench_start_pinned(&th[i], cpu[i], bench_thread_main, &t[i]);
    pthread_barrier_wait(&start);
    int64_t t0 = mono_ns();
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    int64_t t1 = mono_ns();
    pthread_barrier_destroy(&start);
    bench_check(what, t[0].bad);
    bench_check(what, t[1].bad);
    return (double)(t1 - t0) / (double)(2 * iters);
}

static inline double bench_two_threads_median_ns(bench_loop loop, void *ctx0, void *ctx1, long iters, const char *what)
{
    double v[RUNS];
    bench_two_threads_ns(loop, ctx0, ctx1, iters / 4, what); /* warm-up */
    for (int r = 0; r < RUNS; r++)
        v[r] = bench_two_threads_ns(loop, ctx0, ctx1, iters, what);
    return median(v, RUNS);
}

#endif /* BW_BENCH_H */
