/*
 * test_redis.c — what only the redis:// store does (the store contract it
 * shares with every store is tests/contract/): URL validation (each error
 * names its field and range), rediss:// refused for want of TLS, a wrong
 * password and an unreachable server refused at open within the connect
 * deadline, the key layout (prefix + store key, expires_at then the data),
 * a value breakwater did not write read as absent (one longer than an entry
 * never sent), and a stopped server
 * (SIGSTOP) failing calls within the timeout, then answering again after
 * SIGCONT; an update costs one round trip when the store has seen the key's
 * value, and a value another client changed since is only a conflict; on a
 * fake server of its own (support/fakeredis.h), replies no real server sends
 * (arrays and strings announcing billions, nesting, lines without an end, a
 * trickle) refused or timed out within the deadline without the process
 * growing, and an update against conflicts answered in 80 ms giving up
 * within its timeout. Run by ctest under tests/support/with_redis.sh, whose
 * server it talks to ($BW_TEST_PORT) and stops ($BW_TEST_SERVER_PID).
 */
#define _POSIX_C_SOURCE 200809L
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "entries.h"
#include "fakeredis.h"
#include "faultproxy.h"
#include "base/systime.h"
#include "store/front.h"

#define MS 1000000LL

static int port;
static pid_t server;

static const char *url(const char *fmt)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, fmt, port);
    return buf;
}

/* bw_store_open(u) fails with want, naming field, its message holding `says`. */
static void refused(const char *u, int want, const char *field, const char *says)
{
    bw_store *s = NULL;
    bw_error e;
    int rc = bw_store_open(u, &s, &e);
    CHECK_INT(rc, want);
    CHECK(s == NULL);
    if (rc == want && rc != BW_OK) {
        if (field)
            CHECK_STR(e.field, field);
        if (says && !strstr(e.message, says))
            H_FAIL("%s: message '%s' lacks '%s'", u, e.message, says);
    }
    if (s)
        bw_store_close(s);
}

static void test_url_errors(void)
{
    char host[400];
    memset(host, 'h', 256);
    snprintf(host + 256, sizeof host - 256, ":%d", port);
    char u[600];
    snprintf(u, sizeof u, "redis://%s", host);
    refused(u, BW_EINVAL, "host", "1 to 255 bytes");
    refused("redis://127.0.0.1:0", BW_EINVAL, "port", "[1, 65535]");
    refused("redis://127.0.0.1:65536", BW_EINVAL, "port", "[1, 65535]");
    refused("redis://127.0.0.1:63x", BW_EINVAL, "port", "[1, 65535]");
    refused("redis://127.0.0.1:", BW_EINVAL, "port", "[1, 65535]");
    refused("redis://[::1", BW_EINVAL, "host", "]");
    refused("redis://ho st", BW_EINVAL, "host", "letters");
    refused("redis://127.0.0.1/x", BW_EINVAL, "db", "[0, 2147483647]");
    refused("redis://127.0.0.1/-1", BW_EINVAL, "db", "[0, 2147483647]");
    refused("redis:127.0.0.1", BW_EINVAL, "path", "redis://");
    refused("redis://", BW_EINVAL, "host", "needs a host");
    refused("redis://user@127.0.0.1", BW_EINVAL, "url", "user:password");
    refused("redis://127.0.0.1?bogus=1", BW_EINVAL, "bogus", "unknown option");
    refused("redis://127.0.0.1?pool=0", BW_EINVAL, "pool", "[1, 64]");
    refused("redis://127.0.0.1?pool=65", BW_EINVAL, "pool", "[1, 64]");
    refused("redis://127.0.0.1?timeout=0", BW_EINVAL, "timeout", "duration");
    refused("redis://127.0.0.1?timeout=2m", BW_EINVAL, "timeout", "duration");
    refused("redis://127.0.0.1?connect_timeout=500us", BW_EINVAL, "connect_timeout", "duration");
    refused("redis://127.0.0.1?prefix=a b", BW_EINVAL, "prefix", "printable");
    refused("redis://127.0.0.1?socket=/tmp/r.sock", BW_EINVAL, "socket", "not both");
    refused("redis://?socket=relative.sock", BW_EINVAL, "socket", "absolute");
    refused("rediss://127.0.0.1:6380", BW_ESTATE, "scheme", "TLS");
    CHECK(bw_components() & BW_COMPONENT_REDIS);
}

static void test_open_errors(void)
{
    /* This server has no password: AUTH is refused, at open. */
    refused(url("redis://:wrong@127.0.0.1:%d"), BW_ESYS, NULL, "AUTH");
    /* A db the server does not have. */
    refused(url("redis://127.0.0.1:%d/100000"), BW_ESYS, NULL, "SELECT");
    /* Nobody listens on port 1: refused at once (connect_timeout bounds it anyway). */
    int64_t t0 = bw__mono_now();
    refused("redis://127.0.0.1:1?connect_timeout=200ms", BW_ESYS, NULL, "connect");
    CHECK(bw__mono_now() - t0 < 200 * MS + 1000 * MS);
}

/* A raw connection to the test's server, to look at what the store wrote. */
static redisContext *raw(void)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    CHECK(c && !c->err);
    redisSetTimeout(c, tv);
    return c;
}

static void test_layout(void)
{
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(bw_store_open(url("redis://127.0.0.1:%d/3?prefix=lay:&pool=2&timeout=10s"), &s, &e));
    CHECK_STR(bw_store_scheme(s), "redis");
    CHECK_OK(entry_put(s, "svc key", 42, 64, BW_STORE_NEVER, NULL));
    redisContext *c = raw();
    redisReply *r = redisCommand(c, "SELECT 3");
    CHECK(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = redisCommand(c, "GET %s", "lay:svc key");
    CHECK(r && r->type == REDIS_REPLY_STRING && r->len == 8 + 64);
    if (r && r->type == REDIS_REPLY_STRING && r->len >= 8)
        CHECK(memcmp(r->str, "\x7f\xff\xff\xff\xff\xff\xff\xff", 8) == 0); /* BW_STORE_NEVER, big-endian */
    freeReplyObject(r);
    r = redisCommand(c, "PTTL %s", "lay:svc key");
    CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == -1); /* never: no server-side expiry */
    freeReplyObject(r);
    /* A lifetime becomes the server's PX. */
    int64_t now = 0;
    bw_store_entry out;
    int found = 1;
    CHECK_OK(bw__store_try_read(s, "short", &now, &out, &found)); /* the server's TIME */
    CHECK_INT(found, 0);
    CHECK_OK(entry_put(s, "short", 1, 64, now + 30 * (int64_t)BW_NS_PER_S, NULL));
    r = redisCommand(c, "PTTL %s", "lay:short");
    CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer > 25000 && r->integer <= 30000);
    freeReplyObject(r);
    /* What breakwater did not write reads as absent, and an update replaces it. */
    r = redisCommand(c, "SET %s %s", "lay:junk", "abc");
    freeReplyObject(r);
    CHECK_INT(entry_get(s, "junk"), -2);
    CHECK_OK(entry_put(s, "junk", 7, 64, BW_STORE_NEVER, NULL));
    CHECK_INT(entry_get(s, "junk"), 7);
    /* A value longer than an entry is never sent (the scripts answer it as ''): absent, then replaced. */
    size_t big = 64 << 10;
    char *v = malloc(big);
    if (v) {
        memset(v, 'v', big);
        r = redisCommand(c, "SET %s %b", "lay:big", v, big);
        CHECK(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
        free(v);
        int64_t now2;
        bw_store_entry e2;
        int found2 = 1;
        CHECK_OK(bw__store_try_read(s, "big", &now2, &e2, &found2));
        CHECK_INT(found2, 0);
        CHECK_INT(entry_get(s, "big"), -2);
        CHECK_OK(entry_put(s, "big", 8, 64, BW_STORE_NEVER, NULL));
        CHECK_INT(entry_get(s, "big"), 8);
    }
    redisFree(c);
    int d = -1;
    CHECK_OK(bw_store_sweep(s, 10, &d, NULL));
    CHECK_INT(d, 0); /* the server expires entries itself */
    bw_store_close(s);
}

/* EVALSHA calls the server has answered (every store call is one). */
static long evalsha_calls(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO commandstats");
    long n = -1;
    if (r && r->type == REDIS_REPLY_STRING) {
        const char *at = strstr(r->str, "cmdstat_evalsha:calls=");
        n = at ? atol(at + strlen("cmdstat_evalsha:calls=")) : 0;
    }
    freeReplyObject(r);
    return n;
}

/* Counting entry_op_fn's runs. */
typedef struct counted {
    entry_op op;
    int runs;
} counted;

static bw_store_verdict counted_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    counted *c = arg;
    c->runs++;
    return entry_op_fn(&c->op, now, cur, next);
}

/* One update of key by s: its round trips (server-counted), fn's runs, and what fn saw last (-2: absent). */
#define update_costs(...) (h_line = __LINE__, update_costs_(__VA_ARGS__))
static int h_line;
static void update_costs_(bw_store *s, redisContext *c, const char *key, int verdict, int64_t value, long want_trips,
                          int want_runs, int64_t want_seen)
{
    counted k = {{verdict, value, 64, BW_STORE_NEVER, 0, 0}, 0};
    long c0 = evalsha_calls(c);
    CHECK_OK(bw_store_update(s, key, counted_fn, &k, NULL));
    long c1 = evalsha_calls(c);
    if (c1 - c0 != want_trips || k.runs != want_runs)
        fprintf(stderr, "  (the update at line %d)\n", h_line);
    CHECK_INT(c1 - c0, want_trips);
    CHECK_INT(k.runs, want_runs);
    CHECK_INT(k.op.present ? k.op.seen : -2, want_seen);
}

/*
 * The cache: an update of a value the store has seen (by a read or its own
 * write) is one round trip and one run of fn; a value another client changed
 * in between is a conflict that answers the new value (two round trips, fn
 * runs again on it), never a write over it; a KEEP is checked, not trusted.
 */
static void test_cached_update(void)
{
    bw_store *a = NULL, *b = NULL;
    CHECK_OK(bw_store_open(url("redis://127.0.0.1:%d/?prefix=cache:&pool=1&timeout=10s"), &a, NULL));
    CHECK_OK(bw_store_open(url("redis://127.0.0.1:%d/?prefix=cache:&pool=1&timeout=10s"), &b, NULL));
    redisContext *c = raw();
    update_costs(a, c, "k", BW_STORE_PUT, 1, 2, 1, -2); /* unknown to the cache: a read, then the write */
    update_costs(a, c, "k", BW_STORE_PUT, 2, 1, 1, 1);  /* its own write: the write alone */
    update_costs(a, c, "k", BW_STORE_KEEP, 0, 1, 1, 2); /* a KEEP: one check */
    update_costs(b, c, "k", BW_STORE_PUT, 3, 2, 1, 2);  /* another client (b has not seen k) */
    update_costs(a, c, "k", BW_STORE_PUT, 4, 2, 2, 3);  /* a's value is stale: a conflict, then 4 written over 3 */
    CHECK_INT(entry_get(b, "k"), 4);
    update_costs(b, c, "k", BW_STORE_KEEP, 0, 1, 1, 4); /* b's read above told its cache */
    /* A read tells the cache too. */
    update_costs(b, c, "k2", BW_STORE_PUT, 5, 2, 1, -2);
    int64_t now;
    bw_store_entry out;
    int found = 0;
    long c0 = evalsha_calls(c);
    CHECK_OK(bw__store_try_read(a, "k2", &now, &out, &found));
    CHECK_INT(found, 1);
    CHECK_INT(evalsha_calls(c) - c0, 1);
    update_costs(a, c, "k2", BW_STORE_DELETE, 0, 1, 1, 5);
    update_costs(b, c, "k2", BW_STORE_KEEP, 0, 1, 2, -2); /* b thinks 5: the failed check answers "gone" */
    redisReply *r = redisCommand(c, "EXISTS %s", "cache:k2");
    CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    redisFree(c);
    bw_store_close(a);
    bw_store_close(b);
}

/* A store handle belongs to the process that opened it: a forked child gets BW_ESTATE, the parent goes on. */
static void test_fork(void)
{
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(bw_store_open(url("redis://127.0.0.1:%d/?prefix=fork:&timeout=10s"), &s, &e));
    CHECK_OK(entry_put(s, "k", 1, 64, BW_STORE_NEVER, NULL));
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        int rc = entry_put(s, "k", 2, 64, BW_STORE_NEVER, NULL);
        _exit(rc == BW_ESTATE ? 0 : 1);
    }
    CHECK(child > 0);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_INT(entry_get(s, "k"), 1);
    bw_store_close(s);
}

static void test_stopped_server(void)
{
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(bw_store_open(url("redis://127.0.0.1:%d?prefix=stall:&timeout=100ms&connect_timeout=300ms"), &s, &e));
    CHECK_OK(entry_put(s, "k", 1, 64, BW_STORE_NEVER, NULL));
    CHECK(kill(server, SIGSTOP) == 0);
    for (int i = 0; i < 3; i++) { /* the first times out; the next fail at once (backoff) or time out */
        int64_t t0 = bw__mono_now();
        int rc = entry_put(s, "k", 2, 64, BW_STORE_NEVER, &e);
        int64_t took = bw__mono_now() - t0;
        CHECK(rc != BW_OK);
        if (i == 0)
            CHECK_INT(rc, BW_ETIMEDOUT);
        CHECK(took < 100 * MS + 1000 * MS); /* a bound on the wait: timeout + 1 s */
        if (took >= 1100 * MS)
            H_FAIL("call %d took %lld ms (%s)", i, (long long)(took / MS), e.message);
    }
    CHECK(kill(server, SIGCONT) == 0);
    int rc = BW_ESYS;
    int64_t t0 = bw__mono_now();
    while (rc != BW_OK && bw__mono_now() - t0 < 5000 * MS) { /* answers again once the backoff ends */
        rc = entry_put(s, "k", 3, 64, BW_STORE_NEVER, &e);
        if (rc != BW_OK) {
            struct timespec ts = {0, 20 * MS};
            nanosleep(&ts, NULL);
        }
    }
    CHECK_OK(rc);
    int64_t v = entry_get(s, "k");
    CHECK(v == 3 || v == 2); /* a write whose reply timed out may still have been applied */
    bw_store_close(s);
}

/* ---- a hostile server (support/fakeredis.h): every reply bounded in memory and time ---- */

#define HOSTILE_MB 48  /* the most the process may grow over all the hostile replies */
#define SLACK_MS 400   /* a loaded 2-CPU machine's scheduler, a sanitizer */
#define CONNECT_MS 300 /* the stores' connect_timeout here (their timeout is 100 ms) */

static long maxrss_mb(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

typedef struct hostile {
    const char *name;
    const char *reply;
    char fill;         /* then this byte, again and again (0: nothing) */
    size_t fill_len;   /* in chunks of fill_len bytes */
    long fill_max;     /* at most this many bytes in all */
    int fill_every_ms; /* a chunk every so often (0: as fast as the client reads) */
    int refused;       /* the store must say it refused the reply (not time out) */
    int fill_strings;  /* the chunk is a string of 1032 bytes (an entry's longest), not fill bytes */
} hostile;

static const hostile hostiles[] = {
    {"an array of 10^8 elements", "*100000000\r\n", 0, 0, 0, 0, 1, 0},
    {"an array of 2*10^9 elements", "*2000000000\r\n", 0, 0, 0, 0, 1, 0},
    {"a string of 2*10^9 bytes, sent as fast as read", "$2000000000\r\n", 'x', 4096, 128L << 20, 0, 1, 0},
    {"arrays nested 4 deep", "*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", 0, 0, 0, 0, 1, 0},
    {"an endless array of small items", "*1000000\r\n", 0, 0, 0, 0, 1, 0},
    {"arrays of arrays of entry-long strings, each within the command's count", "*3\r\n*3\r\n", 'x', 0, 128L << 20, 0,
     1, 1},
    {"a status line without an end, sent as fast as read", "+", 'a', 4096, 128L << 20, 0, 1, 0},
    {"a reply trickling a byte every 10 ms", "+", 'a', 1, 300, 10, 0, 0},
};

/* fr answers SCRIPT LOAD with h (at_open) or a SHA1, and EVALSHA with h (or with an error). */
static void hostile_set(fakeredis *fr, const hostile *h, int at_open)
{
    size_t n = strlen(h->reply);
    fakeredis_set(fr, at_open ? h->reply : NULL, n, at_open ? NULL : h->reply, n, 0);
    char fill[4096];
    size_t fl = h->fill ? h->fill_len : 0;
    memset(fill, h->fill, sizeof fill);
    if (h->fill_strings) {
        memcpy(fill, "$1032\r\n", 7);
        memcpy(fill + 7 + 1032, "\r\n", 2);
        fl = 7 + 1032 + 2;
    }
    fakeredis_fill(fr, fill, fl, h->fill_max, h->fill_every_ms);
}

/*
 * The call failed within bound_ms: BW_ESYS when h is a reply to refuse, its
 * message (e; NULL for a read, which says no more than its code) saying it
 * refused it, else BW_ETIMEDOUT (a reply that never ends in time); 0 when it
 * broke a bound (the next case could exhaust the machine).
 */
static int hostile_check(const hostile *h, const char *what, int rc, const bw_error *e, int64_t took, int64_t bound_ms)
{
    int ok = 1;
    if (rc == BW_OK) {
        H_FAIL("%s: %s succeeded", h->name, what);
        ok = 0;
    } else if (rc != (h->refused ? BW_ESYS : BW_ETIMEDOUT)) {
        H_FAIL("%s: %s failed with %s, not %s", h->name, what, bw_strerror(rc),
               bw_strerror(h->refused ? BW_ESYS : BW_ETIMEDOUT));
    }
    if (took > bound_ms * MS) {
        H_FAIL("%s: %s took %lld ms, more than %lld ms", h->name, what, (long long)(took / MS), (long long)bound_ms);
        ok = 0;
    }
    if (rc != BW_OK && e && h->refused && (!strstr(e->message, "refused") || strstr(e->message, "emory")))
        H_FAIL("%s: %s: the message does not say the reply was refused: %s", h->name, what, e->message);
    return ok;
}

/*
 * Replies a real server never sends, to the open's SCRIPT LOAD and to an
 * update's and a read's script: arrays announcing 10^8 and 2*10^9 elements, a
 * string announcing 2*10^9 bytes (then sent as fast as read), arrays nested
 * deeper than breakwater's replies, more elements than a command can answer,
 * a line that never ends, a reply that trickles. Each call fails within its
 * deadline (the open: connect_timeout; a call: timeout), refusing the reply
 * where it is too large, and the process stays small: nothing is allocated
 * for what the server announced. A case that breaks the bounds ends the test,
 * so that the machine is not exhausted by the next one.
 */
static void test_hostile_replies(void)
{
    fakeredis fr;
    if (fakeredis_start(&fr) != 0) {
        H_FAIL("fakeredis_start failed");
        return;
    }
    char u[200];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d/?timeout=100ms&connect_timeout=%dms", fr.port, CONNECT_MS);
    long base = maxrss_mb();
    for (size_t i = 0; i < sizeof hostiles / sizeof hostiles[0]; i++) {
        const hostile *h = &hostiles[i];
        bw_error e = {0, "", ""};
        bw_store *s = NULL;
        hostile_set(&fr, h, 1);
        int64_t t0 = bw__mono_now();
        int rc = bw_store_open(u, &s, &e);
        int64_t open_took = bw__mono_now() - t0;
        if (s)
            bw_store_close(s);
        int ok = hostile_check(h, "the open", rc, &e, open_took, CONNECT_MS + SLACK_MS);
        int64_t took[2] = {0, 0};
        char said[2][216];
        snprintf(said[0], sizeof said[0], "%s", e.message);
        said[1][0] = 0;
        hostile_set(&fr, h, 0);
        for (int op = 0; ok && op < 2; op++) { /* an update, then a read, each on a store of its own */
            s = NULL;
            rc = bw_store_open(u, &s, &e);
            if (rc != BW_OK) {
                H_FAIL("%s: open: %s", h->name, e.message);
                break;
            }
            int64_t now;
            bw_store_entry out;
            int found;
            t0 = bw__mono_now();
            rc =
                op == 0 ? entry_put(s, "k", 1, 64, BW_STORE_NEVER, &e) : bw__store_try_read(s, "k", &now, &out, &found);
            took[op] = bw__mono_now() - t0;
            if (op == 0)
                snprintf(said[1], sizeof said[1], "%s", e.message);
            /* a read says no more than its code */
            ok = hostile_check(h, op == 0 ? "an update" : "a read", rc, op == 0 ? &e : NULL, took[op], 100 + SLACK_MS);
            if (s)
                bw_store_close(s);
        }
        long grown = maxrss_mb() - base;
        printf("# %s: the open failed after %lld ms, an update after %lld ms, a read after %lld ms; the process "
               "grew %ld MB (the open: %s; the update: %s)\n",
               h->name, (long long)(open_took / MS), (long long)(took[0] / MS), (long long)(took[1] / MS), grown,
               said[0], said[1]);
        fflush(stdout);
        if (grown > HOSTILE_MB) {
            H_FAIL("%s: the process grew %ld MB, more than %d MB", h->name, grown, HOSTILE_MB);
            ok = 0;
        }
        if (!ok)
            break; /* the next case could exhaust the machine */
    }
    fakeredis_stop(&fr);
}

/*
 * A server answering every script in 80 ms, each compare-and-set with a
 * conflict (other clients writing the key, say): a stored call's update (after
 * its read, as a stored acquire then settle does; the read answered at once,
 * so that it never races its own 100 ms) gives up within its timeout
 * (100 ms), with BW_ETIMEDOUT, however many races it could still run.
 */
static void test_slow_conflicts(void)
{
    fakeredis fr;
    if (fakeredis_start(&fr) != 0) {
        H_FAIL("fakeredis_start failed");
        return;
    }
    char conflict[100];
    int n = snprintf(conflict, sizeof conflict, "*3\r\n$10\r\n%ld\r\n$1\r\n0\r\n$9\r\n", (long)time(NULL));
    memcpy(conflict + n,
           "\x7f\xff\xff\xff\xff\xff\xff\xff"
           "A\r\n",
           11);                                               /* a value: BW_STORE_NEVER, 'A' */
    fakeredis_set(&fr, NULL, 0, conflict, (size_t)n + 11, 0); /* the read that primes the store: at once */
    char u[200];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d/?timeout=100ms&connect_timeout=1s", fr.port);
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(bw_store_open(u, &s, &e));
    int64_t now;
    bw_store_entry out;
    int found;
    if (s)
        CHECK_OK(bw__store_try_read(s, "k", &now, &out, &found)); /* the acquire: the store has seen k */
    fakeredis_set(&fr, NULL, 0, conflict, (size_t)n + 11, 80);
    if (s) {
        int64_t t0 = bw__mono_now();
        int rc = entry_put(s, "k", 1, 64, BW_STORE_NEVER, &e);
        int64_t took = bw__mono_now() - t0;
        printf("# an update after a read, against 80 ms conflicts: %s after %lld ms (%s); %ld commands answered\n",
               bw_strerror(rc), (long long)(took / MS), rc ? e.message : "", atomic_load(&fr.commands));
        CHECK_INT(rc, BW_ETIMEDOUT);
        if (took > (100 + SLACK_MS) * MS)
            H_FAIL("the update took %lld ms, more than its timeout (100 ms) + %d ms", (long long)(took / MS), SLACK_MS);
        bw_store_close(s);
    }
    /*
     * Conflicts answered at once: the server is fine, every race is lost to
     * other writers. The update gives up at its deadline with BW_ECONFLICT
     * (contention, not a failing store), unless the deadline cut a command in
     * flight (BW_ETIMEDOUT, the connection dropped): one of five tries at
     * least ends between two commands.
     */
    fakeredis_set(&fr, NULL, 0, conflict, (size_t)n + 11, 0);
    s = NULL;
    CHECK_OK(bw_store_open(u, &s, &e));
    int conflicts = 0;
    for (int i = 0; s && i < 5 && !conflicts; i++) {
        int64_t t0 = bw__mono_now();
        int rc = entry_put(s, "k", 1, 64, BW_STORE_NEVER, &e);
        int64_t took = bw__mono_now() - t0;
        printf("# an update against conflicts answered at once: %s after %lld ms (%s)\n", bw_strerror(rc),
               (long long)(took / MS), rc ? e.message : "");
        if (rc == BW_ECONFLICT) {
            conflicts++;
            CHECK(strstr(e.message, "lost") && strstr(e.message, "races to other clients"));
        } else {
            CHECK_INT(rc, BW_ETIMEDOUT);
        }
        if (took > (100 + SLACK_MS) * MS)
            H_FAIL("the update took %lld ms, more than its timeout (100 ms) + %d ms", (long long)(took / MS), SLACK_MS);
        struct timespec backoff = {0, 50 * MS}; /* past the pool's backoff, should a command have been cut */
        nanosleep(&backoff, NULL);
    }
    CHECK_INT(conflicts, 1);
    if (s)
        bw_store_close(s);
    fakeredis_stop(&fr);
}

/*
 * What a reply may hold stays near a megabyte, whatever the caller asks:
 * a SCAN page asks for at most 1,000 keys (COUNT; a page asked for 5,000 of
 * 3,000 keys holds about 1,000, and the pages together list every key), a
 * key in it is at most prefix + 511 bytes (a 700-byte one, which an entry's
 * 1,032-byte cap let through, is refused), and read_many reads 1,024 keys a
 * command (2,100 keys: three EVALSHA, every entry right).
 */
static void test_reply_caps(void)
{
    redisContext *c = raw();
    bw_store *s = NULL;
    bw_error e;
    char u[200];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d/?prefix=capped:&timeout=10s", port);
    CHECK_OK(bw_store_open(u, &s, &e));
    enum { KEYS = 3000, MANY = 2100 };
    for (int i = 0; s && i < KEYS; i++) {
        redisAppendCommand(c, "SET capped:sc%04d x", i);
        if (i % 500 == 499 || i == KEYS - 1)
            for (int j = i / 500 * 500; j <= i; j++) {
                redisReply *r = NULL;
                CHECK(redisGetReply(c, (void **)&r) == REDIS_OK);
                freeReplyObject(r);
            }
    }
    bw_store_key *keys = calloc(5000, sizeof *keys);
    char *seen = calloc(KEYS, 1);
    int pages = 0, first = -1, listed = 0;
    bw_store_cursor cur;
    memset(&cur, 0, sizeof cur);
    while (s && keys && seen && !cur.done && pages < 1000) {
        int n = 0;
        int rc = bw_store_scan(s, &cur, keys, 5000, &n, &e);
        if (rc != BW_OK) {
            H_FAIL("bw_store_scan: %s (%s)", bw_strerror(rc), e.message);
            break;
        }
        if (pages++ == 0)
            first = n;
        for (int i = 0; i < n; i++) {
            int k = -1;
            if (sscanf(keys[i].name, "sc%d", &k) == 1 && k >= 0 && k < KEYS && !seen[k]) {
                seen[k] = 1;
                listed++;
            }
        }
    }
    printf("# a scan of %d keys, 5,000 a page asked: %d pages, the first of %d keys\n", KEYS, pages, first);
    CHECK_INT(listed, KEYS);
    CHECK(first >= 1 && first <= 2 * 1000 + 64);
    free(seen);
    free(keys);
    /* read_many: batches of 1,024 keys. */
    char(*names)[16] = calloc(MANY, sizeof *names);
    const char **np = calloc(MANY, sizeof *np);
    bw_store_entry *out = calloc(MANY, sizeof *out);
    int *found = calloc(MANY, sizeof *found);
    for (int i = 0; s && names && np && out && found && i < MANY; i++) {
        snprintf(names[i], sizeof names[i], "rm%04d", i);
        np[i] = names[i];
        if (i % 3 == 0)
            CHECK_OK(entry_put(s, names[i], i, 64, BW_STORE_NEVER, NULL));
    }
    if (s && names && np && out && found) {
        long c0 = evalsha_calls(c);
        int64_t now;
        CHECK_OK(bw__store_read_many(s, MANY, np, &now, out, found));
        long trips = evalsha_calls(c) - c0;
        printf("# read_many of %d keys: %ld commands\n", MANY, trips);
        CHECK_INT(trips, 3);
        int right = 0;
        for (int i = 0; i < MANY; i++)
            right += found[i] == (i % 3 == 0) && (!found[i] || entry_value(&out[i]) == i);
        CHECK_INT(right, MANY);
    }
    free(found);
    free(out);
    free(np);
    free(names);
    if (s)
        bw_store_close(s);
    redisFree(c);
    /* A SCAN answering a key longer than prefix + 511 bytes. */
    fakeredis fr;
    if (fakeredis_start(&fr) != 0) {
        H_FAIL("fakeredis_start failed");
        return;
    }
    char scan[1000];
    int sn = snprintf(scan, sizeof scan, "*2\r\n$1\r\n0\r\n*1\r\n$700\r\nbreakwater:");
    memset(scan + sn, 'k', 700 - 11);
    memcpy(scan + sn + 700 - 11, "\r\n", 2);
    fakeredis_set(&fr, NULL, 0, scan, (size_t)sn + 700 - 11 + 2, 0);
    snprintf(u, sizeof u, "redis://127.0.0.1:%d/?timeout=1s", fr.port);
    s = NULL;
    CHECK_OK(bw_store_open(u, &s, &e));
    if (s) {
        bw_store_key k[10];
        bw_store_cursor sc;
        memset(&sc, 0, sizeof sc);
        int n = -1;
        int rc = bw_store_scan(s, &sc, k, 10, &n, &e);
        printf("# a SCAN key of 700 bytes: %s (%s)\n", bw_strerror(rc), rc ? e.message : "");
        CHECK_RC(rc, BW_ESYS);
        CHECK(strstr(e.message, "refused: a string of 700 bytes (at most 611)") != NULL);
        bw_store_close(s);
    }
    fakeredis_stop(&fr);
}

/* This thread's CPU time, in ms. */
static int64_t thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A server that sends a byte and then reads nothing (on a unix socket, whose
 * buffers hold ~200 KB): a command too large for them (read_many of 1,024
 * keys of 500 bytes, ~0.5 MB) waits
 * for room to write until its deadline (500 ms) without spinning: the wait is
 * for POLLOUT only (it polled POLLIN too, which the unread byte kept ready,
 * and spun on EAGAIN for the whole timeout).
 */
static void test_write_waits(void)
{
    fakeredis fr;
    char path[64], u[200];
    snprintf(path, sizeof path, "/tmp/bw-fakeredis-%d.sock", (int)getpid());
    if (fakeredis_start_unix(&fr, path) != 0) {
        H_FAIL("fakeredis_start_unix failed");
        return;
    }
    snprintf(u, sizeof u, "redis://?socket=%s&timeout=500ms", path);
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(bw_store_open(u, &s, &e));
    enum { N = 1024 };
    char(*names)[512] = calloc(N, sizeof *names);
    const char **np = calloc(N, sizeof *np);
    bw_store_entry *out = calloc(N, sizeof *out);
    int *found = calloc(N, sizeof *found);
    if (s && names && np && out && found) {
        for (int i = 0; i < N; i++) {
            memset(names[i], 'n', 500);
            snprintf(names[i] + 500, 12, "%d", i);
            np[i] = names[i];
        }
        fakeredis_mute(&fr, 1);
        int64_t cpu0 = thread_cpu_ms(), t0 = bw__mono_now();
        int64_t now;
        int rc = bw__store_read_many(s, N, np, &now, out, found);
        int64_t took = (bw__mono_now() - t0) / MS, cpu = thread_cpu_ms() - cpu0;
        printf("# a command the server does not read: %s after %lld ms, %lld ms of CPU\n", bw_strerror(rc),
               (long long)took, (long long)cpu);
        CHECK_RC(rc, BW_ETIMEDOUT);
        CHECK(took >= 490 && took <= 500 + SLACK_MS);
        if (cpu > 50)
            H_FAIL("the call spent %lld ms of CPU waiting %lld ms to write", (long long)cpu, (long long)took);
    }
    free(found);
    free(out);
    free(np);
    free(names);
    if (s)
        bw_store_close(s);
    fakeredis_stop(&fr);
    unlink(path);
}

/* Two updates at once, of keys a and b, each on its own thread: their codes in rc[0], rc[1], messages in e[]. */
typedef struct pair_call {
    bw_store *s;
    const char *key;
    int64_t value;
    int rc;
    bw_error e;
} pair_call;

static void *pair_main(void *arg)
{
    pair_call *c = arg;
    c->rc = entry_put(c->s, c->key, c->value, 64, BW_STORE_NEVER, &c->e);
    return NULL;
}

static void put_pair(bw_store *s, int64_t value, pair_call out[2])
{
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        pair_call c = {s, i ? "b" : "a", value, BW_ESYS, {0, "", ""}};
        out[i] = c;
        CHECK(pthread_create(&th[i], NULL, pair_main, &out[i]) == 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
}

/*
 * A slow link (the proxy delays every chunk 200 ms each way: a round trip
 * takes 400 ms) to a server that wants AUTH, on db 1, with a 700 ms timeout:
 * a command fits a call (300 ms to spare, for a loaded machine), a reconnect
 * with AUTH then SELECT (two round trips, 800 ms) did not. The first time two calls ran at once, the second slot's
 * connect failed at the deadline and closed the working connection with
 * every idle one, and every later reconnect failed the same way: the store
 * never recovered. Now AUTH and SELECT go out together (one round trip), and
 * a connection made too late for the call's command stays for the next call:
 * after two calls at once, every call works, and two at once both do.
 */
static void test_slow_reconnect(void)
{
    redisContext *c = raw();
    redisReply *rep = redisCommand(c, "ACL SETUSER bwslow on >slowpw ~* +@all");
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    redisFree(c);
    faultproxy *px = NULL;
    if (faultproxy_start("127.0.0.1", port, &px) != 0) {
        H_FAIL("faultproxy_start failed");
        return;
    }
    char u[200];
    snprintf(u, sizeof u, "redis://bwslow:slowpw@127.0.0.1:%d/1?timeout=700ms&connect_timeout=10s&pool=2",
             faultproxy_port(px));
    bw_store *s = NULL;
    bw_error e;
    CHECK_OK(bw_store_open(u, &s, &e));
    if (s) {
        CHECK_OK(entry_put(s, "a", 1, 64, BW_STORE_NEVER, NULL)); /* known to the store: an update is one command */
        CHECK_OK(entry_put(s, "b", 1, 64, BW_STORE_NEVER, NULL));
        faultproxy_delay(px, 200);
        CHECK_OK(entry_put(s, "a", 2, 64, BW_STORE_NEVER, NULL)); /* a command fits */
        pair_call two[2];
        put_pair(s, 3, two);
        printf("# two calls at once on a 400 ms link: %s (%s), %s (%s)\n", bw_strerror(two[0].rc),
               two[0].rc ? two[0].e.message : "", bw_strerror(two[1].rc), two[1].rc ? two[1].e.message : "");
        int ok = 0, calls = 0;
        for (int64_t t0 = bw__mono_now(); bw__mono_now() - t0 < 10000 * MS && ok < 5; calls++) {
            bw_error pe = {0, "", ""};
            int rc = entry_put(s, calls % 2 ? "b" : "a", 4 + calls, 64, BW_STORE_NEVER, &pe);
            ok = rc == BW_OK ? ok + 1 : 0;
            if (rc != BW_OK && calls < 3)
                printf("# then: %s (%s)\n", bw_strerror(rc), pe.message);
        }
        printf("# then %d calls one at a time for the last 5 to work\n", calls);
        CHECK_INT(ok, 5);  /* the store recovered */
        CHECK(calls <= 6); /* at once (at most the call that meets the backoff fails) */
        put_pair(s, 100, two);
        CHECK_OK(two[0].rc); /* both slots are connected now */
        CHECK_OK(two[1].rc);
        faultproxy_pass(px);
        CHECK_INT(entry_get(s, "a"), 100);
        bw_store_close(s);
    }
    faultproxy_stop(px);
}

int main(void)
{
    const char *p = getenv("BW_TEST_PORT"), *pid = getenv("BW_TEST_SERVER_PID");
    if (!p || !pid) {
        fprintf(stderr, "test_redis: run it through ctest (tests/support/with_redis.sh sets $BW_TEST_PORT and "
                        "$BW_TEST_SERVER_PID)\n");
        return 2;
    }
    port = atoi(p);
    server = (pid_t)atoi(pid);
    RUN(test_url_errors);
    RUN(test_open_errors);
    RUN(test_layout);
    RUN(test_cached_update);
    RUN(test_fork);
    RUN(test_stopped_server);
    RUN(test_hostile_replies);
    RUN(test_slow_conflicts);
    RUN(test_slow_reconnect);
    RUN(test_reply_caps);
    RUN(test_write_waits);
    return TEST_SUMMARY();
}
