/*
 * store_bench.c — what a store costs a breaker: the coordinated CLOSED path
 * against a breaker without a store, stored-mode calls on shm: and sqlite:
 * from one and two processes, and how long a trip takes to reach another
 * process in coordinated mode.
 *
 * Prints one line per figure, `BENCH <name> <value> <unit>`, each the median of
 * RUNS runs (or trials) after a warm-up; lines starting with '#' are comments.
 *
 *   local_closed_ns                 acquire + settle(SUCCESS) on a CLOSED breaker
 *                                   with no store (default config, system clock)
 *   coordinated_closed_ns           the same on an identical breaker coordinated
 *                                   through a memory: store (CLOSED, nothing shared;
 *                                   store_poll 1 h: no poll runs during the loops)
 *   coordinated_closed_overhead_ns  coordinated_closed_ns - local_closed_ns (the
 *                                   two medians; target <= 3 ns)
 *   shm_stored_call_ns              acquire + settle(SUCCESS) in stored mode on
 *                                   shm:, one process (target <= 120 ns)
 *   shm_stored_two_procs_calls_per_s  2 forked processes (pinned to 2 CPUs when
 *                                   possible), each with its own store handle and
 *                                   breaker of one name, acquire + settle for
 *                                   DURATION; the sum of both rates (target >= 5e6)
 *   sqlite_stored_two_procs_calls_per_s  the same on sqlite: in a temp directory
 *                                   (target >= 10,000)
 *   trip_propagation_ms             coordinated, store_poll 100 ms, shm:: process A
 *                                   trips (two failures) at a random moment;
 *                                   process B, polling with bw_acquire every
 *                                   100 us, first rejects; the median over TRIALS
 *                                   trials, each on a fresh circuit name (target
 *                                   <= 110 ms); min and max as a comment
 *   trip_propagation_sqlite_ms      the same on sqlite:
 *   coordinated_closed_allocations_per_call  heap allocations per acquire +
 *                                   settle on the coordinated CLOSED path (0)
 *   lane_idle_cpu_pct_8000          8,000 idle coordinated breakers on memory:
 *                                   (default store_poll, 1 s): the process's CPU
 *                                   time over LANE_SECONDS of wall time, in percent
 *                                   of one CPU (the main thread sleeps; what runs
 *                                   is the lane's polls; target <= 1 %)
 *   lane_idle_cpu_pct_8000_sqlite   the same on sqlite: (target <= 5 %)
 *
 * Allocations are counted by tests/support/alloc_hook.h (compiled out in sanitizer
 * builds, where the figure is not reported). Segments are named
 * bw-bench-<pid>-*, databases live in a mkdtemp directory; both are removed at
 * the end. Children die with the parent (PR_SET_PDEATHSIG) and on an alarm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "breakwater/breakwater.h"

#include "bench.h"

#define MS 1000000LL
#define ITERS_CLOSED 10000000L
#define ITERS_STORED 1000000L
#define ITERS_ALLOC 1000000L
#define DURATION (500 * MS) /* of each two-process run */
#define TRIALS 7
#define LANE_BREAKERS 8000
#define LANE_SECONDS 5

/* ---- allocation counting: tests/support/alloc_hook.h ---- */

#include "alloc_hook.h"
#define BENCH_COUNT_ALLOCS ALLOC_HOOK

static char shm_url[128], shm_path[128], tmpdir[128], sqlite_url[256];
static pid_t main_pid; /* children must not remove the store at exit */

/* ---- helpers ---- */

static bw_store *open_store(const char *url)
{
    bw_store *s = NULL;
    bw_error err;
    int rc = bw_store_open(url, &s, &err);
    if (rc != BW_OK)
        die_err("bw_store_open", rc, &err);
    return s;
}

/* A breaker: the default config, with a store in `mode` when s is not NULL, and store_poll when poll > 0. */
static bw_breaker *make(const char *name, bw_store *s, bw_store_mode mode, int64_t poll, int small_window)
{
    bw_error err;
    bw_config *cfg = bw_config_new();
    if (!cfg)
        die("bw_config_new", BW_ENOMEM);
    int rc = BW_OK;
    if (small_window) { /* trips on two failures */
        if ((rc = bw_config_set_window(cfg, BW_WINDOW_COUNT, 4, &err)) != BW_OK ||
            (rc = bw_config_set_min_calls(cfg, 2, &err)) != BW_OK)
            die_err("config", rc, &err);
    }
    if (poll > 0 && (rc = bw_config_set_store_poll(cfg, poll, &err)) != BW_OK)
        die_err("bw_config_set_store_poll", rc, &err);
    if (s && (rc = bw_config_set_store(cfg, s, mode, &err)) != BW_OK)
        die_err("bw_config_set_store", rc, &err);
    bw_breaker *b = NULL;
    if ((rc = bw_breaker_new(name, cfg, &b, &err)) != BW_OK)
        die_err("bw_breaker_new", rc, &err);
    bw_config_free(cfg);
    return b;
}

/* The load: acquire + settle(SUCCESS); bad = calls not admitted or not settled. */
static long call_loop(void *ctx, long iters)
{
    bw_breaker *b = ctx;
    long bad = 0;
    for (long i = 0; i < iters; i++) {
        bw_permit p;
        if (bw_acquire(b, &p, NULL) != BW_OK)
            bad++;
        else if (bw_settle(b, &p, BW_SUCCESS) != BW_OK)
            bad++;
        BARRIER();
    }
    return bad;
}

/* A child: dies with the parent, and on its own after 30 s. */
static void child_guard(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(9);
    alarm(30);
}

static int reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void read_all(int fd, void *buf, size_t n, const char *what)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fprintf(stderr, "store_bench: %s: a child went away\n", what);
            exit(1);
        }
        got += (size_t)r;
    }
}

static void write_all(int fd, const void *buf, size_t n)
{
    if (write(fd, buf, n) != (ssize_t)n)
        _exit(20);
}

static void wait_closed(int fd)
{
    char c;
    ssize_t n;
    while ((n = read(fd, &c, 1)) != 0)
        if (n < 0 && errno != EINTR)
            break;
}

/* ---- the coordinated CLOSED path against no store ---- */

static void bench_closed(void)
{
    bw_store *mem = open_store("memory:");
    bw_breaker *local = make("bench-local", NULL, 0, 0, 0);
    /*
     * store_poll 1 h: the lane polls once at creation and not again during the
     * loops, so the process-wide allocation counter sees the calling path only
     * (a poll does not touch the CLOSED path's cost either way).
     */
    bw_breaker *coord = make("bench-coordinated", mem, BW_STORE_COORDINATED, 3600 * 1000 * MS, 0);
    /* Alternate the two, so that drift of the machine hits both alike. */
    double l[RUNS], c[RUNS];
    bench_check("warm-up", call_loop(local, ITERS_CLOSED / 4) + call_loop(coord, ITERS_CLOSED / 4));
    for (int r = 0; r < RUNS; r++) {
        int64_t t0 = mono_ns();
        bench_check("the local loop", call_loop(local, ITERS_CLOSED));
        int64_t t1 = mono_ns();
        bench_check("the coordinated loop", call_loop(coord, ITERS_CLOSED));
        int64_t t2 = mono_ns();
        l[r] = (double)(t1 - t0) / ITERS_CLOSED;
        c[r] = (double)(t2 - t1) / ITERS_CLOSED;
    }
    double lm = median(l, RUNS), cm = median(c, RUNS);
    if (bw_breaker_state(coord) != BW_STATE_CLOSED)
        die("the coordinated breaker left CLOSED", BW_ESTATE);
    report("local_closed_ns", lm, "ns");
    report("coordinated_closed_ns", cm, "ns");
    report("coordinated_closed_overhead_ns", cm - lm, "ns");
#if BENCH_COUNT_ALLOCS
    call_loop(coord, 1000);
    unsigned long a0 = allocs_now();
    long bad = call_loop(coord, ITERS_ALLOC);
    unsigned long a1 = allocs_now();
    bench_check("the allocation loop", bad);
    printf("BENCH coordinated_closed_allocations_per_call %.6f allocs\n", (double)(a1 - a0) / (double)ITERS_ALLOC);
    fflush(stdout);
#else
    printf("# allocations_per_call not measured: sanitizer build\n");
#endif
    bw_breaker_free(coord);
    bw_breaker_free(local);
    bw_store_close(mem); /* stops its lane: no thread is left for the forks below */
}

/* ---- stored mode, one process ---- */

static void bench_stored_one(void)
{
    bw_store *s = open_store(shm_url);
    bw_breaker *b = make("bench-stored-one", s, BW_STORE_STORED, 0, 0);
    report("shm_stored_call_ns", bench_median_ns(call_loop, b, ITERS_STORED, "the stored loop"), "ns");
    bw_snapshot snap;
    if (bw_breaker_snapshot(b, &snap) == BW_OK)
        printf("# after the stored loop: state %s, %llu calls in the stored window\n", bw_state_name(snap.state),
               (unsigned long long)snap.total_calls);
    bw_breaker_free(b);
    bw_store_close(s);
}

/* ---- stored mode, two processes ---- */

typedef struct rate {
    long calls;
    int64_t ns;
    long bad;
} rate;

/* A child of the two-process run: pinned, its own store and breaker, calls for DURATION from the start signal. */
static void stored_child(pid_t parent, const char *url, const char *name, int cpu, int start_fd, int out_fd)
{
    child_guard(parent);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set); /* refused: run unpinned */
    }
    bw_store *s = NULL;
    if (bw_store_open(url, &s, NULL) != BW_OK)
        _exit(2);
    bw_breaker *b = make(name, s, BW_STORE_STORED, 0, 0);
    bench_check("the stored warm-up", call_loop(b, 1000));
    write_all(out_fd, "r", 1);
    wait_closed(start_fd);
    rate r = {0, 0, 0};
    int64_t t0 = mono_ns(), t1 = t0;
    while (t1 - t0 < DURATION) {
        r.bad += call_loop(b, 256);
        r.calls += 256;
        t1 = mono_ns();
    }
    r.ns = t1 - t0;
    write_all(out_fd, &r, sizeof r);
    bw_breaker_free(b);
    bw_store_close(s);
    _exit(0);
}

/* One run: calls per second of both processes together. */
static double stored_two_procs_run(const char *url, const char *name)
{
    int cpu[2];
    bench_two_cpus(cpu);
    int start[2], out[2];
    if (pipe(start) != 0 || pipe(out) != 0)
        die("pipe", BW_ESYS);
    pid_t parent = getpid(), pid[2];
    fflush(stdout);
    for (int i = 0; i < 2; i++) {
        pid[i] = fork();
        if (pid[i] < 0)
            die("fork", BW_ESYS);
        if (pid[i] == 0) {
            close(start[1]);
            close(out[0]);
            stored_child(parent, url, name, cpu[i], start[0], out[1]);
        }
    }
    close(start[0]);
    close(out[1]);
    char c[2];
    read_all(out[0], c, 2, "the two-process run (ready)");
    close(start[1]); /* go */
    double per_s = 0;
    for (int i = 0; i < 2; i++) {
        rate r;
        read_all(out[0], &r, sizeof r, "the two-process run (result)");
        bench_check("the two-process run", r.bad);
        per_s += (double)r.calls * 1e9 / (double)r.ns;
    }
    close(out[0]);
    for (int i = 0; i < 2; i++)
        if (reap(pid[i]) != 0)
            die("a child of the two-process run", BW_ESTATE);
    return per_s;
}

static void bench_stored_two(const char *figure, const char *url)
{
    double v[RUNS];
    stored_two_procs_run(url, "bench-stored-two"); /* warm-up */
    for (int r = 0; r < RUNS; r++)
        v[r] = stored_two_procs_run(url, "bench-stored-two");
    report(figure, median(v, RUNS), "calls/s");
}

/* ---- trip propagation ---- */

/* B: its own store and coordinated breaker; ready; acquire every 100 us until rejected; send the instant. */
static void prop_child(pid_t parent, const char *url, const char *name, int out_fd)
{
    child_guard(parent);
    bw_store *s = NULL;
    if (bw_store_open(url, &s, NULL) != BW_OK)
        _exit(2);
    bw_breaker *b = make(name, s, BW_STORE_COORDINATED, 100 * MS, 1);
    bench_sleep_ns(5 * MS); /* its first poll (at once) finds nothing shared */
    write_all(out_fd, "r", 1);
    int64_t at = 0, give_up = mono_ns() + 3000 * MS;
    while (mono_ns() < give_up) {
        bw_permit p;
        bw_rejection why;
        if (bw_acquire(b, &p, &why) != BW_OK) {
            at = mono_ns();
            break;
        }
        bw_settle(b, &p, BW_SUCCESS);
        bench_sleep_ns(100000);
    }
    write_all(out_fd, &at, sizeof at);
    bw_breaker_free(b);
    bw_store_close(s);
    _exit(0);
}

static void bench_propagation(const char *figure, const char *url, const char *tag)
{
    double v[TRIALS];
    unsigned seed = (unsigned)getpid();
    for (int t = 0; t < TRIALS; t++) {
        char name[64];
        snprintf(name, sizeof name, "bench-prop-%s-%d", tag, t); /* a fresh circuit per trial */
        int out[2];
        if (pipe(out) != 0)
            die("pipe", BW_ESYS);
        pid_t parent = getpid();
        fflush(stdout);
        pid_t pid = fork(); /* before A starts a lane */
        if (pid < 0)
            die("fork", BW_ESYS);
        if (pid == 0) {
            close(out[0]);
            prop_child(parent, url, name, out[1]);
        }
        close(out[1]);
        char c;
        read_all(out[0], &c, 1, "the propagation trial (ready)");
        bw_store *s = open_store(url);
        bw_breaker *a = make(name, s, BW_STORE_COORDINATED, 100 * MS, 1);
        bench_sleep_ns((int64_t)(rand_r(&seed) % 100) * MS); /* at a random phase of B's polls */
        int64_t tripped = 0;
        for (int i = 0; i < 2; i++) {
            bw_permit p;
            if (bw_acquire(a, &p, NULL) != BW_OK || bw_settle(a, &p, BW_FAILURE) != BW_OK)
                die("the trip", BW_ESTATE);
            tripped = mono_ns();
        }
        if (bw_breaker_state(a) != BW_STATE_OPEN)
            die("the trip (A is not OPEN)", BW_ESTATE);
        int64_t seen;
        read_all(out[0], &seen, sizeof seen, "the propagation trial (result)");
        if (seen == 0)
            die("the propagation trial (B never rejected within 3 s)", BW_ESTATE);
        close(out[0]);
        if (reap(pid) != 0)
            die("the propagation child", BW_ESTATE);
        bw_breaker_free(a);
        bw_store_close(s);
        v[t] = (double)(seen - tripped) / 1e6;
    }
    double lo = v[0], hi = v[0];
    for (int t = 1; t < TRIALS; t++) {
        lo = v[t] < lo ? v[t] : lo;
        hi = v[t] > hi ? v[t] : hi;
    }
    printf("# %s: %d trials, min %.2f ms, max %.2f ms (store_poll 100 ms)\n", figure, TRIALS, lo, hi);
    report(figure, median(v, TRIALS), "ms");
}

/* ---- the lane with many idle coordinated breakers ---- */

/* This process's CPU time (user + system), in ns. */
static int64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
           ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

static void bench_lane_idle(const char *figure, const char *url)
{
    bw_store *s = open_store(url);
    bw_breaker **b = malloc(LANE_BREAKERS * sizeof *b);
    if (!b)
        die("malloc", BW_ENOMEM);
    char name[64];
    for (int i = 0; i < LANE_BREAKERS; i++) {
        snprintf(name, sizeof name, "lane-idle-%d", i);
        b[i] = make(name, s, BW_STORE_COORDINATED, 0, 0);
    }
    bench_sleep_ns(1500 * MS); /* the first polls (at once) are done; from now on the lane is in its steady state */
    int64_t c0 = cpu_ns(), t0 = mono_ns();
    bench_sleep_ns(LANE_SECONDS * 1000 * MS);
    int64_t c1 = cpu_ns(), t1 = mono_ns();
    for (int i = 0; i < LANE_BREAKERS; i++)
        bw_breaker_free(b[i]);
    free(b);
    bw_store_close(s);
    printf("# %s: %d breakers, store_poll 1 s, %.3f s of CPU in %.3f s\n", figure, LANE_BREAKERS, (c1 - c0) / 1e9,
           (t1 - t0) / 1e9);
    report(figure, 100.0 * (double)(c1 - c0) / (double)(t1 - t0), "%");
}

/* ---- main ---- */

static void cleanup(void)
{
    if (getpid() != main_pid)
        return;
    if (shm_path[0])
        shm_unlink(shm_path);
    if (tmpdir[0]) {
        static const char *const files[] = {"db",      "db-wal",      "db-shm",      "db-journal",
                                            "lane.db", "lane.db-wal", "lane.db-shm", "lane.db-journal"};
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            char p[256];
            snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
            unlink(p);
        }
        rmdir(tmpdir);
        tmpdir[0] = 0;
    }
}

/* `store_bench [PREFIX]`: only the figures whose names start with PREFIX (all without). */
static const char *only;

static int want(const char *figure)
{
    return !only || strncmp(figure, only, strlen(only)) == 0;
}

int main(int argc, char **argv)
{
    only = argc > 1 ? argv[1] : NULL;
    bench_init("store_bench");
    main_pid = getpid();
    signal(SIGPIPE, SIG_IGN);
    snprintf(shm_path, sizeof shm_path, "/bw-bench-%ld", (long)getpid());
    snprintf(shm_url, sizeof shm_url, "shm:%s", shm_path + 1);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/bw-bench-XXXXXX");
    if (!mkdtemp(tmpdir))
        die("mkdtemp", BW_ESYS);
    snprintf(sqlite_url, sizeof sqlite_url, "sqlite:%s/db", tmpdir);
    atexit(cleanup);
    int cpu[2];
    bench_two_cpus(cpu);
    printf("# two-process runs pinned to CPUs %d and %d (-1: unpinned), %lld ms each\n", cpu[0], cpu[1],
           (long long)(DURATION / MS));

    if (want("local_closed") || want("coordinated_closed"))
        bench_closed();
    if (want("shm_stored_call"))
        bench_stored_one();
    if (want("shm_stored_two"))
        bench_stored_two("shm_stored_two_procs_calls_per_s", shm_url);
    bw_store *probe = NULL;
    bw_error err;
    int have_sqlite = bw_store_open(sqlite_url, &probe, &err) == BW_OK;
    bw_store_close(probe);
    if (!have_sqlite)
        printf("# sqlite: not in this build: %s\n", err.message);
    if (have_sqlite && want("sqlite_stored_two"))
        bench_stored_two("sqlite_stored_two_procs_calls_per_s", sqlite_url);
    if (want("trip_propagation_ms"))
        bench_propagation("trip_propagation_ms", shm_url, "shm");
    if (have_sqlite && want("trip_propagation_sqlite"))
        bench_propagation("trip_propagation_sqlite_ms", sqlite_url, "sqlite");
    if (want("lane_idle_cpu_pct_8000"))
        bench_lane_idle("lane_idle_cpu_pct_8000", "memory:");
    if (have_sqlite && want("lane_idle_cpu_pct_8000_sqlite")) {
        char url[300];
        snprintf(url, sizeof url, "sqlite:%s/lane.db", tmpdir);
        bench_lane_idle("lane_idle_cpu_pct_8000_sqlite", url);
    }
    return 0;
}
