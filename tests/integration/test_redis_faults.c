/*
 * test_redis_faults.c — the faults only a Redis server has (the generic ones,
 * a stopped, killed or unreachable server, are test_store_faults.c): a wrong
 * password at open, the password changed under load (CONFIG SET requirepass,
 * every connection killed), and the server at maxmemory refusing writes
 * (CONFIG SET maxmemory 1, noeviction, with data present). Each fault under
 * load asserts what test_store_faults.c does (support/fault_load.h): no
 * protected call fails or is rejected because of the store, each is bounded
 * by the deadline, the breakers degrade with the server's own error and
 * recover when it is mended, and writes reach the server again. Run by ctest
 * under tests/support/with_redis.sh ($BW_TEST_PORT); an admin connection
 * (hiredis) changes the server's configuration.
 */
#define _GNU_SOURCE
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "harness.h"
#include "timeutil.h"
#include "fault_load.h"

#define DEADLINE_MS 100
#define BACKOFF_MAX_MS 1000
#define ALLOWANCE_MS FL_ALLOWANCE_MS
#define OUTAGE_MS 800
#define CALL_BOUND_MS (DEADLINE_MS + DEADLINE_MS / 5 + ALLOWANCE_MS)
#define RECOVERY_BOUND_MS (BACKOFF_MAX_MS + FL_RETRY_MS + FL_POLL_MS + ALLOWANCE_MS)
#define PASSWORD "fault-pw-1"

static int port;
static redisContext *admin;

static const char *url(const char *fmt)
{
    static char buf[512];
    snprintf(buf, sizeof buf, fmt, port);
    return buf;
}

/* An admin command whose reply must not be an error. */
static void cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(admin, fmt, ap);
    va_end(ap);
    if (!r || r->type == REDIS_REPLY_ERROR)
        H_FAIL("admin '%s': %s", fmt, r ? r->str : admin->errstr);
    if (r)
        freeReplyObject(r);
}

static bw_store *open_ok(const char *u)
{
    bw_store *s = NULL;
    bw_error e;
    int rc = bw_store_open(u, &s, &e);
    if (rc != BW_OK) {
        H_FAIL("bw_store_open(%s): %s: %s", u, bw_strerror(rc), e.message);
        exit(1);
    }
    return s;
}

static bw_store_verdict keep_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)arg;
    (void)now;
    (void)cur;
    (void)next;
    return BW_STORE_KEEP;
}

static bw_store_verdict put_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)arg;
    (void)cur;
    next->expires_at = now + 60 * (int64_t)BW_NS_PER_S;
    next->len = 1;
    next->data[0] = 7;
    return BW_STORE_PUT;
}

/* Within limit_ms, an update of s with fn fails with a message holding `says`; returns that message's status. */
static int fails_saying(bw_store *s, bw_store_update_fn fn, const char *says, int64_t limit_ms)
{
    int64_t t0 = mono_ms();
    bw_error e;
    int rc = BW_OK;
    e.message[0] = 0;
    while (mono_ms() - t0 <= limit_ms) {
        rc = bw_store_update(s, "probe", fn, NULL, &e);
        if (rc != BW_OK && strstr(e.message, says)) {
            printf("# %s\n", e.message);
            return rc;
        }
        sleep_ms(20);
    }
    H_FAIL("no update failed saying '%s' in %lld ms (last: %s: %s)", says, (long long)limit_ms, bw_strerror(rc),
           rc == BW_OK ? "" : e.message);
    return rc;
}

/* bw_store_open(u) fails with BW_ESYS at once, its message holding both `says` and `cause`. */
static void refused(const char *u, const char *says, const char *cause)
{
    bw_store *s = NULL;
    bw_error e;
    int64_t t0 = mono_ms();
    int rc = bw_store_open(u, &s, &e);
    int64_t took = mono_ms() - t0;
    CHECK_RC(rc, BW_ESYS);
    CHECK(s == NULL);
    if (rc != BW_OK && (!strstr(e.message, says) || !strstr(e.message, cause)))
        H_FAIL("%s: message '%s' lacks '%s' or '%s'", u, e.message, says, cause);
    CHECK(took < 300 + 1000); /* connect_timeout + 1 s */
    if (rc != BW_OK)
        printf("# refused in %lld ms: %s\n", (long long)took, e.message);
    bw_store_close(s);
}

static void test_wrong_password_at_open(void)
{
    cmd("CONFIG SET requirepass %s", PASSWORD);
    refused(url("redis://:wrong@127.0.0.1:%d?timeout=100ms&connect_timeout=300ms"), "AUTH", "WRONGPASS");
    refused(url("redis://default:wrong@127.0.0.1:%d?timeout=100ms&connect_timeout=300ms"), "AUTH", "WRONGPASS");
    refused(url("redis://127.0.0.1:%d?timeout=100ms&connect_timeout=300ms"), "SCRIPT LOAD", "NOAUTH");
    bw_store *s = open_ok(url("redis://:" PASSWORD "@127.0.0.1:%d?prefix=bwrf-open:&timeout=100ms"));
    CHECK_OK(bw_store_update(s, "probe", put_fn, NULL, NULL));
    bw_store_close(s);
    cmd("CONFIG SET requirepass %s", "");
}

/*
 * The load's checks after the fault was mended at `mended` (mono_ms); the
 * bounds grow by the longest the process was not run (fault_load.h).
 */
static void after_fault(fault_load *l, const char *what, int64_t mended, int64_t outage, bw_store *other)
{
    int64_t took[FL_BREAKERS];
    fl_wait_healthy(l, mended, 3 * RECOVERY_BOUND_MS, took);
    sleep_ms(100);
    int64_t stall = fl_watch_ms(&l->watch);
    fl_stop_threads(l);
    int64_t longest = atomic_load(&l->max_ns) / FL_MS;
    printf("# %s: %ld calls, longest %lld ms (bound %lld ms); outage %lld ms; recovered after %lld/%lld ms "
           "(coordinated) and %lld/%lld ms (stored), bound %lld ms; the process stalled %lld ms at most\n",
           what, atomic_load(&l->calls), (long long)longest, (long long)(CALL_BOUND_MS + stall), (long long)outage,
           (long long)took[0], (long long)took[1], (long long)took[2], (long long)took[3],
           (long long)(RECOVERY_BOUND_MS + stall), (long long)stall);
    fflush(stdout);
    fl_check_served(l, what);
    if (longest > CALL_BOUND_MS + stall)
        H_FAIL("%s: a protected call took %lld ms", what, (long long)longest);
    for (int i = 0; i < FL_BREAKERS; i++)
        if (took[i] < 0 || took[i] > RECOVERY_BOUND_MS + stall)
            H_FAIL("%s: %s breaker %d recovered after %lld ms (-1: not in %d ms)", what, fl_mode_name(i), i,
                   (long long)took[i], (int)(3 * RECOVERY_BOUND_MS));
    for (int i = 0; i < FL_BREAKERS; i += FL_BREAKERS / 2)
        fl_trip_seen(l, i, other, 3000);
}

static void test_password_changed_under_load(void)
{
    cmd("CONFIG SET requirepass %s", PASSWORD);
    const char *u = url("redis://:" PASSWORD "@127.0.0.1:%d/?prefix=bwrf-pw:&timeout=100ms&connect_timeout=300ms");
    bw_store *s = open_ok(u), *other = open_ok(u);
    fault_load l;
    fl_start(&l, s, "pw");
    sleep_ms(300);
    fl_mark(&l);
    int64_t t0 = mono_ms();
    cmd("CONFIG SET requirepass %s", "fault-pw-2");
    cmd("CLIENT KILL TYPE normal SKIPME yes"); /* connections stay authenticated: drop them */
    CHECK(fl_wait_degraded(&l, 0, FL_BREAKERS, 1, OUTAGE_MS + CALL_BOUND_MS + FL_RETRY_MS));
    int rc = fails_saying(s, keep_fn, "WRONGPASS", OUTAGE_MS); /* the reconnection's AUTH names the cause */
    CHECK(fl_counters(&l, FL_BREAKERS - 1).store_degraded >= 1);
    CHECK_INT(rc, BW_ESYS);
    while (mono_ms() - t0 < OUTAGE_MS)
        sleep_ms(20);
    int64_t outage = mono_ms() - t0;
    cmd("CONFIG SET requirepass %s", PASSWORD);
    after_fault(&l, "password changed", mono_ms(), outage, other);
    fl_free(&l);
    bw_store_close(s);
    bw_store_close(other);
    cmd("CONFIG SET requirepass %s", "");
}

static void test_maxmemory(void)
{
    const char *u = url("redis://127.0.0.1:%d/?prefix=bwrf-mem:&timeout=100ms&connect_timeout=300ms");
    bw_store *s = open_ok(u), *other = open_ok(u);
    char fill[1024];
    memset(fill, 'x', sizeof fill);
    for (int i = 0; i < 200; i++) /* data present: the server is over the limit at once */
        cmd("SET bwrf-filler:%d %b", i, fill, sizeof fill);
    fault_load l;
    fl_start(&l, s, "mem");
    bw_breaker *tripper = fl_breaker("mem-tripper", s, BW_STORE_COORDINATED); /* not under the load */
    sleep_ms(300);
    fl_mark(&l);
    int64_t t0 = mono_ms();
    cmd("CONFIG SET maxmemory-policy noeviction");
    cmd("CONFIG SET maxmemory 1");
    /* Writes fail with the server's error; reads still work. */
    int rc = fails_saying(s, put_fn, "OOM", OUTAGE_MS);
    CHECK_INT(rc, BW_ESYS);
    CHECK_OK(bw_store_update(s, "probe", keep_fn, NULL, NULL));
    /* Stored breakers write every outcome: they degrade (and a read does not recover them). */
    CHECK(fl_wait_degraded(&l, FL_BREAKERS / 2, FL_BREAKERS, 1, OUTAGE_MS));
    /* A coordinated breaker reads in its polls; its trip is a write, refused: it degrades and stays OPEN locally. */
    for (int k = 0; k < 10; k++) {
        bw_permit p;
        if (bw_acquire(tripper, &p, NULL) != BW_OK)
            break;
        CHECK_OK(bw_settle(tripper, &p, BW_FAILURE));
    }
    CHECK_INT(bw_breaker_state(tripper), BW_STATE_OPEN);
    int64_t t1 = mono_ms();
    bw_counters c;
    do {
        sleep_ms(10);
        CHECK_OK(bw_breaker_counters(tripper, &c));
    } while (c.store_degraded == 0 && mono_ms() - t1 < 2000);
    CHECK(c.store_degraded >= 1);
    while (mono_ms() - t0 < OUTAGE_MS)
        sleep_ms(20);
    int64_t outage = mono_ms() - t0;
    cmd("CONFIG SET maxmemory 0");
    after_fault(&l, "maxmemory", mono_ms(), outage, other);
    CHECK_OK(bw_store_update(s, "probe", put_fn, NULL, NULL));
    bw_breaker_free(tripper);
    fl_free(&l);
    bw_store_close(s);
    bw_store_close(other);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_redis_faults: timed out\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

int main(void)
{
    const char *p = getenv("BW_TEST_PORT");
    if (!p) {
        fprintf(stderr, "test_redis_faults: run it through ctest (tests/support/with_redis.sh sets $BW_TEST_PORT)\n");
        return 2;
    }
    port = atoi(p);
    signal(SIGALRM, on_alarm);
    alarm(100);
    struct timeval tv = {2, 0};
    admin = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!admin || admin->err) {
        fprintf(stderr, "test_redis_faults: no admin connection to 127.0.0.1:%d\n", port);
        return 1;
    }
    redisSetTimeout(admin, tv);
    RUN(test_wrong_password_at_open);
    RUN(test_password_changed_under_load);
    RUN(test_maxmemory);
    redisFree(admin);
    return TEST_SUMMARY();
}
