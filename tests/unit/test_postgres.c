/*
 * test_postgres.c — what only the postgresql:// store does (the store
 * contract it shares with every store is tests/contract/): URL validation
 * (each error names its field and range), libpq's keywords passed through
 * and its keyword strings, a wrong password, a missing database and an
 * unreachable server refused at open, the table's layout and its versioned
 * schema, rows breakwater did not write read as absent, the bounded sweep and
 * the automatic one, the row cache (a stale cache is a conflict, never a
 * wrong write, even across a delete and a new insert), the round trips of
 * each operation counted by the server (pg_stat_statements), a forked child
 * refused (and its close harmless to the parent), a row another client holds
 * locked (that update cancelled by the server in time, the other circuits
 * unaffected), a stopped server (SIGSTOP: postmaster and backends) failing
 * calls within the timeout, then answering again after SIGCONT, and a server
 * stopped as a crash would under load and started again (the store
 * reconnects, the circuits survive); a 48 MB row never sent; through a
 * fault proxy (support/faultproxy.h), every call within its timeout: on a
 * blackholed server (reconnects included), on a link too slow to connect
 * within one call (the next call goes on with the connection), against
 * statements answered in 80 ms while another client writes the row. Run by
 * ctest under
 * tests/support/with_postgres.sh, whose server it talks to ($BW_TEST_PORT),
 * stops ($BW_TEST_SERVER_PID) and restarts ($BW_TEST_PG_RESTART).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "faultproxy.h"
#include "scan_pages.h"
#include "entries.h"
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
    if (rc != want)
        H_FAIL("%s: %s (%s), not %s", u, bw_strerror(rc), rc ? e.message : "", bw_strerror(want));
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

static bw_store *open_ok(const char *u)
{
    bw_store *s = NULL;
    bw_error e;
    int rc = bw_store_open(u, &s, &e);
    if (rc != BW_OK)
        H_FAIL("bw_store_open(%s): %s: %s", u, bw_strerror(rc), e.message);
    return s;
}

/* ---- a connection of our own, to look at what the store did ---- */

static PGconn *raw(void)
{
    char ci[200];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=postgres dbname=postgres connect_timeout=5", port);
    PGconn *c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK)
        H_FAIL("raw connection: %s", PQerrorMessage(c));
    return c;
}

/* The first value of a query's answer ("" for none or NULL); a failed check on an error. */
static const char *sql(PGconn *c, const char *q)
{
    static char out[512];
    out[0] = 0;
    PGresult *r = PQexec(c, q);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
        H_FAIL("%s: %s", q, PQresultErrorMessage(r));
    else if (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0)
        snprintf(out, sizeof out, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return out;
}

/* Statements the server ran on `table` (pg_stat_statements), but for this counting. */
static long statements(PGconn *c, const char *table)
{
    char q[300];
    snprintf(q, sizeof q,
             "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE '%%\"%s\"%%' AND query NOT "
             "LIKE '%%pg_stat_statements%%'",
             table);
    return atol(sql(c, q));
}

/* ---- the tests ---- */

static void test_url_errors(void)
{
    refused("postgresql://127.0.0.1?table=1abc", BW_EINVAL, "table", "[schema.]name");
    refused("postgresql://127.0.0.1?table=a-b", BW_EINVAL, "table", "letters, digits and '_'");
    refused("postgresql://127.0.0.1?table=a.b.c", BW_EINVAL, "table", "1 to 63 bytes");
    refused("postgresql://127.0.0.1?table=.a", BW_EINVAL, "table", "1 to 63 bytes");
    refused("postgresql://127.0.0.1?table=", BW_EINVAL, "table", "1 to 63 bytes");
    char u[300];
    snprintf(u, sizeof u, "postgresql://127.0.0.1?table=%064d", 0);
    u[strlen("postgresql://127.0.0.1?table=")] = 't'; /* 64 bytes, a letter first */
    refused(u, BW_EINVAL, "table", "1 to 63 bytes");
    refused("postgresql://127.0.0.1?pool=0", BW_EINVAL, "pool", "[1, 64]");
    refused("postgresql://127.0.0.1?pool=65", BW_EINVAL, "pool", "[1, 64]");
    refused("postgresql://127.0.0.1?timeout=0", BW_EINVAL, "timeout", "duration");
    refused("postgresql://127.0.0.1?timeout=2m", BW_EINVAL, "timeout", "duration");
    refused("postgresql://127.0.0.1?connect_timeout=500us", BW_EINVAL, "connect_timeout", "duration");
    refused("postgresql://127.0.0.1?bogus=1", BW_EINVAL, "bogus", "libpq connection keyword");
    refused("postgres://127.0.0.1?prefix=x", BW_EINVAL, "prefix", "libpq connection keyword");
    /* What libpq itself refuses, before anything is created. */
    refused("postgresql://[::1", BW_EINVAL, "url", "libpq refused");
    refused("postgresql:host", BW_EINVAL, "url", "libpq refused");
    refused("postgresql:host='unterminated", BW_EINVAL, "url", "libpq refused");
    /* libpq checks the values of its own keywords when it connects: refused at open all the same. */
    refused("postgresql://127.0.0.1?sslmode=sometimes", BW_ESYS, NULL, "invalid sslmode value");
    CHECK(bw_components() & BW_COMPONENT_POSTGRES);
    CHECK_INT(BW_COMPONENT_POSTGRES, 0x10);
}

static void test_open_errors(void)
{
    /* Nobody listens on port 1: refused at once (connect_timeout bounds it anyway). */
    int64_t t0 = bw__mono_now();
    refused("postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=200ms", BW_ESYS, NULL, "connecting");
    CHECK(bw__mono_now() - t0 < 200 * MS + 1000 * MS);
    refused(url("postgresql://bwpass:wrong@127.0.0.1:%d/postgres"), BW_ESYS, NULL, "password authentication failed");
    refused(url("postgresql://postgres@127.0.0.1:%d/nosuchdb"), BW_ESYS, NULL, "does not exist");
    /* The right password opens, and makes the table as that role. */
    bw_store *s = open_ok(url("postgresql://bwpass:bwsecret@127.0.0.1:%d/postgres?table=pw&timeout=10s"));
    if (s) {
        CHECK_OK(entry_put(s, "k", 1, 64, BW_STORE_NEVER, NULL));
        bw_store_close(s);
    }
    PGconn *c = raw();
    CHECK_STR(sql(c, "SELECT tableowner FROM pg_tables WHERE tablename = 'pw'"), "bwpass");
    /* A table of that name that breakwater did not make, or of another schema version. */
    sql(c, "CREATE TABLE foreign_t (x int)");
    refused(url("postgresql://postgres@127.0.0.1:%d/postgres?table=foreign_t"), BW_ESTATE, "table",
            "not a breakwater store");
    sql(c, "COMMENT ON TABLE pw IS 'breakwater store schema 0'");
    refused(url("postgresql://postgres@127.0.0.1:%d/postgres?table=pw"), BW_ESTATE, "table", "schema 0");
    PQfinish(c);
}

static void test_url_forms(void)
{
    /* libpq's keyword string, libpq's options passed through, and the postgres:// spelling. */
    bw_store *a = open_ok(
        url("postgresql:host=127.0.0.1 port=%d user=postgres dbname=postgres?table=forms&application_name=bw-kw"));
    bw_store *b =
        open_ok(url("postgres://postgres@127.0.0.1:%d/postgres?table=forms&application_name=bw%%2Duri&timeout=10s"));
    if (!a || !b)
        return;
    CHECK_STR(bw_store_scheme(a), "postgresql");
    CHECK_STR(bw_store_scheme(b), "postgresql");
    CHECK_OK(entry_put(a, "k", 5, 64, BW_STORE_NEVER, NULL));
    CHECK_INT(entry_get(b, "k"), 5);
    PGconn *c = raw();
    CHECK_STR(sql(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bw-kw'"), "1");
    CHECK_STR(sql(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bw-uri'"), "1"); /* %2D decoded */
    /* The session's statement_timeout is the store's timeout (100 ms by default). */
    CHECK_STR(sql(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bw-kw' AND state = 'idle'"), "1");
    PQfinish(c);
    bw_store_close(a);
    bw_store_close(b);
    /* A schema-qualified table. */
    c = raw();
    sql(c, "CREATE SCHEMA bws");
    bw_store *q = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=bws.Circuits&timeout=10s"));
    if (q) {
        CHECK_OK(entry_put(q, "k", 1, 64, BW_STORE_NEVER, NULL));
        CHECK_STR(sql(c, "SELECT count(*) FROM bws.\"Circuits\""), "1"); /* quoted: its case kept */
        bw_store_close(q);
    }
    PQfinish(c);
}

static void test_layout(void)
{
    bw_store *s = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=lay&pool=2&timeout=10s"));
    if (!s)
        return;
    CHECK_OK(entry_put(s, "svc key", 42, 64, BW_STORE_NEVER, NULL));
    PGconn *c = raw();
    CHECK_STR(sql(c, "SELECT string_agg(column_name || ':' || data_type, ',' ORDER BY ordinal_position) FROM "
                     "information_schema.columns WHERE table_name = 'lay'"),
              "name:text,data:bytea,version:bigint,expires_at:bigint");
    CHECK_STR(sql(c, "SELECT obj_description('lay'::regclass, 'pg_class')"), "breakwater store schema 1");
    CHECK_STR(sql(c, "SELECT string_agg(a.attname, ',') FROM pg_index i JOIN pg_attribute a ON a.attrelid = "
                     "i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'lay'::regclass AND i.indisprimary"),
              "name");
    CHECK_STR(sql(c, "SELECT length(data) || ' ' || expires_at FROM lay WHERE name = 'svc key'"),
              "64 9223372036854775807");
    /* Every write takes a fresh version, also after a delete. */
    long v1 = atol(sql(c, "SELECT version FROM lay WHERE name = 'svc key'"));
    CHECK_OK(entry_put(s, "svc key", 43, 64, BW_STORE_NEVER, NULL));
    long v2 = atol(sql(c, "SELECT version FROM lay WHERE name = 'svc key'"));
    CHECK(entry_del(s, "svc key") == BW_OK);
    CHECK_STR(sql(c, "SELECT count(*) FROM lay WHERE name = 'svc key'"), "0");
    CHECK_OK(entry_put(s, "svc key", 44, 64, BW_STORE_NEVER, NULL));
    long v3 = atol(sql(c, "SELECT version FROM lay WHERE name = 'svc key'"));
    CHECK(v1 >= 1 && v2 > v1 && v3 > v2);
    /* Rows breakwater did not write read as absent, and an update replaces them. */
    sql(c, "INSERT INTO lay (name, data, expires_at) VALUES ('empty', '', 9223372036854775807)");
    sql(c, "INSERT INTO lay (name, data, version, expires_at) VALUES ('v0', '\\x00112233445566778899', 0, "
           "9223372036854775807)");
    sql(c, "INSERT INTO lay (name, data, expires_at) SELECT 'huge', decode(repeat('ab', 1025), 'hex'), "
           "9223372036854775807");
    CHECK_INT(entry_get(s, "empty"), -2);
    CHECK_INT(entry_get(s, "v0"), -2);
    CHECK_INT(entry_get(s, "huge"), -2);
    CHECK_OK(entry_put(s, "empty", 7, 64, BW_STORE_NEVER, NULL));
    CHECK_OK(entry_put(s, "v0", 8, 64, BW_STORE_NEVER, NULL));
    CHECK_OK(entry_put(s, "huge", 9, 64, BW_STORE_NEVER, NULL));
    CHECK_INT(entry_get(s, "empty"), 7);
    CHECK_INT(entry_get(s, "v0"), 8);
    CHECK_INT(entry_get(s, "huge"), 9);
    /* Expired rows read as absent; the sweep deletes them in batches of at most max, and only them. */
    int64_t now = 0;
    bw_store_entry out;
    int found = 1;
    CHECK_OK(bw__store_try_read(s, "nothing", &now, &out, &found)); /* the server's clock */
    CHECK_INT(found, 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t real = (int64_t)ts.tv_sec * BW_NS_PER_S + ts.tv_nsec;
    CHECK(now > real - 5000 * MS && now < real + 5000 * MS); /* clock_timestamp(), in ns on the realtime scale */
    for (int i = 0; i < 3; i++) {
        char k[16];
        snprintf(k, sizeof k, "old%d", i);
        CHECK_OK(entry_put(s, k, i, 64, now, NULL)); /* expired when written */
    }
    CHECK_OK(entry_put(s, "young", 1, 64, now + 3600 * (int64_t)BW_NS_PER_S, NULL));
    CHECK_INT(entry_get(s, "old0"), -2);
    CHECK_STR(sql(c, "SELECT count(*) FROM lay WHERE name LIKE 'old%'"), "3");
    int d = -1;
    CHECK_OK(bw_store_sweep(s, 2, &d, NULL));
    CHECK_INT(d, 2);
    CHECK_OK(bw_store_sweep(s, 10, &d, NULL));
    CHECK_INT(d, 1);
    CHECK_OK(bw_store_sweep(s, 10, &d, NULL));
    CHECK_INT(d, 0);
    CHECK_STR(sql(c, "SELECT count(*) FROM lay WHERE name LIKE 'old%'"), "0");
    CHECK_INT(entry_get(s, "young"), 1);
    PQfinish(c);
    bw_store_close(s);
}

/* Indexes of `table` whose first column is expires_at (the sweep's), as text. */
static const char *expiry_indexes(PGconn *c, const char *table)
{
    char q[400];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = "
             "i.indkey[0] WHERE i.indrelid = to_regclass('%s') AND a.attname = 'expires_at'",
             table);
    return sql(c, q);
}

/*
 * The sweep's index on expires_at: a new table has it; a table made before it
 * (no index) gets it at the next open, once; a user that may not make it (not
 * the table's owner) still opens the store, and writes; a name too long for
 * NAME_expires_at gets a shortened one.
 */
static void test_expiry_index(void)
{
    PGconn *c = raw();
    bw_store *s = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=idxnew&timeout=10s"));
    if (s) {
        CHECK_STR(expiry_indexes(c, "idxnew"), "1");
        CHECK_STR(sql(c, "SELECT count(*) FROM pg_indexes WHERE indexname = 'idxnew_expires_at'"), "1");
        bw_store_close(s);
    }
    static const char old[] = "CREATE TABLE %s (name text PRIMARY KEY, data bytea NOT NULL, version bigserial NOT "
                              "NULL, expires_at int8 NOT NULL); COMMENT ON TABLE %s IS 'breakwater store schema 1'";
    char q[400];
    snprintf(q, sizeof q, old, "idxold", "idxold");
    sql(c, q);
    CHECK_STR(expiry_indexes(c, "idxold"), "0");
    for (int i = 0; i < 2; i++) {
        s = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=idxold&timeout=10s"));
        CHECK_STR(expiry_indexes(c, "idxold"), "1"); /* made at the first open, kept at the second */
        if (s) {
            CHECK_OK(entry_put(s, "k", 1, 64, BW_STORE_NEVER, NULL));
            bw_store_close(s);
        }
    }
    snprintf(q, sizeof q, old, "idxro", "idxro");
    sql(c, q);
    sql(c, "CREATE ROLE bwro LOGIN");
    sql(c, "GRANT SELECT, INSERT, UPDATE, DELETE ON idxro TO bwro");
    sql(c, "GRANT USAGE ON SEQUENCE idxro_version_seq TO bwro");
    s = open_ok(url("postgresql://bwro@127.0.0.1:%d/postgres?table=idxro&timeout=10s"));
    CHECK_STR(expiry_indexes(c, "idxro"), "0"); /* not its owner: no index, and the store works */
    if (s) {
        CHECK_OK(entry_put(s, "k", 1, 64, BW_STORE_NEVER, NULL));
        CHECK_INT(entry_get(s, "k"), 1);
        bw_store_close(s);
    }
    const char *longname = "idx_a_table_name_that_is_much_too_long_for_its_index_suffix_x"; /* 62 bytes */
    char u[300];
    snprintf(u, sizeof u, "postgresql://postgres@127.0.0.1:%%d/postgres?table=%s&timeout=10s", longname);
    s = open_ok(url(u));
    if (s) {
        CHECK_STR(expiry_indexes(c, longname), "1");
        CHECK_STR(sql(c,
                      "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'idx_a_table_name_that_is_much_too_long_fo_"
                      "%_expires_at' AND length(indexname) = 62"),
                  "1");
        bw_store_close(s);
    }
    PQfinish(c);
}

/* The automatic sweep: an update that finds it due deletes expired rows; sweep=off never. */
static void test_auto_sweep(void)
{
    bw_store *on = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=autosw&sweep=20ms&timeout=10s"));
    bw_store *off = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=autosw2&sweep=off&timeout=10s"));
    if (!on || !off)
        return;
    PGconn *c = raw();
    int64_t now;
    bw_store_entry out;
    int found;
    CHECK_OK(bw__store_try_read(on, "x", &now, &out, &found));
    for (int i = 0; i < 3; i++) {
        char k[16];
        snprintf(k, sizeof k, "old%d", i);
        CHECK_OK(entry_put(on, k, i, 64, now, NULL));
        CHECK_OK(entry_put(off, k, i, 64, now, NULL));
    }
    struct timespec ts = {0, 50 * MS};
    nanosleep(&ts, NULL);
    CHECK_OK(entry_put(on, "live", 1, 64, BW_STORE_NEVER, NULL));
    CHECK_OK(entry_put(off, "live", 1, 64, BW_STORE_NEVER, NULL));
    CHECK_STR(sql(c, "SELECT count(*) FROM autosw"), "1");
    CHECK_STR(sql(c, "SELECT count(*) FROM autosw2"), "4");
    refused("postgresql://127.0.0.1?sweep=367d", BW_EINVAL, "sweep", "duration");
    bw_store_close(on);
    /*
     * A pass deletes at most 100 rows; one that deleted a full 100 leaves the
     * sweep due, so the next update runs another at once (a flood of
     * short-lived keys is swept as fast as it is written) rather than a
     * period (here at least 500 ms) later.
     */
    on = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=autosw3&sweep=1s&timeout=10s"));
    if (!on)
        return;
    CHECK_OK(entry_put(on, "live", 1, 64, BW_STORE_NEVER, NULL)); /* makes the table */
    sql(c, "INSERT INTO autosw3 (name, data, expires_at) SELECT 'old' || i, '\\x00', 0 FROM generate_series(1, 250) i");
    struct timespec due = {1, 100 * MS};
    nanosleep(&due, NULL);
    static const char *const left[] = {"151", "51", "1"};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(entry_put(on, "live", 2 + i, 64, BW_STORE_NEVER, NULL));
        CHECK_STR(sql(c, "SELECT count(*) FROM autosw3"), left[i]);
    }
    PQfinish(c);
    bw_store_close(on);
    bw_store_close(off);
}

/* entry_incr, counting its runs. */
static int incr_calls;
static bw_store_verdict counted_incr(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    incr_calls++;
    return entry_incr(arg, now, cur, next);
}

/* The row cache: what another client wrote meanwhile is a conflict (fn runs again on it), never overwritten. */
static void test_stale_cache(void)
{
    bw_store *a = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=cache&timeout=10s"));
    bw_store *b = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=cache&timeout=10s"));
    if (!a || !b)
        return;
    CHECK_OK(entry_put(a, "k", 1, 64, BW_STORE_NEVER, NULL)); /* a has seen k = 1 */
    CHECK_OK(entry_put(b, "k", 5, 64, BW_STORE_NEVER, NULL));
    incr_calls = 0;
    CHECK_OK(bw_store_update(a, "k", counted_incr, NULL, NULL));
    CHECK_INT(incr_calls, 2); /* first on the cache (1), then on what b wrote (5) */
    CHECK_INT(entry_get(b, "k"), 6);
    /* A KEEP decided on a stale cache is checked: a sees b's write. */
    CHECK_OK(entry_put(b, "k", 9, 64, BW_STORE_NEVER, NULL));
    CHECK_INT(entry_get(a, "k"), 9);
    /* A delete and a new insert in between (a version is never used twice). */
    CHECK_OK(entry_put(a, "n", 1, 64, BW_STORE_NEVER, NULL)); /* a has seen n's first version */
    CHECK(entry_del(b, "n") == BW_OK);
    CHECK_OK(entry_put(b, "n", 100, 64, BW_STORE_NEVER, NULL));
    incr_calls = 0;
    CHECK_OK(bw_store_update(a, "n", counted_incr, NULL, NULL));
    CHECK_INT(incr_calls, 2);
    CHECK_INT(entry_get(b, "n"), 101);
    /* Absent in a's cache, written by b meanwhile: the insert conflicts. */
    CHECK_INT(entry_get(a, "m"), -2);
    CHECK_OK(entry_put(b, "m", 50, 64, BW_STORE_NEVER, NULL));
    incr_calls = 0;
    CHECK_OK(bw_store_update(a, "m", counted_incr, NULL, NULL));
    CHECK_INT(incr_calls, 2);
    CHECK_INT(entry_get(b, "m"), 51);
    /* Deleted by b while a's cache holds it: a's write conflicts, then inserts. */
    CHECK(entry_del(b, "m") == BW_OK);
    incr_calls = 0;
    CHECK_OK(bw_store_update(a, "m", counted_incr, NULL, NULL));
    CHECK_INT(incr_calls, 2);
    CHECK_INT(entry_get(b, "m"), 1);
    bw_store_close(a);
    bw_store_close(b);
}

/* Round trips, as the server counts the statements it ran. */
static void test_round_trips(void)
{
    bw_store *s = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=rt&timeout=10s"));
    if (!s)
        return;
    PGconn *c = raw();
    int64_t now;
    bw_store_entry out;
    int found;
    long n0 = statements(c, "rt");
    /* A stored call: acquire reads (1), settle updates on what the read saw (1). */
    CHECK_OK(bw__store_try_read(s, "k", &now, &out, &found));
    CHECK_OK(entry_put(s, "k", 1, 64, BW_STORE_NEVER, NULL));
    long n1 = statements(c, "rt");
    CHECK_INT(n1 - n0, 2);
    /* Updates in a row: 1 each (a write on the cache; a KEEP on the cache and its check). */
    CHECK_OK(entry_put(s, "k", 2, 64, BW_STORE_NEVER, NULL));
    CHECK_INT(entry_get(s, "k"), 2);
    long n2 = statements(c, "rt");
    CHECK_INT(n2 - n1, 2);
    /* A key never seen: a read, then the write. */
    CHECK_OK(entry_put(s, "fresh", 1, 64, BW_STORE_NEVER, NULL));
    long n3 = statements(c, "rt");
    CHECK_INT(n3 - n2, 2);
    /* read_many of 200 keys: 1. */
    const char *names[200];
    char buf[200][16];
    bw_store_entry *many = malloc(200 * sizeof *many);
    int fm[200];
    for (int i = 0; i < 200; i++) {
        snprintf(buf[i], sizeof buf[i], "m%d", i);
        names[i] = buf[i];
    }
    names[7] = "k";
    names[9] = "k"; /* twice: both answered */
    CHECK_OK(bw__store_read_many(s, 200, names, &now, many, fm));
    CHECK(fm[7] && fm[9] && !fm[0] && !fm[199]);
    CHECK_INT(entry_value(&many[9]), 2);
    long n4 = statements(c, "rt");
    CHECK_INT(n4 - n3, 1);
    free(many);
    /* An expired sample (none here: the clock was read just now) is the only other case that reads first. */
    PQfinish(c);
    bw_store_close(s);
}

/* A store handle belongs to the process that opened it: a forked child gets BW_ESTATE, the parent goes on. */
static void test_fork(void)
{
    bw_store *s = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=fork&pool=1&timeout=10s"));
    if (!s)
        return;
    CHECK_OK(entry_put(s, "k", 1, 64, BW_STORE_NEVER, NULL));
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        int rc = entry_put(s, "k", 2, 64, BW_STORE_NEVER, NULL);
        bw_store_close(s); /* must not end the parent's session, which shares the socket */
        _exit(rc == BW_ESTATE ? 0 : 1);
    }
    CHECK(child > 0);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_INT(entry_get(s, "k"), 1); /* the same connection (pool=1), still open */
    CHECK_OK(entry_put(s, "k", 3, 64, BW_STORE_NEVER, NULL));
    bw_store_close(s);
}

/*
 * A row another client holds locked: the update of that circuit fails within
 * the timeout (the server cancels it), and the store's other circuits go on at
 * once (the connection stays: no backoff).
 */
static void test_locked_row(void)
{
    bw_store *s = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=locked&timeout=200ms&pool=1"));
    if (!s)
        return;
    bw_error e;
    int64_t t1 = bw__mono_now(); /* a loaded machine may stall the server past 200 ms: until it answers */
    while (entry_put(s, "held", 1, 64, BW_STORE_NEVER, &e) != BW_OK && bw__mono_now() - t1 < 10000 * MS) {
        struct timespec ts = {0, 20 * MS};
        nanosleep(&ts, NULL);
    }
    while (entry_put(s, "free", 1, 64, BW_STORE_NEVER, &e) != BW_OK && bw__mono_now() - t1 < 10000 * MS) {
        struct timespec ts = {0, 20 * MS};
        nanosleep(&ts, NULL);
    }
    PGconn *c = raw();
    sql(c, "BEGIN");
    sql(c, "SELECT version FROM locked WHERE name = 'held' FOR UPDATE");
    int64_t t0 = bw__mono_now();
    int rc = entry_put(s, "held", 2, 64, BW_STORE_NEVER, &e);
    int64_t took = bw__mono_now() - t0;
    CHECK_INT(rc, BW_ETIMEDOUT);
    if (rc == BW_ETIMEDOUT && !strstr(e.message, "statement timeout"))
        H_FAIL("the server did not cancel it: %s", e.message);
    CHECK(took < 200 * MS + 1000 * MS);
    CHECK_OK(entry_put(s, "free", 2, 64, BW_STORE_NEVER, &e)); /* at once: the same connection (pool=1) */
    sql(c, "COMMIT");
    PQfinish(c);
    CHECK_OK(entry_put(s, "held", 3, 64, BW_STORE_NEVER, &e));
    CHECK_INT(entry_get(s, "held"), 3);
    bw_store_close(s);
}

/* Send sig to the server: the postmaster and every process it started (each its own session leader). */
static void signal_server(int sig)
{
    CHECK(kill(server, sig) == 0);
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char path[300], buf[512];
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *close = strrchr(buf, ')'); /* pid (comm) state ppid ... */
        char state;
        long ppid;
        if (close && sscanf(close + 1, " %c %ld", &state, &ppid) == 2 && ppid == (long)server)
            kill((pid_t)atol(de->d_name), sig);
    }
    if (d)
        closedir(d);
}

static void test_stopped_server(void)
{
    bw_store *s = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=stall&timeout=100ms&connect_timeout="
                              "300ms"));
    if (!s)
        return;
    bw_error e;
    int64_t t1 = bw__mono_now(); /* a loaded machine may stall the server past 100 ms: until it answers */
    while (entry_put(s, "k", 1, 64, BW_STORE_NEVER, &e) != BW_OK && bw__mono_now() - t1 < 10000 * MS) {
        struct timespec ts = {0, 20 * MS};
        nanosleep(&ts, NULL);
    }
    CHECK_INT(entry_get(s, "k"), 1);
    signal_server(SIGSTOP);
    for (int i = 0; i < 6; i++) { /* the first times out; the next fail at once (backoff) or time out */
        int64_t t0 = bw__mono_now();
        int rc;
        if (i % 3 == 0) {
            rc = entry_put(s, "k", 2, 64, BW_STORE_NEVER, &e);
        } else if (i % 3 == 1) {
            int64_t now;
            bw_store_entry out;
            int found;
            rc = bw__store_try_read(s, "k", &now, &out, &found);
        } else {
            int d;
            rc = bw_store_sweep(s, 10, &d, &e);
        }
        int64_t took = bw__mono_now() - t0;
        CHECK(rc != BW_OK);
        if (i == 0)
            CHECK_INT(rc, BW_ETIMEDOUT);
        if (took >= 1100 * MS) /* a bound on the wait: timeout (or connect_timeout) + slack */
            H_FAIL("call %d took %lld ms", i, (long long)(took / MS));
    }
    signal_server(SIGCONT);
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
    CHECK(v == 3);
    bw_store_close(s);
}

/* Updates in a loop on another thread, timing each, until told to stop. */
typedef struct loader {
    bw_store *s;
    atomic_int stop;
    int ok_after;     /* successes once `after` was set */
    atomic_int after; /* the restart is over */
    int64_t longest;  /* the longest call, ns */
} loader;

static void *load_main(void *arg)
{
    loader *l = arg;
    while (!atomic_load(&l->stop)) {
        int after = atomic_load(&l->after);
        int64_t t0 = bw__mono_now();
        int rc = bw_store_update(l->s, "load", entry_incr, NULL, NULL);
        int64_t took = bw__mono_now() - t0;
        if (took > l->longest)
            l->longest = took;
        if (rc == BW_OK && after)
            atomic_fetch_add(&l->ok_after, 1);
        if (rc != BW_OK) {
            struct timespec ts = {0, 5 * MS};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/*
 * The server stopped as a crash would, under load, and started again on the
 * same port: every call stays bounded, the store reconnects by itself (its
 * statements prepared again) and the circuits written before are still there.
 */
static void test_scan_pages_bounded(void)
{
    bw_store *s = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=scanpages&timeout=10s"));
    if (!s)
        return;
    check_scan_pages_bounded(s);
    bw_store_close(s);
}

static void test_restart(void)
{
    const char *restart = getenv("BW_TEST_PG_RESTART");
    if (!restart || !restart[0]) {
        H_FAIL("no $BW_TEST_PG_RESTART: run it through tests/support/with_postgres.sh");
        return;
    }
    bw_store *s =
        open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=restart&timeout=1s&connect_timeout=1s"));
    if (!s)
        return;
    bw_error e;
    int64_t t1 = bw__mono_now();
    while (entry_put(s, "k", 1, 64, BW_STORE_NEVER, &e) != BW_OK && bw__mono_now() - t1 < 10000 * MS) {
        struct timespec ts = {0, 20 * MS};
        nanosleep(&ts, NULL);
    }
    struct timespec flushed = {0, 700 * MS}; /* synchronous_commit=off: the WAL writer flushes within 600 ms */
    nanosleep(&flushed, NULL);
    loader l;
    memset(&l, 0, sizeof l);
    l.s = s;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, load_main, &l) == 0);
    struct timespec warm = {0, 200 * MS};
    nanosleep(&warm, NULL);
    CHECK_INT(system(restart), 0);
    atomic_store(&l.after, 1);
    int64_t t0 = bw__mono_now();
    while (bw__mono_now() - t0 < 5000 * MS) { /* the loader gets through again after the backoff */
        struct timespec ts = {0, 20 * MS};
        nanosleep(&ts, NULL);
        if (atomic_load(&l.ok_after) >= 10)
            break;
    }
    atomic_store(&l.stop, 1);
    pthread_join(th, NULL);
    CHECK(atomic_load(&l.ok_after) >= 10);
    if (l.longest >= 2500 * MS) /* connect_timeout + timeout + slack */
        H_FAIL("a call took %lld ms across the restart", (long long)(l.longest / MS));
    CHECK_INT(entry_get(s, "k"), 1); /* survived the crash */
    bw_store_close(s);
}

/* ---- every reply bounded in memory, every call in time ---- */

#define SLACK_MS 400 /* a loaded 2-CPU machine's scheduler, a sanitizer */

static long maxrss_mb(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

/*
 * A row far longer than an entry (another client wrote 48 MB of data) is
 * never sent to the store: it reads as absent, an update replaces it, and the
 * process does not grow by the row.
 */
static void test_huge_row(void)
{
    bw_store *s = open_ok(url("postgresql://postgres@127.0.0.1:%d/postgres?table=hugerow&timeout=10s"));
    if (!s)
        return;
    CHECK_OK(entry_put(s, "small", 1, 64, BW_STORE_NEVER, NULL));
    PGconn *c = raw();
    sql(c, "INSERT INTO hugerow (name, data, expires_at) SELECT 'big', decode(repeat('ab', 48 * 1024 * 1024), 'hex'), "
           "9223372036854775807");
    PQfinish(c);
    long base = maxrss_mb();
    int64_t t0 = bw__mono_now();
    CHECK_INT(entry_get(s, "big"), -2); /* not an entry: absent */
    int64_t now;
    bw_store_entry out[2];
    int found[2] = {1, 1};
    const char *names[2] = {"big", "small"};
    CHECK_OK(bw__store_read_many(s, 2, names, &now, out, found));
    CHECK_INT(found[0], 0);
    CHECK_INT(found[1], 1);
    CHECK_OK(entry_put(s, "big", 2, 64, BW_STORE_NEVER, NULL)); /* replaced through its version */
    CHECK_INT(entry_get(s, "big"), 2);
    int64_t took = bw__mono_now() - t0;
    long grown = maxrss_mb() - base;
    printf("# a 48 MB row: read, read_many and replaced in %lld ms, the process grew %ld MB\n", (long long)(took / MS),
           grown);
    if (grown > 24)
        H_FAIL("the process grew %ld MB reading a row of 48 MB: it was sent", grown);
    bw_store_close(s);
}

/* A store of table `table` through the proxy px, with `opts`; NULL (and a failed check) when it cannot open. */
static bw_store *open_via(faultproxy *px, const char *table, const char *opts)
{
    char u[300];
    snprintf(u, sizeof u, "postgresql://postgres@127.0.0.1:%d/postgres?table=%s&%s", faultproxy_port(px), table, opts);
    return open_ok(u);
}

/* entry_put until it works, at most ms (a loaded machine may stall the server past a short timeout). */
static int put_until(bw_store *s, int64_t value, int64_t ms, int64_t *longest, int *unfinished)
{
    bw_error e = {0, "", ""};
    int rc = BW_ESYS;
    for (int64_t t1 = bw__mono_now(); rc != BW_OK && bw__mono_now() - t1 < ms * MS;) {
        int64_t t0 = bw__mono_now();
        rc = entry_put(s, "k", value, 64, BW_STORE_NEVER, &e);
        int64_t took = bw__mono_now() - t0;
        if (longest && took > *longest)
            *longest = took;
        if (unfinished && rc == BW_ETIMEDOUT && strstr(e.message, "the next call goes on with it"))
            ++*unfinished;
        if (rc != BW_OK) {
            struct timespec ts = {0, 5 * MS};
            nanosleep(&ts, NULL);
        }
    }
    return rc;
}

/*
 * A blackholed server (the proxy swallows every byte both ways, accepting
 * connections): every call returns within its timeout (100 ms) though
 * connect_timeout is 1 s, the calls that reconnect included; once the proxy
 * passes again, the store answers again.
 */
static void test_blackhole(void)
{
    faultproxy *px = NULL;
    if (faultproxy_start("127.0.0.1", port, &px) != 0) {
        H_FAIL("faultproxy_start failed");
        return;
    }
    bw_store *s = open_via(px, "hole", "timeout=100ms&connect_timeout=1s");
    if (s) {
        CHECK_OK(put_until(s, 1, 10000, NULL, NULL));
        faultproxy_blackhole(px);
        long accepted = faultproxy_accepted(px);
        int64_t longest = 0;
        int calls = 0, ok = 0;
        for (int64_t t1 = bw__mono_now(); bw__mono_now() - t1 < 2500 * MS; calls++) {
            int64_t t0 = bw__mono_now();
            ok += entry_put(s, "k", 2, 64, BW_STORE_NEVER, NULL) == BW_OK;
            int64_t took = bw__mono_now() - t0;
            longest = took > longest ? took : longest;
            struct timespec ts = {0, 5 * MS};
            nanosleep(&ts, NULL);
        }
        long reconnects = faultproxy_accepted(px) - accepted;
        printf("# blackholed: %d calls, the longest %lld ms, %ld reconnects tried\n", calls, (long long)(longest / MS),
               reconnects);
        CHECK_INT(ok, 0);
        CHECK(reconnects >= 1); /* the bound held for calls that reconnect too */
        if (longest > (100 + SLACK_MS) * MS)
            H_FAIL("a call on a blackholed server took %lld ms, more than its timeout (100 ms) + %d ms",
                   (long long)(longest / MS), SLACK_MS);
        faultproxy_pass(px);
        CHECK_OK(put_until(s, 3, 5000, NULL, NULL));
        bw_store_close(s);
    }
    faultproxy_stop(px);
}

/*
 * A slow link (the proxy delays every chunk 100 ms each way): a statement (a
 * round trip, 200 ms) fits a call's timeout (500 ms), a new connection does
 * not (the TLS request, the startup and the session's set-up: 3 round trips,
 * 600 ms). The connection is reset: a call that reconnects fails within its
 * timeout, leaving the connection being made, and the next one goes on with
 * it (at least one does), so that the store gets connected again and the
 * write goes through (the next call finishes the connection 300 ms before
 * its deadline: room for the statement and a loaded machine).
 */
static void test_slow_reconnect(void)
{
    faultproxy *px = NULL;
    if (faultproxy_start("127.0.0.1", port, &px) != 0) {
        H_FAIL("faultproxy_start failed");
        return;
    }
    bw_store *s = open_via(px, "slowlink", "timeout=500ms&connect_timeout=10s&pool=1&gssencmode=disable");
    if (s) {
        CHECK_OK(put_until(s, 1, 10000, NULL, NULL));
        faultproxy_delay(px, 100);
        faultproxy_reset(px);
        int64_t longest = 0, t0 = bw__mono_now();
        int unfinished = 0;
        int rc = put_until(s, 2, 15000, &longest, &unfinished);
        printf("# a slow link: connected again after %lld ms, %d calls going on with a connection being made, the "
               "longest call %lld ms\n",
               (long long)((bw__mono_now() - t0) / MS), unfinished, (long long)(longest / MS));
        CHECK_OK(rc);
        CHECK(unfinished >= 1); /* a connection was made across calls */
        if (longest > (500 + SLACK_MS) * MS)
            H_FAIL("a call took %lld ms, more than its timeout (500 ms) + %d ms", (long long)(longest / MS), SLACK_MS);
        faultproxy_pass(px);
        CHECK_INT(entry_get(s, "k"), 2);
        bw_store_close(s);
    }
    faultproxy_stop(px);
}

/* Another client writing row `name` of `table` again and again (a fresh version each time), until told to stop. */
typedef struct writer {
    const char *table, *name;
    atomic_int stop;
    atomic_long writes;
} writer;

static void *writer_main(void *arg)
{
    writer *w = arg;
    PGconn *c = raw();
    char q[200];
    snprintf(q, sizeof q, "UPDATE %s SET version = DEFAULT WHERE name = '%s'", w->table, w->name);
    while (!atomic_load(&w->stop)) {
        PGresult *r = PQexec(c, q);
        PQclear(r);
        w->writes++;
    }
    PQfinish(c);
    return NULL;
}

/*
 * Statements answered in 80 ms (the proxy delays each way 40 ms) while
 * another client writes the row all the time: every compare-and-set of an
 * update is a conflict, and the update gives up within its timeout (100 ms).
 */
static void test_slow_conflicts(void)
{
    faultproxy *px = NULL;
    if (faultproxy_start("127.0.0.1", port, &px) != 0) {
        H_FAIL("faultproxy_start failed");
        return;
    }
    bw_store *s = open_via(px, "slowrace", "timeout=100ms&connect_timeout=1s&pool=1");
    if (s) {
        CHECK_OK(put_until(s, 1, 10000, NULL, NULL)); /* the store has seen the row */
        writer w = {"slowrace", "k", 0, 0};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, writer_main, &w) == 0);
        faultproxy_delay(px, 40);
        struct timespec ts = {0, 50 * MS};
        nanosleep(&ts, NULL);
        for (int i = 0; i < 500 && atomic_load(&w.writes) < 2; i++) /* the writer under way (at most 5 s more) */
            nanosleep(&(struct timespec){0, 10 * MS}, NULL);
        bw_error e = {0, "", ""};
        int64_t t0 = bw__mono_now();
        int rc = entry_put(s, "k", 2, 64, BW_STORE_NEVER, &e);
        int64_t took = bw__mono_now() - t0;
        atomic_store(&w.stop, 1);
        pthread_join(th, NULL);
        printf("# an update against 80 ms statements and another writer: %s after %lld ms (%s); %ld writes by the "
               "other\n",
               bw_strerror(rc), (long long)(took / MS), rc ? e.message : "", (long)atomic_load(&w.writes));
        /* The other writer wins the row's every race but on a loaded machine, where the first compare-and-set
         * may find it unchanged: then the update succeeds (one statement, 80 ms). Either way, within its timeout. */
        if (rc != BW_OK)
            CHECK_INT(rc, BW_ETIMEDOUT);
        if (took > (100 + SLACK_MS) * MS)
            H_FAIL("the update took %lld ms, more than its timeout (100 ms) + %d ms", (long long)(took / MS), SLACK_MS);
        bw_store_close(s);
    }
    faultproxy_stop(px);
}

/*
 * An automatic sweep cut by the call's deadline (the proxy delays 150 ms each
 * way: the update's one statement answers in 300 ms of its 450, the sweep
 * after it cannot): the update is done (BW_OK), its connection is dropped and
 * the pool backs off, and a call during that backoff fails with the sweep's
 * error (it used to be handed a slot that was never set: the pool's backoff
 * kept the error code 0 of an update that had worked).
 */
static void test_cut_sweep(void)
{
    faultproxy *px = NULL;
    if (faultproxy_start("127.0.0.1", port, &px) != 0) {
        H_FAIL("faultproxy_start failed");
        return;
    }
    bw_store *s = open_via(px, "cutsweep", "timeout=450ms&connect_timeout=10s&pool=1&sweep=20ms");
    if (s) {
        CHECK_OK(put_until(s, 1, 10000, NULL, NULL)); /* the store has seen the row: the next update is one statement */
        struct timespec due = {0, 50 * MS};
        nanosleep(&due, NULL); /* the sweep is due */
        faultproxy_delay(px, 150);
        bw_error e = {0, "", ""};
        int rc = entry_put(s, "k", 2, 64, BW_STORE_NEVER, &e);
        printf("# an update whose sweep the deadline cut: %s (%s)\n", bw_strerror(rc), rc ? e.message : "");
        CHECK_OK(rc);
        bw_error after = {0, "", ""};
        rc = entry_put(s, "k", 3, 64, BW_STORE_NEVER, &after);
        printf("# the next call, during the backoff: %s (%s)\n", bw_strerror(rc), rc ? after.message : "");
        CHECK_RC(rc, BW_ETIMEDOUT);
        CHECK(strstr(after.message, "not retried for") != NULL);
        faultproxy_pass(px);
        CHECK_OK(put_until(s, 4, 5000, NULL, NULL));
        CHECK_INT(entry_get(s, "k"), 4);
        bw_store_close(s);
    }
    faultproxy_stop(px);
}

int main(void)
{
    const char *p = getenv("BW_TEST_PORT"), *pid = getenv("BW_TEST_SERVER_PID");
    if (!p || !pid) {
        fprintf(stderr, "test_postgres: run it through ctest (tests/support/with_postgres.sh sets $BW_TEST_PORT and "
                        "$BW_TEST_SERVER_PID)\n");
        return 2;
    }
    port = atoi(p);
    server = (pid_t)atoi(pid);
    RUN(test_url_errors);
    RUN(test_open_errors);
    RUN(test_url_forms);
    RUN(test_layout);
    RUN(test_auto_sweep);
    RUN(test_expiry_index);
    RUN(test_stale_cache);
    RUN(test_round_trips);
    RUN(test_fork);
    RUN(test_locked_row);
    RUN(test_stopped_server);
    RUN(test_scan_pages_bounded);
    RUN(test_huge_row);
    RUN(test_blackhole);
    RUN(test_slow_reconnect);
    RUN(test_slow_conflicts);
    RUN(test_cut_sweep);
    RUN(test_restart); /* last: the server's pid changes */
    return TEST_SUMMARY();
}
