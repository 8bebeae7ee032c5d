/*
 * breakwater/store.h — where breakers share state: the store contract, and the
 * stores of the core (memory:, shm:NAME, sqlite:PATH).
 *
 * A store keeps one small entry per circuit name and offers one primitive: an
 * atomic read-modify-write of one entry (`update`), run against the store's own
 * clock. Everything a breaker keeps in a store (the shared OPEN/HALF_OPEN state,
 * its version, the probe round, the counters of the stored mode, lifetimes) is
 * computed by breakwater inside that update, in C, once for every store. So a
 * store only has to make its update atomic against every other client: a mutex
 * (memory:), a robust process-shared mutex (shm:), a BEGIN IMMEDIATE transaction
 * (sqlite:), an optimistic compare-and-set script (redis:) or statement
 * (postgresql:).
 *
 * Entries have a lifetime: each carries the instant it expires on the store's
 * clock (BW_STORE_NEVER for operator holds). An expired entry reads as absent;
 * bw_store_sweep deletes expired entries in bounded batches.
 *
 * URLs:
 *   memory:            in this process only; the reference store for tests
 *   shm:NAME           a POSIX shared-memory segment /NAME (1 to 200 bytes of
 *                      [A-Za-z0-9._-]) shared by the processes of one host;
 *                      ?capacity=N circuits (default 1024, at most 1048576);
 *                      ?lock_timeout=5s, in [1ns, 1h]: the longest an
 *                      operation waits for the segment's lock (a holder that
 *                      is stopped), after which it fails with BW_ETIMEDOUT and
 *                      a breaker degrades to its local circuit. The
 *                      segment belongs to its user: made with mode 0600; an
 *                      existing one is used only when it belongs to the
 *                      calling (effective) user and its group and others have
 *                      no access, else bw_store_open fails with BW_ESTATE
 *                      naming its owner and the file to remove (another
 *                      user's segment would let them change or truncate the
 *                      circuits); a symbolic link at /dev/shm/NAME is refused.
 *                      ?group=1 shares it with a group: made 0660, and an
 *                      existing one used when it belongs to the calling user
 *                      or to its effective group, others having no access.
 *                      An existing segment keeps its mode: one made 0600
 *                      (without ?group=1) is used by its owner but never
 *                      widened, so the group's other users are refused
 *                      (BW_ESTATE, "not this user's to open") until it is
 *                      removed (rm /dev/shm/NAME) and made again with
 *                      ?group=1.
 *                      Limit: a process that truncates the segment file
 *                      makes every process using it die of SIGBUS (it is
 *                      memory-mapped, as with SQLite's mmap mode); only the
 *                      same user (its group with ?group=1) or root can, and
 *                      nothing but breakwater should write /dev/shm/NAME
 *   sqlite:PATH        a SQLite database file (WAL, busy timeout
 *                      ?busy_timeout=5s, hourly sweep ?sweep=1h or ?sweep=off:
 *                      100 expired rows a pass, and a pass at each following
 *                      update while a pass deletes a full 100).
 *                      busy_timeout, in [0, 1h], bounds all the waits of one
 *                      call (an open, an update, a sweep...) for other
 *                      connections' locks and for other threads' calls on
 *                      the same store, after which it fails with BW_ESYS
 *                      ("busy") and a breaker degrades to its local circuit.
 *                      PATH is breakwater's own file: a SQLite database of
 *                      another program (tables but no bw_meta) is refused
 *                      with BW_ESTATE before anything changes it (its mode,
 *                      journal mode and tables stay as they were).
 *                      The files belong to their user: PATH, PATH-wal,
 *                      PATH-shm and PATH-journal are created with mode 0600
 *                      whatever the umask (the files beside PATH by
 *                      breakwater, O_EXCL, as SQLite opens them), and an
 *                      existing store's are made 0600 before SQLite opens a
 *                      file beside it; a symbolic link at PATH (or PATH-wal,
 *                      PATH-shm, PATH-journal) is refused, as is a file there
 *                      of another user or that is not a regular file, or a
 *                      file beside PATH with more than one name (BW_ESTATE);
 *                      those beside PATH are checked as SQLite opens them, so
 *                      that none can be slipped in after the check (in a
 *                      sticky directory such as /tmp); links among PATH's
 *                      directories are followed. The store opens its files
 *                      through a SQLite VFS of its own, registered in the
 *                      process at the first sqlite: open as "breakwater" (a
 *                      copy of the default VFS of that moment with its own
 *                      sleeps and opens), never made the default: the
 *                      program's own SQLite connections keep the default VFS,
 *                      and may see this one (sqlite3_vfs_find) but should not
 *                      use it. Without a default VFS then, no sqlite: store
 *                      opens (BW_ESYS). Closing a store whose last commit left 128
 *                      frames (about 512 KB) or more in the WAL empties it,
 *                      without waiting for other connections: the WAL stays
 *                      bounded also when every call is a process of its own
 *   redis://[user:password@]host[:port][/db]   a Redis server (hiredis;
 *                      BW_COMPONENT_REDIS), shared by processes on any host;
 *                      or redis://[user:password@][/db]?socket=/path.sock
 *                      for a unix socket (no host then). host: 1 to 255
 *                      bytes of letters, digits, '.', '-', '_', or [IPv6];
 *                      port in [1, 65535] (6379); db in [0, 2147483647] (0);
 *                      user and password printable ASCII, at most 127
 *                      bytes, no escapes (the password may not hold '/',
 *                      '?' or '&'). Options: ?prefix=breakwater: (0 to 100
 *                      bytes, printable, no space; keys are prefix + store
 *                      key); ?connect_timeout=1s and ?timeout=100ms, in
 *                      [1ms, 1m] (what they bound: "Network stores",
 *                      below); ?pool=4 connections, in [1, 64]. Its clock
 *                      is the server's TIME; entries expire on the server
 *                      (bw_store_sweep deletes nothing). bw_store_open
 *                      connects once (BW_ESYS for an unreachable server, a
 *                      refused AUTH or SELECT). Not for Redis Cluster.
 *                      rediss:// (TLS) is refused with BW_ESTATE: this
 *                      hiredis has no TLS. docs/stores.md has the details
 *   postgresql://[user[:password]@][host][:port][/dbname]   a table of a
 *                      PostgreSQL database (libpq; BW_COMPONENT_POSTGRES),
 *                      shared by processes on any host; postgres:// too, or
 *                      a libpq keyword string: postgresql:host=H dbname=D
 *                      (no '?' inside). Options: ?table=breakwater
 *                      ([schema.]name, each part 1 to 63 bytes of letters,
 *                      digits and '_', not starting with a digit; quoted, so
 *                      its case is kept), made on first use;
 *                      ?connect_timeout=1s and ?timeout=100ms, in [1ms, 1m]
 *                      (what they bound: "Network stores", below; the
 *                      server also ends a statement at 4/5 of timeout);
 *                      ?pool=4 connections, in [1, 64]; ?sweep=1h (off, or
 *                      up to 366d): an update deletes at most 100 expired
 *                      rows that often, and the next does too while a pass
 *                      deletes a full 100; any other option must be a libpq
 *                      connection keyword (sslmode, sslrootcert,
 *                      application_name, ...) and goes to libpq as written
 *                      (TLS and authentication are libpq's, and so are its
 *                      environment variables and files: PGHOST, ~/.pgpass,
 *                      ...). Its clock is the server's clock_timestamp().
 *                      bw_store_open connects once (BW_ESYS for an
 *                      unreachable server, a refused password, a missing
 *                      database; BW_ESTATE for a table of that name that is
 *                      not a breakwater store of this schema version).
 *                      docs/stores.md has the details
 * Options follow the path as ?key=value&key=value, each at most once, written
 * as in configuration text (whole numbers, and durations with their unit such
 * as 250ms: ?timeout=100 is refused, asking "100ms or 100s?"; no spaces); a
 * key is 1 to 31 bytes of letters, digits and '_'. Every option is checked
 * before anything is created.
 *
 * Secrets: a URL may carry a password (in its userinfo, a password= option or
 * a libpq keyword). No error of bw_store_open shows it: a malformed URL is
 * named by the part at fault and its rule, never quoted where the part could
 * hold a secret, and what a backend's library wrote (libpq quotes parts of a
 * connection string) is scrubbed of the URL's secrets before it reaches
 * *err; so is the error of every later call on the store (bw_store_update,
 * bw_store_scan, bw_store_sweep, and the events and failure messages of the
 * breakers on it: libpq's message of a failed reconnect names the hosts it
 * tried, which a password holding an '@' may have become part of). To show a URL yourself (a log line, a status page),
 * pass it through bw_store_url_redact. Keep a URL with a password out of command lines (other users see them: ps);
 * docs/stores.md says how to pass it.
 *
 * Network stores (redis:, postgresql:): what a server, or anyone on the way
 * to it, can cost a caller. This is the one statement of these bounds
 * (docs/stores.md points here).
 * - Time: every call on an open store (a read, read_many, update, scan or
 *   sweep) returns within `timeout` (100 ms) of its start (give or take the
 *   scheduler of a loaded machine): its wait for a pooled connection, a
 *   reconnect, each command or statement, each retry after a race lost to
 *   another client, all share that deadline, and nothing is sent once it
 *   passed. Then the call fails with BW_ETIMEDOUT and a breaker degrades to
 *   its local circuit; but an update whose every compare-and-set lost to
 *   another client writing the same entry, the server answering each time,
 *   fails with BW_ECONFLICT (contention, not a failing store): a breaker
 *   drops that write (BW_EVENT_STORE_WRITE_DROPPED; the local circuit learns
 *   a settle's outcome) and stays on the store. Making a connection takes
 *   at most `connect_timeout` (1 s): a call whose deadline comes first fails,
 *   and the next call goes on with that connection (libpq's connect, TLS and
 *   the session's set-up, or redis:'s connect then AUTH and SELECT, sent
 *   together: one round trip, may take more than a call's timeout allows);
 *   a redis: connection made with less of the call's time left than its last
 *   round trip is kept for the next call, that call failing before its
 *   command, which the deadline would cut. Neither is a failure of the
 *   server: no backoff, the other connections stay. bw_store_open waits at
 *   most `connect_timeout` (the connect, and redis:'s SCRIPT LOADs or
 *   postgresql:'s check of its table). A host name is resolved by the
 *   system's resolver (getaddrinfo), which these deadlines do not bound:
 *   give an address where that matters. A call that its deadline cut short
 *   drops its connection (a write whose answer timed out may have been
 *   applied), and for a backoff (10 ms doubling to 1 s, reset by an answer)
 *   calls fail at once with that error. So a server answering each command
 *   in just under `timeout` serves a call of one command (a stored acquire,
 *   a settle on what it read) and fails one of two: give a slow server a
 *   `timeout` of a few times its answer time.
 * - Memory: redis: refuses, before anything is allocated for it, a reply
 *   holding more than its command can be answered: an array longer than the
 *   keys asked for + 2 (read_many asks 1,024 keys a command; a SCAN page:
 *   twice its COUNT, at most 1,000, + 64), a string longer than 1,032 bytes
 *   (an entry's longest: the scripts answer a longer value at a key as
 *   absent, and an update replaces it) or, in a SCAN page, than a key
 *   (prefix + 511 bytes), arrays nested more than 2 deep, or more bytes in
 *   all than such a reply: about 1.4 MB at most, whatever the caller asks;
 *   the call fails with BW_ESYS ("the server's reply was refused: ...") and
 *   the connection is dropped.
 *   postgresql: its statements never ask for data longer than an entry
 *   (such a row reads as absent, and an update replaces it), and each
 *   value's length and the rows' number are checked before anything is
 *   copied. libpq, though, reads a whole row and a whole result before
 *   breakwater sees them: a hostile server (or anyone on a path without
 *   TLS) can make it hold what it sends within `timeout`, up to 2 GB a row
 *   as the protocol's lengths allow. Use TLS across a network you do not
 *   trust (postgresql: sslmode=verify-full; redis: a TLS tunnel).
 *
 * Thread safety: a store may be used from any number of threads at once;
 * bw_store_close must not race any other use, and every breaker using the store
 * must be freed first.
 */
#ifndef BREAKWATER_STORE_H
#define BREAKWATER_STORE_H

#include "clock.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bw_store bw_store;

/*
 * How a breaker uses a store (bw_config_set_store; docs/stores.md):
 * - BW_STORE_COORDINATED (interlock's model): each process keeps its own window;
 *   the store holds the shared OPEN / HALF_OPEN state, its generation, the
 *   fleet's backoff and the probe round. CLOSED and OPEN admissions read a
 *   cached view (no store round trip); a HALF_OPEN probe lease is the one inline
 *   store operation; trips and probe outcomes are written by a background lane
 *   through a bounded queue; polls every store_poll refresh the view. A store
 *   error degrades the breaker to its local state until the store answers again.
 * - BW_STORE_STORED (grelmicro's model): the circuit itself (window or
 *   consecutive counts, state, probes) lives in the store; each admission and
 *   each settlement is one atomic store operation. For processes that live for
 *   one call (a CLI, cron, CGI, pre-fork workers). A store error falls back to
 *   the breaker's local circuit for that call.
 */
typedef enum bw_store_mode { BW_STORE_COORDINATED = 1, BW_STORE_STORED = 2 } bw_store_mode;

/*
 * The largest store_quorum (config.h): instances that must trip before a
 * coordinated fleet's circuit opens. Part of the stored format: an entry keeps
 * at most BW_STORE_QUORUM_MAX - 1 votes.
 */
#define BW_STORE_QUORUM_MAX 16

/* The most bytes an entry holds. */
#define BW_STORE_DATA_MAX 1024
/* The expiry of an entry that never expires. */
#define BW_STORE_NEVER INT64_MAX

/* One entry: opaque bytes breakwater writes, and when they expire. */
typedef struct bw_store_entry {
    int64_t expires_at; /* on the store's clock; BW_STORE_NEVER = never */
    uint32_t len;       /* bytes used in data, 1..BW_STORE_DATA_MAX */
    unsigned char data[BW_STORE_DATA_MAX];
} bw_store_entry;

/* What an update does with the entry. */
typedef enum bw_store_verdict {
    BW_STORE_KEEP = 0,  /* leave the entry as it was (or absent) */
    BW_STORE_PUT = 1,   /* store *next (creating the entry if absent) */
    BW_STORE_DELETE = 2 /* delete the entry (nothing if absent) */
} bw_store_verdict;

/*
 * The function an update runs while it holds the entry: `now` is the store's
 * clock (ns), `cur` the live entry or NULL when absent or expired. It fills
 * *next for BW_STORE_PUT and returns a verdict. It must not call into the
 * store, block or take long: other clients wait for it.
 */
typedef bw_store_verdict (*bw_store_update_fn)(void *arg, int64_t now, const bw_store_entry *cur, bw_store_entry *next);

#define BW_STORE_OPS_VERSION 3

/* The longest store key, in bytes (its NUL not counted): a name, a space and a key. */
#define BW_STORE_KEY_MAX 511
/* The bytes of a scan cursor, its NUL included. */
#define BW_STORE_CURSOR_MAX 600

/* One store key, as a scan lists it (NUL-terminated). */
typedef struct bw_store_key {
    char name[BW_STORE_KEY_MAX + 1];
} bw_store_key;

/*
 * The operations of a store, for writing your own (bw_store_custom). Tables only
 * ever grow at their end: a table of any version >= 1 is accepted and read up
 * to the members its version has (version 1 ends at `read`).
 * - update: atomically against every other client of the same store (threads
 *   and processes), read `name`'s entry, call fn(arg, now, cur, &next), and
 *   apply its verdict. A store that locks calls fn once; an optimistic one
 *   (redis:, postgresql:) calls it again on the newer entry when another client wrote in
 *   between, and applies the last call's verdict: so fn computes its result
 *   from its arguments only, with no effect that adds up across calls.
 *   Return BW_OK, or an error (BW_ESYS, BW_ELIMIT when the store is full,
 *   BW_ETIMEDOUT when a wait ran out, BW_ECONFLICT when other writers of the
 *   entry won every race until the deadline, ...) with *err filled (err may
 *   be NULL), in which case nothing changed (redis:, postgresql: a write whose
 *   reply timed out may still land). Whatever `cur` holds is untrusted: breakwater
 *   decodes it with every field range-checked, and replaces an entry it did not write with a fresh circuit
 *   (BW_EVENT_STORE_CORRUPT). `now` must lie within +-2^62 ns (+-146 years).
 * - sweep: delete at most `max` expired entries; *deleted says how many.
 * - close: release ctx.
 * - read (optional, may be NULL): copy `name`'s live entry into *out and set
 *   *found (0 when absent or expired) and *now (the store's clock), without
 *   waiting for writers and without changing anything. Return BW_OK with a copy
 *   consistent as of one instant, or BW_ESTATE when it could not get one at once
 *   (a writer was busy): breakwater then runs an update instead. A store
 *   without a cheaper read than update leaves it NULL.
 * - read_many (version 2, optional, may be NULL): read the n entries of
 *   names[0..n) in one call, into out[i] and found[i], with *now the store's
 *   clock, changing nothing; each entry consistent as of one instant. It may
 *   wait as an update does. The coordinated mode's lane refreshes all of a
 *   store's circuits with it, one call per poll instead of one per circuit:
 *   worth it where a call costs a round trip. Return BW_OK, or an error (then
 *   breakwater reads each name alone).
 * - scan (version 3, optional, may be NULL): list the store's keys, a page at
 *   a time. `cursor` is "" for the first page, else the `next` an earlier
 *   call wrote; the call writes at most `max` (>= 1) keys into keys[0..*n)
 *   and the cursor of the following page into `next` (BW_STORE_CURSOR_MAX
 *   bytes, NUL-terminated; "" when the scan is complete). Each call does
 *   bounded work (one query, one server command, at most a bounded part of a
 *   table), so a network store answers a page in one round trip: a page may
 *   hold fewer than max keys, or none, before the scan is complete. Every key
 *   live from the first page to the last is listed at least once; a key made
 *   or deleted meanwhile may be listed or not; a key may be listed twice
 *   (redis: SCAN may) and an expired one may be listed (a read then finds it
 *   absent): callers read each key and skip duplicates. The cursor is the
 *   store's own text (a key, a slot, a server's cursor), opaque to callers;
 *   it needs no state kept between calls. Return BW_OK, or an error with
 *   *err filled. A store without it cannot be listed (bw_store_scan says
 *   BW_ENOTSUP); breakwater's breakers never call it.
 * `name` is a store key: a breaker's name, or a breaker's name, one space and a
 * keyed circuit's key (keyed.h), so 1 to 511 bytes of printable ASCII holding at
 * most one space (a name and a key hold none). Never paste it unescaped into a
 * query.
 */
typedef struct bw_store_ops {
    int version; /* BW_STORE_OPS_VERSION */
    const char *scheme;
    int (*update)(void *ctx, const char *name, bw_store_update_fn fn, void *arg, bw_error *err);
    int (*sweep)(void *ctx, int max, int *deleted, bw_error *err);
    void (*close)(void *ctx);
    int (*read)(void *ctx, const char *name, int64_t *now, bw_store_entry *out, int *found, bw_error *err);
    /* Version 2. */
    int (*read_many)(void *ctx, size_t n, const char *const *names, int64_t *now, bw_store_entry *out, int *found,
                     bw_error *err);
    /* Version 3. */
    int (*scan)(void *ctx, const char *cursor, char *next, int max, bw_store_key *keys, int *n, bw_error *err);
} bw_store_ops;

/*
 * bw_store_open — open the store a URL names (see above). memory: and shm:
 * are in the core; sqlite:, redis: and postgresql: are components, each a
 * library of its own (libbreakwater-sqlite, -redis, -postgres): a program
 * linked with the shared core need not link them, the first URL of a scheme
 * loads its library (the one the program linked, else the one beside the
 * core, else the one the dynamic loader finds by its soname,
 * libbreakwater-NAME.so.MAJOR) and it stays loaded; a program linked with the
 * static core must link the component (pkg-config --static breakwater-NAME,
 * or the CMake target breakwater::NAME_static). Returns BW_OK with
 * *out (close with bw_store_close); BW_EINVAL for NULL arguments or a malformed
 * URL or option (*err names the part: "url", "scheme", "name", "path", "host",
 * "port", "db", or the option), BW_ESTATE for a scheme this process cannot
 * have (rediss: always; the others when their component is missing: *err
 * says which library to install or link),
 * BW_ESYS when the operating system or the database refused, BW_ENOMEM;
 * BW_ESTATE also for an existing shm: segment, sqlite: database or
 * postgresql: table of another layout or schema version, for a sqlite: PATH
 * that is another program's SQLite database (tables, no bw_meta: left as it
 * was), and for a shm: segment or sqlite: file of another user, or a
 * symbolic link in its place.
 * Thread safety: any thread.
 */
BW_API int bw_store_open(const char *url, bw_store **out, bw_error *err);

/*
 * bw_store_url_redact — url with every part that is or may be a secret
 * replaced by "***", for a message, a log line or a status output:
 * - the password of a userinfo, "scheme://user:***@host" (a userinfo without
 *   ':' is a user name, and kept); the userinfo runs to the URL's last '@',
 *   so a password holding '@', '/' or '?' is masked whole;
 * - a port that is not a number ("redis://:***": a password whose '@' is
 *   missing);
 * - the value of every option or libpq keyword whose key holds "pass",
 *   "pwd", "secret", "token" or "auth" (in any case): "?password=***",
 *   "postgresql:host=h password=***", quoted ('...') or not, and the words
 *   without '=' that follow it (what an unquoted value holding a space, or a
 *   '&' in a value, leaves);
 * - all of a string that is not a URL (no scheme before a ':'): "***".
 * It masks generously: a part it cannot tell from a secret is masked. It
 * parses nothing else and never fails on a malformed URL; control bytes are
 * copied as they are (escape them for a terminal).
 * Writes at most n bytes into buf, NUL-terminated when n > 0 (a text cut
 * short is cut after the masking: it never holds a piece of a secret), and
 * returns the length of the whole text (as snprintf: buf NULL and n 0 ask
 * for it); BW_EINVAL (negative) for a NULL url, or a NULL buf with n > 0.
 * A buffer of 3 * strlen(url) + 1 bytes always holds the whole.
 * *masked (when masked is not NULL; set on success): what was masked, the
 * BW_STORE_URL_* bits below, 0 when nothing was. A URL that gives a
 * password has BW_STORE_URL_SECRET set; BW_STORE_URL_WORD and
 * BW_STORE_URL_ALL alone are a malformed URL, or a string that is not one
 * (a file name given as a URL), masked only because it might hold one.
 * Thread safety: any thread; it keeps no state.
 */
BW_API int bw_store_url_redact(const char *url, char *buf, size_t n, unsigned *masked);

/* What bw_store_url_redact masked (bits of *masked). */
enum {
    BW_STORE_URL_PASSWORD = 1 << 0, /* the password of a userinfo */
    BW_STORE_URL_PORT = 1 << 1,     /* a port that is not a number (a password without its '@') */
    BW_STORE_URL_KEYED = 1 << 2,    /* the value of an option or libpq keyword naming a secret */
    BW_STORE_URL_WORD = 1 << 3,     /* a word without '=' in a query or keyword string (malformed) */
    BW_STORE_URL_ALL = 1 << 4,      /* all of a string that is not a URL (no scheme before a ':') */
    /* the parts that hold a password when the URL is well formed */
    BW_STORE_URL_SECRET = BW_STORE_URL_PASSWORD | BW_STORE_URL_PORT | BW_STORE_URL_KEYED
};

/*
 * bw_store_custom — a store from your own operations table (copied) and ctx
 * (owned by the store from now on: ops->close(ctx) runs at bw_store_close, also
 * when this call fails after validating the table). ops->scheme is borrowed:
 * it must outlive the store. The operations are called from any thread that
 * uses a breaker on the store and from the store's lane threads, at once:
 * they must be thread-safe. Returns BW_OK; BW_EINVAL for a NULL or incomplete
 * table, a version below 1, or a NULL out; BW_ENOMEM.
 * Thread safety: any thread.
 */
BW_API int bw_store_custom(const bw_store_ops *ops, void *ctx, bw_store **out, bw_error *err);

/*
 * bw_store_close — close the store; NULL is ignored. Joins the store's lane
 * threads (coordinated breakers: one per clock they use), so it waits for a
 * store call still running there (one abandoned by a freed breaker). Every
 * breaker on the store must have been freed.
 * Thread safety: must not race any other use of the store.
 */
BW_API void bw_store_close(bw_store *s);

/*
 * bw_store_scheme — "memory", "shm", "sqlite", "redis", "postgresql" (also
 * for a postgres:// URL) or a custom table's scheme
 * (owned by the store, or by the custom table); NULL for NULL. Any thread.
 */
BW_API const char *bw_store_scheme(const bw_store *s);

/*
 * bw_store_set_clock — the clock the memory: store reads as "the store's
 * clock" (NULL: the system monotonic clock); for tests with a manual clock.
 * shm: and sqlite: accept it too, for tests in one process (other processes
 * keep their own clock: use it only where all clients share it). The clock is
 * borrowed until bw_store_close. Returns BW_OK or BW_EINVAL.
 * Thread safety: any thread; set it before breakers use the store.
 */
BW_API int bw_store_set_clock(bw_store *s, bw_clock *clock);

/*
 * bw_store_update — run one atomic update (for tools and tests; breakers call it
 * themselves). `name` is a store key: a breaker's name (rules as
 * bw_breaker_new), or a breaker's name, one space and a keyed circuit's key,
 * which is where a keyed circuit of a breaker with a store keeps its circuit
 * (keyed.h). Returns BW_OK; BW_EINVAL for a
 * NULL store or fn, a bad name (*err says why), or an fn that returned an
 * unknown verdict or a PUT length outside [1, BW_STORE_DATA_MAX] (nothing is
 * written then); the store's own errors (BW_ELIMIT when full, BW_ESYS,
 * BW_ETIMEDOUT, BW_ECONFLICT when redis: or postgresql: lost every race to
 * other writers of the entry within its timeout, ...).
 * Thread safety: any thread.
 */
BW_API int bw_store_update(bw_store *s, const char *name, bw_store_update_fn fn, void *arg, bw_error *err);

/* Where a listing of a store's keys stands (bw_store_scan): zero it to start. */
typedef struct bw_store_cursor {
    char pos[BW_STORE_CURSOR_MAX]; /* the store's cursor: "" at the start */
    int done;                      /* 1 once the last page was listed */
} bw_store_cursor;

/*
 * bw_store_scan — list a page of the store's keys (breaker names, and "NAME
 * KEY" for keyed circuits): up to `max` (>= 1) keys into keys[0..*n), from
 * where *cursor stands, moving it on. Start with a zeroed cursor and call
 * again until cursor->done; a page may hold fewer than max keys, even none,
 * before the end (a network store answers each page in one round trip). Every
 * key live for the whole listing is listed at least once; one made or deleted
 * meanwhile may be listed or not; a key may come twice, and an expired one
 * may be listed (bw_store_read_circuit then finds it absent): skip
 * duplicates. memory:, shm:, sqlite: and redis: list; a custom store lists
 * when its table has `scan` (version 3). Cost: memory: walks its table under
 * its mutex; shm: looks at most 65,536 slots a page under its lock; sqlite:
 * is one indexed query a page; redis: one SCAN MATCH prefix* COUNT max a page,
 * COUNT at most 1,000 (never KEYS). Returns BW_OK; BW_EINVAL (NULL s, cursor, keys or n, max < 1,
 * a cursor that is done, or one the store did not write); BW_ENOTSUP when the
 * store cannot list its keys; the store's errors (then the cursor has not
 * moved: the same call may be tried again).
 * Thread safety: any thread; a cursor belongs to one listing.
 */
BW_API int bw_store_scan(bw_store *s, bw_store_cursor *cursor, bw_store_key *keys, int max, int *n, bw_error *err);

/*
 * bw_store_sweep — delete at most max (>= 1) expired entries now; *deleted (may
 * be NULL) says how many. Stores also sweep by themselves (sqlite: hourly).
 * Returns BW_OK; BW_EINVAL for a NULL store or max < 1; the store's errors.
 * Thread safety: any thread.
 */
BW_API int bw_store_sweep(bw_store *s, int max, int *deleted, bw_error *err);

#ifdef __cplusplus
}
#endif
#endif
