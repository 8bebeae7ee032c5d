/*
 * sqlite.c — the sqlite:PATH store: the processes of one host share circuits
 * through one SQLite database file.
 *
 * Design notes
 * - One connection per store, opened in WAL mode (readers never block the
 *   writer) with synchronous=NORMAL (a commit costs no fsync; a power loss can
 *   only lose the last commits, never corrupt the file) and a busy timeout
 *   (?busy_timeout=5s, at most 1h): one call of the store (an open, an update,
 *   a read, a sweep, a page of a scan) waits at most that long in all for
 *   other connections' locks and other threads' calls on the store (the
 *   mutex, see Locking), then fails with BW_ESYS saying "busy". Two waits on
 *   the database make that bound: the busy handler (on_busy) gives up at the
 *   call's deadline, not busy_timeout after each of its starts; and SQLite's
 *   WAL reader, which retries a read it cannot start (a lock on the WAL index
 *   held by another process, e.g. during the recovery that each first
 *   connection runs) about 100 times over ~10 s without asking the busy
 *   handler, sleeps through the store's VFS, whose sleeps end at the call's
 *   deadline.
 * - The store's VFS (vfs_register) is a copy of the process's default VFS as
 *   it is at the first sqlite: open, with its own xSleep (above) and xOpen
 *   (the files, below), registered once per process as "breakwater" and never
 *   made the default: the host program's own SQLite connections keep the
 *   default VFS, but can see (sqlite3_vfs_find) and could name this one;
 *   outside a store's calls it acts as the VFS it copies. Without a default
 *   VFS, or if SQLite refuses to register it, no sqlite: store opens: it would
 *   lose both the bound on SQLite's sleeps and the checks of the files.
 * - The files belong to their user (the house rule of local stores). PATH is
 *   opened here before SQLite opens it, O_NOFOLLOW (a symbolic link at PATH is
 *   refused; the directories above it may be links: they are resolved first
 *   and SQLite opens the resolved path with SQLITE_OPEN_NOFOLLOW), created
 *   with mode 0600 whatever the umask. A file of another user, or one that is
 *   not a regular file, at PATH, PATH-wal, PATH-shm or PATH-journal is refused
 *   (BW_ESTATE), as is a file beside PATH with more than one name (a hard
 *   link: a -journal SQLite would play back into the database).
 *   The files beside PATH are checked where SQLite opens them, not only before:
 *   the store's VFS (xOpen) checks a -wal or -journal as SQLite opens it, and
 *   makes it (0600, O_EXCL, O_NOFOLLOW) when SQLite would, and at a -wal's
 *   open does the same for its -shm (which SQLite opens next, not through
 *   xOpen); so in a sticky directory (/tmp) nobody can slip a file of theirs
 *   in between a check and SQLite's open (a hot -journal is played back at the
 *   first read, a -wal read as the store's). Those checks run inside the
 *   store's calls only (call_deadline set).
 *   Modes: SQLite gives every file it makes beside the database the database's
 *   mode (and an empty one it opens, too: robust_open's fchmod), so a
 *   database open to the group or others (an older breakwater made 0644) is
 *   narrowed (their bits taken off, never an owner's bit added) before SQLite
 *   opens a file beside it, when it is or may be a store, with the files
 *   beside it: a database in rollback mode with no -wal is read first by the
 *   connection (that read opens nothing beside it); any other is peeked at by
 *   an immutable read-only connection, which reads PATH alone (files_prepare).
 *   Another program's database (tables, no bw_meta) is refused and left as it
 *   was; one whose schema is still in its WAL reads as empty to the peek, is
 *   narrowed, and gets its mode back when the connection finds it foreign.
 *   A file that is no database is left as it was.
 * - The WAL stays bounded: closing a connection whose last commit left
 *   WAL_CKPT_FRAMES frames or more in the WAL runs a TRUNCATE checkpoint,
 *   which copies them into the database and empties the WAL. It does not
 *   wait: when a reader or a writer is in the way it gives up, and the next
 *   close tries again; it never runs after a failed open (what that open read
 *   may not be the store's). While a connection lives, SQLite's automatic checkpoint
 *   runs as before (PASSIVE at 1000 frames, from our WAL hook, which also
 *   counts the frames): a TRUNCATE after every WAL_CKPT_FRAMES frames would
 *   cost a long-lived writer two fsyncs every ~60 updates (a third of its
 *   throughput). A WAL that is checkpointed but not emptied does not help
 *   processes that open the store for one call: each one is the first
 *   connection, rebuilds the WAL index by reading the whole WAL, forgets what
 *   was checkpointed and appends; the WAL grew ~8 KB a run and a run's cost
 *   with it.
 * - Atomicity: every update is one BEGIN IMMEDIATE transaction. BEGIN IMMEDIATE
 *   takes the database's write lock up front, so the read (SELECT), the update
 *   function and the write (an upsert or a DELETE) run while no other
 *   connection, in this process or another, can write: a read-modify-write can
 *   neither interleave with another nor deadlock upgrading a read lock. On any
 *   error the transaction is rolled back and nothing changed.
 * - The store's clock is CLOCK_REALTIME by default (the file outlives reboots
 *   and is shared by processes, whose monotonic clocks differ); it is read
 *   inside the transaction, after the write lock is held.
 * - The WAL file persists (SQLITE_FCNTL_PERSIST_WAL) and closing a store does
 *   not checkpoint (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE): a process that opens
 *   the store for one call (the breakwater command) then neither recreates nor
 *   syncs the WAL; the checkpoint at close above empties it once it holds
 *   WAL_CKPT_FRAMES frames.
 * - Schema (version 1), created on first use inside BEGIN IMMEDIATE:
 *     bw_meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID, row ('schema_version', 1)
 *     bw_circuits(name TEXT PRIMARY KEY, expires_at INTEGER NOT NULL,
 *                 data BLOB NOT NULL) WITHOUT ROWID
 *     index bw_circuits_expires ON bw_circuits(expires_at)
 *   The schema is made only in an empty database (no object in
 *   sqlite_master): a database with objects but no bw_meta table is another
 *   program's and is refused with BW_ESTATE, read before anything could
 *   change it (journal_mode=WAL, the tables, the files' modes), and again
 *   inside the transaction that makes the schema. A database whose
 *   schema_version is not 1 is refused with BW_ESTATE. Every
 *   statement is prepared once at open with bound parameters: a name is only
 *   ever a bound value, never part of SQL text.
 * - Expiry and the sweep: an entry whose expires_at <= now reads as absent (the
 *   next PUT overwrites it), as does a row whose data is not 1 to
 *   BW_STORE_DATA_MAX bytes (written by something else than breakwater). bw_store_sweep deletes at most max expired
 * rows in one BEGIN IMMEDIATE transaction, through the expires_at index. The automatic sweep (?sweep=1h; off, none or 0
 * disables) needs no thread: an update that finds the sweep due runs one pass of at most 100 rows in its own short
 *   transaction right after its commit (an error there is ignored: the update
 *   already succeeded, and the next pass retries). A pass that deleted a full
 *   100 leaves the sweep due, so the next update runs another: the sweep keeps
 *   up with any write rate, one bounded pass per update. As grelmicro does, the first
 *   pass is due min(30s, interval) after the store's first update and then
 *   every interval, each delay jittered by +-20% from a per-store seed, so that
 *   processes started together do not sweep together. If the clock steps back,
 *   the schedule restarts from the new time.
 *
 * Locking
 * - One connection per store, opened with SQLITE_OPEN_NOMUTEX: ctx->mu
 *   serializes every use of the connection and its statements (so threads of
 *   one process queue on it, never on SQLite's busy handler; a thread waits
 *   for it until its call's deadline at most, pthread_mutex_clocklock through
 *   bw__mutex_lock_until, as for the database's locks), and guards the
 *   sweep schedule and the entry buffers. The update function runs under it, inside the
 *   transaction: that is the store contract (it must not call into the store).
 *   No other lock is taken under it, except SQLite's own.
 * - Across processes the database's write lock (BEGIN IMMEDIATE) serializes.
 * - A connection must not cross fork(): a child opens its own store.
 */
#define READ_BATCH 64     /* rows a read_many reads in one transaction, under the mutex */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/sat.h"
#include "base/systime.h"
#include "store/backend.h"

#define SCHEMA_VERSION 1
#define SWEEP_BATCH 100                         /* rows an automatic pass deletes at most */
#define SWEEP_FIRST (30 * (int64_t)BW_NS_PER_S) /* the first pass at most this long after the first update */
#define WAL_CKPT_FRAMES 128  /* a close after a commit that left this many WAL frames (512 KB) empties the WAL */
#define WAL_AUTO_FRAMES 1000 /* SQLite's automatic checkpoint (SQLITE_DEFAULT_WAL_AUTOCHECKPOINT) */

enum { ST_BEGIN, ST_BEGIN_READ, ST_COMMIT, ST_ROLLBACK, ST_GET, ST_PUT, ST_DEL, ST_SWEEP, ST_SCAN, ST_COUNT };

static const char *const sql_text[ST_COUNT] = {
    "BEGIN IMMEDIATE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SELECT expires_at, data FROM bw_circuits WHERE name = ?1",
    "INSERT INTO bw_circuits(name, expires_at, data) VALUES(?1, ?2, ?3) "
    "ON CONFLICT(name) DO UPDATE SET expires_at = excluded.expires_at, data = excluded.data",
    "DELETE FROM bw_circuits WHERE name = ?1",
    "DELETE FROM bw_circuits WHERE name IN "
    "(SELECT name FROM bw_circuits WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
    "SELECT name, expires_at > ?2 FROM bw_circuits WHERE name > ?1 AND length(CAST(name AS BLOB)) BETWEEN 1 AND 511 "
    "ORDER BY name LIMIT ?3",
};

typedef struct sq {
    const bw__store_clock *clock;
    pthread_mutex_t mu;
    sqlite3 *db;
    sqlite3_stmt *st[ST_COUNT];
    int64_t busy;        /* ns: busy_timeout, the longest one call waits for locks */
    int64_t deadline;    /* the running call's end of waiting (bw__mono_now) */
    int no_wait;         /* 1 while the WAL checkpoint at close runs: it never waits */
    int opened;          /* the open succeeded: only then may close checkpoint */
    int wal_frames;      /* the WAL's frames after this connection's last commit */
    int64_t sweep_every; /* ns; 0 = no automatic sweep */
    int sweep_armed;     /* next_sweep is set (at the first update) */
    int64_t sweep_base;  /* the time next_sweep was computed at */
    int64_t next_sweep;
    uint64_t rng; /* the jitter's state, seeded per store */
    bw_store_entry cur, next;
} sq;

/* ---- errors ---- */

/* A file the store's VFS refused to open (vfs_own_side), for db_fail: this thread's running call's. */
static _Thread_local bw_error vfs_err;
static _Thread_local int vfs_refused;

/* Fail with BW_ESYS and SQLite's message for rc (read before anything else runs). */
static int db_fail(sq *c, int rc, const char *what, bw_error *err)
{
    if (vfs_refused) { /* the store's VFS refused a file beside the database: its own message */
        vfs_refused = 0;
        return bw__fail(err, vfs_err.code, vfs_err.field, "%s", vfs_err.message);
    }
    const char *msg = c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc);
    /* SQLITE_PROTOCOL: the WAL reader's retries ran out (a lock on the WAL index held elsewhere). */
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_PROTOCOL)
        return bw__fail(err, BW_ESYS, "",
                        "sqlite: %s: the database stayed busy (locked by another connection) "
                        "beyond busy_timeout: %s",
                        what, msg);
    return bw__fail(err, BW_ESYS, "", "sqlite: %s: %s", what, msg);
}

/* ---- the bound of a call's waits ---- */

/* The running call's deadline in this thread (bw__mono_now), read by the VFS's xSleep; 0 = none. */
static _Thread_local int64_t call_deadline;

static int vfs_own_side(const char *name, int create, int wal);

static sqlite3_vfs vfs;       /* the default VFS but for xSleep and xOpen: "breakwater" */
static sqlite3_vfs *vfs_base; /* the default VFS */
static const char *vfs_name;  /* "breakwater" (see vfs_register), or NULL when it could not be registered */
static const char *vfs_why;   /* why not */
static char vfs_unique[48];   /* its name when "breakwater" was taken */
static pthread_once_t vfs_once = PTHREAD_ONCE_INIT;

static void nap(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / BW_NS_PER_S), (long)(ns % BW_NS_PER_S)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* SQLite's sleeps (the WAL reader's retries among them) end at the running call's deadline. */
static int vfs_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    int64_t dl = call_deadline;
    if (dl == 0)
        return vfs_base->xSleep(vfs_base, us);
    int64_t left = dl - bw__mono_now();
    if (left <= 0)
        return 0;
    if ((int64_t)us * 1000 > left)
        us = (int)((left + 999) / 1000);
    return vfs_base->xSleep(vfs_base, us);
}

/* The files beside the database are checked (and made) as SQLite opens them, in a store's call. */
static int vfs_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f, int flags, int *out)
{
    if (call_deadline != 0 && name && (flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL))) {
        int rc = vfs_own_side(name, (flags & SQLITE_OPEN_CREATE) != 0, (flags & SQLITE_OPEN_WAL) != 0);
        if (rc != SQLITE_OK) {
            f->pMethods = NULL; /* as xOpen must, failing */
            return rc;
        }
    }
    return vfs_base->xOpen(v, name, f, flags, out);
}

/*
 * Register the store's VFS, once per process: a copy of the default VFS (the
 * host's, as it is at the first sqlite: open) with our xSleep and xOpen, never
 * made the default. It is named "breakwater", or "breakwater-ADDRESS" when
 * another VFS has that name (another copy of this library in the process:
 * sqlite3_vfs_find would give each copy's stores the other's). Without a
 * default VFS, or when registering fails, no store opens (vfs_why says why).
 */
static void vfs_register(void)
{
    vfs_base = sqlite3_vfs_find(NULL);
    if (!vfs_base || !vfs_base->xSleep || !vfs_base->xOpen) {
        vfs_why = "no default SQLite VFS to build the store's on (has the program unregistered it?)";
        return;
    }
    vfs = *vfs_base; /* its methods read what they need (pAppData, szOsFile, mxPathname) from the copy */
    vfs.pNext = NULL;
    vfs.zName = "breakwater";
    if (sqlite3_vfs_find(vfs.zName)) {
        snprintf(vfs_unique, sizeof vfs_unique, "breakwater-%p", (void *)&vfs);
        vfs.zName = vfs_unique;
    }
    vfs.xSleep = vfs_sleep;
    vfs.xOpen = vfs_open;
    if (sqlite3_vfs_register(&vfs, 0) == SQLITE_OK && sqlite3_vfs_find(vfs.zName) == &vfs)
        vfs_name = vfs.zName;
    else
        vfs_why = "SQLite refused to register the store's VFS";
}

/* Start a call: its waits end busy_timeout after `start` (taken before the call waited for the mutex). Mutex held. */
static void call_begin(sq *c, int64_t start)
{
    c->deadline = start + c->busy;
    call_deadline = c->deadline;
    vfs_refused = 0;
}

/*
 * Take the store (its mutex) and start a call that began at `start`: the wait
 * for another thread's call on it ends at the call's deadline too, failing as
 * the database's own busy does.
 */
static int call_lock(sq *c, int64_t start, const char *what, bw_error *err)
{
    int rc = bw__mutex_lock_until(&c->mu, start + c->busy);
    if (rc == 0) {
        call_begin(c, start);
        return BW_OK;
    }
    if (rc == ETIMEDOUT)
        return bw__fail(err, BW_ESYS, "",
                        "sqlite: %s: the store stayed busy (in use by another thread's call) beyond busy_timeout",
                        what);
    return bw__fail(err, BW_ESYS, "", "sqlite: %s: could not take the store's mutex: %s", what, strerror(rc));
}

static void call_end(void)
{
    call_deadline = 0;
}

/* The busy handler: SQLite's own pauses (1 ms growing to 100 ms), until the call's deadline. */
static int on_busy(void *arg, int n)
{
    static const int ms[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100};
    sq *c = arg;
    int64_t left = c->deadline - bw__mono_now();
    if (c->no_wait || left <= 0)
        return 0;
    int64_t pause = (int64_t)ms[n < 12 ? n : 11] * BW_NS_PER_MS;
    nap(pause < left ? pause : left);
    return 1;
}

/* After each commit: count the WAL's frames, and run SQLite's automatic checkpoint (as its default hook). */
static int on_wal(void *arg, sqlite3 *db, const char *name, int frames)
{
    sq *c = arg;
    c->wal_frames = frames;
    if (frames >= WAL_AUTO_FRAMES)
        (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

/* Step a prepared statement that returns no row, then reset it. */
static int run(sq *c, int id, const char *what, bw_error *err)
{
    sqlite3_stmt *st = c->st[id];
    int rc = sqlite3_step(st);
    int ret = rc == SQLITE_DONE || rc == SQLITE_ROW ? BW_OK : db_fail(c, rc, what, err);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return ret;
}

/* End a failed transaction, if SQLite has not already rolled it back. */
static void rollback(sq *c)
{
    if (!sqlite3_get_autocommit(c->db)) {
        sqlite3_step(c->st[ST_ROLLBACK]);
        sqlite3_reset(c->st[ST_ROLLBACK]);
    }
}

/* ---- the sweep ---- */

/* d scaled by a uniform factor in [0.8, 1.2]. */
static int64_t jitter(sq *c, int64_t d)
{
    uint64_t r = bw__splitmix(&c->rng);
    int64_t fifth = d / 5;
    return d - fifth + (int64_t)(r % (uint64_t)(2 * fifth + 1));
}

/* Delete at most max rows expired at `now`, in one transaction. */
static int sweep_pass(sq *c, int64_t now, int max, int *deleted, bw_error *err)
{
    *deleted = 0;
    int rc = run(c, ST_BEGIN, "begin the sweep", err);
    if (rc != BW_OK)
        return rc;
    sqlite3_bind_int64(c->st[ST_SWEEP], 1, now);
    sqlite3_bind_int(c->st[ST_SWEEP], 2, max);
    rc = run(c, ST_SWEEP, "sweep", err);
    int n = rc == BW_OK ? sqlite3_changes(c->db) : 0;
    if (rc == BW_OK)
        rc = run(c, ST_COMMIT, "commit the sweep", err);
    if (rc != BW_OK) {
        rollback(c);
        return rc;
    }
    *deleted = n;
    return BW_OK;
}

/* After a successful update at `now`: arm the schedule, or run a due pass. */
static void sweep_maybe(sq *c, int64_t now)
{
    if (c->sweep_every <= 0)
        return;
    if (!c->sweep_armed || now < c->sweep_base) {
        int64_t first = c->sweep_every < SWEEP_FIRST ? c->sweep_every : SWEEP_FIRST;
        c->sweep_armed = 1;
        c->sweep_base = now;
        c->next_sweep = bw__sat_add(now, jitter(c, first));
        return;
    }
    if (now < c->next_sweep)
        return;
    int n = 0;
    (void)sweep_pass(c, now, SWEEP_BATCH, &n, NULL); /* best effort; the next pass retries */
    c->sweep_base = now;
    /* A full batch: more may have expired (a flood of short-lived keys). The next update sweeps again, one
     * bounded pass each, until a pass comes back short: each update writes at most one row, a pass deletes 100. */
    c->next_sweep = n == SWEEP_BATCH ? now : bw__sat_add(now, jitter(c, c->sweep_every));
}

/* ---- the operations ---- */

/* Read name's row into *out; an expired or malformed row reads as absent (*found = 0). Mutex held. */
static int get_row(sq *c, const char *name, int64_t now, bw_store_entry *out, int *found, bw_error *err)
{
    int rc = BW_OK;
    *found = 0;
    sqlite3_stmt *get = c->st[ST_GET];
    sqlite3_bind_text(get, 1, name, -1, SQLITE_STATIC);
    int src = sqlite3_step(get);
    if (src == SQLITE_ROW) {
        int64_t exp = sqlite3_column_int64(get, 0);
        const void *data = sqlite3_column_blob(get, 1);
        int len = sqlite3_column_bytes(get, 1);
        if (exp > now && data && len >= 1 && len <= BW_STORE_DATA_MAX) {
            out->expires_at = exp;
            out->len = (uint32_t)len;
            memcpy(out->data, data, (size_t)len);
            *found = 1;
        }
    } else if (src != SQLITE_DONE) {
        rc = db_fail(c, src, "read the entry", err);
    }
    sqlite3_reset(get);
    sqlite3_clear_bindings(get);
    return rc;
}

/*
 * The optional read: one SELECT in autocommit, which in WAL mode reads a
 * consistent snapshot without the write lock and without waiting for writers.
 */
static int sq_read(void *ctx, const char *name, int64_t *now, bw_store_entry *out, int *found, bw_error *err)
{
    sq *c = ctx;
    if (pthread_mutex_trylock(&c->mu) != 0)
        return BW_ESTATE; /* another thread is in an update: the read must not wait for it */
    call_begin(c, bw__mono_now());
    *now = bw__store_clock_now(c->clock);
    int rc = get_row(c, name, *now, out, found, err);
    call_end();
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/*
 * Many entries in one read transaction (BEGIN ... COMMIT, deferred): one WAL
 * snapshot and one lock of the connection for all of them. It waits for the
 * connection as an update does, never for another process's writer.
 */
static int sq_read_many(void *ctx, size_t n, const char *const *names, int64_t *now, bw_store_entry *out, int *found,
                        bw_error *err)
{
    sq *c = ctx;
    int rc = BW_OK;
    int64_t start = bw__mono_now();
    *now = bw__store_clock_now(c->clock);
    /* In transactions of READ_BATCH rows: the mutex is not held for a whole poll of many circuits. */
    for (size_t at = 0; rc == BW_OK && at < n; at += READ_BATCH) {
        size_t end = n - at < READ_BATCH ? n : at + READ_BATCH;
        rc = call_lock(c, start, "begin a read", err);
        if (rc != BW_OK)
            break;
        rc = run(c, ST_BEGIN_READ, "begin a read", err);
        for (size_t i = at; rc == BW_OK && i < end; i++)
            rc = get_row(c, names[i], *now, &out[i], &found[i], err);
        if (rc == BW_OK)
            rc = run(c, ST_COMMIT, "end a read", err);
        if (rc != BW_OK)
            rollback(c);
        call_end();
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

static int sq_update(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err)
{
    sq *c = ctx;
    int rc = call_lock(c, bw__mono_now(), "begin the update", err);
    if (rc != BW_OK)
        return rc;
    rc = run(c, ST_BEGIN, "begin the update", err);
    if (rc != BW_OK) {
        call_end();
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    int64_t now = bw__store_clock_now(c->clock);

    /* Read the entry; an expired or malformed row reads as absent. */
    int found;
    rc = get_row(c, name, now, &c->cur, &found, err);
    const bw_store_entry *cur = found ? &c->cur : NULL;

    if (rc == BW_OK) {
        bw_store_entry *next = &c->next;
        switch (fn(arg, now, cur, next)) {
        case BW_STORE_KEEP:
            break;
        case BW_STORE_PUT: /* store.c checked the verdict and the length */
            sqlite3_bind_text(c->st[ST_PUT], 1, name, -1, SQLITE_STATIC);
            sqlite3_bind_int64(c->st[ST_PUT], 2, next->expires_at);
            sqlite3_bind_blob(c->st[ST_PUT], 3, next->data, (int)next->len, SQLITE_STATIC);
            rc = run(c, ST_PUT, "write the entry", err);
            break;
        case BW_STORE_DELETE:
            sqlite3_bind_text(c->st[ST_DEL], 1, name, -1, SQLITE_STATIC);
            rc = run(c, ST_DEL, "delete the entry", err);
            break;
        }
    }
    if (rc == BW_OK)
        rc = run(c, ST_COMMIT, "commit the update", err);
    if (rc != BW_OK)
        rollback(c);
    else
        sweep_maybe(c, now);
    call_end();
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int sq_sweep(void *ctx, int max, int *deleted, bw_error *err)
{
    sq *c = ctx;
    int rc = call_lock(c, bw__mono_now(), "begin the sweep", err);
    if (rc != BW_OK) {
        *deleted = 0;
        return rc;
    }
    rc = sweep_pass(c, bw__store_clock_now(c->clock), max, deleted, err);
    call_end();
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/*
 * A page of keys in name order: one query on the primary key, after the
 * cursor (the page before's last name), in autocommit (a WAL snapshot, no
 * write lock). It reads at most max rows, expired ones included (they are
 * skipped here, so that a page costs max rows however many expired rows lie
 * between live ones); a page of max rows that may not be the last ends with
 * its last row's name as the next cursor; the page after it may then be empty.
 */
static int sq_scan(void *ctx, const char *cursor, char *next, int max, bw_store_key *keys, int *n, bw_error *err)
{
    sq *c = ctx;
    int got = 0, rows = 0, rc = BW_OK, src;
    next[0] = 0;
    rc = call_lock(c, bw__mono_now(), "list the circuits", err);
    if (rc != BW_OK) {
        *n = 0;
        return rc;
    }
    sqlite3_stmt *st = c->st[ST_SCAN];
    sqlite3_bind_text(st, 1, cursor, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, bw__store_clock_now(c->clock));
    sqlite3_bind_int(st, 3, max);
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *nm = sqlite3_column_text(st, 0);
        int nl = sqlite3_column_bytes(st, 0);
        if (!nm || nl < 1 || nl > BW_STORE_KEY_MAX)
            continue;      /* not a key breakwater wrote (the query leaves none out: a page stays max rows) */
        if (++rows == max) /* the last row of a full page, listed or not, is where the next page starts */
            memcpy(next, nm, (size_t)nl + 1);
        if (sqlite3_column_int(st, 1) != 1)
            continue; /* expired */
        memcpy(keys[got].name, nm, (size_t)nl);
        keys[got++].name[nl] = 0;
    }
    if (src != SQLITE_DONE)
        rc = db_fail(c, src, "list the circuits", err);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    call_end();
    pthread_mutex_unlock(&c->mu);
    if (rc != BW_OK) {
        got = 0;
        next[0] = 0;
    }
    *n = got;
    return rc;
}

static void sq_close(void *ctx)
{
    sq *c = ctx;
    /* Not after a failed open: what it read may not be the store's (never copy it into the database). */
    if (c->db && c->opened && c->wal_frames >= WAL_CKPT_FRAMES) {
        /* Empty the WAL (see the top of the file), waiting for nobody. */
        call_begin(c, bw__mono_now());
        c->no_wait = 1;
        (void)sqlite3_wal_checkpoint_v2(c->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        call_end();
    }
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(c->st[i]);
    sqlite3_close_v2(c->db);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ---- opening ---- */

/* Run constant SQL (no parameters, results ignored). */
static int exec(sq *c, const char *sql, const char *what, bw_error *err)
{
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? BW_OK : db_fail(c, rc, what, err);
}

/* What a database holds, by its schema (classify). */
enum { DB_EMPTY, DB_STORE, DB_FOREIGN };

/*
 * What db holds: DB_STORE when it has a bw_meta table (breakwater's), else
 * DB_FOREIGN when its schema has anything at all (another program's
 * database), else DB_EMPTY. A SQLite result code when the schema cannot be
 * read (SQLITE_NOTADB: not a database).
 */
static int classify(sqlite3 *db, int *kind)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(
        db, "SELECT count(*), coalesce(sum(type = 'table' AND name = 'bw_meta'), 0) FROM sqlite_master", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *kind = sqlite3_column_int64(st, 1) > 0 ? DB_STORE : sqlite3_column_int64(st, 0) > 0 ? DB_FOREIGN : DB_EMPTY;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

static int foreign_fail(const char *path, bw_error *err)
{
    return bw__fail(err, BW_ESTATE, "path",
                    "sqlite: %.100s is a SQLite database of another program, not a breakwater store: give breakwater "
                    "its own file",
                    path);
}

/* What the database holds (classify), another program's database failing with BW_ESTATE. */
static int check_kind(sq *c, const char *path, int *kind, bw_error *err)
{
    int rc = classify(c->db, kind);
    if (rc != SQLITE_OK)
        return db_fail(c, rc, "read the schema", err);
    return *kind == DB_FOREIGN ? foreign_fail(path, err) : BW_OK;
}

/*
 * Read schema_version from bw_meta (the database is a DB_STORE): *found = 1
 * when its row is there, and a value that is not 1 is BW_ESTATE.
 */
static int read_version(sq *c, const char *path, int *found, bw_error *err)
{
    *found = 0;
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c->db, "SELECT value FROM bw_meta WHERE key = 'schema_version'", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return db_fail(c, rc, "read schema_version", err);
    int ret = BW_OK;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *found = 1;
        if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || sqlite3_column_int64(st, 0) != SCHEMA_VERSION) {
            const unsigned char *v = sqlite3_column_text(st, 0);
            ret = bw__fail(err, BW_ESTATE, "path", "sqlite: %.100s has schema_version %.20s, expected %d", path,
                           v ? (const char *)v : "NULL", SCHEMA_VERSION);
        }
    } else if (rc != SQLITE_DONE) {
        ret = db_fail(c, rc, "read schema_version", err);
    }
    sqlite3_finalize(st);
    return ret;
}

/*
 * Check the schema, creating it on first use (inside BEGIN IMMEDIATE, where
 * what the database holds is read again: another process may have made the
 * store, or another program its tables, since).
 */
static int ensure_schema(sq *c, const char *path, int kind, bw_error *err)
{
    int found = 0;
    int rc = kind == DB_STORE ? read_version(c, path, &found, err) : BW_OK;
    if (rc != BW_OK || found)
        return rc; /* the common case: no write lock needed */
    rc = exec(c, "BEGIN IMMEDIATE", "begin creating the schema", err);
    if (rc != BW_OK)
        return rc;
    rc = check_kind(c, path, &kind, err);
    if (rc == BW_OK && kind == DB_STORE)
        rc = read_version(c, path, &found, err);
    if (rc == BW_OK && !found)
        rc = exec(c,
                  "CREATE TABLE IF NOT EXISTS bw_meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
                  "CREATE TABLE bw_circuits(name TEXT PRIMARY KEY, expires_at INTEGER NOT NULL, "
                  "data BLOB NOT NULL) WITHOUT ROWID;"
                  "CREATE INDEX bw_circuits_expires ON bw_circuits(expires_at);"
                  "INSERT INTO bw_meta(key, value) VALUES('schema_version', 1);",
                  "create the schema", err);
    if (rc == BW_OK)
        rc = exec(c, "COMMIT", "commit the schema", err);
    if (rc != BW_OK && !sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/*
 * Switch to WAL. Changing the journal mode of a new file needs an exclusive
 * lock, and SQLite reports a conflict there without calling the busy handler
 * when several processes open a new file at once; so retry until the call's
 * deadline.
 */
static int set_wal(sq *c, const char *path, bw_error *err)
{
    int64_t pause = 1000000; /* 1 ms, doubling to 64 ms */
    for (;;) {
        sqlite3_stmt *st;
        int rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(st);
            if (rc == SQLITE_ROW) {
                const unsigned char *mode = sqlite3_column_text(st, 0);
                int ret = mode && strcmp((const char *)mode, "wal") == 0
                              ? BW_OK
                              : bw__fail(err, BW_ESYS, "path", "sqlite: %.100s cannot use journal_mode=WAL (got %.20s)",
                                         path, mode ? (const char *)mode : "NULL");
                sqlite3_finalize(st);
                return ret;
            }
            sqlite3_finalize(st);
        }
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            return db_fail(c, rc, "set journal_mode=WAL", err);
        int64_t left = c->deadline - bw__mono_now();
        if (left <= 0)
            return db_fail(c, SQLITE_BUSY, "set journal_mode=WAL", err);
        nap(pause < left ? pause : left);
        if (pause < 64000000)
            pause *= 2;
    }
}

/* ---- the files ---- */

enum { OWN_CREATE = 1, OWN_NARROW = 2, OWN_SIDE = 4, OWN_SET = 8 };

#define HDR_LEN 100 /* a SQLite database's header */

/* What own_file found. */
typedef struct owned {
    int made;      /* this call made it */
    unsigned mode; /* its mode now (0: absent) */
    int64_t size;  /* bytes */
    int hdr_len;   /* bytes of hdr read (when asked for) */
    unsigned char hdr[HDR_LEN];
} owned;

/*
 * Check that `path` (`shown` in messages) is this user's regular file, never
 * following a symbolic link: with OWN_CREATE make it (mode 0600, whatever the
 * umask) when absent; with OWN_SIDE (a file SQLite keeps beside the database)
 * it must have one name (a hard link could be any file of the user's, or a
 * -journal SQLite would play back into the database); with OWN_NARROW take
 * its group's and others' bits off; with OWN_SET give it mode `set`. An absent
 * file is fine without OWN_CREATE. *o (may be NULL) says what was found, and
 * with hdr_len = HDR_LEN asked for, holds the file's first bytes. BW_ESTATE
 * for a link, another user's file, not a regular file, or more than one name.
 */
static int own_file(const char *path, const char *shown, int how, unsigned set, owned *o, bw_error *err)
{
    owned dummy;
    if (!o)
        o = &dummy;
    int want_hdr = o == &dummy ? 0 : o->hdr_len == HDR_LEN;
    o->made = 0;
    o->mode = 0;
    o->size = 0;
    o->hdr_len = 0;
    /* Read-only: enough to make it, fstat and fchmod it (SQLite opens a file it cannot write read-only). */
    const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    int fd = (how & OWN_CREATE) ? open(path, flags | O_CREAT | O_EXCL, 0600) : -1;
    o->made = fd >= 0;
    if (fd < 0 && (!(how & OWN_CREATE) || errno == EEXIST))
        fd = open(path, flags);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && !(how & OWN_CREATE))
            return BW_OK;
        if (e == ELOOP)
            return bw__fail(err, BW_ESTATE, "path",
                            "sqlite: %.100s is a symbolic link: refused (name the file itself, or remove the link)",
                            shown);
        return bw__fail(err, BW_ESYS, "path", "sqlite: could not open %.100s: %s", shown, strerror(e));
    }
    struct stat st;
    int rc = BW_OK;
    if (fstat(fd, &st) != 0)
        rc = bw__fail(err, BW_ESYS, "path", "sqlite: could not open %.100s: %s", shown, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        rc = bw__fail(err, BW_ESYS, "path", "sqlite: could not open %.100s: %s", shown, strerror(EISDIR));
    else if (!S_ISREG(st.st_mode))
        rc = bw__fail(err, BW_ESTATE, "path", "sqlite: %.100s is not a regular file: refused", shown);
    else if (st.st_uid != geteuid())
        rc = bw__fail(err, BW_ESTATE, "path",
                      "sqlite: %.100s belongs to uid %lu, not this user (uid %lu): refused; its owner or root may "
                      "remove it, or use another path",
                      shown, (unsigned long)st.st_uid, (unsigned long)geteuid());
    else if ((how & OWN_SIDE) && st.st_nlink != 1)
        rc = bw__fail(err, BW_ESTATE, "path",
                      "sqlite: %.100s has %lu names (hard links): refused; remove it (SQLite's file beside the "
                      "database has one name)",
                      shown, (unsigned long)st.st_nlink);
    else {
        /* Made: 0600. Narrowed: the owner's bits alone (a file its owner made read-only stays so). */
        unsigned now = (unsigned)st.st_mode & 07777;
        unsigned want = o->made ? 0600 : (how & OWN_SET) ? set : (how & OWN_NARROW) ? now & 0700 : now;
        if (want != now && fchmod(fd, (mode_t)want) != 0)
            rc = bw__fail(err, BW_ESYS, "path", "sqlite: could not make %.100s mode %04o: %s", shown, want,
                          strerror(errno));
        o->mode = want;
        o->size = (int64_t)st.st_size;
        if (want_hdr && st.st_size > 0) {
            ssize_t n = pread(fd, o->hdr, HDR_LEN, 0);
            o->hdr_len = n > 0 ? (int)n : 0;
        }
    }
    close(fd);
    return rc;
}

/* The files SQLite keeps beside the database; -journal only while it changes the journal mode. */
static const char *const side[] = {"-wal", "-shm", "-journal"};
enum { SIDE_COUNT = 3, SIDE_WAL = 0, SIDE_SHM = 1 };

/*
 * The store's VFS opens the files SQLite keeps beside the database (see the
 * top of the file): `name` (a -wal or -journal, as SQLite names it) must be
 * this user's regular file of one name, made here (0600) when SQLite would
 * make it; opening a -wal, its -shm likewise (SQLite opens it next, not
 * through xOpen). On a refusal the error is kept for db_fail (vfs_err).
 */
static int vfs_own_side(const char *name, int create, int wal)
{
    int how = OWN_SIDE | (create ? OWN_CREATE : 0);
    int rc = own_file(name, name, how, 0, NULL, &vfs_err);
    size_t n = strlen(name);
    if (rc == BW_OK && wal && create && n > 4 && strcmp(name + n - 4, "-wal") == 0) {
        char *shm = malloc(n + 1);
        if (!shm)
            return SQLITE_NOMEM;
        memcpy(shm, name, n - 4);
        memcpy(shm + n - 4, "-shm", 5);
        rc = own_file(shm, shm, how, 0, NULL, &vfs_err);
        free(shm);
    }
    if (rc == BW_OK)
        return SQLITE_OK;
    vfs_refused = 1;
    return SQLITE_PERM;
}

/* PATH with its directory resolved (realpath): *out, malloc'd. */
static int resolve(const char *path, char **out, bw_error *err)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    *out = NULL;
    if (!*base)
        return bw__fail(err, BW_ESYS, "path", "sqlite: could not open %.100s: it names a directory", path);
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    char *real = realpath(dir, NULL);
    int e = errno;
    free(dir);
    if (!real)
        return e == ENOMEM ? bw__fail(err, BW_ENOMEM, "", "out of memory")
                           : bw__fail(err, BW_ESYS, "path", "sqlite: could not open %.100s: %s", path, strerror(e));
    size_t n = strlen(real) + strlen(base) + 2;
    *out = malloc(n);
    if (*out)
        snprintf(*out, n, "%s/%s", strcmp(real, "/") == 0 ? "" : real, base);
    free(real);
    return *out ? BW_OK : bw__fail(err, BW_ENOMEM, "", "out of memory");
}

/* The store's files: PATH resolved, as the user gave it, and what the first look found. */
typedef struct files {
    const char *real, *path;
    owned db;
    unsigned side_mode[SIDE_COUNT]; /* 0: absent */
} files;

/* Run own_file on PATH (i = -1) or the file beside it of side[i]. */
static int own_at(const files *fs, int i, int how, unsigned set, owned *o, bw_error *err)
{
    if (i < 0)
        return own_file(fs->real, fs->path, how, set, o, err);
    size_t rn = strlen(fs->real), pn = strlen(fs->path), sn = strlen(side[i]);
    char *f = malloc(rn + sn + 1), *shown = malloc(pn + sn + 1);
    int rc;
    if (!f || !shown) {
        rc = bw__fail(err, BW_ENOMEM, "", "out of memory");
    } else {
        memcpy(f, fs->real, rn);
        memcpy(f + rn, side[i], sn + 1);
        memcpy(shown, fs->path, pn);
        memcpy(shown + pn, side[i], sn + 1);
        rc = own_file(f, shown, how | OWN_SIDE, set, o, err);
    }
    free(f);
    free(shown);
    return rc;
}

/* Before SQLite opens anything: PATH made (0600) or checked, its header read; the files beside it checked. */
static int files_check(files *fs, bw_error *err)
{
    fs->db.hdr_len = HDR_LEN;
    int rc = own_at(fs, -1, OWN_CREATE, 0, &fs->db, err);
    for (int i = 0; rc == BW_OK && i < SIDE_COUNT; i++) {
        owned o;
        rc = own_at(fs, i, 0, 0, &o, err);
        fs->side_mode[i] = o.mode;
    }
    return rc;
}

/* Whether any of the files is open to the group or others. */
static int files_wide(const files *fs)
{
    unsigned m = fs->db.mode;
    for (int i = 0; i < SIDE_COUNT; i++)
        m |= fs->side_mode[i];
    return (m & 077) != 0;
}

/* Take the group's and others' bits off PATH and the files beside it that exist. */
static int files_narrow(const files *fs, bw_error *err)
{
    int rc = BW_OK;
    for (int i = -1; rc == BW_OK && i < SIDE_COUNT; i++)
        rc = own_at(fs, i, OWN_NARROW, 0, NULL, err);
    return rc;
}

/*
 * What PATH holds, read without SQLite opening any file beside it: through an
 * immutable read-only connection, which reads PATH alone (no lock, no WAL, no
 * -shm). Only the checkpointed schema is seen: DB_EMPTY may be a store whose
 * schema is still in its WAL. -1 when it cannot be read.
 */
static int peek_kind(const char *real)
{
    size_t n = strlen(real);
    char *uri = malloc(3 * n + 32);
    if (!uri)
        return -1;
    char *u = uri + sprintf(uri, "file:");
    for (const unsigned char *p = (const unsigned char *)real; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/._-~", *p))
            *u++ = (char)*p;
        else
            u += sprintf(u, "%%%02X", *p);
    }
    strcpy(u, "?immutable=1");
    sqlite3 *db = NULL;
    int kind = -1;
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                        vfs_name) == SQLITE_OK &&
        classify(db, &kind) != SQLITE_OK)
        kind = -1;
    sqlite3_close_v2(db);
    free(uri);
    return kind;
}

enum { NARROWED = 1, NARROWED_MAYBE = 2 };

/*
 * Before SQLite opens PATH: SQLite gives every file it makes beside the
 * database the database's mode, so a database open to others (not made here)
 * is narrowed first when it is, or may be, a store; another program's is left
 * as it was. Whether SQLite's first read opens -wal and -shm decides how that
 * is told: a database in rollback mode with no -wal beside it is left to the
 * connection's first read (which opens no file beside it; *narrowed stays 0
 * and open_db narrows after it); any other is peeked at (peek_kind). *narrowed
 * = NARROWED_MAYBE when it was narrowed as a store whose schema may be still
 * in its WAL: the connection's read decides, and another program's database
 * gets its mode back.
 */
static int files_prepare(files *fs, int *narrowed, bw_error *err)
{
    static const unsigned char magic[16] = "SQLite format 3";
    const owned *d = &fs->db;
    *narrowed = 0;
    if (d->made || !files_wide(fs))
        return BW_OK;
    if (d->size > 0 && (d->hdr_len < HDR_LEN || memcmp(d->hdr, magic, 16) != 0))
        return BW_OK; /* not a database: SQLite says so at its first read, opening nothing beside it */
    if (d->size > 0 && d->hdr[18] == 1 && d->hdr[19] == 1 && fs->side_mode[SIDE_WAL] == 0)
        return BW_OK;
    int kind = d->size > 0 ? peek_kind(fs->real) : DB_EMPTY;
    if (kind == DB_FOREIGN)
        return foreign_fail(fs->path, err);
    *narrowed = kind == DB_STORE || d->size == 0 ? NARROWED : NARROWED_MAYBE;
    return files_narrow(fs, err);
}

/* Open the connection: the files, WAL, synchronous=NORMAL, the bounded waits, the schema, the statements. */
static int open_db(sq *c, const char *path, bw_error *err)
{
    pthread_once(&vfs_once, vfs_register);
    if (!vfs_name) /* without it SQLite's sleeps are unbounded and the files beside PATH unchecked */
        return bw__fail(err, BW_ESYS, "", "sqlite: cannot open %.100s: %s", path, vfs_why);
    char *real;
    int rc = resolve(path, &real, err);
    if (rc != BW_OK)
        return rc;
    files fs = {real, path, {0}, {0}};
    int narrowed = 0;
    rc = files_check(&fs, err);
    if (rc == BW_OK)
        rc = files_prepare(&fs, &narrowed, err);
    if (rc != BW_OK) {
        free(real);
        return rc;
    }
    /* NOFOLLOW: no link in the resolved path, even one made since. The files beside it: see vfs_open. */
    int src = sqlite3_open_v2(real, &c->db,
                              SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                              vfs_name);
    if (src != SQLITE_OK) {
        rc = bw__fail(err, BW_ESYS, "path", "sqlite: could not open %.100s: %s", path,
                      c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(src));
        sqlite3_close_v2(c->db);
        c->db = NULL;
        free(real);
        return rc;
    }
    sqlite3_busy_handler(c->db, on_busy, c);
    /* Counts the WAL's frames, for the checkpoint at close, and runs SQLite's automatic checkpoint. */
    sqlite3_wal_hook(c->db, on_wal, c);
    /* A process that lives for one call (the breakwater command) must not make, sync and delete the WAL each
       time: the WAL stays (PERSIST_WAL), and closing does not checkpoint. */
    int one = 1;
    sqlite3_file_control(c->db, "main", SQLITE_FCNTL_PERSIST_WAL, &one);
    sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);

    /* Another program's database is refused before anything changes it (WAL mode, tables, modes). */
    int kind = -1;
    rc = check_kind(c, path, &kind, err);
    if (kind == DB_FOREIGN && narrowed == NARROWED_MAYBE)
        (void)own_at(&fs, -1, OWN_SET, fs.db.mode, NULL, NULL); /* its mode back (fs.db: as first found) */
    /* A store, or an empty database about to be one: what is still open to others is narrowed before
       journal_mode=WAL makes a file beside it. */
    if (rc == BW_OK && !narrowed && files_wide(&fs))
        rc = files_narrow(&fs, err);
    if (rc == BW_OK)
        rc = set_wal(c, path, err);
    if (rc == BW_OK)
        rc = exec(c, "PRAGMA synchronous=NORMAL", "set synchronous=NORMAL", err);
    if (rc == BW_OK)
        rc = ensure_schema(c, path, kind, err);
    for (int i = 0; rc == BW_OK && i < ST_COUNT; i++) {
        src = sqlite3_prepare_v3(c->db, sql_text[i], -1, SQLITE_PREPARE_PERSISTENT, &c->st[i], NULL);
        if (src != SQLITE_OK)
            rc = db_fail(c, src, "prepare a statement", err);
    }
    free(real);
    return rc;
}

static int sq_open(const bw__url *u, const bw__store_clock *clock, bw_store_ops *ops, void **ctx, bw_error *err)
{
    int64_t start = bw__mono_now(), busy, every;
    int rc = bw__url_int(u, "busy_timeout", 0, 3600 * (int64_t)BW_NS_PER_S, 5 * (int64_t)BW_NS_PER_S, 1, &busy, err);
    if (rc == BW_OK)
        rc =
            bw__url_int(u, "sweep", 0, 366 * 86400 * (int64_t)BW_NS_PER_S, 3600 * (int64_t)BW_NS_PER_S, 1, &every, err);
    if (rc != BW_OK)
        return rc;
    if (!u->path[0])
        return bw__fail(err, BW_EINVAL, "path", "a sqlite: store needs a path, as in sqlite:/var/lib/app/breakers.db");
    sq *c = calloc(1, sizeof *c);
    if (!c)
        return bw__fail(err, BW_ENOMEM, "", "out of memory");
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return bw__fail(err, BW_ESYS, "", "could not create the sqlite: store's mutex");
    }
    c->clock = clock;
    c->sweep_every = every;
    c->busy = busy;
    c->rng = bw__hash_seed(c) ^ ((uint64_t)getpid() << 32);
    call_begin(c, start); /* the whole open waits at most busy_timeout */
    rc = open_db(c, u->path, err);
    call_end();
    if (rc != BW_OK) {
        sq_close(c);
        if (err && !err->field[0])
            memcpy(err->field, "path", 5); /* the file could not be opened as a store */
        return rc;
    }
    static const bw_store_ops sq_ops = {BW_STORE_OPS_VERSION, "sqlite", sq_update, sq_sweep, sq_close, sq_read,
                                        sq_read_many,         sq_scan};
    c->opened = 1;
    *ops = sq_ops;
    *ctx = c;
    return BW_OK;
}

const bw__backend bw__backend_sqlite = {"sqlite", {"busy_timeout", "sweep", NULL}, BW__STORE_REALTIME, sq_open, NULL,
                                        NULL};
