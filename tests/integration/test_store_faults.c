/*
 * test_store_faults.c — a network store's server failing under load, each
 * fault a test (tests/integration/): the server stopped (SIGSTOP) and
 * continued, the server killed (SIGKILL) and restarted on the same port, and
 * through a fault proxy (support/faultproxy.h) its connections reset (and
 * new ones refused), every chunk delayed past the deadline, or everything
 * swallowed. Each runs a load (support/fault_load.h: coordinated and stored
 * breakers, threads calling them) and asserts:
 * - no protected call fails or is rejected because of the store: each one
 *   returns the guarded function's own result;
 * - every call is bounded by the store's deadline: the longest is at most
 *   DEADLINE + 20 % + ALLOWANCE_MS (the scheduler of a loaded 2-CPU machine,
 *   support/fault_load.h);
 * - every breaker degrades to its local circuit, and after the fault ends
 *   recovers within BACKOFF_MAX_MS (the store's own reconnect backoff) +
 *   store_retry + store_poll + ALLOWANCE_MS;
 * - writes reach the server again: a breaker tripped after recovery is seen
 *   OPEN by a client of another store handle (another process's view);
 * - and every bound holds plus the longest the process itself was not run
 *   (fault_load.h's stall watch: a loaded machine, a sanitizer).
 * Two more cases without the load: a coordinated breaker's probe lease (its
 * one inline store call) on a stopped server, and tearing breakers and the
 * store down while the server is stopped.
 *
 * Run as `test_store_faults URL DEADLINE_MS` under the backend's TEST_WRAPPER
 * (bw_add_backend's FAULT_URL and FAULT_DEADLINE, cmake/backends.cmake): URL
 * has %P for the server's port and gives each store call the deadline
 * DEADLINE_MS; the wrapper exports $BW_TEST_PORT, $BW_TEST_SERVER_PID and
 * $BW_TEST_RESTART (tests/support/with_redis.sh says what each is), and for a
 * server of many processes $BW_TEST_SIGNAL (with_postgres.sh). What one
 * server alone does (a wrong password, a full memory) is in that backend's
 * own fault test (test_redis_faults.c).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "harness.h"
#include "timeutil.h"
#include "store_url.h"
#include "fault_load.h"
#include "faultproxy.h"

#define BACKOFF_MAX_MS 1000 /* a network store retries a failed server after at most 1 s (docs/stores.md) */
#define ALLOWANCE_MS FL_ALLOWANCE_MS
#define OUTAGE_MS 800

static int64_t deadline_ms;
static volatile pid_t server; /* read by the alarm handler */
static const char *restart_script;
static int signal_server(int sig);

/* The bounds, given the longest the process was not run meanwhile (fault_load.h's stall watch). */
static int64_t call_bound_ms(int64_t stall_ms)
{
    return deadline_ms + deadline_ms / 5 + ALLOWANCE_MS + stall_ms;
}

static int64_t recovery_bound_ms(int64_t stall_ms)
{
    return BACKOFF_MAX_MS + FL_RETRY_MS + FL_POLL_MS + ALLOWANCE_MS + stall_ms;
}

/*
 * A store of the URL, its %P the proxy's port (0: the server's): a fresh one,
 * or (`again`) the same keys as the last one. Ends the test when it cannot open.
 */
static bw_store *open_at(int proxy_port, int again)
{
    char port[16];
    snprintf(port, sizeof port, "%d", proxy_port);
    const char *url =
        again ? store_url_again_at(proxy_port ? port : NULL) : store_url_fresh_at(proxy_port ? port : NULL);
    bw_store *s = NULL;
    bw_error e;
    int rc = bw_store_open(url, &s, &e);
    if (rc != BW_OK) {
        H_FAIL("bw_store_open(%s): %s: %s", url, bw_strerror(rc), e.message);
        exit(1);
    }
    return s;
}

/* A fault: begin() breaks the store's server (or the way to it), during() runs every 50 ms of it, end() mends it. */
typedef struct fault {
    const char *name;
    void (*begin)(void *arg);
    void (*during)(void *arg, int64_t elapsed_ms);
    void (*end)(void *arg);
    void *arg;
    int proxy_port; /* the store goes through the proxy there (0: straight to the server) */
} fault;

static void run_fault(const fault *f)
{
    bw_store *s = open_at(f->proxy_port, 0);
    bw_store *other = open_at(0, 1); /* another client of the same keys, always straight to the server */
    fault_load l;
    fl_start(&l, s, f->name);
    sleep_ms(300); /* the load runs on a healthy store first */
    fl_mark(&l);
    int64_t t0 = mono_ms();
    f->begin(f->arg);
    /* OUTAGE_MS, and longer (bounded) until every breaker saw the fault. */
    int degraded = 0;
    for (int64_t el = 0; el < OUTAGE_MS || (!degraded && el < OUTAGE_MS + call_bound_ms(0) + FL_RETRY_MS);
         el = mono_ms() - t0) {
        if (f->during)
            f->during(f->arg, el);
        sleep_ms(50);
        degraded = fl_wait_degraded(&l, 0, FL_BREAKERS, 1, 0);
    }
    int64_t outage = mono_ms() - t0;
    bw_counters before[FL_BREAKERS];
    for (int i = 0; i < FL_BREAKERS; i++)
        before[i] = fl_counters(&l, i);
    f->end(f->arg);
    int64_t mended = mono_ms(), took[FL_BREAKERS];
    fl_wait_healthy(&l, mended, 3 * recovery_bound_ms(0), took);
    sleep_ms(100); /* a few calls on the recovered store too */
    int64_t stall = fl_watch_ms(&l.watch);
    fl_stop_threads(&l);
    int64_t longest = atomic_load(&l.max_ns) / FL_MS;
    long timed = atomic_load(&l.timed);
    printf("# %s: %ld calls (%ld during the fault and after, mean %.2f ms, longest %lld ms: coordinated %lld, "
           "stored %lld, begun %lld ms after the fault; bound %lld ms); outage %lld ms; recovered after %lld/%lld "
           "ms (coordinated) and %lld/%lld ms (stored), bound %lld ms; the process stalled %lld ms at most\n",
           f->name, atomic_load(&l.calls), timed, timed ? (double)atomic_load(&l.sum_ns) / (double)timed / 1e6 : 0.0,
           (long long)longest, (long long)(atomic_load(&l.max_mode_ns[0]) / FL_MS),
           (long long)(atomic_load(&l.max_mode_ns[1]) / FL_MS), (long long)(atomic_load(&l.max_at_ns) / FL_MS - t0),
           (long long)call_bound_ms(stall), (long long)outage, (long long)took[0], (long long)took[1],
           (long long)took[2], (long long)took[3], (long long)recovery_bound_ms(stall), (long long)stall);
    fflush(stdout);
    if (!degraded)
        for (int i = 0; i < FL_BREAKERS; i++)
            if (before[i].store_degraded == 0)
                H_FAIL("%s: %s breaker %d never degraded: the fault did not reach it", f->name, fl_mode_name(i), i);
    fl_check_served(&l, f->name);
    if (longest > call_bound_ms(stall))
        H_FAIL("%s: a protected call took %lld ms, more than the deadline %lld ms + 20 %% + %d ms + the stall %lld "
               "ms",
               f->name, (long long)longest, (long long)deadline_ms, (int)ALLOWANCE_MS, (long long)stall);
    for (int i = 0; i < FL_BREAKERS; i++)
        if (took[i] < 0 || took[i] > recovery_bound_ms(stall))
            H_FAIL("%s: %s breaker %d recovered after %lld ms (-1: not in %lld ms), bound %lld ms", f->name,
                   fl_mode_name(i), i, (long long)took[i], (long long)(3 * recovery_bound_ms(0)),
                   (long long)recovery_bound_ms(stall));
    for (int i = 0; i < FL_BREAKERS; i += FL_BREAKERS / 2) /* one of each mode */
        fl_trip_seen(&l, i, other, 3000);
    fl_free(&l);
    bw_store_close(s);
    bw_store_close(other);
}

/* ---- the server stopped, then continued ---- */

static void stop_server(void *arg)
{
    (void)arg;
    CHECK(signal_server(SIGSTOP) == 0);
}

static void cont_server(void *arg)
{
    (void)arg;
    CHECK(signal_server(SIGCONT) == 0);
}

static void test_server_stopped(void)
{
    fault f = {"stopped", stop_server, NULL, cont_server, NULL, 0};
    run_fault(&f);
}

/*
 * A coordinated breaker's one inline store call, the probe lease, on a stopped
 * server: a breaker follows the fleet's OPEN (another client tripped it), its
 * polls far apart (store_poll 1 h) so that it still follows when the wait
 * ends; the server stops; the first acquire after the wait asks the store for
 * a probe. It must come back within the deadline, admitted by the local
 * circuit (which never tripped), and so must every call after it.
 */
static bw_breaker *lease_breaker(bw_store *s)
{
    bw_config *c = bw_config_new();
    bw_error e;
    bw_breaker *b = NULL;
    CHECK_OK(bw_config_parse(c,
                             "failure_rate=0.5 window=count:10 min_calls=5 wait=500ms store_poll=1h "
                             "store_retry=200ms store_retry_multiplier=1 store_retry_jitter=0 store_close_timeout=2s",
                             &e));
    CHECK_OK(bw_config_set_store(c, s, BW_STORE_COORDINATED, &e));
    CHECK_OK(bw_breaker_new("lease", c, &b, &e));
    bw_config_free(c);
    return b;
}

static void test_probe_lease_stopped(void)
{
    bw_store *s = open_at(0, 0), *other = open_at(0, 1);
    bw_breaker *tripper = lease_breaker(other);
    if (!tripper)
        return;
    for (int k = 0; k < 10; k++) {
        bw_permit p;
        if (bw_acquire(tripper, &p, NULL) != BW_OK)
            break;
        CHECK_OK(bw_settle(tripper, &p, BW_FAILURE));
    }
    bw_breaker *b = NULL;
    bw_permit p;
    bw_rejection why;
    int64_t wait_over = 0;
    for (int64_t t0 = mono_ms(); !wait_over && mono_ms() - t0 < 400;) { /* a breaker made now follows the OPEN */
        bw_breaker_free(b);
        b = lease_breaker(s); /* its first poll, at once, reads the shared OPEN */
        sleep_ms(20);
        if (bw_acquire(b, &p, &why) == BW_REJECTED)
            wait_over = mono_ms() + why.retry_after_ns / FL_MS + 1;
        else
            CHECK_OK(bw_settle(b, &p, BW_IGNORED));
    }
    CHECK_INT(bw_breaker_state(b), BW_STATE_OPEN);
    CHECK(wait_over > 0);
    CHECK(signal_server(SIGSTOP) == 0);
    while (mono_ms() < wait_over + 20) /* the fleet's wait is over: the next acquire leases a probe */
        sleep_ms(5);
    int64_t longest = 0;
    long admitted = 0, calls = 0;
    fl_watch w;
    fl_watch_start(&w);
    for (int64_t t0 = mono_ms(); mono_ms() - t0 < 600; calls++) {
        int64_t c0 = mono_ns();
        int rc = bw_acquire(b, &p, NULL);
        int64_t took = (mono_ns() - c0) / FL_MS;
        longest = took > longest ? took : longest;
        if (rc == BW_OK) {
            admitted++;
            CHECK_OK(bw_settle(b, &p, BW_SUCCESS));
        }
        sleep_ms(2);
    }
    CHECK(signal_server(SIGCONT) == 0);
    int64_t stall = fl_watch_ms(&w);
    fl_watch_stop(&w);
    bw_counters c;
    CHECK_OK(bw_breaker_counters(b, &c));
    printf("# probe lease on a stopped server: %ld calls, %ld admitted, longest %lld ms (bound %lld ms), %llu "
           "degraded; the process stalled %lld ms at most\n",
           calls, admitted, (long long)longest, (long long)call_bound_ms(stall), (unsigned long long)c.store_degraded,
           (long long)stall);
    CHECK_INT(admitted, calls); /* the store's failure rejects nothing: the local circuit serves */
    CHECK(c.store_degraded >= 1);
    if (longest > call_bound_ms(stall))
        H_FAIL("an acquire leasing a probe from a stopped server took %lld ms", (long long)longest);
    bw_breaker_free(b);
    bw_breaker_free(tripper);
    bw_store_close(s);
    bw_store_close(other);
}

/*
 * Tearing down on a stopped server: a coordinated breaker with a trip queued
 * for the lane, a stored one, then the store itself. bw_breaker_free waits for
 * queued writes at most store_close_timeout (2 s here) and bw_store_close for
 * a lane's store call at most its deadline: nothing waits for the server.
 */
static void test_teardown_stopped(void)
{
    bw_store *s = open_at(0, 0);
    bw_breaker *coord = fl_breaker("teardown-c", s, BW_STORE_COORDINATED);
    bw_breaker *stored = fl_breaker("teardown-s", s, BW_STORE_STORED);
    h_calls(stored, 3, BW_SUCCESS);
    sleep_ms(2 * FL_POLL_MS);
    fl_watch w;
    fl_watch_start(&w);
    CHECK(signal_server(SIGSTOP) == 0);
    int64_t t0 = mono_ms();
    for (int k = 0; k < 10; k++) { /* a local trip: its write is queued for the lane, which finds the server stopped */
        bw_permit p;
        if (bw_acquire(coord, &p, NULL) != BW_OK)
            break;
        CHECK_OK(bw_settle(coord, &p, BW_FAILURE));
    }
    h_calls(stored, 3, BW_SUCCESS);
    bw_breaker_free(coord);
    int64_t t1 = mono_ms();
    bw_breaker_free(stored);
    int64_t t2 = mono_ms();
    bw_store_close(s);
    int64_t t3 = mono_ms();
    CHECK(signal_server(SIGCONT) == 0);
    int64_t stall = fl_watch_ms(&w);
    fl_watch_stop(&w);
    printf("# teardown on a stopped server: the calls and freeing the coordinated breaker %lld ms, the stored one "
           "%lld ms, closing the store %lld ms; the process stalled %lld ms at most\n",
           (long long)(t1 - t0), (long long)(t2 - t1), (long long)(t3 - t2), (long long)stall);
    if (t3 - t0 > 2000 + call_bound_ms(stall))
        H_FAIL("tearing down on a stopped server took %lld ms, more than store_close_timeout (2 s) + the deadline",
               (long long)(t3 - t0));
}

/* ---- the server killed under load, restarted on the same port ---- */

/*
 * Signal the server: kill(2) on its pid, or, when the wrapper exports
 * $BW_TEST_SIGNAL (a server of many processes, PostgreSQL's), that script
 * with the signal's name, which signals every process of the server.
 */
static int signal_server(int sig)
{
    const char *script = getenv("BW_TEST_SIGNAL");
    if (!script)
        return kill(server, sig);
    const char *name = sig == SIGSTOP ? "STOP" : sig == SIGCONT ? "CONT" : sig == SIGKILL ? "KILL" : "TERM";
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "sh '%s' %s", script, name);
    return system(cmd) == 0 ? 0 : -1;
}

static void kill_server(void *arg)
{
    (void)arg;
    CHECK(signal_server(SIGKILL) == 0);
}

static void restart_server(void *arg)
{
    (void)arg;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "sh '%s'", restart_script);
    FILE *p = popen(cmd, "r");
    long pid = 0;
    if (!p || fscanf(p, "%ld", &pid) != 1 || pid <= 1)
        H_FAIL("the restart script %s did not print the new server's pid", restart_script);
    int st = p ? pclose(p) : -1;
    CHECK_INT(st, 0);
    if (pid > 1)
        server = (pid_t)pid;
}

static void test_server_killed(void)
{
    fault f = {"killed", kill_server, NULL, restart_server, NULL, 0};
    run_fault(&f);
}

/* ---- through the fault proxy ---- */

static void px_reset(void *arg)
{
    faultproxy_reset(arg);
}

/* The first half: every connection reset each 50 ms, mid-flight (the store reconnects in between); then refused. */
static void px_reset_during(void *arg, int64_t elapsed_ms)
{
    if (elapsed_ms >= OUTAGE_MS / 2)
        faultproxy_refuse(arg, 1);
    faultproxy_reset(arg);
}

static void px_pass(void *arg)
{
    faultproxy_refuse(arg, 0);
    faultproxy_pass(arg);
}

static void px_delay(void *arg)
{
    faultproxy_delay(arg, (int)(3 * deadline_ms));
}

static void px_blackhole(void *arg)
{
    faultproxy_blackhole(arg);
}

static void test_proxy_faults(void)
{
    const char *port = getenv("BW_TEST_PORT");
    faultproxy *px = NULL;
    if (faultproxy_start("127.0.0.1", atoi(port), &px) != 0) {
        H_FAIL("faultproxy_start failed");
        return;
    }
    fault reset = {"reset", px_reset, px_reset_during, px_pass, px, faultproxy_port(px)};
    fault delay = {"delayed", px_delay, NULL, px_pass, px, faultproxy_port(px)};
    fault hole = {"blackholed", px_blackhole, NULL, px_pass, px, faultproxy_port(px)};
    run_fault(&reset);
    run_fault(&delay);
    run_fault(&hole);
    CHECK(faultproxy_accepted(px) > 3); /* the stores did go through it, and reconnected */
    faultproxy_stop(px);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_store_faults: timed out\n";
    if (server > 0)
        signal_server(SIGCONT); /* never leave the server stopped */
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

int main(int argc, char **argv)
{
    store_url_init(argc, argv);
    const char *pid = getenv("BW_TEST_SERVER_PID");
    restart_script = getenv("BW_TEST_RESTART");
    if (argc < 3 || atoi(argv[2]) < 1 || !pid || !restart_script || !getenv("BW_TEST_PORT")) {
        fprintf(stderr, "usage: test_store_faults URL DEADLINE_MS, under a TEST_WRAPPER that exports $BW_TEST_PORT, "
                        "$BW_TEST_SERVER_PID and $BW_TEST_RESTART (run it through ctest)\n");
        return 2;
    }
    deadline_ms = atoi(argv[2]);
    server = (pid_t)atoi(pid);
    signal(SIGALRM, on_alarm);
    alarm(100);
    printf("# %s, deadline %lld ms\n", store_url_scheme(), (long long)deadline_ms);
    RUN(test_server_stopped);
    RUN(test_probe_lease_stopped);
    RUN(test_teardown_stopped);
    RUN(test_proxy_faults);
    RUN(test_server_killed);
    store_url_cleanup();
    return TEST_SUMMARY();
}
