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
 * The redis: figures (built with the redis: store; `store_bench redis` runs
 * only them). The bench starts a redis-server of its own (found in PATH): on a
 * free loopback port in [20000, 32000), no persistence, its --dir the bench's
 * temp directory; it waits at most 5 s for an answer whose INFO process_id is
 * its child's, and kills it at exit (the server also dies with the bench,
 * PR_SET_PDEATHSIG). Without redis-server these figures are skipped, with a
 * `# redis figures skipped: ...` line. The store URL gives each call 1 s
 * (timeout=1s), so a stalled server does not degrade the breakers mid-figure.
 * Round trips are counted by the server: `INFO commandstats` read on a raw
 * hiredis connection before and after the calls; a round trip is one command
 * a client sent, so the sum of the `calls` of every command except INFO (the
 * counting's own) and GET, SET, DEL and TIME (the store sends these only
 * inside its scripts, where the server counts them as well): each EVALSHA or
 * EVAL is one, as are any reconnect's AUTH, SELECT or SCRIPT LOAD.
 *
 *   redis_round_trips_per_stored_call  stored mode, CLOSED: round trips per
 *                                   acquire + settle(SUCCESS), over RT_CALLS
 *                                   calls; the median of RUNS runs (target <= 2.0)
 *   redis_round_trips_per_poll_1000 1,000 coordinated breakers on one redis
 *                                   store, store_poll 100 ms, idle: round trips
 *                                   in POLL_SECONDS divided by the poll intervals
 *                                   in that time (target <= 2)
 *   redis_coordinated_closed_overhead_ns  a breaker coordinated through redis
 *                                   (CLOSED, store_poll 1 h) against one with no
 *                                   store, both timed in each of RUNS rounds of
 *                                   ITERS_CLOSED calls; the median of the
 *                                   per-round differences (target <= 3 ns)
 *   redis_stored_two_procs_calls_per_s  as shm_stored_two_procs_calls_per_s,
 *                                   each process opening its own redis store
 *                                   after the fork (reported)
 *   redis_trip_propagation_ms       as trip_propagation_ms, on redis (target <= 110)
 *   redis_stalled_acquire_max_ms    the server stopped (SIGSTOP), a stored breaker
 *                                   on a store of the default deadline (timeout
 *                                   100 ms) retrying it every 1 ms (store_retry,
 *                                   multiplier 1): the longest of STALL_CALLS
 *                                   acquires, one a millisecond, each timed; so
 *                                   every time the store's own backoff (10 ms
 *                                   doubling to 1 s) lets a call through to the
 *                                   stopped server, that call waits for the
 *                                   deadline (target <= timeout + 20 % = 120 ms)
 *
 * The postgresql: figures (built with the postgresql: store; `store_bench pg`
 * runs only them). The bench starts a server of its own through
 * tests/support/with_postgres.sh (initdb in a temporary directory, a free
 * loopback port, as the user nobody when run as root), which holds it while
 * the bench holds a pipe to it: the server stops when the bench closes it or
 * dies. Without the server binaries these figures are skipped, with a
 * `# postgresql figures skipped: ...` line. The store URL gives each call 1 s.
 * Round trips are counted by the server: pg_stat_statements (loaded by the
 * wrapper, utility statements not tracked) read on a raw libpq connection
 * before and after the calls; each of the store's statements is one round
 * trip (it sends one and waits for its answer), so the sum of `calls` of the
 * statements on the bench's table is the round trips (a reconnect's session
 * set-up, SET and PREPAREs, would not be counted; none happens with timeout=1s
 * on loopback).
 *
 *   pg_round_trips_per_stored_call  as redis_round_trips_per_stored_call (target <= 2.0)
 *   pg_round_trips_per_poll_1000    as redis_round_trips_per_poll_1000 (target <= 2)
 *   pg_stored_two_procs_calls_per_s as redis_stored_two_procs_calls_per_s (reported)
 *   pg_trip_propagation_ms          as trip_propagation_ms, on postgresql (target <= 110)
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

#ifdef BW_BENCH_REDIS
#include <hiredis/hiredis.h>
#endif
#ifdef BW_BENCH_PG
#include <libpq-fe.h>
#endif

#define MS 1000000LL
#define ITERS_CLOSED 10000000L
#define ITERS_STORED 1000000L
#define ITERS_ALLOC 1000000L
#define DURATION (500 * MS) /* of each two-process run */
#define TRIALS 7
#define LANE_BREAKERS 8000
#define LANE_SECONDS 5
#define RT_CALLS 10000 /* stored calls per round-trip count */
#define POLL_BREAKERS 1000
#define POLL_SECONDS 3
#define STALL_CALLS 1000

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

/* n coordinated breakers on s named PREFIX-i, polling every `poll` (0: the default); free with free_many. */
static bw_breaker **make_many(const char *prefix, int n, bw_store *s, int64_t poll)
{
    bw_breaker **b = malloc((size_t)n * sizeof *b);
    if (!b)
        die("malloc", BW_ENOMEM);
    char name[64];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s-%d", prefix, i);
        b[i] = make(name, s, BW_STORE_COORDINATED, poll, 0);
    }
    return b;
}

static void free_many(bw_breaker **b, int n)
{
    for (int i = 0; i < n; i++)
        bw_breaker_free(b[i]);
    free(b);
}

static void bench_lane_idle(const char *figure, const char *url)
{
    bw_store *s = open_store(url);
    bw_breaker **b = make_many("lane-idle", LANE_BREAKERS, s, 0);
    bench_sleep_ns(1500 * MS); /* the first polls (at once) are done; from now on the lane is in its steady state */
    int64_t c0 = cpu_ns(), t0 = mono_ns();
    bench_sleep_ns(LANE_SECONDS * 1000 * MS);
    int64_t c1 = cpu_ns(), t1 = mono_ns();
    free_many(b, LANE_BREAKERS);
    bw_store_close(s);
    printf("# %s: %d breakers, store_poll 1 s, %.3f s of CPU in %.3f s\n", figure, LANE_BREAKERS, (c1 - c0) / 1e9,
           (t1 - t0) / 1e9);
    report(figure, 100.0 * (double)(c1 - c0) / (double)(t1 - t0), "%");
}

/* `store_bench [PREFIX]`: only the figures whose names start with PREFIX (all without). */
static const char *only;

static int want(const char *figure)
{
    return !only || strncmp(figure, only, strlen(only)) == 0;
}

/* ---- redis: a server of our own, round trips counted by the server ---- */

#ifdef BW_BENCH_REDIS
static pid_t redis_pid;         /* the server we started (0: none) */
static redisContext *redis_raw; /* our counting connection */
static char redis_url[256];
static int redis_port;

static void redis_stop(void)
{
    if (redis_raw) {
        redisFree(redis_raw);
        redis_raw = NULL;
    }
    if (redis_pid > 0) {
        kill(redis_pid, SIGKILL);
        reap(redis_pid);
        redis_pid = 0;
    }
}

/* redis-server in PATH, or why not (in why). */
static int redis_found(char *why, size_t n)
{
    const char *path = getenv("PATH");
    char dir[512];
    while (path && *path) {
        size_t len = strcspn(path, ":");
        if (len > 0 && len < sizeof dir - 20) {
            memcpy(dir, path, len);
            snprintf(dir + len, sizeof dir - len, "/redis-server");
            if (access(dir, X_OK) == 0)
                return 1;
        }
        path += len + (path[len] == ':');
    }
    snprintf(why, n, "redis-server is not in PATH (apt-get install redis-server, or sh scripts/deps.sh --all as root)");
    return 0;
}

/* INFO <section> on the raw connection: a reply string (freed by the caller with freeReplyObject), or NULL. */
static redisReply *redis_info(redisContext *c, const char *section)
{
    redisReply *rep = redisCommand(c, "INFO %s", section);
    if (rep && rep->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        rep = NULL;
    }
    return rep;
}

/* Start redis-server on a free port; 1 when it answers as our child, 0 (why) when not. */
static int redis_start(char *why, size_t n)
{
    if (!redis_found(why, n))
        return 0;
    unsigned seed = (unsigned)getpid() ^ (unsigned)mono_ns();
    char log[256];
    snprintf(log, sizeof log, "%s/redis.log", tmpdir);
    for (int attempt = 0; attempt < 20; attempt++) {
        int port = 20000 + (int)(rand_r(&seed) % 12000); /* below the kernel's ephemeral range */
        char ps[16];
        snprintf(ps, sizeof ps, "%d", port);
        fflush(stdout);
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0)
            die("fork", BW_ESYS);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* survives the exec: the server dies with the bench */
            if (getppid() != parent)
                _exit(9);
            execlp("redis-server", "redis-server", "--port", ps, "--bind", "127.0.0.1", "--save", "", "--appendonly",
                   "no", "--dir", tmpdir, "--daemonize", "no", "--logfile", log, (char *)NULL);
            _exit(127);
        }
        redis_pid = pid;
        for (int i = 0; i < 100; i++) { /* at most 5 s */
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid) { /* it exited: the port was taken */
                redis_pid = 0;
                break;
            }
            struct timeval tv = {1, 0};
            redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
            if (c && !c->err) {
                redisSetTimeout(c, tv);
                redisReply *rep = redis_info(c, "server");
                char want_line[64];
                snprintf(want_line, sizeof want_line, "process_id:%ld\r", (long)pid);
                int ours = rep && strstr(rep->str, want_line) != NULL;
                if (rep)
                    freeReplyObject(rep);
                if (ours) {
                    redis_raw = c;
                    redis_port = port;
                    snprintf(redis_url, sizeof redis_url,
                             "redis://127.0.0.1:%d/?prefix=bw-bench-%ld:&timeout=1s&connect_timeout=1s", port,
                             (long)getpid());
                    printf("# redis: redis-server pid %ld on 127.0.0.1:%d\n", (long)pid, port);
                    return 1;
                }
            }
            if (c)
                redisFree(c);
            bench_sleep_ns(50 * MS);
        }
        redis_stop(); /* another port */
    }
    snprintf(why, n, "could not start redis-server on a free port in 20 tries (its log: %s)", log);
    return 0;
}

/* Commands clients sent so far: INFO commandstats, every command's calls but INFO's and the scripts' inner ones. */
static long redis_round_trips(void)
{
    redisReply *rep = redis_info(redis_raw, "commandstats");
    if (!rep) {
        fprintf(stderr, "store_bench: INFO commandstats failed: %s\n", redis_raw->errstr);
        exit(1);
    }
    static const char *const skip[] = {"info", "get", "set", "del", "time"};
    long total = 0;
    for (const char *line = strstr(rep->str, "cmdstat_"); line; line = strstr(line + 1, "\ncmdstat_")) {
        if (*line == '\n')
            line++;
        const char *name = line + strlen("cmdstat_"), *colon = strchr(name, ':');
        const char *calls = colon ? strstr(colon, "calls=") : NULL;
        if (!calls)
            break;
        int skipped = 0;
        for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
            if ((size_t)(colon - name) == strlen(skip[i]) && strncmp(name, skip[i], strlen(skip[i])) == 0)
                skipped = 1;
        if (!skipped)
            total += strtol(calls + strlen("calls="), NULL, 10);
    }
    freeReplyObject(rep);
    return total;
}

static void bench_redis_stored_rt(void)
{
    bw_store *s = open_store(redis_url);
    bw_breaker *b = make("bench-redis-stored", s, BW_STORE_STORED, 0, 0);
    bench_check("the warm-up", call_loop(b, 1000));
    double v[RUNS], ns[RUNS];
    for (int r = 0; r < RUNS; r++) {
        long c0 = redis_round_trips();
        int64_t t0 = mono_ns();
        bench_check("the stored loop", call_loop(b, RT_CALLS));
        int64_t t1 = mono_ns();
        long c1 = redis_round_trips();
        v[r] = (double)(c1 - c0) / RT_CALLS;
        ns[r] = (double)(t1 - t0) / RT_CALLS;
    }
    if (bw_breaker_state(b) != BW_STATE_CLOSED)
        die("the stored breaker left CLOSED", BW_ESTATE);
    printf("# redis stored acquire + settle: %.1f us per call (loopback)\n", median(ns, RUNS) / 1000.0);
    report("redis_round_trips_per_stored_call", median(v, RUNS), "round_trips");
    bw_breaker_free(b);
    bw_store_close(s);
}

static void bench_redis_poll(void)
{
    bw_store *s = open_store(redis_url);
    bw_breaker **b = make_many("bench-redis-poll", POLL_BREAKERS, s, 100 * MS);
    bench_sleep_ns(500 * MS); /* the first polls (at creation) are done */
    long c0 = redis_round_trips();
    int64_t t0 = mono_ns();
    bench_sleep_ns(POLL_SECONDS * 1000 * MS);
    long c1 = redis_round_trips();
    int64_t t1 = mono_ns();
    free_many(b, POLL_BREAKERS);
    bw_store_close(s);
    double intervals = (double)(t1 - t0) / (100.0 * MS);
    printf("# redis poll: %d breakers, store_poll 100 ms: %ld round trips in %.3f s (%.1f intervals)\n", POLL_BREAKERS,
           c1 - c0, (t1 - t0) / 1e9, intervals);
    report("redis_round_trips_per_poll_1000", (double)(c1 - c0) / intervals, "round_trips");
}

static void bench_redis_closed(void)
{
    bw_store *s = open_store(redis_url);
    bw_breaker *local = make("bench-redis-local", NULL, 0, 0, 0);
    bw_breaker *coord = make("bench-redis-coordinated", s, BW_STORE_COORDINATED, 3600 * 1000 * MS, 0);
    double d[RUNS];
    bench_check("warm-up", call_loop(local, ITERS_CLOSED / 4) + call_loop(coord, ITERS_CLOSED / 4));
    for (int r = 0; r < RUNS; r++) {
        int64_t t0 = mono_ns();
        bench_check("the local loop", call_loop(local, ITERS_CLOSED));
        int64_t t1 = mono_ns();
        bench_check("the coordinated loop", call_loop(coord, ITERS_CLOSED));
        int64_t t2 = mono_ns();
        d[r] = (double)((t2 - t1) - (t1 - t0)) / ITERS_CLOSED;
    }
    if (bw_breaker_state(coord) != BW_STATE_CLOSED)
        die("the coordinated breaker left CLOSED", BW_ESTATE);
    report("redis_coordinated_closed_overhead_ns", median(d, RUNS), "ns");
    bw_breaker_free(coord);
    bw_breaker_free(local);
    bw_store_close(s); /* stops its lane: no thread is left for the forks below */
}

/* redis_stalled_acquire_max_ms: see the figures at the top. */
static void bench_redis_stalled(void)
{
    char url[256];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/?prefix=bw-bench-stall-%ld:&timeout=100ms", redis_port,
             (long)getpid());
    bw_store *s = open_store(url);
    bw_error err;
    bw_config *cfg = bw_config_new();
    bw_breaker *b = NULL;
    int rc =
        cfg ? bw_config_parse(cfg, "store_retry=1ms store_retry_multiplier=1 store_retry_jitter=0", &err) : BW_ENOMEM;
    if (rc == BW_OK)
        rc = bw_config_set_store(cfg, s, BW_STORE_STORED, &err);
    if (rc == BW_OK)
        rc = bw_breaker_new("bench-redis-stalled", cfg, &b, &err);
    if (rc != BW_OK)
        die_err("the stalled breaker", rc, &err);
    bw_config_free(cfg);
    bench_check("the warm-up", call_loop(b, 100));
    if (kill(redis_pid, SIGSTOP) != 0)
        die("kill SIGSTOP", BW_ESYS);
    int64_t max = 0, max_call = 0, t_start = mono_ns();
    long waited = 0, bad = 0;
    for (int i = 0; i < STALL_CALLS; i++) {
        bw_permit p;
        int64_t t0 = mono_ns();
        int a = bw_acquire(b, &p, NULL);
        int64_t t1 = mono_ns();
        if (a != BW_OK || bw_settle(b, &p, BW_SUCCESS) != BW_OK)
            bad++; /* a call failed because of the store */
        int64_t t2 = mono_ns();
        max = t1 - t0 > max ? t1 - t0 : max;
        max_call = t2 - t0 > max_call ? t2 - t0 : max_call;
        waited += t1 - t0 >= 50 * MS;
        bench_sleep_ns(1 * MS);
    }
    int64_t t_end = mono_ns();
    kill(redis_pid, SIGCONT);
    bench_check("the stalled calls", bad);
    printf("# redis stalled: %d stored acquires in %.2f s, %ld of them waited for the stopped server; the longest "
           "acquire + settle %.1f ms\n",
           STALL_CALLS, (double)(t_end - t_start) / 1e9, waited, (double)max_call / 1e6);
    report("redis_stalled_acquire_max_ms", (double)max / 1e6, "ms");
    bw_breaker_free(b);
    bw_store_close(s);
}

static void bench_redis(void)
{
    if (!(want("redis_round_trips_per_stored_call") || want("redis_round_trips_per_poll_1000") ||
          want("redis_coordinated_closed_overhead_ns") || want("redis_stored_two_procs_calls_per_s") ||
          want("redis_trip_propagation_ms") || want("redis_stalled_acquire_max_ms")))
        return;
    char why[300];
    if (!redis_start(why, sizeof why)) {
        printf("# redis figures skipped: %s\n", why);
        return;
    }
    if (want("redis_round_trips_per_stored_call"))
        bench_redis_stored_rt();
    if (want("redis_round_trips_per_poll_1000"))
        bench_redis_poll();
    if (want("redis_coordinated_closed_overhead_ns"))
        bench_redis_closed();
    if (want("redis_stored_two_procs_calls_per_s"))
        bench_stored_two("redis_stored_two_procs_calls_per_s", redis_url);
    if (want("redis_trip_propagation_ms"))
        bench_propagation("redis_trip_propagation_ms", redis_url, "redis");
    if (want("redis_stalled_acquire_max_ms"))
        bench_redis_stalled();
    redis_stop();
}
#else
static void redis_stop(void)
{
}

static void bench_redis(void)
{
    if (want("redis"))
        printf("# redis figures skipped: this build has no redis: store (hiredis was not found)\n");
}
#endif

/* ---- postgresql: a server of our own, round trips counted by the server ---- */

#ifdef BW_BENCH_PG
static pid_t pg_wrapper; /* tests/support/with_postgres.sh, holding the server while we hold its stdin */
static int pg_hold = -1; /* our end of its stdin: closing it (or exiting) stops the server */
static PGconn *pg_raw;   /* our counting connection */
static char pg_url[256], pg_table[64];

static void pg_stop(void)
{
    if (pg_raw) {
        PQfinish(pg_raw);
        pg_raw = NULL;
    }
    if (pg_hold >= 0) {
        close(pg_hold); /* the wrapper's command reads EOF and ends: its trap stops the server and removes it */
        pg_hold = -1;
    }
    if (pg_wrapper > 0) {
        reap(pg_wrapper);
        pg_wrapper = 0;
    }
}

/*
 * Start a PostgreSQL server through tests/support/with_postgres.sh (initdb in a
 * temporary directory, a free loopback port, as nobody when root,
 * pg_stat_statements loaded): its command prints the port, then waits for EOF
 * on the pipe we hold. 1 when it answers, 0 (why) when not.
 */
static int pg_start(char *why, size_t n)
{
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0)
        die("pipe", BW_ESYS);
    fflush(stdout);
    int64_t t0 = mono_ns();
    pid_t pid = fork();
    if (pid < 0)
        die("fork", BW_ESYS);
    if (pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[0]);
        close(to[1]);
        close(from[0]);
        close(from[1]);
        execl("/bin/sh", "sh", BW_BENCH_PG_WRAPPER, "sh", "-c", "echo \"$BW_TEST_PORT\"; read x", (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    pg_wrapper = pid;
    pg_hold = to[1];
    char line[64];
    size_t got = 0;
    for (;;) { /* the port, or EOF: the wrapper failed (it said why on stderr) */
        ssize_t r = read(from[0], line + got, sizeof line - 1 - got);
        if (r <= 0 || (got += (size_t)r, memchr(line, '\n', got)) || got == sizeof line - 1)
            break;
    }
    close(from[0]);
    line[got] = 0;
    int port = atoi(line);
    if (port <= 0) {
        pg_stop();
        snprintf(why, n,
                 "tests/support/with_postgres.sh could not start a server (it said why above; apt-get install "
                 "postgresql, or sh scripts/deps.sh --all as root)");
        return 0;
    }
    char ci[128];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=postgres dbname=postgres connect_timeout=5", port);
    pg_raw = PQconnectdb(ci);
    if (PQstatus(pg_raw) != CONNECTION_OK) {
        snprintf(why, n, "could not connect to the server we started: %s", PQerrorMessage(pg_raw));
        pg_stop();
        return 0;
    }
    snprintf(pg_table, sizeof pg_table, "bw_bench_%ld", (long)getpid());
    snprintf(pg_url, sizeof pg_url,
             "postgresql://postgres@127.0.0.1:%d/postgres?table=%s&timeout=1s&connect_timeout=1s", port, pg_table);
    printf("# postgresql: a server of our own on 127.0.0.1:%d, up in %.2f s (initdb + start)\n", port,
           (double)(mono_ns() - t0) / 1e9);
    return 1;
}

/*
 * Statements the server ran on the bench's table so far (pg_stat_statements:
 * every plannable statement executed, counted when it ends), but this counting.
 */
static long pg_round_trips(void)
{
    char q[300];
    snprintf(q, sizeof q,
             "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE '%%\"%s\"%%' AND query NOT "
             "LIKE '%%pg_stat_statements%%'",
             pg_table);
    PGresult *r = PQexec(pg_raw, q);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        fprintf(stderr, "store_bench: counting statements failed: %s\n", PQresultErrorMessage(r));
        exit(1);
    }
    long v = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static void bench_pg_stored_rt(void)
{
    bw_store *s = open_store(pg_url);
    bw_breaker *b = make("bench-pg-stored", s, BW_STORE_STORED, 0, 0);
    bench_check("the warm-up", call_loop(b, 1000));
    double v[RUNS], ns[RUNS];
    for (int r = 0; r < RUNS; r++) {
        long c0 = pg_round_trips();
        int64_t t0 = mono_ns();
        bench_check("the stored loop", call_loop(b, RT_CALLS));
        int64_t t1 = mono_ns();
        long c1 = pg_round_trips();
        v[r] = (double)(c1 - c0) / RT_CALLS;
        ns[r] = (double)(t1 - t0) / RT_CALLS;
    }
    if (bw_breaker_state(b) != BW_STATE_CLOSED)
        die("the stored breaker left CLOSED", BW_ESTATE);
    printf("# postgresql stored acquire + settle: %.1f us per call (loopback)\n", median(ns, RUNS) / 1000.0);
    report("pg_round_trips_per_stored_call", median(v, RUNS), "round_trips");
    bw_breaker_free(b);
    bw_store_close(s);
}

static void bench_pg_poll(void)
{
    bw_store *s = open_store(pg_url);
    bw_breaker **b = make_many("bench-pg-poll", POLL_BREAKERS, s, 100 * MS);
    bench_sleep_ns(500 * MS); /* the first polls (at creation) are done */
    long c0 = pg_round_trips();
    int64_t t0 = mono_ns();
    bench_sleep_ns(POLL_SECONDS * 1000 * MS);
    long c1 = pg_round_trips();
    int64_t t1 = mono_ns();
    free_many(b, POLL_BREAKERS);
    bw_store_close(s);
    double intervals = (double)(t1 - t0) / (100.0 * MS);
    printf("# postgresql poll: %d breakers, store_poll 100 ms: %ld round trips in %.3f s (%.1f intervals)\n",
           POLL_BREAKERS, c1 - c0, (t1 - t0) / 1e9, intervals);
    report("pg_round_trips_per_poll_1000", (double)(c1 - c0) / intervals, "round_trips");
}

static void bench_pg(void)
{
    if (!(want("pg_round_trips_per_stored_call") || want("pg_round_trips_per_poll_1000") ||
          want("pg_stored_two_procs_calls_per_s") || want("pg_trip_propagation_ms")))
        return;
    char why[300];
    if (!pg_start(why, sizeof why)) {
        printf("# postgresql figures skipped: %s\n", why);
        return;
    }
    if (want("pg_round_trips_per_stored_call"))
        bench_pg_stored_rt();
    if (want("pg_round_trips_per_poll_1000"))
        bench_pg_poll();
    if (want("pg_stored_two_procs_calls_per_s"))
        bench_stored_two("pg_stored_two_procs_calls_per_s", pg_url);
    if (want("pg_trip_propagation_ms"))
        bench_propagation("pg_trip_propagation_ms", pg_url, "postgresql");
    pg_stop();
}
#else
static void pg_stop(void)
{
}

static void bench_pg(void)
{
    if (want("pg"))
        printf("# postgresql figures skipped: this build has no postgresql: store (libpq was not found)\n");
}
#endif

/* ---- main ---- */

static void cleanup(void)
{
    if (getpid() != main_pid)
        return;
    redis_stop();
    pg_stop();
    if (shm_path[0])
        shm_unlink(shm_path);
    if (tmpdir[0]) {
        static const char *const files[] = {"db",          "db-wal",      "db-shm",          "db-journal", "lane.db",
                                            "lane.db-wal", "lane.db-shm", "lane.db-journal", "redis.log",  "dump.rdb"};
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            char p[256];
            snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
            unlink(p);
        }
        rmdir(tmpdir);
        tmpdir[0] = 0;
    }
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
    bench_redis();
    bench_pg();
    return 0;
}
