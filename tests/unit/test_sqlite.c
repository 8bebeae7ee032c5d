/*
 * test_sqlite.c — what only the sqlite:PATH store does (the store contract it
 * shares with every store is tests/contract/): the schema it creates (checked
 * with raw SQLite), reopening, URL errors, a foreign schema_version, refused
 * updates leaving no transaction open, the bounded sweep as rows and the
 * automatic one, names SQL would choke on stored as rows of their own, a busy
 * database, a dropped table, rows breakwater did not write (tests/unit/;
 * processes sharing it are tests/integration/'s); the files the user's alone
 * (mode 0600 whatever the umask, a symbolic link or another user's file
 * refused); one call's waits bounded by busy_timeout with another process
 * holding a lock of the WAL index; the WAL bounded over 1,000 opens. Every
 * file lives in a fresh mkdtemp directory, removed at the end.
 *
 * The files of another user are made with chown, so that part needs root (as
 * the tests run in CI): it is its own ctest entry, test_sqlite_foreign_owner
 * (test_sqlite test_foreign_owner), which ctest shows as skipped when not run
 * as root.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "procs.h"
#include "scan_pages.h"
#include "timeutil.h"

#define S BW_NS_PER_S

static char dir[64];
static int nfiles;

/* A fresh database path in the test directory, written to buf. */
static const char *db_path(char *buf, size_t n)
{
    snprintf(buf, n, "%s/t%d.db", dir, nfiles++);
    return buf;
}

static bw_store *open_url(const char *fmt, ...)
{
    char url[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(url, sizeof url, fmt, ap);
    va_end(ap);
    bw_store *s = NULL;
    bw_error e;
    int rc = bw_store_open(url, &s, &e);
    if (rc != BW_OK)
        H_FAIL("bw_store_open(%s): %s (%s)", url, bw_strerror(rc), e.message);
    return s;
}

/* The first column of a raw query's first row: an integer (or -1), or text. */
static long long raw_int(const char *path, const char *sql)
{
    sqlite3 *db;
    long long v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        }
    }
    sqlite3_close(db);
    return v;
}

static void raw_text(const char *path, const char *sql, char *out, size_t n)
{
    sqlite3 *db;
    out[0] = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
                snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
            sqlite3_finalize(st);
        }
    }
    sqlite3_close(db);
}

static int raw_exec(const char *path, const char *sql)
{
    sqlite3 *db;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

/* ---- update functions ---- */

/* What one update saw and what it asks for. */
typedef struct op {
    int verdict;
    int64_t expires_at;
    uint32_t len;
    unsigned char fill;
    /* filled by the function */
    int saw;
    int64_t saw_now, saw_exp;
    uint32_t saw_len;
    unsigned char saw_data[BW_STORE_DATA_MAX];
} op;

static bw_store_verdict do_op(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    op *o = arg;
    o->saw = cur != NULL;
    o->saw_now = now;
    if (cur) {
        o->saw_exp = cur->expires_at;
        o->saw_len = cur->len;
        memcpy(o->saw_data, cur->data, cur->len);
    }
    if (o->verdict == BW_STORE_PUT) {
        next->expires_at = o->expires_at;
        next->len = o->len;
        for (uint32_t i = 0; i < o->len && i < BW_STORE_DATA_MAX; i++)
            next->data[i] = (unsigned char)(o->fill + i);
    }
    return (bw_store_verdict)o->verdict;
}

static int put(bw_store *s, const char *name, int64_t exp, uint32_t len, unsigned char fill)
{
    op o = {.verdict = BW_STORE_PUT, .expires_at = exp, .len = len, .fill = fill};
    bw_error e;
    int rc = bw_store_update(s, name, do_op, &o, &e);
    if (rc != BW_OK)
        H_FAIL("put %s: %s (%s)", name, bw_strerror(rc), e.message);
    return rc;
}

/* Read name's entry: 1 and *o filled when live, 0 when absent. */
static int get(bw_store *s, const char *name, op *o)
{
    memset(o, 0, sizeof *o);
    o->verdict = BW_STORE_KEEP;
    CHECK_OK(bw_store_update(s, name, do_op, o, NULL));
    return o->saw;
}

/* ---- tests ---- */

static void test_open_creates_schema(void)
{
    char p[256], buf[64];
    bw_store *s = open_url("sqlite:%s", db_path(p, sizeof p));
    if (!s)
        return;
    CHECK_STR(bw_store_scheme(s), "sqlite");
    raw_text(p, "PRAGMA journal_mode", buf, sizeof buf);
    CHECK_STR(buf, "wal");
    CHECK_INT(raw_int(p, "SELECT value FROM bw_meta WHERE key = 'schema_version'"), 1);
    CHECK_INT(raw_int(p, "SELECT typeof(value) = 'integer' FROM bw_meta WHERE key = 'schema_version'"), 1);
    CHECK_INT(raw_int(p, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'bw_circuits'"), 1);
    CHECK_INT(raw_int(p, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'bw_circuits' "
                         "AND sql LIKE '%expires_at%'"),
              1);
    CHECK_INT(raw_int(p, "SELECT count(*) FROM bw_circuits"), 0);
    /* A second store on the same file finds the schema and adds nothing. */
    bw_store *t = open_url("sqlite:%s", p);
    CHECK_INT(raw_int(p, "SELECT count(*) FROM bw_meta"), 1);
    bw_store_close(t);
    bw_store_close(s);
}

static void test_reopen_keeps_entries(void)
{
    char p[256];
    bw_store *s = open_url("sqlite:%s", db_path(p, sizeof p));
    if (!s)
        return;
    put(s, "kept", BW_STORE_NEVER, BW_STORE_DATA_MAX, 7);
    put(s, "short", BW_STORE_NEVER, 1, 42);
    bw_store_close(s);
    s = open_url("sqlite:%s?busy_timeout=1s&sweep=off", p);
    if (!s)
        return;
    op o;
    CHECK_INT(get(s, "kept", &o), 1);
    CHECK_INT(o.saw_exp, BW_STORE_NEVER);
    CHECK_INT(o.saw_len, BW_STORE_DATA_MAX);
    CHECK_INT(o.saw_data[0], 7);
    CHECK_INT(o.saw_data[BW_STORE_DATA_MAX - 1], (unsigned char)(7 + BW_STORE_DATA_MAX - 1));
    CHECK_INT(get(s, "short", &o), 1);
    CHECK_INT(o.saw_len, 1);
    CHECK_INT(o.saw_data[0], 42);
    CHECK_INT(get(s, "never-written", &o), 0);
    /* The default clock is the wall clock: now is near time(). */
    CHECK(o.saw_now / S >= (int64_t)time(NULL) - 5 && o.saw_now / S <= (int64_t)time(NULL) + 5);
    bw_store_close(s);
}

static void test_url_errors(void)
{
    char p[256], url[400];
    db_path(p, sizeof p);
    struct {
        const char *suffix;
        const char *field;
    } bad[] = {
        {"?busy_timeout=abc", "busy_timeout"},
        {"?busy_timeout=2h", "busy_timeout"},
        {"?busy_timeout=-1s", "busy_timeout"},
        {"?sweep=soon", "sweep"},
        {"?sweep=-5m", "sweep"},
        {"?sweep=1h&colour=blue", "colour"},
        {"?capacity=10", "capacity"},
    };
    bw_store *s = NULL;
    bw_error e;
    CHECK_RC(bw_store_open("sqlite:", &s, &e), BW_EINVAL);
    CHECK_STR(e.field, "path");
    CHECK_RC(bw_store_open("sqlite:?sweep=off", &s, &e), BW_EINVAL);
    CHECK_STR(e.field, "path");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(url, sizeof url, "sqlite:%s%s", p, bad[i].suffix);
        e.field[0] = 0;
        CHECK_RC(bw_store_open(url, &s, &e), BW_EINVAL);
        CHECK_STR(e.field, bad[i].field);
    }
    CHECK(s == NULL);
    /* Good option values. */
    const char *good[] = {"?sweep=off", "?sweep=none", "?sweep=0", "?sweep=10m&busy_timeout=0", "?busy_timeout=1h"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(url, sizeof url, "sqlite:%s%s", p, good[i]);
        CHECK_OK(bw_store_open(url, &s, &e));
        bw_store_close(s);
        s = NULL;
    }
    /* A file that cannot be opened is the system's refusal. */
    snprintf(url, sizeof url, "sqlite:%s/no/such/dir/x.db", dir);
    CHECK_RC(bw_store_open(url, &s, &e), BW_ESYS);
    CHECK(strstr(e.message, "could not open") != NULL);
    snprintf(url, sizeof url, "sqlite:%s", dir); /* a directory */
    CHECK_RC(bw_store_open(url, &s, &e), BW_ESYS);
    CHECK(s == NULL);
}

static void test_foreign_schema(void)
{
    char p[256], q[256], url[300];
    bw_store *s = NULL;
    bw_error e;
    db_path(p, sizeof p);
    CHECK_INT(raw_exec(p, "CREATE TABLE bw_meta(key TEXT PRIMARY KEY, value);"
                          "INSERT INTO bw_meta VALUES('schema_version', 2);"),
              SQLITE_OK);
    snprintf(url, sizeof url, "sqlite:%s", p);
    CHECK_RC(bw_store_open(url, &s, &e), BW_ESTATE);
    CHECK(strstr(e.message, "schema_version") != NULL);
    CHECK(strstr(e.message, "2") != NULL);
    CHECK(s == NULL);
    /* Nothing was created next to it. */
    CHECK_INT(raw_int(p, "SELECT count(*) FROM sqlite_master WHERE name = 'bw_circuits'"), 0);

    /* A version stored as text is foreign too. */
    db_path(q, sizeof q);
    CHECK_INT(raw_exec(q, "CREATE TABLE bw_meta(key TEXT PRIMARY KEY, value);"
                          "INSERT INTO bw_meta VALUES('schema_version', 'one');"),
              SQLITE_OK);
    snprintf(url, sizeof url, "sqlite:%s", q);
    CHECK_RC(bw_store_open(url, &s, &e), BW_ESTATE);
    CHECK(strstr(e.message, "one") != NULL);

    /* A file that is no database at all: the error names the path. */
    char r[256];
    db_path(r, sizeof r);
    FILE *f = fopen(r, "wb");
    CHECK(f != NULL);
    if (f) {
        for (int i = 0; i < 64; i++)
            fputs("this is not a database, just text. ", f);
        fclose(f);
    }
    snprintf(url, sizeof url, "sqlite:%s", r);
    memset(&e, 0, sizeof e);
    CHECK_RC(bw_store_open(url, &s, &e), BW_ESYS);
    CHECK_STR(e.field, "path");
    CHECK(strstr(e.message, "not a database") != NULL);
}

/*
 * Updates the store layer refuses (a bad length, an unknown verdict) leave no
 * transaction open: a raw writer gets in at once. (What each one returns is
 * the store contract's, tests/contract/.)
 */
static void test_refused_updates_leave_no_transaction(void)
{
    char p[256];
    bw_store *s = open_url("sqlite:%s?busy_timeout=100ms", db_path(p, sizeof p));
    if (!s)
        return;
    put(s, "a", BW_STORE_NEVER, 5, 9);
    op bad[] = {{.verdict = BW_STORE_PUT, .expires_at = BW_STORE_NEVER, .len = 0},
                {.verdict = BW_STORE_PUT, .expires_at = BW_STORE_NEVER, .len = BW_STORE_DATA_MAX + 1},
                {.verdict = 7}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_RC(bw_store_update(s, "a", do_op, &bad[i], NULL), BW_EINVAL);
    CHECK_INT(raw_exec(p, "BEGIN IMMEDIATE; COMMIT;"), SQLITE_OK);
    op o;
    CHECK_INT(get(s, "a", &o), 1);
    CHECK_INT(o.saw_len, 5);
    CHECK_INT(o.saw_data[0], 9);
    bw_store_close(s);
}

static void test_sweep_bounded(void)
{
    char p[256], name[32];
    bw_clock *clk;
    CHECK_OK(bw_clock_manual_new(5000 * S, &clk));
    bw_store *s = open_url("sqlite:%s?sweep=off", db_path(p, sizeof p));
    if (!s)
        return;
    CHECK_OK(bw_store_set_clock(s, clk));
    for (int i = 0; i < 250; i++) {
        snprintf(name, sizeof name, "dead-%d", i);
        put(s, name, 5000 * S + (i % 7 + 1) * S, 4, (unsigned char)i);
    }
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "live-%d", i);
        put(s, name, i % 2 ? BW_STORE_NEVER : 6000 * S, 4, (unsigned char)i);
    }
    int n = -1;
    CHECK_OK(bw_store_sweep(s, 100, &n, NULL));
    CHECK_INT(n, 0); /* nothing expired yet */
    bw_clock_manual_advance(clk, 8 * S);
    CHECK_OK(bw_store_sweep(s, 100, &n, NULL));
    CHECK_INT(n, 100);
    CHECK_INT(raw_int(p, "SELECT count(*) FROM bw_circuits"), 160);
    CHECK_OK(bw_store_sweep(s, 100, &n, NULL));
    CHECK_INT(n, 100);
    CHECK_OK(bw_store_sweep(s, 100, &n, NULL));
    CHECK_INT(n, 50);
    CHECK_OK(bw_store_sweep(s, 100, NULL, NULL));
    CHECK_OK(bw_store_sweep(s, 1, &n, NULL));
    CHECK_INT(n, 0);
    CHECK_INT(raw_int(p, "SELECT count(*) FROM bw_circuits"), 10);
    CHECK_INT(raw_int(p, "SELECT count(*) FROM bw_circuits WHERE name LIKE 'live-%'"), 10);
    /* The boundary: expires_at == now is expired. */
    bw_clock_manual_set(clk, 6000 * S);
    CHECK_OK(bw_store_sweep(s, 1000, &n, NULL));
    CHECK_INT(n, 5);
    CHECK_RC(bw_store_sweep(s, 0, &n, NULL), BW_EINVAL);
    bw_store_close(s);
    bw_clock_free(clk);
}

/* Write `count` entries expiring at `exp` (s on clk). */
static void fill(bw_store *s, int count, int64_t exp)
{
    char name[32];
    for (int i = 0; i < count; i++) {
        snprintf(name, sizeof name, "e-%d", i);
        put(s, name, exp, 4, 1);
    }
}

static void test_auto_sweep(void)
{
    char p[256], q[256];
    bw_clock *clk;
    op o;
    CHECK_OK(bw_clock_manual_new(100 * S, &clk));
    bw_store *s = open_url("sqlite:%s?sweep=1h", db_path(p, sizeof p));
    if (!s)
        return;
    CHECK_OK(bw_store_set_clock(s, clk));
    fill(s, 250, 101 * S); /* the first update arms the schedule: first pass within 36 s */
    const char *count = "SELECT count(*) FROM bw_circuits WHERE name LIKE 'e-%'";
    CHECK_INT(raw_int(p, count), 250);
    bw_clock_manual_advance(clk, 20 * S); /* t = 120: expired, but the first pass is not due before 124 */
    get(s, "x", &o);
    CHECK_INT(raw_int(p, count), 250);
    bw_clock_manual_advance(clk, 20 * S); /* t = 140: due */
    get(s, "x", &o);
    CHECK_INT(raw_int(p, count), 150);
    /* A pass that deleted a full 100 leaves the sweep due: each following update runs another (so a flood of
     * short-lived keys is swept as fast as it is written), until one comes back short. */
    get(s, "x", &o);
    CHECK_INT(raw_int(p, count), 50);
    get(s, "x", &o);
    CHECK_INT(raw_int(p, count), 0);
    /* Then the next pass is due in an hour +-20%. */
    fill(s, 150, 141 * S);
    bw_clock_manual_advance(clk, 2800 * S);
    get(s, "x", &o);
    CHECK_INT(raw_int(p, count), 150);
    bw_clock_manual_advance(clk, 1600 * S); /* 4400 s > 1.2 h after the last pass */
    get(s, "x", &o);
    CHECK_INT(raw_int(p, count), 50);
    get(s, "x", &o);
    CHECK_INT(raw_int(p, count), 0);
    /* However long the pause, one pass deletes at most 100 rows. */
    bw_clock_manual_advance(clk, 4400 * S);
    fill(s, 250, 1000000 * S);
    bw_clock_manual_set(clk, 2000000 * S);
    get(s, "x", &o);
    CHECK_INT(raw_int(p, count), 150);
    bw_store_close(s);
    bw_clock_free(clk);

    /* sweep=off never sweeps by itself. */
    CHECK_OK(bw_clock_manual_new(100 * S, &clk));
    s = open_url("sqlite:%s?sweep=off", db_path(q, sizeof q));
    if (!s)
        return;
    CHECK_OK(bw_store_set_clock(s, clk));
    fill(s, 150, 101 * S);
    for (int i = 0; i < 5; i++) {
        bw_clock_manual_advance(clk, 86400 * S);
        get(s, "x", &o);
    }
    CHECK_INT(raw_int(q, count), 150);
    CHECK_INT(get(s, "e-1", &o), 0); /* expired all the same */
    bw_store_close(s);
    bw_clock_free(clk);
}

static void test_awkward_names(void)
{
    static const char *names[] = {
        "o'brien;--\"x\"",
        "a';DROP_TABLE_bw_circuits;--",
        "'",
        "\"",
        "''",
        ";",
        "%s%n%%",
        "?1",
        ":name",
        "$x",
        "@y",
        "\\",
        "*",
        "a%",
        "a_",
        "x)--",
        "bw_meta",
    };
    enum { N = sizeof names / sizeof names[0] };
    char p[256];
    bw_store *s = open_url("sqlite:%s", db_path(p, sizeof p));
    if (!s)
        return;
    for (int i = 0; i < N; i++)
        put(s, names[i], BW_STORE_NEVER, 1, (unsigned char)i);
    for (int i = 0; i < N; i++) {
        op o;
        CHECK_INT(get(s, names[i], &o), 1);
        CHECK_INT(o.saw_data[0], i);
    }
    op o;
    CHECK_INT(get(s, "a", &o), 0); /* LIKE patterns are not patterns here */
    CHECK_INT(get(s, "ab", &o), 0);
    CHECK_INT(raw_int(p, "SELECT count(*) FROM bw_circuits"), N);
    /* Stored verbatim: each name is a row of its own, byte for byte. */
    sqlite3 *db;
    CHECK_INT(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    CHECK_INT(sqlite3_prepare_v2(db, "SELECT data FROM bw_circuits WHERE name = ?1", -1, &st, NULL), SQLITE_OK);
    for (int i = 0; i < N; i++) {
        sqlite3_bind_text(st, 1, names[i], -1, SQLITE_STATIC);
        CHECK_INT(sqlite3_step(st), SQLITE_ROW);
        CHECK_INT(sqlite3_column_bytes(st, 0), 1);
        CHECK_INT(((const unsigned char *)sqlite3_column_blob(st, 0))[0], i);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    for (int i = 0; i < N; i += 2) {
        op d = {.verdict = BW_STORE_DELETE};
        CHECK_OK(bw_store_update(s, names[i], do_op, &d, NULL));
    }
    CHECK_INT(raw_int(p, "SELECT count(*) FROM bw_circuits"), N / 2);
    CHECK_INT(raw_int(p, "SELECT value FROM bw_meta WHERE key = 'schema_version'"), 1);
    /* An invalid name never reaches the database. */
    CHECK_RC(bw_store_update(s, "two  spaces", do_op, &o, NULL), BW_EINVAL);
    CHECK_RC(bw_store_update(s, "trailing ", do_op, &o, NULL), BW_EINVAL);
    CHECK_RC(bw_store_update(s, "", do_op, &o, NULL), BW_EINVAL);
    bw_store_close(s);
}

static void test_busy_and_errors(void)
{
    char p[256];
    bw_store *s = open_url("sqlite:%s?busy_timeout=100ms", db_path(p, sizeof p));
    if (!s)
        return;
    put(s, "k", BW_STORE_NEVER, 1, 1);
    /* Another connection holds the write lock past busy_timeout. */
    sqlite3 *db;
    CHECK_INT(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    CHECK_INT(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    op o = {.verdict = BW_STORE_PUT, .expires_at = BW_STORE_NEVER, .len = 1, .fill = 9};
    bw_error e = {0};
    CHECK_RC(bw_store_update(s, "k", do_op, &o, &e), BW_ESYS);
    CHECK(strstr(e.message, "busy") != NULL);
    CHECK_INT(o.saw_now, 0); /* the function never ran */
    int n = -1;
    CHECK_RC(bw_store_sweep(s, 10, &n, &e), BW_ESYS);
    CHECK_INT(n, 0);
    CHECK_INT(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    CHECK_INT(get(s, "k", &o), 1);
    CHECK_INT(o.saw_data[0], 1);

    /* A dropped table: the error propagates and no transaction is left open. */
    CHECK_INT(sqlite3_exec(db, "DROP TABLE bw_circuits", NULL, NULL, NULL), SQLITE_OK);
    o.verdict = BW_STORE_KEEP;
    CHECK_RC(bw_store_update(s, "k", do_op, &o, &e), BW_ESYS);
    CHECK(strstr(e.message, "bw_circuits") != NULL);
    CHECK_INT(sqlite3_exec(db, "BEGIN IMMEDIATE; COMMIT;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    bw_store_close(s);
}

/* Rows breakwater did not write (empty or oversized data) read as absent. */
static void test_malformed_rows(void)
{
    char p[256];
    bw_store *s = open_url("sqlite:%s", db_path(p, sizeof p));
    if (!s)
        return;
    CHECK_INT(raw_exec(p, "INSERT INTO bw_circuits VALUES('empty', 9223372036854775807, x'');"
                          "INSERT INTO bw_circuits VALUES('big', 9223372036854775807, zeroblob(1025));"
                          "INSERT INTO bw_circuits VALUES('text', 9223372036854775807, 'abc');"),
              SQLITE_OK);
    op o;
    CHECK_INT(get(s, "empty", &o), 0);
    CHECK_INT(get(s, "big", &o), 0);
    CHECK_INT(get(s, "text", &o), 1); /* text is bytes too */
    CHECK_INT(o.saw_len, 3);
    put(s, "big", BW_STORE_NEVER, 2, 6); /* overwritten in place */
    CHECK_INT(get(s, "big", &o), 1);
    CHECK_INT(o.saw_len, 2);
    CHECK_INT(raw_int(p, "SELECT length(data) FROM bw_circuits WHERE name = 'big'"), 2);
    bw_store_close(s);
}

static void test_scan_pages_bounded(void)
{
    char path[128];
    bw_store *s = open_url("sqlite:%s", db_path(path, sizeof path));
    if (!s)
        return;
    check_scan_pages_bounded(s);
    bw_store_close(s);
}

/* ---- the files are the user's ---- */

#define NOBODY 65534

/* The mode bits of path, or -1 when absent. */
static int file_mode(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static int file_mode_of(const char *db, const char *suffix)
{
    char f[512]; /* a path of up to 300 bytes and its suffix */
    if (snprintf(f, sizeof f, "%s%s", db, suffix) >= (int)sizeof f)
        return -1;
    return file_mode(f);
}

/* Open sqlite:path (+ opts), expecting `want`: the message in msg. */
static int try_open(const char *path, const char *opts, char *msg, size_t len)
{
    char url[400];
    bw_store *s = NULL;
    bw_error e;
    memset(&e, 0, sizeof e);
    snprintf(url, sizeof url, "sqlite:%s%s", path, opts);
    int rc = bw_store_open(url, &s, &e);
    snprintf(msg, len, "%s", e.message);
    if (rc == BW_OK) {
        put(s, "w", BW_STORE_NEVER, 8, 1); /* a write: the WAL and its index exist */
        bw_store_close(s);
    } else if (strcmp(e.field, "path") != 0) {
        H_FAIL("%s: field '%s', want 'path' (%s)", url, e.field, e.message);
    }
    return rc;
}

#define CHECK_HAS(msg, part)                                                                                           \
    do {                                                                                                               \
        if (!strstr((msg), (part)))                                                                                    \
            H_FAIL("message '%s' lacks '%s'", (msg), (part));                                                          \
    } while (0)

/*
 * The database, its -wal and its -shm are mode 0600 whatever the umask (they
 * were 0644: SQLite's default), and an older store's 0644 files are narrowed.
 */
static void test_file_modes(void)
{
    static const mode_t masks[] = {022, 0, 077, 0277};
    char p[256], msg[256];
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        mode_t old = umask(masks[i]);
        db_path(p, sizeof p);
        CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
        umask(old);
        if (file_mode(p) != 0600 || file_mode_of(p, "-wal") != 0600 || file_mode_of(p, "-shm") != 0600)
            H_FAIL("umask %04o: modes %04o, -wal %04o, -shm %04o, want 0600", (unsigned)masks[i], file_mode(p),
                   file_mode_of(p, "-wal"), file_mode_of(p, "-shm"));
    }
    /* A store an older breakwater made 0644 (its -wal too; its -shm not there): all 0600 once opened. */
    char f[300];
    db_path(p, sizeof p);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    CHECK_INT(chmod(p, 0644), 0);
    snprintf(f, sizeof f, "%s-wal", p);
    CHECK_INT(chmod(f, 0644), 0);
    snprintf(f, sizeof f, "%s-shm", p);
    CHECK_INT(unlink(f), 0);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    CHECK_INT(file_mode(p), 0600);
    CHECK_INT(file_mode_of(p, "-wal"), 0600);
    CHECK_INT(file_mode_of(p, "-shm"), 0600);
    /* Narrowing takes bits off, never adds one: a store its owner made read-only (0444) is 0400. */
    CHECK_INT(chmod(p, 0444), 0);
    bw_store *ro = open_url("sqlite:%s", p);
    bw_store_close(ro);
    CHECK_INT(file_mode(p), 0400);
    CHECK_INT(chmod(p, 0600), 0);
    /* A file that is not a store is left as it was. */
    db_path(p, sizeof p);
    FILE *t = fopen(p, "w");
    CHECK(t != NULL);
    if (t) {
        fputs("not a database, and not to be touched: mode 0644 stays\n", t);
        fclose(t);
    }
    CHECK_INT(chmod(p, 0644), 0);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESYS);
    CHECK_INT(file_mode(p), 0644);
    CHECK_INT(file_mode_of(p, "-wal"), -1);
    CHECK_INT(file_mode_of(p, "-shm"), -1);
}

/* The whole of a file (malloc'd, *n bytes), or NULL. */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        if (*n == cap) {
            unsigned char *b = realloc(buf, cap = cap ? 2 * cap : 65536);
            if (!b)
                break;
            buf = b;
        }
        size_t got = fread(buf + *n, 1, cap - *n, f);
        if (got == 0)
            break;
        *n += got;
    }
    fclose(f);
    return buf;
}

/* path holds exactly the n bytes of want. */
static int same_bytes(const char *path, const unsigned char *want, size_t n)
{
    size_t m;
    unsigned char *got = slurp(path, &m);
    int same = got && m == n && memcmp(got, want, n) == 0;
    free(got);
    return same;
}

/*
 * Another program's SQLite database is refused and left as it was: its mode,
 * its bytes, its journal mode; no table added, no file made beside it (it was
 * converted to WAL, given bw_meta and bw_circuits, and made 0600).
 */
static void test_foreign_database(void)
{
    char p[256], msg[256], want[400], mode[16];
    size_t n;
    /* A rollback-journal database of mode 0644, as the app.db. */
    db_path(p, sizeof p);
    CHECK_INT(raw_exec(p, "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES(1, 'ann');"),
              SQLITE_OK);
    CHECK_INT(chmod(p, 0644), 0);
    unsigned char *before = slurp(p, &n);
    CHECK(before != NULL);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want,
             "sqlite: %s is a SQLite database of another program, not a breakwater store: give breakwater its own "
             "file",
             p);
    CHECK_STR(msg, want);
    CHECK_INT(file_mode(p), 0644);
    CHECK(before && same_bytes(p, before, n));
    CHECK_INT(file_mode_of(p, "-wal"), -1);
    CHECK_INT(file_mode_of(p, "-shm"), -1);
    CHECK_INT(file_mode_of(p, "-journal"), -1);
    raw_text(p, "PRAGMA journal_mode", mode, sizeof mode);
    CHECK_STR(mode, "delete");
    CHECK_INT(raw_int(p, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'bw_%'"), 0);
    free(before);

    /* A WAL database of mode 0600: refused, its bytes unchanged. */
    db_path(p, sizeof p);
    CHECK_INT(raw_exec(p, "PRAGMA journal_mode=WAL; CREATE TABLE orders(id INTEGER PRIMARY KEY);"), SQLITE_OK);
    CHECK_INT(chmod(p, 0600), 0);
    before = slurp(p, &n);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
    CHECK_HAS(msg, "a SQLite database of another program");
    CHECK(before && same_bytes(p, before, n));
    CHECK_INT(raw_int(p, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'bw_%'"), 0);
    free(before);

    /* A WAL database of mode 0644 that its program holds open, its schema still in its WAL: the database alone
       reads as empty (it may be an older store), so it is narrowed before SQLite opens its -wal, then refused,
       and given its mode back. */
    db_path(p, sizeof p);
    sqlite3 *app = NULL;
    CHECK_INT(sqlite3_open(p, &app), SQLITE_OK);
    CHECK_INT(
        sqlite3_exec(app, "PRAGMA journal_mode=WAL; CREATE TABLE sessions(id INTEGER PRIMARY KEY);", NULL, NULL, NULL),
        SQLITE_OK);
    CHECK_INT(chmod(p, 0644), 0);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
    CHECK_HAS(msg, "a SQLite database of another program");
    CHECK_INT(file_mode(p), 0644);
    CHECK_INT(sqlite3_exec(app, "INSERT INTO sessions VALUES(1)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(app);
    CHECK_INT(raw_int(p, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'bw_%'"), 0);
}

/*
 * The host's default VFS, as a program that registers its own would have it:
 * the unix VFS, passed through, watching what SQLite opens (the store's VFS is
 * built on the default one, so it sees the store's opens too). Armed, it
 * records at each -wal's open the modes of the database, the -wal and the
 * -shm; given a file, it links it in at the moment SQLite looks for a name
 * ending with plant_suffix (xAccess), as another user racing the store would.
 */
static sqlite3_vfs shim, *shim_real;
static struct {
    int armed, wal_opens;
    unsigned db, wal, shm; /* the modes seen, or-ed */
} seen;
static char plant_src[300];
static const char *plant_suffix;

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int shim_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f, int flags, int *out)
{
    int rc = shim_real->xOpen(v, name, f, flags, out);
    if (seen.armed && name && (flags & SQLITE_OPEN_WAL) && ends_with(name, "-wal")) {
        char db[300];
        snprintf(db, sizeof db, "%.*s", (int)(strlen(name) - 4), name);
        int m[3] = {file_mode(db), file_mode(name), file_mode_of(db, "-shm")};
        seen.wal_opens++;
        seen.db |= m[0] > 0 ? (unsigned)m[0] : 0;
        seen.wal |= m[1] > 0 ? (unsigned)m[1] : 0;
        seen.shm |= m[2] > 0 ? (unsigned)m[2] : 0;
    }
    return rc;
}

static int shim_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    if (plant_suffix && plant_src[0] && ends_with(name, plant_suffix)) {
        if (link(plant_src, name) != 0)
            H_FAIL("could not plant %s at %s", plant_src, name);
        plant_src[0] = 0;
    }
    return shim_real->xAccess(v, name, flags, out);
}

/* Make the shim the default VFS, before the first store opens (the store's VFS copies the default then). */
static void shim_install(void)
{
    shim_real = sqlite3_vfs_find(NULL);
    shim = *shim_real;
    shim.pNext = NULL;
    shim.zName = "test-shim";
    shim.xOpen = shim_open;
    shim.xAccess = shim_access;
    if (sqlite3_vfs_register(&shim, 1) != SQLITE_OK)
        H_FAIL("could not register the test's VFS");
}

/*
 * The store's VFS ("breakwater") is registered beside the host's, never in
 * its place: after stores were opened, the default VFS is still the one the
 * host installed (here the shim) and the host's own connections use it.
 */
static void test_vfs_default_unchanged(void)
{
    char p[256];
    bw_store *s = open_url("sqlite:%s", db_path(p, sizeof p));
    bw_store_close(s);
    CHECK(sqlite3_vfs_find(NULL) == &shim);
    sqlite3_vfs *bw = sqlite3_vfs_find("breakwater");
    CHECK(bw != NULL && bw != &shim && bw != shim_real);
    sqlite3 *db = NULL;
    CHECK_INT(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    const char *name = NULL;
    CHECK_INT(sqlite3_file_control(db, "main", SQLITE_FCNTL_VFSNAME, &name), SQLITE_OK);
    CHECK_STR(name, "test-shim");
    sqlite3_free((void *)name);
    sqlite3_close(db);
}

/*
 * Without a default VFS to build the store's on, a sqlite: store does not
 * open (it would have lost the bound on SQLite's sleeps and the checks of the
 * files beside the database): BW_ESYS, saying so. In a child, before any
 * store of this process opened (the VFS is made once per process).
 */
static void test_no_default_vfs(void)
{
    char p[256];
    db_path(p, sizeof p);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        sqlite3_initialize();
        for (sqlite3_vfs *v; (v = sqlite3_vfs_find(NULL)) != NULL;)
            sqlite3_vfs_unregister(v);
        char url[300];
        snprintf(url, sizeof url, "sqlite:%s", p);
        bw_store *s = NULL;
        bw_error e;
        memset(&e, 0, sizeof e);
        int rc = bw_store_open(url, &s, &e);
        if (rc != BW_ESYS || !strstr(e.message, "no default SQLite VFS")) {
            fprintf(stderr, "test_no_default_vfs: rc %d, message '%s'\n", rc, e.message);
            _exit(1);
        }
        _exit(0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK_INT(status, 0);
}

/* Open sqlite:path with the shim recording: 1 when at every -wal's open the three files were 0600. */
static int opened_all_0600(const char *path)
{
    char msg[256];
    memset(&seen, 0, sizeof seen);
    seen.armed = 1;
    int rc = try_open(path, "", msg, sizeof msg);
    seen.armed = 0;
    if (rc != BW_OK)
        H_FAIL("%s: %s", path, msg);
    if (seen.wal_opens == 0 || seen.db != 0600 || seen.wal != 0600 || seen.shm != 0600) {
        H_FAIL("%s: at SQLite's %d opens of the WAL: database %04o, -wal %04o, -shm %04o; want 0600", path,
               seen.wal_opens, seen.db, seen.wal, seen.shm);
        return 0;
    }
    return file_mode(path) == 0600 && file_mode_of(path, "-wal") == 0600 && file_mode_of(path, "-shm") == 0600;
}

/*
 * An older store of mode 0644 is narrowed before SQLite opens a file beside
 * it, which SQLite makes (or, empty, gives) the database's mode: its -wal and
 * -shm were made 0644 and narrowed only after the schema was read, time
 * enough for another user to open them and keep the descriptor.
 */
static void test_side_files_never_wide(void)
{
    char p[256], msg[256];
    /* A checkpointed store whose -wal and -shm are gone (as after the sqlite3 shell closed it). */
    db_path(p, sizeof p);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    CHECK_INT(raw_exec(p, "PRAGMA wal_checkpoint(TRUNCATE)"), SQLITE_OK);
    CHECK_INT(file_mode_of(p, "-wal"), -1);
    CHECK_INT(file_mode_of(p, "-shm"), -1);
    CHECK_INT(chmod(p, 0644), 0);
    CHECK(opened_all_0600(p));
    /* Its schema still in its WAL (0644 too; no -shm): the database alone reads as empty. */
    char f[300];
    db_path(p, sizeof p);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    CHECK_INT(chmod(p, 0644), 0);
    snprintf(f, sizeof f, "%s-wal", p);
    CHECK_INT(chmod(f, 0644), 0);
    snprintf(f, sizeof f, "%s-shm", p);
    CHECK_INT(unlink(f), 0);
    CHECK(opened_all_0600(p));
    op o;
    bw_store *s = open_url("sqlite:%s", p);
    CHECK_INT(get(s, "w", &o), 1); /* try_open's entry, read through the WAL */
    bw_store_close(s);
    /* An empty database in rollback mode, and an empty file, both 0644: stores, made 0600 before the WAL. */
    db_path(p, sizeof p);
    CHECK_INT(raw_exec(p, "PRAGMA user_version = 7"), SQLITE_OK);
    CHECK_INT(chmod(p, 0644), 0);
    CHECK(opened_all_0600(p));
    db_path(p, sizeof p);
    FILE *t = fopen(p, "w");
    CHECK(t != NULL);
    if (t)
        fclose(t);
    CHECK_INT(chmod(p, 0644), 0);
    CHECK(opened_all_0600(p));
}

/*
 * A hot journal: a scratch database's -journal, left by a process that died
 * inside a transaction after writing pages (SQLite plays it back into the
 * database at the next first read). Its path in out.
 */
static int make_hot_journal(char *out, size_t n)
{
    char scratch[256];
    db_path(scratch, sizeof scratch);
    snprintf(out, n, "%s-journal", scratch);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        sqlite3 *db;
        if (sqlite3_open(scratch, &db) != SQLITE_OK ||
            sqlite3_exec(db,
                         "CREATE TABLE evil(x); INSERT INTO evil VALUES(randomblob(3000));"
                         "INSERT INTO evil SELECT randomblob(3000) FROM evil;"
                         "INSERT INTO evil SELECT randomblob(3000) FROM evil;"
                         "BEGIN; UPDATE evil SET x = randomblob(3000);",
                         NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_db_cacheflush(db) != SQLITE_OK)
            _exit(1);
        _exit(0); /* dies inside the transaction */
    }
    int status = -1;
    waitpid(pid, &status, 0);
    struct stat st;
    return status == 0 && stat(out, &st) == 0 && st.st_size > 0;
}

/*
 * A file beside the store that is not its own is refused before SQLite reads
 * it, also one slipped in at the moment SQLite looks for it (after the
 * store's own look): a hot -journal that is a hard link (it was played back
 * into the store, which then opened on the journal's pages), a -wal of another
 * store (its frames were read as this store's).
 */
static void test_planted_files(void)
{
    char p[256], q[256], hot[300], msg[256], want[400], f[300];
    size_t n;
    CHECK(make_hot_journal(hot, sizeof hot));
    db_path(p, sizeof p);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    unsigned char *before = slurp(p, &n);
    snprintf(f, sizeof f, "%s-journal", p);
    /* Planted before the open. */
    CHECK_INT(link(hot, f), 0);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want,
             "sqlite: %s-journal has 2 names (hard links): refused; remove it (SQLite's file beside the database "
             "has one name)",
             p);
    CHECK_STR(msg, want);
    CHECK(before && same_bytes(p, before, n));
    CHECK_INT(unlink(f), 0);
    /* Planted when SQLite looks for a hot journal. */
    snprintf(plant_src, sizeof plant_src, "%s", hot);
    plant_suffix = "-journal";
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
    CHECK(plant_src[0] == 0); /* it was planted */
    CHECK_HAS(msg, "-journal has 2 names (hard links): refused");
    CHECK(before && same_bytes(p, before, n));
    CHECK_INT(unlink(f), 0);
    /* Another store's -wal, planted when SQLite looks for this one's (gone: checkpointed by another tool). */
    db_path(q, sizeof q);
    CHECK_INT(try_open(q, "", msg, sizeof msg), BW_OK);
    bw_store *s = open_url("sqlite:%s", q);
    put(s, "theirs", BW_STORE_NEVER, 4, 9);
    bw_store_close(s);
    CHECK_INT(raw_exec(p, "PRAGMA wal_checkpoint(TRUNCATE)"), SQLITE_OK);
    free(before);
    before = slurp(p, &n);
    snprintf(plant_src, sizeof plant_src, "%s-wal", q);
    plant_suffix = "-wal";
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
    CHECK(plant_src[0] == 0);
    CHECK_HAS(msg, "-wal has 2 names (hard links): refused");
    CHECK(before && same_bytes(p, before, n));
    plant_suffix = NULL;
    snprintf(f, sizeof f, "%s-wal", p);
    CHECK_INT(unlink(f), 0);
    /* The planted files gone, the store opens on its own data. */
    op o;
    s = open_url("sqlite:%s", p);
    CHECK_INT(get(s, "theirs", &o), 0);
    CHECK_INT(get(s, "w", &o), 1);
    bw_store_close(s);
    free(before);

    /* An older store of mode 0644, its schema still in its WAL: narrowed before SQLite opens its -wal; refused for
       a journal planted then, it stays narrowed (a store: only another program's database gets its mode back). */
    db_path(p, sizeof p);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    CHECK_INT(chmod(p, 0644), 0);
    snprintf(f, sizeof f, "%s-wal", p);
    CHECK_INT(chmod(f, 0644), 0);
    snprintf(plant_src, sizeof plant_src, "%s", hot);
    plant_suffix = "-journal";
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
    plant_suffix = NULL;
    CHECK_HAS(msg, "-journal has 2 names (hard links): refused");
    CHECK_INT(file_mode(p), 0600);
    CHECK_INT(file_mode(f), 0600);
    snprintf(f, sizeof f, "%s-journal", p);
    CHECK_INT(unlink(f), 0);
}

/* A symbolic link at the path (or at its -wal) is refused; a link among its directories is followed. */
static void test_symlinks(void)
{
    char p[256], l[256], msg[256], want[400];
    db_path(p, sizeof p);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    db_path(l, sizeof l);
    CHECK_INT(symlink(p, l), 0);
    CHECK_INT(try_open(l, "", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want, "sqlite: %s is a symbolic link: refused (name the file itself, or remove the link)", l);
    CHECK_STR(msg, want);
    CHECK_INT(unlink(l), 0);
    /* A dangling link: nothing is made where it points. */
    char target[300];
    snprintf(target, sizeof target, "%s/made-through-a-link.db", dir);
    CHECK_INT(symlink(target, l), 0);
    CHECK_INT(try_open(l, "", msg, sizeof msg), BW_ESTATE);
    CHECK_INT(file_mode(target), -1);
    CHECK_INT(unlink(l), 0);
    /* A link at PATH-wal. */
    char q[256], w[300];
    db_path(q, sizeof q);
    CHECK_INT(try_open(q, "", msg, sizeof msg), BW_OK);
    snprintf(w, sizeof w, "%s-wal", q);
    CHECK_INT(unlink(w), 0);
    CHECK_INT(symlink(target, w), 0);
    CHECK_INT(try_open(q, "", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want, "sqlite: %s-wal is a symbolic link: refused (name the file itself, or remove the link)",
             q);
    CHECK_STR(msg, want);
    CHECK_INT(file_mode(target), -1);
    CHECK_INT(unlink(w), 0);
    /* A directory that is a link: followed (the user's own layout). */
    char d[256], via[300];
    snprintf(d, sizeof d, "%s/linkdir", dir);
    CHECK_INT(symlink(".", d), 0);
    snprintf(via, sizeof via, "%s/t%d.db", d, nfiles++);
    CHECK_INT(try_open(via, "", msg, sizeof msg), BW_OK);
    CHECK_INT(file_mode_of(via, ""), 0600);
    CHECK_INT(unlink(d), 0);
    /* Not a regular file (a FIFO): refused, never opened by SQLite. */
    db_path(p, sizeof p);
    CHECK_INT(mkfifo(p, 0600), 0);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want, "sqlite: %s is not a regular file: refused", p);
    CHECK_STR(msg, want);
}

/* Another user's database, -wal, -shm or -journal is refused (needs root, to make them another user's). */
static void test_foreign_owner(void)
{
    if (geteuid() != 0) {
        H_SKIP("needs root, to make the files of another user (chown)");
        return;
    }
    char p[256], msg[256], want[400], f[300];
    db_path(p, sizeof p);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    CHECK_INT(chown(p, NOBODY, NOBODY), 0);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
    snprintf(want, sizeof want,
             "sqlite: %s belongs to uid %d, not this user (uid 0): refused; its owner or root may remove it, or use "
             "another path",
             p, NOBODY);
    CHECK_STR(msg, want);
    CHECK_INT(chown(p, 0, 0), 0);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    /* Files another user slipped in beside it: each refused, none narrowed or written; the -journal a hot one,
       not played back. */
    static const char *const sides[] = {"-wal", "-shm", "-journal"};
    char hot[300];
    size_t n, hn = 0;
    CHECK(make_hot_journal(hot, sizeof hot));
    unsigned char *hj = slurp(hot, &hn), *before = slurp(p, &n);
    for (int i = 0; i < 3; i++) {
        size_t len = i == 2 ? hn : 0;
        snprintf(f, sizeof f, "%s%s", p, sides[i]);
        unlink(f);
        int fd = open(f, O_WRONLY | O_CREAT | O_EXCL, 0666);
        CHECK(fd >= 0);
        if (fd >= 0) {
            CHECK(len == 0 || (hj && write(fd, hj, len) == (ssize_t)len));
            CHECK_INT(fchown(fd, NOBODY, NOBODY), 0);
            CHECK_INT(fchmod(fd, 0666), 0);
            close(fd);
        }
        CHECK_INT(try_open(p, "", msg, sizeof msg), BW_ESTATE);
        snprintf(want, sizeof want, "sqlite: %s%s belongs to uid %d", p, sides[i], NOBODY);
        CHECK_HAS(msg, want);
        CHECK_INT(file_mode(f), 0666);
        struct stat st;
        CHECK(stat(f, &st) == 0 && (size_t)st.st_size == len);
        CHECK(before && same_bytes(p, before, n));
        CHECK_INT(unlink(f), 0);
    }
    free(hj);
    free(before);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
}

/*
 * One call's waits end at busy_timeout. Another process holds a shared lock
 * on the WAL index's write-lock byte (what a local user with read access to
 * -shm could do): the first connection of a process must rebuild the index
 * and cannot take that lock. SQLite's WAL reader retried for ~10 s without
 * asking the busy handler (busy_timeout 5 s: the run waited 10 s); now the
 * open fails "busy" after busy_timeout.
 */
static void test_lock_wait_bounded(void)
{
    char p[256], shm[300], msg[256];
    db_path(p, sizeof p);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    snprintf(shm, sizeof shm, "%s-shm", p);
    int ready[2];
    CHECK_INT(pipe(ready), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        procs_child_guard(60);
        int fd = open(shm, O_RDONLY);
        struct flock lk = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 120, .l_len = 1};
        char ok = fd >= 0 && fcntl(fd, F_SETLK, &lk) == 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char ok = 0;
    CHECK(pid > 0 && read(ready[0], &ok, 1) == 1 && ok == 'y');
    close(ready[0]);
    close(ready[1]);
    static const struct {
        const char *opts;
        int64_t bound_ms;
    } cases[] = {{"?busy_timeout=300ms", 300}, {"?busy_timeout=0", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t t0 = mono_ms();
        CHECK_INT(try_open(p, cases[i].opts, msg, sizeof msg), BW_ESYS);
        int64_t took = mono_ms() - t0;
        CHECK_HAS(msg, "busy");
        /* a generous margin for a loaded machine; the wait was ~10 s */
        if (took < cases[i].bound_ms || took > cases[i].bound_ms + 1500)
            H_FAIL("%s: the open took %lld ms, want %lld ms (+ at most 1.5 s)", cases[i].opts, (long long)took,
                   (long long)cases[i].bound_ms);
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        procs_reap(pid);
    }
    /* The lock gone, the store opens. */
    CHECK_INT(try_open(p, "?busy_timeout=300ms", msg, sizeof msg), BW_OK);
}

/* An update whose function holds the store (its mutex and the write lock) until released, or for `hold_ms`. */
typedef struct holder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inside, release;
    int64_t hold_ms;
    bw_store *s;
    int rc;
} holder;

static bw_store_verdict hold_fn(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next)
{
    (void)now, (void)cur, (void)next;
    holder *h = arg;
    pthread_mutex_lock(&h->mu);
    h->inside = 1;
    pthread_cond_broadcast(&h->cv);
    int64_t end = mono_ms() + h->hold_ms;
    while (!h->release && mono_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    }
    pthread_mutex_unlock(&h->mu);
    return BW_STORE_KEEP;
}

static void *hold_thread(void *arg)
{
    holder *h = arg;
    h->rc = bw_store_update(h->s, "held", hold_fn, h, NULL);
    return NULL;
}

/*
 * The wait for another thread's call on the same store ends at busy_timeout
 * too: a thread whose update function holds the store for 3 s (as a slow
 * disk, or a long update function, would) made another thread's update wait
 * those 3 s (the mutex was taken with pthread_mutex_lock); it now fails
 * "busy" after busy_timeout (500 ms).
 */
static void test_thread_wait_bounded(void)
{
    char p[256];
    bw_store *s = open_url("sqlite:%s?busy_timeout=500ms", db_path(p, sizeof p));
    if (!s)
        return;
    holder h = {.hold_ms = 3000, .s = s};
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, hold_thread, &h), 0);
    pthread_mutex_lock(&h.mu);
    while (!h.inside)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    op o = {.verdict = BW_STORE_KEEP};
    bw_error e;
    memset(&e, 0, sizeof e);
    int64_t t0 = mono_ms();
    CHECK_RC(bw_store_update(s, "other", do_op, &o, &e), BW_ESYS);
    int64_t took = mono_ms() - t0;
    CHECK_HAS(e.message, "busy");
    if (took < 450 || took > 500 + 1000)
        H_FAIL("the update waiting for another thread's took %lld ms, want 500 ms (+ at most 1 s)", (long long)took);
    /* And a sweep, and a scan page. */
    t0 = mono_ms();
    CHECK_RC(bw_store_sweep(s, 10, NULL, &e), BW_ESYS);
    took = mono_ms() - t0;
    if (took > 500 + 1000)
        H_FAIL("the sweep took %lld ms, want at most 1.5 s", (long long)took);
    bw_store_cursor cur = {{0}, 0};
    bw_store_key keys[4];
    int n = -1;
    t0 = mono_ms();
    CHECK_RC(bw_store_scan(s, &cur, keys, 4, &n, &e), BW_ESYS);
    took = mono_ms() - t0;
    CHECK_INT(n, 0);
    if (took > 500 + 1000)
        H_FAIL("the scan took %lld ms, want at most 1.5 s", (long long)took);
    pthread_mutex_lock(&h.mu);
    h.release = 1;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    pthread_join(t, NULL);
    CHECK_OK(h.rc);
    CHECK_OK(bw_store_update(s, "other", do_op, &o, NULL)); /* the store free again */
    pthread_cond_destroy(&h.cv);
    pthread_mutex_destroy(&h.mu);
    bw_store_close(s);
}

typedef struct updater {
    bw_store *s;
    int rc;
} updater;

static void *update_thread(void *arg)
{
    updater *u = arg;
    op o = {.verdict = BW_STORE_KEEP};
    u->rc = bw_store_update(u->s, "a", do_op, &o, NULL);
    return NULL;
}

/*
 * An update's deadline is its call's, counting all its waits, not each wait's:
 * another process holds the database's write lock for longer than
 * busy_timeout (1 s); thread A's update waits for it holding the store; an
 * update started 100 ms later waits ~0.9 s for A's call, then for the lock
 * only until its own call's deadline: ~1 s in all (with a deadline per wait,
 * ~1.9 s).
 */
static void test_update_deadline_per_call(void)
{
    char p[256], msg[256];
    db_path(p, sizeof p);
    CHECK_INT(try_open(p, "", msg, sizeof msg), BW_OK);
    int ready[2];
    CHECK_INT(pipe(ready), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        procs_child_guard(60);
        sqlite3 *db;
        char ok =
            sqlite3_open(p, &db) == SQLITE_OK && sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char ok = 0;
    CHECK(pid > 0 && read(ready[0], &ok, 1) == 1 && ok == 'y');
    close(ready[0]);
    close(ready[1]);
    bw_store *s = open_url("sqlite:%s?busy_timeout=1s", p);
    updater a = {s, BW_OK};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, update_thread, &a), 0);
    struct timespec pause_ts = {0, 100 * 1000000};
    nanosleep(&pause_ts, NULL); /* A is in its update (it takes the store at once) */
    op o = {.verdict = BW_STORE_KEEP};
    bw_error e;
    memset(&e, 0, sizeof e);
    int64_t t0 = mono_ms();
    CHECK_RC(bw_store_update(s, "b", do_op, &o, &e), BW_ESYS);
    int64_t took = mono_ms() - t0;
    CHECK_HAS(e.message, "busy");
    if (took < 950 || took > 1000 + 600)
        H_FAIL("the update took %lld ms in all, want 1000 ms (+ at most 600)", (long long)took);
    pthread_join(t, NULL);
    CHECK_RC(a.rc, BW_ESYS);
    bw_store_close(s);
    if (pid > 0) {
        kill(pid, SIGKILL);
        procs_reap(pid);
    }
}

/* Bytes this process read and wrote through system calls (/proc/self/io), or -1. */
static int64_t io_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return -1;
    char line[128];
    long long v, sum = 0;
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "rchar: %lld", &v) == 1 || sscanf(line, "wchar: %lld", &v) == 1) {
            sum += v;
            n++;
        }
    fclose(f);
    return n == 2 ? sum : -1;
}

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The WAL stays bounded when every call is a process of its own (the
 * command): 1,000 rounds of open, one write, close (each open the first
 * connection, as a new process's is). The WAL stays under 1 MB and the last
 * rounds cost what the first did: the bytes read and written (deterministic:
 * the first connection reads the whole WAL to rebuild its index) and the CPU
 * time (loosely). It grew by ~8 KB a round, and a round's cost with it.
 */
static void test_wal_bounded(void)
{
    enum { ROUNDS = 1000, WINDOW = 200 };
    char p[256], wal[300];
    db_path(p, sizeof p);
    snprintf(wal, sizeof wal, "%s-wal", p);
    static int64_t io[ROUNDS], cpu[ROUNDS];
    int64_t wal_max = 0;
    for (int i = 0; i < ROUNDS; i++) {
        int64_t io0 = io_bytes(), cpu0 = cpu_ns();
        bw_store *s = open_url("sqlite:%s", p);
        if (!s)
            return;
        put(s, "n", BW_STORE_NEVER, 64, (unsigned char)i);
        bw_store_close(s);
        io[i] = io_bytes() - io0;
        cpu[i] = cpu_ns() - cpu0;
        struct stat st;
        if (stat(wal, &st) == 0 && st.st_size > wal_max)
            wal_max = st.st_size;
    }
    CHECK(io_bytes() >= 0);
    if (wal_max > 1024 * 1024)
        H_FAIL("the WAL grew to %lld bytes in %d rounds, want at most 1 MB", (long long)wal_max, ROUNDS);
    int64_t io_first = 0, io_last = 0, io_first_max = 0, io_last_max = 0, cpu_first = 0, cpu_last = 0;
    for (int i = 0; i < WINDOW; i++) {
        io_first += io[i];
        io_last += io[ROUNDS - WINDOW + i];
        io_first_max = io[i] > io_first_max ? io[i] : io_first_max;
        io_last_max = io[ROUNDS - WINDOW + i] > io_last_max ? io[ROUNDS - WINDOW + i] : io_last_max;
        cpu_first += cpu[i];
        cpu_last += cpu[ROUNDS - WINDOW + i];
    }
    fprintf(stderr,
            "test_wal_bounded: WAL at most %lld bytes; a round's I/O: first %d %lld bytes (max %lld), last %d %lld "
            "(max %lld); CPU: %lld us, %lld us\n",
            (long long)wal_max, WINDOW, (long long)(io_first / WINDOW), (long long)io_first_max, WINDOW,
            (long long)(io_last / WINDOW), (long long)io_last_max, (long long)(cpu_first / WINDOW / 1000),
            (long long)(cpu_last / WINDOW / 1000));
    /* The windows hold several periods of the checkpoint (one in ~60 rounds): their means compare. */
    if (io_last > io_first * 5 / 4 + WINDOW * 16384 || io_last_max > io_first_max * 5 / 4 + 16384)
        H_FAIL("a round's I/O grew: %lld bytes (max %lld) in the last %d rounds, %lld (max %lld) in the first",
               (long long)(io_last / WINDOW), (long long)io_last_max, WINDOW, (long long)(io_first / WINDOW),
               (long long)io_first_max);
    if (cpu_last > 2 * cpu_first)
        H_FAIL("a round's CPU time grew: %lld us in the last %d rounds, %lld us in the first",
               (long long)(cpu_last / WINDOW / 1000), WINDOW, (long long)(cpu_first / WINDOW / 1000));
}

/* Remove every file the tests made, then the directory. */
static void cleanup(void)
{
    char p[300];
    static const char *suffix[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < nfiles; i++)
        for (int k = 0; k < 4; k++) {
            snprintf(p, sizeof p, "%s/t%d.db%s", dir, i, suffix[k]);
            unlink(p);
        }
    if (rmdir(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    H_ARGS(argc, argv);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/bw-sqlite-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_no_default_vfs); /* first: before this process opens a store */
    shim_install();
    RUN(test_open_creates_schema);
    RUN(test_reopen_keeps_entries);
    RUN(test_url_errors);
    RUN(test_foreign_schema);
    RUN(test_refused_updates_leave_no_transaction);
    RUN(test_sweep_bounded);
    RUN(test_auto_sweep);
    RUN(test_scan_pages_bounded);
    RUN(test_awkward_names);
    RUN(test_busy_and_errors);
    RUN(test_malformed_rows);
    RUN(test_file_modes);
    RUN(test_foreign_database);
    RUN(test_side_files_never_wide);
    RUN(test_planted_files);
    RUN(test_vfs_default_unchanged);
    RUN(test_symlinks);
    RUN_ALONE(test_foreign_owner); /* as root: its own ctest entry, test_sqlite_foreign_owner */
    RUN(test_lock_wait_bounded);
    RUN(test_thread_wait_bounded);
    RUN(test_update_deadline_per_call);
    RUN(test_wal_bounded);
    cleanup();
    return TEST_SUMMARY();
}
