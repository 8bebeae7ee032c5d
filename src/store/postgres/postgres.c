/*
 * postgres.c — the postgresql:// store: processes on any number of hosts
 * share circuits through one table of a PostgreSQL database (libpq, its
 * asynchronous API).
 *
 * Design notes
 * - URL: a libpq connection URI, postgresql://[user[:password]@][host][:port]
 *   [/dbname] (postgres:// too), or a libpq keyword string after the colon,
 *   postgresql:host=db.internal dbname=app sslmode=verify-full (anything after
 *   "postgresql:" that does not start with "//"; it may not hold a '?').
 *   breakwater's own options are taken out of the query: table (default
 *   "breakwater", [schema.]table, each part 1 to 63 bytes of [A-Za-z0-9_] not
 *   starting with a digit, quoted, so case is kept), connect_timeout (1s),
 *   timeout (100ms), pool (4), sweep (1h). Every other option must be one
 *   of libpq's connection keywords (sslmode, application_name, ...;
 *   PQconndefaults) and goes to libpq as written. The whole connection string is checked by
 *   PQconninfoParse before anything is created; bw_store_open then connects
 *   once (so a wrong host, password or database fails at open) and makes the
 *   table if it is missing.
 * - One table: name text primary key, data bytea, version bigint (a bigserial:
 *   every write takes a fresh value of the table's sequence, so a version is
 *   never used twice for a name, not even after a delete and a new insert:
 *   no ABA), expires_at bigint (on the store's clock, ns), indexed for the
 *   sweep (r->index). Made on first use under an advisory lock (CREATE TABLE,
 *   its index, a COMMENT naming the schema version, SCHEMA); a table of that
 *   name without that comment is refused with BW_ESTATE; one without the
 *   index (made before it was) gets it at open, when the opener may. Store keys only ever travel as statement
 * parameters.
 * - The store's clock is the server's clock_timestamp() (µs, given in ns on
 *   the realtime scale), returned by every statement; a test may inject its
 *   own clock (bw_store_set_clock), which is then read after the reply (and
 *   given to the sweep as its "now"), as the redis: store does.
 * - update is an optimistic compare-and-set on `version`, not a row lock (the
 *   loop is the network stores' one, store/netupdate.c: the cache, lost races,
 *   the pause, BW_ECONFLICT; this file supplies its protocol, pg_update_ops).
 *   A row lock (BEGIN; SELECT ... FOR UPDATE; fn; UPDATE; COMMIT) costs at
 *   least 2 round trips every time and holds the lock across a round trip, so
 *   a client stopped in between (SIGSTOP, a pause of its VM) blocks every
 *   other writer of that circuit until the server notices. The
 *   compare-and-set costs 1 round trip in the common case and never holds a
 *   lock across one: the store caches, per key, the last row it saw (by read,
 *   read_many or update: version, data, expiry) and runs fn at once on it,
 *   with "now" estimated from the server's clock last seen plus the local
 *   monotonic time since the answer that carried it arrived (so never ahead
 *   of the server's clock: a trip's opened_at is never in the future of a
 *   client that reads it next), only when that sample is at most ESTIMATE_MAX
 *   old (else it reads first). Then ONE statement writes only if the version
 *   is still the one fn saw (UPDATE ... WHERE version = $2, INSERT ... ON
 *   CONFLICT DO NOTHING, or DELETE ... WHERE version = $2, inside a WITH) and
 *   otherwise answers the row as it is, with the server's clock, so a stale
 *   cache costs one conflict, never a wrong write. On a conflict fn runs again
 *   on the row the statement answered; from the second conflict on, after a
 *   random pause (at most 4 ms) and a fresh read. It goes on until its
 *   deadline (below), then gives up with BW_ECONFLICT, saying how many races
 *   it lost (BW_ETIMEDOUT when the deadline cut a statement, or the server's
 *   statement_timeout ended one). A KEEP (or a DELETE of nothing) decided on
 *   the cache is confirmed by a read (fn runs again only when the entry it
 *   saw changed: no lost race), so every
 *   verdict applied was computed on the row as the server had it. So a stored
 *   call (acquire: one read; settle: one update) costs 2 round trips.
 * - read and read_many are one statement each (unnest($1) WITH ORDINALITY,
 *   a text[] parameter in binary form: no quoting), at most READ_MANY_MAX
 *   names; a row whose expires_at <= now, whose data is not 1 to
 *   BW_STORE_DATA_MAX bytes or whose version is below 1 reads as absent (and
 *   an update replaces it through its version). The statements answer data
 *   of another length as NULL (DATA_SQL), so the server never sends more
 *   than an entry of a row.
 * - sweep deletes at most `max` rows whose expires_at <= now, by ctid, in one
 *   statement (the expiry is checked again on the row deleted, so a row
 *   renewed meanwhile stays). The automatic sweep (?sweep=1h; off disables)
 *   needs no thread: an update that finds it due (every period, the first
 *   pass at a random point of the first period) runs one pass of at most
 *   SWEEP_BATCH rows on its connection, one more round trip; a pass that
 *   deleted a full batch leaves it due for the next update, so the sweep keeps
 *   up with any write rate (an update writes at most one row).
 * - Deadlines: every wait is a poll() on the connection's socket with a
 *   deadline, never a blocking libpq call, so a stopped server cannot hold a
 *   caller. A call's wait for a pooled connection, a reconnect and its
 *   statements share one deadline, `timeout` from its start (the pool's),
 *   and no statement is sent once it passed. A connection takes at most
 *   connect_timeout to make (libpq's connect, TLS and authentication, the
 *   session's set-up), which may be more than a call's timeout: the call
 *   whose deadline comes first leaves it in its slot (connect_slot), and the
 *   next call goes on with it (libpq keeps where it stands), so a slow link
 *   still gets connected while no call waits longer than `timeout`. At open,
 *   connect_timeout bounds the connect and the table's check. The server
 *   also ends statements after 4/5 of `timeout` (statement_timeout, set on
 *   each session), so that a statement waiting for another client's row lock
 *   fails with BW_ETIMEDOUT and keeps its connection (the other circuits of
 *   the store are not held up by a backoff). A connection whose deadline
 *   passed, or that failed, is closed (PQfinish: nothing is waited for, it is
 *   non-blocking; no cancel request) with every idle connection of the pool,
 *   and for a backoff (10 ms doubling to 1 s, reset by a success) calls fail
 *   at once with the last error. A write whose answer timed out may still
 *   have been applied.
 * - The pool is the store layer's for network backends (store/netpool.h):
 *   this file registers how a connection is made (connect_pooled) and
 *   closed, and the pool does the rest (slots, the wait for one, backoff).
 * - Everything the server answers is checked: the result status, the number
 *   of rows and columns, each column's type and format, each value's length
 *   (before anything is copied) and range (the clock within year 2096). What
 *   libpq receives is bounded only by the deadline: it reads a whole message
 *   (a row: up to 2 GB as the protocol's lengths allow) and a whole result
 *   before this file sees them, so a hostile server can make it hold what it
 *   sends within `timeout` (include/breakwater/store.h says so).
 *
 * Locking
 * - The pool's mutex (store/netpool.h) guards which slot is busy, its
 *   connection when idle, the backoff and the last failure. A busy slot
 *   belongs to one thread, which uses its connection without the mutex: no
 *   network wait happens under it; under it the pool only closes idle
 *   connections (PQfinish, non-blocking), taking no other lock. r->cmu guards
 *   the row cache and the server clock's sample; it is held only to copy in
 *   or out. No lock is held while fn runs, and the two mutexes are never held
 *   together.
 * - Connections must not cross fork(): a child opens its own store (the pool
 *   refuses a call in a child with BW_ESTATE, and pg_close there leaves the
 *   parent's sessions alone).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/systime.h"
#include "store/backend.h"
#include "store/netpool.h"
#include "store/netupdate.h"

#define IDENT_MAX 63 /* bytes of a table (or schema) name: PostgreSQL's NAMEDATALEN - 1 */
#define POOL_MAX BW__NETPOOL_MAX
#define READ_MANY_MAX 100000
#define SWEEP_BATCH 100                             /* rows an automatic sweep deletes at most */
#define CACHE_SLOTS 256                             /* rows remembered, one per slot (direct-mapped) */
#define ESTIMATE_MAX ((int64_t)10 * BW_NS_PER_S)    /* the oldest server clock sample "now" is estimated from */
#define NOW_MAX ((int64_t)4000000000 * BW_NS_PER_S) /* the server clock we accept (year 2096) */
#define CONNINFO_MAX 6144
#define SCHEMA "breakwater store schema 1"
#define LOCK_KEY "7095266681868674353" /* the advisory lock of table creation ("bwstore1") */
#define OID_INT8 20
#define OID_BYTEA 17
#define OID_TEXT 25
#define OID_BOOL 16

/* The server's clock, in ns (µs resolution). */
#define NOW_SQL "(extract(epoch FROM clock_timestamp()) * 1000000)::int8 * 1000"
/* A row's data as the statements answer it: NULL when it is not 1 to BW_STORE_DATA_MAX bytes, so it is never sent. */
#define DATA_SQL "CASE WHEN octet_length(c.data) BETWEEN 1 AND 1024 THEN c.data END"
_Static_assert(BW_STORE_DATA_MAX == 1024, "DATA_SQL's bound is an entry's longest data");

/* Each statement answers rows of: now, i or written version, version, data, expires_at. */
enum { ST_READ, ST_PUT, ST_INS, ST_DEL, ST_SWEEP, ST_SCAN, ST_COUNT };
static const char *const st_name[ST_COUNT] = {"bw_read", "bw_put", "bw_ins", "bw_del", "bw_sweep", "bw_scan"};

/* A slot of the pool: its conn a PGconn (store/netpool.h). */
typedef bw__netslot slot;

/* What the store last saw of a row. */
typedef struct row {
    int exists;      /* a row is there (live, expired or malformed) */
    int64_t version; /* when it exists */
    int live;        /* its data are a well-formed entry (expiry not checked) */
    bw_store_entry e;
} row;

typedef struct centry {
    size_t klen;
    char key[BW__STORE_KEY_MAX + 1];
    row r;
} centry;

typedef struct pg {
    const bw__store_clock *clock;
    char conninfo[CONNINFO_MAX];
    char table[2 * (IDENT_MAX + 2) + 2]; /* quoted: "schema"."table" or "table" */
    char index[IDENT_MAX + 3];           /* its expiry index, quoted (in the table's schema): "table_expires_at" */
    char *setup;                         /* the session's SET and PREPAREs */
    int64_t connect_ns, timeout_ns;
    int64_t sweep_ns;   /* the automatic sweep's period; 0: none */
    int64_t next_sweep; /* bw__mono_now instant of the next pass (cmu) */
    int pool;
    bw__netpool conns; /* the connections (a forked child must open its own store: its sockets are the parent's) */
    pthread_mutex_t cmu;
    int64_t srv_now, srv_mono; /* the server's clock last seen, and bw__mono_now then; srv_mono 0: never */
    uint64_t seed;             /* the cache's hash */
    uint64_t rng;              /* the sweep's random instants: SplitMix64 (base/hash.h), under cmu */
    centry *cache[CACHE_SLOTS];
} pg;

/* ---- the URL ---- */

static int ident_ok(const char *s, size_t n)
{
    if (n < 1 || n > IDENT_MAX || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_'))
            return 0;
    return 1;
}

static int parse_table(pg *r, const char *t, bw_error *err)
{
    const char *dot = strchr(t, '.');
    size_t n = strlen(t);
    int ok = dot ? ident_ok(t, (size_t)(dot - t)) && ident_ok(dot + 1, n - (size_t)(dot - t) - 1) : ident_ok(t, n);
    if (!ok)
        return bw__fail(err, BW_EINVAL, "table",
                        "postgresql: table must be [schema.]name, each 1 to %d bytes of letters, digits and '_', "
                        "not starting with a digit, got '%.80s'",
                        IDENT_MAX, t);
    if (dot)
        snprintf(r->table, sizeof r->table, "\"%.*s\".\"%s\"", (int)(dot - t), t, dot + 1);
    else
        snprintf(r->table, sizeof r->table, "\"%s\"", t);
    /*
     * The expiry index's name: NAME_expires_at, or for a name longer than 52
     * bytes its first 42, '_', 8 hex digits of its hash, then _expires_at
     * (an identifier holds 63 bytes).
     */
    const char *name = dot ? dot + 1 : t;
    size_t nl = strlen(name);
    if (nl + 11 <= IDENT_MAX) {
        snprintf(r->index, sizeof r->index, "\"%s_expires_at\"", name);
    } else {
        uint32_t h = (uint32_t)bw__hash(0, name, nl); /* seed 0: the same name in every process */
        snprintf(r->index, sizeof r->index, "\"%.42s_%08x_expires_at\"", name, (unsigned)h);
    }
    return BW_OK;
}

static int own_option(const char *k)
{
    return strcmp(k, "table") == 0 || strcmp(k, "connect_timeout") == 0 || strcmp(k, "timeout") == 0 ||
           strcmp(k, "pool") == 0 || strcmp(k, "sweep") == 0;
}

/* Append s to r->conninfo; 0 when it does not fit. */
static int put(pg *r, size_t *at, const char *s, size_t n)
{
    if (*at + n >= sizeof r->conninfo)
        return 0;
    memcpy(r->conninfo + *at, s, n);
    *at += n;
    r->conninfo[*at] = 0;
    return 1;
}

/* The libpq connection string: the URL's path, with the options that are libpq's. */
static int parse_conninfo(pg *r, const bw__url *u, bw_error *err)
{
    PQconninfoOption *known = PQconndefaults();
    if (!known)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    int uri = strncmp(u->path, "//", 2) == 0;
    size_t at = 0;
    int fits = 1, nlib = 0;
    if (uri) {
        fits = put(r, &at, u->scheme, strlen(u->scheme)) && put(r, &at, ":", 1);
    }
    fits = fits && put(r, &at, u->path, strlen(u->path));
    for (int i = 0; fits && i < u->nopts; i++) {
        const char *k = u->opt[i].key, *v = u->opt[i].value;
        if (own_option(k))
            continue;
        int libpq = 0;
        for (PQconninfoOption *o = known; o->keyword && !libpq; o++)
            libpq = strcmp(o->keyword, k) == 0;
        if (!libpq) {
            PQconninfoFree(known);
            return bw__fail(err, BW_EINVAL, k,
                            "unknown option '%s' for a postgresql: store: neither breakwater's (table, "
                            "connect_timeout, timeout, pool, sweep) nor a libpq connection keyword",
                            k);
        }
        if (uri) { /* as the URI's own query: libpq decodes its %-escapes */
            fits = put(r, &at, nlib ? "&" : "?", 1) && put(r, &at, k, strlen(k)) && put(r, &at, "=", 1) &&
                   put(r, &at, v, strlen(v));
        } else { /* keyword='value', quoted */
            fits = put(r, &at, " ", at ? 1 : 0) && put(r, &at, k, strlen(k)) && put(r, &at, "='", 2);
            for (const char *c = v; fits && *c; c++)
                fits = (*c == '\'' || *c == '\\' ? put(r, &at, "\\", 1) : 1) && put(r, &at, c, 1);
            fits = fits && put(r, &at, "'", 1);
        }
        nlib++;
    }
    PQconninfoFree(known);
    if (!fits)
        return bw__fail(err, BW_EINVAL, "url", "postgresql: the connection string is longer than %d bytes",
                        CONNINFO_MAX - 1);
    char *why = NULL;
    PQconninfoOption *parsed = PQconninfoParse(r->conninfo, &why);
    if (!parsed) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s", why ? why : "out of memory");
        PQfreemem(why);
        msg[strcspn(msg, "\n")] = 0;
        return bw__fail(err, why ? BW_EINVAL : BW_ENOMEM, "url",
                        "postgresql: libpq refused the connection string: %.150s (postgresql://[user[:password]@]"
                        "[host][:port][/dbname] or postgresql:key=value ...)",
                        msg);
    }
    PQconninfoFree(parsed);
    return BW_OK;
}

static int parse_options(pg *r, const bw__url *u, bw_error *err)
{
    int64_t v = 4;
    int rc = bw__url_int(u, "connect_timeout", 1000000, 60 * (int64_t)BW_NS_PER_S, BW_NS_PER_S, 1, &r->connect_ns, err);
    if (rc == BW_OK)
        rc = bw__url_int(u, "timeout", 1000000, 60 * (int64_t)BW_NS_PER_S, 100 * (int64_t)1000000, 1, &r->timeout_ns,
                         err);
    if (rc == BW_OK)
        rc = bw__url_int(u, "pool", 1, POOL_MAX, 4, 0, &v, err);
    if (rc == BW_OK)
        rc = bw__url_int(u, "sweep", 0, 366 * 86400 * (int64_t)BW_NS_PER_S, 3600 * (int64_t)BW_NS_PER_S, 1,
                         &r->sweep_ns, err);
    if (rc == BW_OK)
        rc = parse_table(r, bw__url_opt(u, "table") ? bw__url_opt(u, "table") : "breakwater", err);
    if (rc == BW_OK)
        rc = parse_conninfo(r, u, err);
    r->pool = (int)v;
    return rc;
}

/* The statements each session prepares (the table name is validated and quoted). */
static char *make_setup(const pg *r)
{
    const char *t = r->table;
    const char *tail = "SELECT n.now, w.version, c.version, " DATA_SQL ", c.expires_at FROM (SELECT " NOW_SQL
                       " AS now) n LEFT JOIN w ON true LEFT JOIN %s c ON c.name = $1 AND w.version IS NULL;\n";
    char tl[800];
    snprintf(tl, sizeof tl, tail, t); /* at most 131 bytes of table name: fits */
    /*
     * The server ends a statement at 4/5 of the timeout, so that one stuck
     * behind another client's row lock fails with the server's answer before
     * the client's deadline: the connection stays (no reconnect, no backoff),
     * and the store's other circuits go on.
     */
    long ms = (long)((r->timeout_ns / 5 * 4 + 999999) / 1000000);
    size_t n = 4096 + 8 * strlen(t);
    char *s = malloc(n);
    if (!s)
        return NULL;
    int len = snprintf(
        s, n,
        "SET statement_timeout = %ld;\n"
        "PREPARE bw_read(text[]) AS SELECT n.now, k.i, c.version, " DATA_SQL ", c.expires_at FROM (SELECT " NOW_SQL
        " AS now) n CROSS JOIN unnest($1) WITH ORDINALITY AS k(name, i) LEFT JOIN %s c ON c.name = k.name;\n"
        "PREPARE bw_put(text, int8, bytea, int8) AS WITH w AS (UPDATE %s SET data = $3, expires_at = $4, "
        "version = DEFAULT WHERE name = $1 AND version = $2 RETURNING version) %s"
        "PREPARE bw_ins(text, bytea, int8) AS WITH w AS (INSERT INTO %s (name, data, expires_at) VALUES ($1, $2, "
        "$3) ON CONFLICT (name) DO NOTHING RETURNING version) %s"
        "PREPARE bw_del(text, int8) AS WITH w AS (DELETE FROM %s WHERE name = $1 AND version = $2 RETURNING "
        "version) %s"
        "PREPARE bw_sweep(int8, int4) AS WITH n AS (SELECT COALESCE($1, " NOW_SQL
        ") AS now), d AS (DELETE FROM %s WHERE ctid IN (SELECT ctid FROM %s, n WHERE expires_at <= n.now LIMIT "
        "$2) AND expires_at <= (SELECT now FROM n) RETURNING 1) SELECT count(*)::int8 FROM d;\n"
        "PREPARE bw_scan(text, int4, int8) AS SELECT name, COALESCE(expires_at > COALESCE($3, " NOW_SQL
        "), false) FROM %s WHERE name > $1 AND octet_length(name) BETWEEN 1 AND 511 ORDER BY name LIMIT $2;\n",
        ms, t, t, tl, t, tl, t, tl, t, t, t);
    if (len < 0 || (size_t)len >= n) { /* cannot happen (n allows for the longest name): never run a cut script */
        free(s);
        return NULL;
    }
    return s;
}

/* ---- connections ---- */

/* libpq's message, on one line, without its trailing newline. */
static const char *clean(const char *m, char *buf, size_t n)
{
    snprintf(buf, n, "%s", m && m[0] ? m : "(no message)");
    size_t l = strlen(buf);
    while (l && (buf[l - 1] == '\n' || buf[l - 1] == ' '))
        buf[--l] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    return buf;
}

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* "relation already exists, skipping" and the like: not the caller's business */
}

/*
 * Wait until c's socket is readable (or writable when `out`) or `deadline`
 * passes: 1 ready, 0 timed out, -1 error.
 */
static int wait_sock(PGconn *c, int what, int64_t deadline)
{
    int fd = PQsocket(c);
    return fd < 0 ? -1 : bw__netpool_wait(fd, what, deadline);
}

/*
 * Send what is queued on c and wait until a result can be taken without
 * blocking (PQisBusy false), by `deadline`: 1, 0 when it passed first, -1 on
 * an error (PQerrorMessage says). libpq keeps where it stands: a later call
 * may go on.
 */
static int wait_ready(PGconn *c, int64_t deadline)
{
    for (;;) {
        int f = PQflush(c);
        if (f < 0)
            return -1;
        if (f == 0 && !PQisBusy(c))
            return 1;
        int w = wait_sock(c, f == 1 ? BW__NETPOOL_INOUT : BW__NETPOOL_IN, deadline); /* what comes is read */
        if (w <= 0)
            return w;
        if (!PQconsumeInput(c))
            return -1;
    }
}

/*
 * Send what is queued on c and collect its results until deadline. Returns
 * the last result (the caller clears it), or NULL with *broken set (the
 * connection is unusable) and *err filled.
 */
static PGresult *finish_query(PGconn *c, int64_t deadline, const char *what, PGresult **first_error, int *broken,
                              bw_error *err)
{
    char m[200];
    PGresult *last = NULL;
    for (;;) {
        int w = wait_ready(c, deadline);
        if (w <= 0) {
            *broken = 1;
            PQclear(last);
            if (w == 0)
                bw__fail(err, BW_ETIMEDOUT, "", "postgresql: %s: no answer in time", what);
            else
                bw__fail(err, BW_ESYS, "", "postgresql: %s: %.150s", what, clean(PQerrorMessage(c), m, sizeof m));
            return NULL;
        }
        PGresult *res = PQgetResult(c);
        if (!res)
            break;
        ExecStatusType st = PQresultStatus(res);
        if (first_error && !*first_error && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            *first_error = res; /* the statement that failed (the rest of a script is skipped) */
            continue;
        }
        PQclear(last);
        last = res;
    }
    if (PQstatus(c) == CONNECTION_BAD) {
        *broken = 1;
        PQclear(last);
        bw__fail(err, BW_ESYS, "", "postgresql: %s: %.150s", what, clean(PQerrorMessage(c), m, sizeof m));
        return NULL;
    }
    if (!last && !(first_error && *first_error)) {
        *broken = 1;
        bw__fail(err, BW_ESYS, "", "postgresql: %s: the server sent no result", what);
    }
    return last;
}

/* Fail with the server's error (the connection stays usable): BW_ETIMEDOUT for statement_timeout. */
static int result_fail(const PGresult *res, const char *what, bw_error *err)
{
    char m[200];
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    int code = state && strcmp(state, "57014") == 0 ? BW_ETIMEDOUT : BW_ESYS;
    return bw__fail(err, code, "", "postgresql: %s: the server answered: %.150s", what,
                    clean(PQresultErrorMessage(res), m, sizeof m));
}

/* A script of statements (simple protocol) that must all succeed. */
static int run_script(PGconn *c, const char *sql, int64_t deadline, const char *what, int *broken, bw_error *err)
{
    if (!PQsendQuery(c, sql)) {
        char m[200];
        *broken = 1;
        return bw__fail(err, BW_ESYS, "", "postgresql: %s: %.150s", what, clean(PQerrorMessage(c), m, sizeof m));
    }
    PGresult *bad = NULL;
    PGresult *res = finish_query(c, deadline, what, &bad, broken, err);
    int rc = BW_OK;
    if (bad)
        rc = result_fail(bad, what, err);
    else if (!res)
        rc = err ? err->code : BW_ESYS;
    PQclear(bad);
    PQclear(res);
    if (rc == BW_OK && !res)
        rc = BW_ESYS;
    return rc;
}

/* The table, made if missing (under an advisory lock: openers race), and its schema checked. */
static int make_table(pg *r, PGconn *c, int64_t deadline, int *broken, bw_error *err)
{
    char sql[1400];
    /* The table name is validated and quoted: as a literal it holds no quote of its own. */
    snprintf(sql, sizeof sql,
             "BEGIN; SELECT pg_advisory_xact_lock(" LOCK_KEY "); SELECT to_regclass('%s') IS NOT NULL, "
             "left(obj_description(to_regclass('%s'), 'pg_class'), 100), EXISTS (SELECT 1 FROM pg_index i JOIN "
             "pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] WHERE i.indrelid = "
             "to_regclass('%s') AND a.attname = 'expires_at');",
             r->table, r->table, r->table);
    if (!PQsendQuery(c, sql)) {
        *broken = 1;
        return bw__fail(err, BW_ESYS, "", "postgresql: checking the table: could not send");
    }
    PGresult *bad = NULL;
    PGresult *res = finish_query(c, deadline, "checking the table", &bad, broken, err);
    int rc = BW_OK, exists = 0, indexed = 0;
    char comment[200] = "";
    if (bad)
        rc = result_fail(bad, "checking the table", err);
    else if (!res)
        rc = err ? err->code : BW_ESYS;
    else if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) != 3)
        rc = bw__fail(err, BW_ESYS, "", "postgresql: checking the table: an unexpected answer");
    else {
        exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        snprintf(comment, sizeof comment, "%s", PQgetisnull(res, 0, 1) ? "" : PQgetvalue(res, 0, 1));
        indexed = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
    }
    PQclear(bad);
    PQclear(res);
    if (rc != BW_OK) {
        if (!*broken)
            run_script(c, "ROLLBACK", deadline, "rolling back", broken, NULL);
        return rc;
    }
    if (!exists) {
        snprintf(sql, sizeof sql,
                 "CREATE TABLE %s (name text PRIMARY KEY, data bytea NOT NULL, version bigserial NOT NULL, "
                 "expires_at int8 NOT NULL); CREATE INDEX %s ON %s (expires_at); COMMENT ON TABLE %s IS '" SCHEMA
                 "'; COMMIT;",
                 r->table, r->index, r->table, r->table);
        rc = run_script(c, sql, deadline, "creating the table", broken, err);
        if (rc != BW_OK && !*broken)
            run_script(c, "ROLLBACK", deadline, "rolling back", broken, NULL);
        return rc;
    }
    if (strcmp(comment, SCHEMA) != 0) {
        rc = run_script(c, "COMMIT", deadline, "checking the table", broken, err);
        return rc != BW_OK ? rc
                           : bw__fail(err, BW_ESTATE, "table",
                                      "postgresql: the table %.140s exists but is not a breakwater store of this "
                                      "version (its comment is '%.60s', not '" SCHEMA "')",
                                      r->table, comment);
    }
    if (!indexed) {
        /*
         * A table made before the sweep's index was gets it now, built under
         * the advisory lock (holding its writers the milliseconds a table of
         * circuits takes). A user that may not (not the table's owner) opens
         * the store all the same: the sweep works without it, scanning.
         */
        snprintf(sql, sizeof sql, "CREATE INDEX IF NOT EXISTS %s ON %s (expires_at); COMMIT;", r->index, r->table);
        bw_error ie = {0, "", ""};
        if (run_script(c, sql, deadline, "indexing the table", broken, &ie) == BW_OK)
            return BW_OK;
        if (*broken) {
            if (err)
                *err = ie;
            return ie.code;
        }
        return run_script(c, "ROLLBACK", deadline, "checking the table", broken, err);
    }
    return run_script(c, "COMMIT", deadline, "checking the table", broken, err);
}

/* Where a connection being made stands (a slot's connect_step; 0: made). */
enum { CS_WRITE = 1, CS_READ, CS_SETUP };

/*
 * Make, or go on making, the connection of slot s by `deadline`, and by its
 * connect_timeout from its start (s->connect_until) at most: libpq's
 * non-blocking connect (PQconnectPoll: its state is libpq's, s->connect_step
 * says which way it waits), then the session's set-up script (and, `first`,
 * the table made or checked before it), whose results may come to a later
 * call. As the pool's connect: BW_OK made; an error with s->conn NULL:
 * failed; BW_ETIMEDOUT with s->conn set: the call's deadline came first, and
 * the next call on the slot goes on with it.
 */
static int connect_slot(pg *r, slot *s, int64_t deadline, int first, bw_error *err)
{
    char m[200];
    int rc = BW_OK, w = 1, broken = 0;
    if (!s->conn) {
        s->conn = PQconnectStart(r->conninfo);
        if (!s->conn)
            return bw__fail(err, BW_ENOMEM, "", "out of memory");
        s->connect_until = bw__mono_now() + r->connect_ns;
        s->connect_step = CS_WRITE; /* as PQconnectPoll's PGRES_POLLING_WRITING */
        if (PQstatus(s->conn) == CONNECTION_BAD)
            rc = bw__fail(err, BW_ESYS, "", "postgresql: connecting: %.170s",
                          clean(PQerrorMessage(s->conn), m, sizeof m));
    }
    PGconn *c = s->conn;
    int64_t until = s->connect_until < deadline ? s->connect_until : deadline;
    while (rc == BW_OK && s->connect_step != CS_SETUP) {
        w = wait_sock(c, s->connect_step == CS_WRITE ? BW__NETPOOL_INOUT : BW__NETPOOL_IN, until);
        if (w == 0)
            break;
        PostgresPollingStatusType st = w < 0 ? PGRES_POLLING_FAILED : PQconnectPoll(c);
        if (st == PGRES_POLLING_FAILED) {
            rc = bw__fail(err, BW_ESYS, "", "postgresql: connecting: %.170s", clean(PQerrorMessage(c), m, sizeof m));
        } else if (st != PGRES_POLLING_OK) {
            s->connect_step = st == PGRES_POLLING_WRITING ? CS_WRITE : CS_READ;
        } else {
            PQsetNoticeProcessor(c, ignore_notice, NULL);
            if (PQsetnonblocking(c, 1) != 0)
                rc = bw__fail(err, BW_ESYS, "", "postgresql: could not make the connection non-blocking");
            if (rc == BW_OK && first)
                rc = make_table(r, c, until, &broken, err);
            if (rc == BW_OK && !PQsendQuery(c, r->setup))
                rc = bw__fail(err, BW_ESYS, "", "postgresql: preparing the statements: %.150s",
                              clean(PQerrorMessage(c), m, sizeof m));
            s->connect_step = CS_SETUP;
        }
    }
    while (rc == BW_OK && w != 0 && s->connect_step == CS_SETUP) { /* the set-up's results, one a statement */
        w = wait_ready(c, until);
        PGresult *res = w > 0 ? PQgetResult(c) : NULL;
        if (w < 0 || (w > 0 && !res && PQstatus(c) == CONNECTION_BAD))
            rc = bw__fail(err, BW_ESYS, "", "postgresql: preparing the statements: %.150s",
                          clean(PQerrorMessage(c), m, sizeof m));
        else if (res && PQresultStatus(res) != PGRES_COMMAND_OK)
            rc = result_fail(res, "preparing the statements", err);
        else if (w > 0 && !res)
            s->connect_step = 0; /* made */
        PQclear(res);
    }
    if (rc == BW_OK && s->connect_step == 0) {
        s->connect_until = 0;
        return BW_OK;
    }
    if (rc == BW_OK && until < s->connect_until) /* the call's deadline came first: the next call goes on */
        return bw__fail(err, BW_ETIMEDOUT, "",
                        "postgresql: connecting: not done within the call's timeout (%" PRId64
                        " ms); the next call goes on with it",
                        r->timeout_ns / 1000000);
    if (rc == BW_OK)
        rc =
            bw__fail(err, BW_ETIMEDOUT, "", "postgresql: connecting: no answer within connect_timeout (%" PRId64 " ms)",
                     r->connect_ns / 1000000);
    PQfinish(c);
    s->conn = NULL;
    s->connect_until = 0;
    s->connect_step = 0;
    return rc;
}

/* The pool's callbacks (store/netpool.h): a connection made (or gone on with) when a slot has none, and closed. */
static int connect_pooled(void *backend, bw__netslot *s, int64_t deadline, bw_error *err)
{
    return connect_slot(backend, s, deadline, 0, err);
}

static void close_one(void *backend, void *conn, int forked)
{
    (void)backend;
    /*
     * In a forked child the socket is the parent's too: PQfinish's goodbye
     * would end the parent's session. Its descriptor is pointed at /dev/null
     * first, so only this process's copy closes.
     */
    if (forked) {
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        int moved = devnull >= 0 && PQsocket(conn) >= 0 && dup2(devnull, PQsocket(conn)) >= 0;
        if (devnull >= 0)
            close(devnull);
        if (!moved)
            return; /* could not: leave it (a little memory) rather than break the parent's */
    }
    PQfinish(conn); /* non-blocking: a Terminate message if the socket takes it, then close */
}

static const bw__netpool_ops pool_ops = {connect_pooled, close_one};

/* ---- statements and their answers (untrusted: every field checked) ---- */

static void be64(unsigned char *p, int64_t v)
{
    uint64_t x = (uint64_t)v;
    for (int i = 7; i >= 0; i--, x >>= 8)
        p[i] = (unsigned char)(x & 0xff);
}

static int64_t rd64(const char *p)
{
    uint64_t x = 0;
    for (int i = 0; i < 8; i++)
        x = x << 8 | (unsigned char)p[i];
    return (int64_t)x;
}

/*
 * Run prepared statement `st` with n parameters (binary but for text,
 * vals[i] NULL for SQL NULL) on slot s, by its call's deadline (none left:
 * BW_ETIMEDOUT, nothing sent); binary results. The result, or NULL with *err
 * filled (and *broken when the connection is unusable).
 */
static PGresult *exec(const pg *r, slot *s, int st, int n, const char *const *vals, const int *lens, const int *fmts,
                      int *broken, bw_error *err)
{
    if (bw__netpool_check(&r->conns, s, err) != BW_OK)
        return NULL;
    PGconn *c = s->conn;
    if (!PQsendQueryPrepared(c, st_name[st], n, vals, lens, fmts, 1)) {
        char m[200];
        *broken = 1;
        bw__fail(err, BW_ESYS, "", "postgresql: %s: %.150s", st_name[st], clean(PQerrorMessage(c), m, sizeof m));
        return NULL;
    }
    PGresult *res = finish_query(c, s->deadline, st_name[st], NULL, broken, err);
    if (res && PQresultStatus(res) != PGRES_TUPLES_OK) {
        result_fail(res, st_name[st], err);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* A result of rows (now, int8, version, data, expires_at): nrows of them, each column of its type, binary. */
static int check_shape(const PGresult *res, int nrows, bw_error *err)
{
    static const Oid types[5] = {OID_INT8, OID_INT8, OID_INT8, OID_BYTEA, OID_INT8};
    if (PQnfields(res) != 5 || PQntuples(res) != nrows)
        return bw__fail(err, BW_ESYS, "", "postgresql: the server's answer has %d rows of %d columns, not %d of 5",
                        PQntuples(res), PQnfields(res), nrows);
    for (int j = 0; j < 5; j++)
        if (PQftype(res, j) != types[j] || PQfformat(res, j) != 1)
            return bw__fail(err, BW_ESYS, "", "postgresql: the server's answer has a column of an unexpected type");
    for (int i = 0; i < nrows; i++)
        for (int j = 0; j < 5; j++)
            if (j != 3 && !PQgetisnull(res, i, j) && PQgetlength(res, i, j) != 8)
                return bw__fail(err, BW_ESYS, "", "postgresql: the server's answer has a malformed number");
    return BW_OK;
}

/* The int8 at (i, j), or `dflt` when NULL. */
static int64_t int8_at(const PGresult *res, int i, int j, int64_t dflt)
{
    return PQgetisnull(res, i, j) ? dflt : rd64(PQgetvalue(res, i, j));
}

/* Row i's columns 2..4 as a row (NULL version: no row). */
static void row_at(const PGresult *res, int i, row *out)
{
    out->exists = !PQgetisnull(res, i, 2);
    out->live = 0;
    out->version = 0;
    if (!out->exists)
        return;
    out->version = rd64(PQgetvalue(res, i, 2));
    int len = PQgetisnull(res, i, 3) ? -1 : PQgetlength(res, i, 3);
    if (out->version < 1 || len < 1 || len > BW_STORE_DATA_MAX || PQgetisnull(res, i, 4))
        return; /* not what breakwater writes: reads as absent, replaced through its version */
    out->live = 1;
    out->e.len = (uint32_t)len;
    memcpy(out->e.data, PQgetvalue(res, i, 3), (size_t)len);
    out->e.expires_at = rd64(PQgetvalue(res, i, 4));
}

/* `now` of a result (the server's clock, or the injected one), and the clock sample it gives. */
static int result_now(pg *r, const PGresult *res, int64_t *now, bw_error *err)
{
    int64_t srv = int8_at(res, 0, 0, -1);
    if (srv < 0 || srv > NOW_MAX)
        return bw__fail(err, BW_ESYS, "", "postgresql: the server's clock is missing or out of range");
    /*
     * The sample is taken as of the answer's arrival, not the midpoint of the
     * round trip: the server read its clock before that, so an estimate from
     * it (cache_get) is never ahead of the server's clock (but for the rates
     * of the two clocks, within ESTIMATE_MAX). A write made on an estimate
     * then never carries an instant later than what another client reads
     * after it (a trip's opened_at is never in its readers' future).
     */
    pthread_mutex_lock(&r->cmu);
    r->srv_now = srv;
    r->srv_mono = bw__mono_now();
    pthread_mutex_unlock(&r->cmu);
    if (atomic_load(&((bw__store_clock *)r->clock)->clock))
        *now = bw__store_clock_now(r->clock);
    else
        *now = srv;
    return BW_OK;
}

/* ---- the row cache ---- */

static centry **cache_slot(pg *r, const char *name, size_t n)
{
    return &r->cache[bw__hash(r->seed, name, n) % CACHE_SLOTS];
}

static void cache_put(pg *r, const char *name, const row *w)
{
    size_t n = strlen(name);
    if (n > BW__STORE_KEY_MAX)
        return;
    pthread_mutex_lock(&r->cmu);
    centry **p = cache_slot(r, name, n);
    if (!*p)
        *p = malloc(sizeof **p);
    if (*p) {
        centry *c = *p;
        c->klen = n;
        memcpy(c->key, name, n + 1);
        c->r.exists = w->exists;
        c->r.version = w->version;
        c->r.live = w->live;
        if (w->exists && w->live)
            bw__entry_copy(&c->r.e, &w->e);
    }
    pthread_mutex_unlock(&r->cmu);
}

/*
 * What the cache knows of name, and "now" estimated from the last server
 * clock sample (or the injected clock): 1 when both are known.
 */
static int cache_get(pg *r, const char *name, row *out, int64_t *now)
{
    size_t n = strlen(name);
    int have = 0;
    int injected = atomic_load(&((bw__store_clock *)r->clock)->clock) != NULL;
    pthread_mutex_lock(&r->cmu);
    centry *c = *cache_slot(r, name, n);
    int64_t mono = bw__mono_now();
    if (c && c->klen == n && memcmp(c->key, name, n) == 0 &&
        (injected || (r->srv_mono && mono - r->srv_mono >= 0 && mono - r->srv_mono <= ESTIMATE_MAX))) {
        out->exists = c->r.exists;
        out->version = c->r.version;
        out->live = c->r.live;
        if (c->r.exists && c->r.live)
            bw__entry_copy(&out->e, &c->r.e);
        *now = r->srv_now + (mono - r->srv_mono);
        have = 1;
    }
    pthread_mutex_unlock(&r->cmu);
    if (have && injected)
        *now = bw__store_clock_now(r->clock);
    return have;
}

/* ---- the operations ---- */

/* A text[] parameter in binary form: 1 dimension, no NULLs, n elements. */
static char *text_array(size_t n, const char *const *names, int *len)
{
    size_t total = 20;
    for (size_t i = 0; i < n; i++)
        total += 4 + strlen(names[i]);
    if (total > INT32_MAX)
        return NULL;
    unsigned char *a = malloc(total), *p = a;
    if (!a)
        return NULL;
    const uint32_t head[5] = {1, 0, OID_TEXT, (uint32_t)n, 1};
    for (int h = 0; h < 5; h++, p += 4)
        for (int b = 0; b < 4; b++)
            p[b] = (unsigned char)(head[h] >> (24 - 8 * b));
    for (size_t i = 0; i < n; i++) {
        uint32_t l = (uint32_t)strlen(names[i]);
        for (int b = 0; b < 4; b++)
            p[b] = (unsigned char)(l >> (24 - 8 * b));
        memcpy(p + 4, names[i], l);
        p += 4 + l;
    }
    *len = (int)total;
    return (char *)a;
}

/* Read n names on slot s (which stays the caller's): rows[i] and *now. */
static int read_rows(pg *r, slot *s, size_t n, const char *const *names, row *rows, int64_t *now, int *broken,
                     bw_error *err)
{
    int alen = 0;
    char *arr = text_array(n, names, &alen);
    if (!arr)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    const char *vals[1] = {arr};
    int lens[1] = {alen}, fmts[1] = {1};
    PGresult *res = exec(r, s, ST_READ, 1, vals, lens, fmts, broken, err);
    free(arr);
    if (!res)
        return err ? err->code : BW_ESYS;
    int rc = check_shape(res, (int)n, err);
    if (rc == BW_OK)
        rc = result_now(r, res, now, err);
    unsigned char *seen = rc == BW_OK ? calloc(n, 1) : NULL;
    if (rc == BW_OK && !seen)
        rc = bw__fail(err, BW_ENOMEM, "", "out of memory");
    for (size_t i = 0; rc == BW_OK && i < n; i++) {
        int64_t k = int8_at(res, (int)i, 1, 0);
        if (k < 1 || (uint64_t)k > n || seen[k - 1]) {
            rc = bw__fail(err, BW_ESYS, "", "postgresql: the server's answer to a read has a wrong row index");
            break;
        }
        seen[k - 1] = 1;
        row_at(res, (int)i, &rows[k - 1]);
    }
    free(seen);
    PQclear(res);
    return rc;
}

static void entry_of(const row *w, int64_t now, bw_store_entry *out, int *found)
{
    *found = w->exists && w->live && w->e.expires_at > now;
    if (*found)
        bw__entry_copy(out, &w->e);
}

static int pg_read_many(void *ctx, size_t n, const char *const *names, int64_t *now, bw_store_entry *out, int *found,
                        bw_error *err)
{
    pg *r = ctx;
    if (n == 0) {
        *now = bw__store_clock_now(r->clock);
        return BW_OK;
    }
    if (n > READ_MANY_MAX)
        return bw__fail(err, BW_EINVAL, "n", "postgresql: read_many reads at most %d keys at once, got %zu",
                        READ_MANY_MAX, n);
    row *rows = malloc(n * sizeof *rows);
    if (!rows)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    slot *s;
    int rc = bw__netpool_acquire(&r->conns, 0, &s, err);
    if (rc != BW_OK) {
        free(rows);
        return rc;
    }
    int broken = 0;
    bw_error e = {0, "", ""};
    rc = read_rows(r, s, n, names, rows, now, &broken, &e);
    bw__netpool_release(&r->conns, s, broken, &e);
    for (size_t i = 0; rc == BW_OK && i < n; i++) {
        entry_of(&rows[i], *now, &out[i], &found[i]);
        cache_put(r, names[i], &rows[i]);
    }
    free(rows);
    if (rc != BW_OK && err)
        *err = e;
    return rc;
}

static int pg_read(void *ctx, const char *name, int64_t *now, bw_store_entry *out, int *found, bw_error *err)
{
    pg *r = ctx;
    slot *s;
    int rc = bw__netpool_acquire(&r->conns, 1, &s, err);
    if (rc != BW_OK)
        return rc;
    int broken = 0;
    bw_error e = {0, "", ""};
    row w;
    rc = read_rows(r, s, 1, &name, &w, now, &broken, &e);
    bw__netpool_release(&r->conns, s, broken, &e);
    if (rc == BW_OK) {
        entry_of(&w, *now, out, found);
        cache_put(r, name, &w);
    } else if (err) {
        *err = e;
    }
    return rc;
}

/*
 * The conditional write of `verdict` against row w: 1 written (*w becomes
 * what was written), 0 a conflict (*w and *now become the row as the server
 * has it), or an error.
 */
static int cas(pg *r, slot *s, const char *name, bw_store_verdict verdict, const bw_store_entry *next, row *w,
               int64_t *now, int *broken, bw_error *err)
{
    unsigned char ver[8], exp[8];
    const char *vals[4];
    int lens[4], fmts[4] = {0, 1, 1, 1};
    int st, n;
    vals[0] = name;
    lens[0] = 0;
    be64(ver, w->version);
    if (verdict == BW_STORE_DELETE) {
        st = ST_DEL;
        n = 2;
        vals[1] = (const char *)ver;
        lens[1] = 8;
    } else {
        be64(exp, next->expires_at);
        int at = 1;
        st = w->exists ? ST_PUT : ST_INS;
        if (w->exists) {
            vals[at] = (const char *)ver;
            lens[at++] = 8;
        }
        vals[at] = (const char *)next->data;
        lens[at++] = (int)next->len;
        vals[at] = (const char *)exp;
        lens[at++] = 8;
        n = at;
    }
    PGresult *res = exec(r, s, st, n, vals, lens, fmts, broken, err);
    if (!res)
        return err ? err->code : BW_ESYS;
    int rc = check_shape(res, 1, err);
    if (rc == BW_OK)
        rc = result_now(r, res, now, err);
    if (rc == BW_OK) {
        if (!PQgetisnull(res, 0, 1)) {
            rc = 1;
            w->exists = verdict == BW_STORE_PUT;
            w->version = int8_at(res, 0, 1, 0);
            w->live = w->exists;
            if (w->exists)
                bw__entry_copy(&w->e, next);
        } else {
            rc = 0;
            row_at(res, 0, w);
        }
    }
    PQclear(res);
    return rc;
}

/* One pass of the sweep on slot s: at most max expired rows deleted (*deleted). */
static int sweep_pass(pg *r, slot *s, int max, int *deleted, int *broken, bw_error *err)
{
    unsigned char nowb[8], maxb[4];
    int injected = atomic_load(&((bw__store_clock *)r->clock)->clock) != NULL;
    be64(nowb, injected ? bw__store_clock_now(r->clock) : 0);
    for (int b = 0; b < 4; b++)
        maxb[b] = (unsigned char)((uint32_t)max >> (24 - 8 * b));
    const char *vals[2] = {injected ? (const char *)nowb : NULL, (const char *)maxb};
    int lens[2] = {8, 4}, fmts[2] = {1, 1};
    PGresult *res = exec(r, s, ST_SWEEP, 2, vals, lens, fmts, broken, err);
    if (!res)
        return err ? err->code : BW_ESYS;
    int64_t n = -1;
    if (PQnfields(res) == 1 && PQntuples(res) == 1 && PQftype(res, 0) == OID_INT8 && PQfformat(res, 0) == 1 &&
        !PQgetisnull(res, 0, 0) && PQgetlength(res, 0, 0) == 8)
        n = rd64(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (n < 0 || n > max)
        return bw__fail(err, BW_ESYS, "", "postgresql: the server's answer to a sweep is malformed");
    *deleted = (int)n;
    return BW_OK;
}

/* The period's next instant from `mono`: in [period / 2, period) ahead, so that processes started together spread. */
static int64_t next_sweep(pg *r, int64_t mono)
{
    uint64_t x = bw__splitmix(&r->rng);
    return mono + r->sweep_ns / 2 + (int64_t)(x % (uint64_t)(r->sweep_ns / 2 + 1));
}

/*
 * The automatic sweep, when due: one pass of at most SWEEP_BATCH rows on slot
 * s, best effort. A pass that broke the connection (cut by the call's
 * deadline, a failed socket) sets *broken and says why in *e, for the
 * release: the call itself stays done.
 */
static void sweep_maybe(pg *r, slot *s, int *broken, bw_error *e)
{
    if (r->sweep_ns <= 0)
        return;
    int64_t mono = bw__mono_now();
    pthread_mutex_lock(&r->cmu);
    int due = mono >= r->next_sweep;
    if (due)
        r->next_sweep = next_sweep(r, mono);
    pthread_mutex_unlock(&r->cmu);
    int n = 0;
    bw_error se = {0, "", ""};
    int rc = due ? sweep_pass(r, s, SWEEP_BATCH, &n, broken, &se) : BW_ESTATE;
    if (*broken)
        *e = se;
    if (rc == BW_OK && n == SWEEP_BATCH) {
        /* A full batch: more may have expired. The next update sweeps again, one bounded pass each. */
        pthread_mutex_lock(&r->cmu);
        r->next_sweep = mono;
        pthread_mutex_unlock(&r->cmu);
    } /* else the next pass retries */
}

/* One update (store/netupdate.h): the row last seen (the state). */
typedef struct pg_call {
    bw__netupdate u; /* first: the operations get it */
    pg *r;
    slot *s;
    row w;
    int found; /* what entry() answered last: the entry fn saw was live */
} pg_call;

static int pg_up_cached(bw__netupdate *u, int64_t *now)
{
    pg_call *c = (pg_call *)u;
    return cache_get(c->r, c->u.name, &c->w, now);
}

static int pg_up_read(bw__netupdate *u, int64_t *now)
{
    pg_call *c = (pg_call *)u;
    return read_rows(c->r, c->s, 1, &c->u.name, &c->w, now, &u->broken, &u->e);
}

static int pg_up_entry(bw__netupdate *u, int64_t now, bw_store_entry *cur, int *exists)
{
    pg_call *c = (pg_call *)u;
    entry_of(&c->w, now, cur, &c->found);
    *exists = c->w.exists;
    return c->found;
}

static int pg_up_write(bw__netupdate *u, bw_store_verdict verdict, const bw_store_entry *next, int64_t *now)
{
    pg_call *c = (pg_call *)u;
    return cas(c->r, c->s, c->u.name, verdict, next, &c->w, now, &u->broken, &u->e);
}

/* A KEEP (or a DELETE of nothing) decided on the cache: a read, the same entry (a version is never used twice)? */
static int pg_up_confirm(bw__netupdate *u, int64_t *now)
{
    pg_call *c = (pg_call *)u;
    int found = c->found, again;
    int64_t seen = found ? c->w.version : 0;
    int rc = read_rows(c->r, c->s, 1, &c->u.name, &c->w, now, &u->broken, &u->e);
    if (rc != BW_OK)
        return rc;
    bw_store_entry cur;
    entry_of(&c->w, *now, &cur, &again);
    return again == found && (!found || c->w.version == seen);
}

static const bw__netupdate_ops pg_update_ops = {pg_up_cached, pg_up_read, pg_up_entry, pg_up_write, pg_up_confirm};

static int pg_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    pg *r = ctx;
    slot *s;
    int rc = bw__netpool_acquire(&r->conns, 0, &s, err);
    if (rc != BW_OK)
        return rc;
    pg_call c = {.r = r, .s = s};
    bw__netupdate_start(&c.u, &pg_update_ops, &r->conns, s, name);
    rc = bw__netupdate_run(&c.u, fn, arg);
    if (rc == BW_OK && !c.u.broken)
        sweep_maybe(r, s, &c.u.broken, &c.u.e);
    bw__netpool_release(&r->conns, s, c.u.broken, &c.u.e);
    if (rc == BW_OK)
        cache_put(r, name, &c.w); /* the row now there: written, or the one fn kept */
    else if (err)
        *err = c.u.e;
    return rc;
}

/*
 * scan: one indexed query a page (names after the cursor, in order, with
 * whether each is live): at most max rows, expired ones included and skipped
 * here, so that a page costs max rows however many expired rows lie between
 * live ones; the cursor is the last row's name of a full page, "" when a page
 * came back short (the scan is complete).
 */
static int pg_scan(void *ctx, const char *cursor, char *next, int max, bw_store_key *keys, int *n, bw_error *err)
{
    pg *r = ctx;
    size_t clen = strlen(cursor);
    if (clen > BW__STORE_KEY_MAX)
        return bw__fail(err, BW_EINVAL, "cursor", "postgresql: not a cursor this store wrote");
    if (max > 100000)
        max = 100000;
    slot *s;
    int rc = bw__netpool_acquire(&r->conns, 0, &s, err);
    if (rc != BW_OK)
        return rc;
    unsigned char maxb[4], nowb[8];
    for (int b = 0; b < 4; b++)
        maxb[b] = (unsigned char)((uint32_t)max >> (24 - 8 * b));
    int injected = atomic_load(&((bw__store_clock *)r->clock)->clock) != NULL;
    be64(nowb, injected ? bw__store_clock_now(r->clock) : 0);
    const char *vals[3] = {cursor, (const char *)maxb, injected ? (const char *)nowb : NULL};
    int lens[3] = {(int)clen, 4, 8}, fmts[3] = {0, 1, 1};
    int broken = 0;
    bw_error e = {0, "", ""};
    PGresult *res = exec(r, s, ST_SCAN, 3, vals, lens, fmts, &broken, &e);
    rc = res ? BW_OK : e.code;
    if (res &&
        (PQnfields(res) != 2 || PQntuples(res) > max || PQftype(res, 0) != OID_TEXT || PQftype(res, 1) != OID_BOOL))
        rc = bw__fail(&e, BW_ESYS, "", "postgresql: the server's answer to a scan is malformed");
    int got = 0;
    for (int i = 0; rc == BW_OK && i < PQntuples(res); i++) {
        int len = PQgetisnull(res, i, 0) ? -1 : PQgetlength(res, i, 0);
        const char *v = PQgetvalue(res, i, 0);
        int ok = len >= 1 && len <= BW__STORE_KEY_MAX;
        for (int j = 0; ok && j < len; j++)
            ok = v[j] >= 0x20 && v[j] < 0x7f;
        /* live: a one-byte binary bool (anything else reads as expired) */
        ok = ok && !PQgetisnull(res, i, 1) && PQgetlength(res, i, 1) == 1 && PQgetvalue(res, i, 1)[0] == 1;
        if (!ok)
            continue; /* expired, or not a name breakwater writes */
        memcpy(keys[got].name, v, (size_t)len);
        keys[got].name[len] = 0;
        got++;
    }
    if (rc == BW_OK) {
        int full = PQntuples(res) == max;
        next[0] = 0;
        if (full) { /* the last row's name (listed or not) is where the next page starts */
            int last = PQntuples(res) - 1, len = PQgetlength(res, last, 0);
            if (len >= 1 && len <= BW__STORE_KEY_MAX) {
                memcpy(next, PQgetvalue(res, last, 0), (size_t)len);
                next[len] = 0;
            }
        }
        *n = got;
    }
    if (res)
        PQclear(res);
    return bw__netpool_done(&r->conns, s, broken, rc, &e, err);
}

static int pg_sweep(void *ctx, int max, int *deleted, bw_error *err)
{
    pg *r = ctx;
    slot *s;
    int rc = bw__netpool_acquire(&r->conns, 0, &s, err);
    if (rc != BW_OK)
        return rc;
    int broken = 0;
    bw_error e = {0, "", ""};
    rc = sweep_pass(r, s, max, deleted, &broken, &e);
    return bw__netpool_done(&r->conns, s, broken, rc, &e, err);
}

static void pg_close(void *ctx)
{
    pg *r = ctx;
    bw__netpool_destroy(&r->conns); /* in a forked child, without a goodbye on the parent's sessions (close_one) */
    for (int i = 0; i < CACHE_SLOTS; i++)
        free(r->cache[i]);
    free(r->setup);
    pthread_mutex_destroy(&r->cmu);
    free(r);
}

/* ---- opening ---- */

static int pg_open(const bw__url *u, const bw__store_clock *clock, bw_store_ops *ops, void **ctx, bw_error *err)
{
    pg *r = calloc(1, sizeof *r);
    if (!r)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    int rc = parse_options(r, u, err);
    if (rc == BW_OK && !(r->setup = make_setup(r)))
        rc = bw__fail(err, BW_ENOMEM, "", "out of memory");
    if (rc != BW_OK) {
        free(r->setup);
        free(r);
        return rc;
    }
    rc = bw__netpool_init(&r->conns, "postgresql", r->pool, r->timeout_ns, &pool_ops, r, err);
    if (rc != BW_OK) {
        free(r->setup);
        free(r);
        return rc;
    }
    if (pthread_mutex_init(&r->cmu, NULL) != 0) {
        bw__netpool_destroy(&r->conns);
        free(r->setup);
        free(r);
        return bw__fail(err, BW_ESYS, "", "could not create the postgresql: store's mutex");
    }
    r->clock = clock;
    r->seed = bw__hash_seed(r);
    r->rng = bw__hash_seed(&r->rng);
    if (r->sweep_ns > 0)
        r->next_sweep = next_sweep(r, bw__mono_now());
    /*
     * Connect once now, by connect_timeout (the table made or checked), so a
     * wrong URL fails here; the connection joins the pool.
     */
    slot first = {0};
    rc = connect_slot(r, &first, INT64_MAX, 1, err);
    if (rc != BW_OK) {
        pg_close(r);
        return rc;
    }
    bw__netpool_adopt(&r->conns, first.conn);
    static const bw_store_ops pg_ops = {BW_STORE_OPS_VERSION, "postgresql", pg_update, pg_sweep, pg_close, pg_read,
                                        pg_read_many,         pg_scan};
    *ops = pg_ops;
    *ctx = r;
    return BW_OK;
}

/* "*": any other option is accepted here and checked by pg_open (libpq's connection keywords). */
const bw__backend bw__backend_postgresql = {"postgresql",
                                            {"table", "connect_timeout", "timeout", "pool", "sweep", "*", NULL},
                                            BW__STORE_REALTIME,
                                            pg_open,
                                            NULL,
                                            NULL};
const bw__backend bw__backend_postgres = {
    "postgres", {"table", "connect_timeout", "timeout", "pool", "sweep", "*", NULL}, BW__STORE_REALTIME, pg_open, NULL,
    NULL};
