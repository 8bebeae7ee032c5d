/*
 * test_netupdate.c — the network stores' update loop (src/store/netupdate.h)
 * on fake operations, without a server, on a fake clock (no sleeps): the
 * cache's one round trip, a read first when the key is unknown, a KEEP ending
 * on a fresh value and confirmed on a cached one, a DELETE confirmed on a key
 * that now holds an expired entry, lost races (fn again at once, then a
 * pause and a fresh read from the second on), the pause's bound and its
 * random source, the deadline passing between two commands (BW_ECONFLICT)
 * against one cut in flight, a server's timeout before the deadline and a
 * timeout without a race lost (BW_ETIMEDOUT), an operation's error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/hash.h"
#include "base/systime.h"
#include "store/netupdate.h"

#define US ((int64_t)1000)

/* What the fake server holds at the key; version 0: nothing there. */
typedef struct val {
    int64_t version;
    int64_t value, expires_at;
} val;

typedef struct fake {
    bw__netupdate u; /* first: the operations get it */
    val seen;        /* the state: the value last seen */
    int last_found;  /* what entry() answered last (the confirmation compares it) */
    /* The server and the test's knobs */
    val server;
    int64_t next_version;
    int cache_known; /* the cache knows `cache` */
    val cache;
    int steal;                /* so many commands find another client's write just before them (-1: every one) */
    int cut_write;            /* the n-th write (1-based) is cut by the deadline: broken, BW_ETIMEDOUT */
    int server_timeout_write; /* the n-th write is ended by the server's own timeout, before the deadline */
    int error_write;          /* the n-th write fails with BW_ESYS */
    int64_t clock, rtt;       /* the fake clock, and what a command costs on it */
    /* What happened */
    int reads, writes, confirms;
    int sleeps;
    int64_t slept[64];
} fake;

static int64_t fake_now(void *arg)
{
    return ((fake *)arg)->clock;
}

static void fake_sleep(void *arg, int64_t ns)
{
    fake *f = arg;
    if (f->sleeps < 64)
        f->slept[f->sleeps] = ns;
    f->sleeps++;
    f->clock += ns;
}

/* A command on the fake server: the deadline checked before it (nothing sent), then its round trip. */
static int command(fake *f)
{
    if (f->clock >= f->u.deadline)
        return bw__fail(&f->u.e, BW_ETIMEDOUT, "", "fake: the deadline passed before a command");
    f->clock += f->rtt;
    if (f->steal) {
        f->steal -= f->steal > 0;
        f->server.version = ++f->next_version;
        f->server.value = 1000 + f->server.version;
        f->server.expires_at = INT64_MAX;
    }
    return BW_OK;
}

static int f_cached(bw__netupdate *u, int64_t *now)
{
    fake *f = (fake *)u;
    if (!f->cache_known)
        return 0;
    f->seen = f->cache;
    *now = f->clock;
    return 1;
}

static int f_read(bw__netupdate *u, int64_t *now)
{
    fake *f = (fake *)u;
    int rc = command(f);
    if (rc != BW_OK)
        return rc;
    f->reads++;
    f->seen = f->server;
    *now = f->clock;
    return BW_OK;
}

static int f_entry(bw__netupdate *u, int64_t now, bw_store_entry *cur, int *exists)
{
    fake *f = (fake *)u;
    *exists = f->seen.version != 0;
    f->last_found = *exists && f->seen.expires_at > now;
    if (f->last_found) {
        memcpy(cur->data, &f->seen.value, 8);
        cur->len = 8;
        cur->expires_at = f->seen.expires_at;
    }
    return f->last_found;
}

static int f_write(bw__netupdate *u, bw_store_verdict verdict, const bw_store_entry *next, int64_t *now)
{
    fake *f = (fake *)u;
    int n = f->writes + 1;
    if (n == f->error_write) {
        f->writes++;
        return bw__fail(&u->e, BW_ESYS, "", "fake: the server refused the write");
    }
    if (n == f->cut_write) {
        f->writes++;
        f->clock = u->deadline;
        u->broken = 1;
        return bw__fail(&u->e, BW_ETIMEDOUT, "", "fake: the deadline cut the write");
    }
    if (n == f->server_timeout_write) {
        f->writes++;
        return bw__fail(&u->e, BW_ETIMEDOUT, "", "fake: the server's statement timeout");
    }
    int rc = command(f);
    if (rc != BW_OK)
        return rc;
    f->writes++;
    if (f->server.version != f->seen.version) {
        f->seen = f->server;
        *now = f->clock;
        return 0;
    }
    if (verdict == BW_STORE_PUT) {
        f->server.version = ++f->next_version;
        memcpy(&f->server.value, next->data, 8);
        f->server.expires_at = next->expires_at;
    } else {
        memset(&f->server, 0, sizeof f->server);
    }
    f->seen = f->server;
    return 1;
}

/* The postgresql: rule: the same live entry (or none) as fn saw. */
static int f_confirm(bw__netupdate *u, int64_t *now)
{
    fake *f = (fake *)u;
    int rc = command(f);
    if (rc != BW_OK)
        return rc;
    f->confirms++;
    int found = f->last_found;
    int64_t version = f->seen.version;
    f->seen = f->server;
    *now = f->clock;
    int exists;
    bw_store_entry cur;
    int again = f_entry(u, *now, &cur, &exists);
    return again == found && (!found || f->seen.version == version);
}

static const bw__netupdate_ops fake_ops = {f_cached, f_read, f_entry, f_write, f_confirm};

static void fake_make(fake *f, bw__netupdate_clock *clk, int64_t timeout)
{
    memset(f, 0, sizeof *f);
    clk->now = fake_now;
    clk->sleep = fake_sleep;
    clk->arg = f;
    f->clock = 1000 * BW_NS_PER_S;
    f->rtt = 100 * US;
    f->next_version = 10;
    bw__netpool pool = {.name = "fake", .timeout_ns = timeout};
    bw__netslot slot = {.deadline = f->clock + timeout};
    bw__netupdate_start(&f->u, &fake_ops, &pool, &slot, "k");
    f->u.clock = clk;
}

/* Something at the key: a live entry (version v, value x). */
static val live(int64_t v, int64_t x)
{
    val w = {v, x, INT64_MAX};
    return w;
}

/* An update function: its verdict (a PUT of `value`; a DELETE when it finds nothing, if delete_absent), its runs. */
typedef struct op {
    bw_store_verdict verdict;
    int64_t value;
    int delete_absent;
    int runs;
    int64_t seen; /* the value it saw last; -1: none */
} op;

static bw_store_verdict op_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    op *o = arg;
    (void)now;
    o->runs++;
    o->seen = -1;
    if (cur)
        memcpy(&o->seen, cur->data, 8);
    if (o->delete_absent && !cur)
        return BW_STORE_DELETE;
    if (o->verdict == BW_STORE_PUT) {
        memcpy(next->data, &o->value, 8);
        next->len = 8;
        next->expires_at = INT64_MAX;
    }
    return o->verdict;
}

/* Known to the cache and unchanged: fn once, the compare-and-set at once, no read. */
static void test_cache_one_round_trip(void)
{
    fake f;
    bw__netupdate_clock clk;
    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = f.cache = live(5, 50);
    f.cache_known = 1;
    op o = {BW_STORE_PUT, 7, 0, 0, 0};
    CHECK_OK(bw__netupdate_run(&f.u, op_fn, &o));
    CHECK_INT(f.reads, 0);
    CHECK_INT(f.writes, 1);
    CHECK_INT(o.runs, 1);
    CHECK_INT(o.seen, 50);
    CHECK_INT(f.server.value, 7);
    CHECK_INT(f.seen.value, 7); /* the state is what was written, for the backend's cache */
}

/* Unknown to the cache: a read first, then the write. */
static void test_unknown_reads_first(void)
{
    fake f;
    bw__netupdate_clock clk;
    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = live(5, 50);
    op o = {BW_STORE_PUT, 7, 0, 0, 0};
    CHECK_OK(bw__netupdate_run(&f.u, op_fn, &o));
    CHECK_INT(f.reads, 1);
    CHECK_INT(f.writes, 1);
    CHECK_INT(o.runs, 1);
    CHECK_INT(f.server.value, 7);
}

/*
 * A KEEP on a fresh read ends there; on the cache it is confirmed (one
 * command); a stale cache makes fn run again on the current value, which is
 * no lost race (no pause, no read, no write).
 */
static void test_keep(void)
{
    fake f;
    bw__netupdate_clock clk;
    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = live(5, 50);
    op o = {BW_STORE_KEEP, 0, 0, 0, 0};
    CHECK_OK(bw__netupdate_run(&f.u, op_fn, &o));
    CHECK_INT(f.reads + f.writes + f.confirms, 1);
    CHECK_INT(f.reads, 1);

    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = f.cache = live(5, 50);
    f.cache_known = 1;
    o.runs = 0;
    CHECK_OK(bw__netupdate_run(&f.u, op_fn, &o));
    CHECK_INT(f.confirms, 1);
    CHECK_INT(f.reads + f.writes, 0);
    CHECK_INT(o.runs, 1);

    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.cache = live(5, 50);
    f.server = live(6, 60); /* another client wrote since */
    f.cache_known = 1;
    o.runs = 0;
    CHECK_OK(bw__netupdate_run(&f.u, op_fn, &o));
    CHECK_INT(f.confirms, 1);
    CHECK_INT(f.reads + f.writes, 0);
    CHECK_INT(o.runs, 2);
    CHECK_INT(o.seen, 60);
    CHECK_INT(f.u.conflicts, 0);
    CHECK_INT(f.sleeps, 0);
}

/* A DELETE of nothing decided on the cache, confirmed on a key that now holds an expired entry: that is deleted. */
static void test_delete_confirmed_expired(void)
{
    fake f;
    bw__netupdate_clock clk;
    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.cache_known = 1; /* the cache: nothing there */
    val expired = {8, 80, f.clock - 1};
    f.server = expired;
    op o = {BW_STORE_KEEP, 0, 1, 0, 0};
    CHECK_OK(bw__netupdate_run(&f.u, op_fn, &o));
    CHECK_INT(f.confirms, 1);
    CHECK_INT(f.writes, 1);
    CHECK_INT(o.runs, 1);
    CHECK_INT(f.server.version, 0); /* deleted */
}

/*
 * Lost races: fn runs again at once on the first conflict's answer; from the
 * second on, a pause and a fresh read; each pause within [0, 16 us << c).
 */
static void test_lost_races(void)
{
    fake f;
    bw__netupdate_clock clk;
    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = f.cache = live(5, 50);
    f.cache_known = 1;
    f.steal = 4; /* the first write, the second, the read after it, the third: then the fourth wins */
    op o = {BW_STORE_PUT, 7, 0, 0, 0};
    CHECK_OK(bw__netupdate_run(&f.u, op_fn, &o));
    CHECK_INT(f.u.conflicts, 3);
    CHECK_INT(f.writes, 4);
    CHECK_INT(f.reads, 2);  /* after the second lost race and after the third */
    CHECK_INT(f.sleeps, 2); /* likewise */
    CHECK(f.slept[0] >= 0 && f.slept[0] < 16 * US << 2);
    CHECK(f.slept[1] >= 0 && f.slept[1] < 16 * US << 3);
    CHECK_INT(o.runs, 4);
    CHECK_INT(f.server.value, 7);

    /* One lost race: no pause, no read (the conflict's answer serves). */
    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = f.cache = live(5, 50);
    f.cache_known = 1;
    f.steal = 1;
    o.runs = 0;
    CHECK_OK(bw__netupdate_run(&f.u, op_fn, &o));
    CHECK_INT(f.u.conflicts, 1);
    CHECK_INT(f.reads, 0);
    CHECK_INT(f.writes, 2);
    CHECK_INT(f.sleeps, 0);
    CHECK_INT(o.runs, 2);
}

/* The pause's bound: [0, min(4 ms, 16 us << c)), never past the deadline; spread over its window. */
static void test_pause_bound(void)
{
    uint64_t rng = 42;
    for (int c = 0; c <= 12; c++) {
        int64_t cap = c >= 8 ? 4000 * US : 16 * US << c, lo = cap, hi = 0;
        for (int i = 0; i < 2000; i++) {
            int64_t ns = bw__netupdate_pause_ns(&rng, c, INT64_MAX);
            lo = ns < lo ? ns : lo;
            hi = ns > hi ? ns : hi;
        }
        if (lo < 0 || hi >= cap)
            H_FAIL("c=%d: pauses from %" PRId64 " to %" PRId64 " ns, the window is [0, %" PRId64 ")", c, lo, hi, cap);
        CHECK(lo < cap / 10 && hi > cap - cap / 10); /* they cover the window */
    }
    CHECK(bw__netupdate_pause_ns(&rng, 12, 1000) <= 1000);
    CHECK_INT(bw__netupdate_pause_ns(&rng, 12, 0), 0);
    CHECK_INT(bw__netupdate_pause_ns(&rng, 12, -5), 0);
    /* The one random source: SplitMix64 (base/hash.h) on the caller's state. */
    uint64_t a = 7, b = 7;
    for (int i = 0; i < 100; i++)
        CHECK_INT(bw__netupdate_pause_ns(&a, 8, INT64_MAX), (int64_t)(bw__splitmix(&b) % 4000000));
}

/* Two updates that lose races seed their pauses apart. */
static void test_pause_seeds_differ(void)
{
    int64_t first[2];
    for (int k = 0; k < 2; k++) {
        fake f;
        bw__netupdate_clock clk;
        fake_make(&f, &clk, 100 * BW_NS_PER_MS);
        f.server = live(5, 50);
        f.steal = 12;
        op o = {BW_STORE_PUT, 7, 0, 0, 0};
        CHECK_OK(bw__netupdate_run(&f.u, op_fn, &o));
        CHECK(f.sleeps >= 3);
        first[k] = f.slept[0] ^ f.slept[1] << 12 ^ f.slept[2] << 24;
    }
    CHECK(first[0] != first[1]);
}

/*
 * Every race lost until the deadline passes between two commands:
 * BW_ECONFLICT, saying how many; the pauses never reach past the deadline.
 */
static void test_deadline_between_commands(void)
{
    fake f;
    bw__netupdate_clock clk;
    fake_make(&f, &clk, 20 * BW_NS_PER_MS);
    f.server = live(5, 50);
    f.rtt = 0; /* no command is cut: the deadline can only pass between two */
    f.steal = -1;
    op o = {BW_STORE_PUT, 7, 0, 0, 0};
    CHECK_RC(bw__netupdate_run(&f.u, op_fn, &o), BW_ECONFLICT);
    CHECK(f.u.conflicts >= 2);
    CHECK(f.clock == f.u.deadline); /* slept up to the deadline, not past it */
    char want[100];
    snprintf(want, sizeof want, "fake: an update of 'k' lost %d races to other clients", f.u.conflicts);
    if (!strstr(f.u.e.message, want))
        H_FAIL("the message '%s' does not say '%s'", f.u.e.message, want);
}

/*
 * BW_ETIMEDOUT stays: a command the deadline cut (the connection broken), a
 * timeout the server ended before the deadline, and a deadline passed
 * without a race lost.
 */
static void test_timeouts_stay(void)
{
    fake f;
    bw__netupdate_clock clk;
    op o = {BW_STORE_PUT, 7, 0, 0, 0};
    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = f.cache = live(5, 50);
    f.cache_known = 1;
    f.steal = 1;
    f.cut_write = 2;
    CHECK_RC(bw__netupdate_run(&f.u, op_fn, &o), BW_ETIMEDOUT);
    CHECK_INT(f.u.conflicts, 1);
    CHECK_STR(f.u.e.message, "fake: the deadline cut the write");

    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = f.cache = live(5, 50);
    f.cache_known = 1;
    f.steal = 1;
    f.server_timeout_write = 2;
    CHECK_RC(bw__netupdate_run(&f.u, op_fn, &o), BW_ETIMEDOUT);
    CHECK_INT(f.u.conflicts, 1);
    CHECK_STR(f.u.e.message, "fake: the server's statement timeout");

    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = live(5, 50);
    f.clock = f.u.deadline;
    CHECK_RC(bw__netupdate_run(&f.u, op_fn, &o), BW_ETIMEDOUT);
    CHECK_INT(f.u.conflicts, 0);
    CHECK_STR(f.u.e.message, "fake: the deadline passed before a command");
}

/* An operation's error ends the update with it. */
static void test_write_error(void)
{
    fake f;
    bw__netupdate_clock clk;
    fake_make(&f, &clk, 100 * BW_NS_PER_MS);
    f.server = f.cache = live(5, 50);
    f.cache_known = 1;
    f.error_write = 1;
    op o = {BW_STORE_PUT, 7, 0, 0, 0};
    CHECK_RC(bw__netupdate_run(&f.u, op_fn, &o), BW_ESYS);
    CHECK_STR(f.u.e.message, "fake: the server refused the write");
    CHECK_INT(f.writes, 1);
    CHECK_INT(o.runs, 1);
}

int main(int argc, char **argv)
{
    H_ARGS(argc, argv);
    RUN(test_cache_one_round_trip);
    RUN(test_unknown_reads_first);
    RUN(test_keep);
    RUN(test_delete_confirmed_expired);
    RUN(test_lost_races);
    RUN(test_pause_bound);
    RUN(test_pause_seeds_differ);
    RUN(test_deadline_between_commands);
    RUN(test_timeouts_stay);
    RUN(test_write_error);
    return TEST_SUMMARY();
}
